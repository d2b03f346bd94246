"""Where a batch gets a block whose write-ahead log record cannot be read.

An input stream that can fetch a block's records again from its source hands each partition a
*recovery source*: plain data (msgpack-able, never pickled) with a ``kind`` and the ``module``
that implements that kind. The executor-side reader calls :func:`recover_block` with it when
the WAL read fails; the module, imported on first use (executors import nothing of an input
stream otherwise), registers its function for the kind. This package knows no source.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

# recovery source -> the block's bytes in the block format.
BlockRecovery = Callable[[Mapping[str, Any]], bytes]

_registry: dict[str, BlockRecovery] = {}
_lock = threading.Lock()


class BlockRecoveryError(RuntimeError):
    """A block could be read neither from the write-ahead log nor from its source."""


def register_block_recovery(kind: str, recover: BlockRecovery) -> None:
    with _lock:
        _registry[kind] = recover


def recover_block(source: Mapping[str, Any]) -> bytes:
    kind = source.get("kind")
    with _lock:
        recover = _registry.get(str(kind))
    if recover is None:
        module = source.get("module")
        if not isinstance(module, str) or not module.startswith("reliable_kafka."):
            raise BlockRecoveryError(f"no block recovery registered for kind {kind!r}")
        importlib.import_module(module)
        with _lock:
            recover = _registry.get(str(kind))
        if recover is None:
            raise BlockRecoveryError(f"{module} registered no block recovery for kind {kind!r}")
    return recover(source)
