"""glibc malloc settings for a process that runs receivers, so that it gives memory back.

A receiver's partition threads each allocate the chunks they read: hundreds of threads for a
topic of hundreds of partitions. With glibc's defaults a receiver process held several times
what it had buffered (a 256-partition receiver of 1 KB records, 16 MiB of prefetch and 8 MiB of
blocks: ~100 MB of growth), for two reasons:

- threads that allocate at the same time get arenas of their own, up to 8 per core, and each
  arena keeps the memory of its busiest moment: capped here at 2;
- a freed buffer above the mmap threshold raises the threshold (up to 32 MiB), so later buffers
  of that size come from the arenas and stay there: fixed here at 64 KiB, so that chunks and
  blocks larger than that are mapped and unmapped, going back to the system when freed.

Together: ~43 MB of growth, ~22 MB once the backlog is read (tests/kafka/test_receiver_memory_bound.py).
Python objects below 512 bytes never reach malloc (pymalloc), so what the cap serializes is the
larger buffers, a few per batch. ``mallopt`` is process-wide and applies from the call on: it is
called once, before the first partition thread starts. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

logger = logging.getLogger(__name__)

# glibc's malloc.h.
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
RECEIVER_MALLOC_ARENAS = 2
RECEIVER_MMAP_THRESHOLD = 64 << 10


@functools.cache
def tune_malloc_for_receivers() -> bool:
    """Apply the settings above from now on; False where they cannot be set (no glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    tuned = mallopt(_M_ARENA_MAX, RECEIVER_MALLOC_ARENAS) == 1
    tuned = mallopt(_M_MMAP_THRESHOLD, RECEIVER_MMAP_THRESHOLD) == 1 and tuned
    logger.debug("malloc tuned for receivers: %s", tuned)
    return tuned
