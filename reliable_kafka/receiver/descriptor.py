"""A receiver as plain data, so that it can cross to an executor without pickle.

Spark serializes the receiver object into its one-task job. We send a descriptor instead: the
dotted path of a factory function and the factory's arguments (msgpack-able values only), and the
executor calls the factory to build a fresh receiver. The driver already runs arbitrary code on
the executors, so naming a factory by path grants nothing new; the factory still has to be a
module-level function of an importable module, and its arguments are checked by the factory.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reliable_kafka.receiver.receiver import Receiver


class ReceiverDescriptorError(ValueError):
    """A descriptor that names no usable factory, or whose factory returned no receiver."""


@dataclass(frozen=True, slots=True)
class ReceiverDescriptor:
    """``factory`` is ``"package.module:function"``; ``args`` are its keyword arguments."""

    factory: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        module, sep, name = self.factory.partition(":")
        if not sep or not module or not name.isidentifier():
            raise ReceiverDescriptorError(f"receiver factory must be 'module:function', got {self.factory!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"factory": self.factory, "args": dict(self.args)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReceiverDescriptor:
        factory, args = d.get("factory"), d.get("args")
        if not isinstance(factory, str) or not isinstance(args, dict):
            raise ReceiverDescriptorError(f"not a receiver descriptor: keys {sorted(d)}")
        return cls(factory, args)

    def build(self) -> Receiver:
        """A new receiver from the factory (imported on first use: executors load lazily)."""
        module_name, _, name = self.factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError) as exc:
            raise ReceiverDescriptorError(f"cannot load receiver factory {self.factory}: {exc}") from exc
        receiver = factory(**self.args)
        if not isinstance(receiver, Receiver):
            raise ReceiverDescriptorError(
                f"receiver factory {self.factory} returned {type(receiver).__name__}, not a Receiver"
            )
        return receiver
