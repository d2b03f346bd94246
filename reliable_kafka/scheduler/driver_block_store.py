"""The block store of receivers that run in the driver when the tracker is given none: a
``BlockManager`` of the tracker's own, closed when the tracker goes away."""

from __future__ import annotations

import weakref

from reliable_kafka.storage.block_manager import BlockManager


def driver_block_manager(owner: object) -> BlockManager:
    """A new ``BlockManager`` that lives as long as ``owner``."""
    block_manager = BlockManager()
    # Not closed on stop: the batches of a graceful stop still read it. Closing it when the owner
    # goes away (or at exit) removes its spill directory.
    weakref.finalize(owner, block_manager.close)
    return block_manager
