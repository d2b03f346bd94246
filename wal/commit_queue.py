"""The queue between batched writers and the single group-commit thread."""

from __future__ import annotations

import threading
import time
from collections import deque

from wal.api import RecordHandle

# Resolution is normally done by the commit thread alone; the guard matters only when close()
# gives up on a hung batch and fails it from another thread.
_RESOLVE_GUARD = threading.Lock()


class PendingWrite:
    """One queued write; ``done`` is held until the outcome is known (cheaper than an Event)."""

    __slots__ = ("done", "error", "handle", "record", "resolved", "time_ms")

    def __init__(self, record: bytes, time_ms: int) -> None:
        self.record = record
        self.time_ms = time_ms
        self.handle: RecordHandle | None = None
        self.error: BaseException | None = None
        self.resolved = False
        self.done = threading.Lock()
        self.done.acquire()

    def resolve(self, handle: RecordHandle | None, error: BaseException | None) -> None:
        """First outcome wins; later ones (a batch finishing after close gave up on it) are dropped."""
        with _RESOLVE_GUARD:
            if self.resolved:
                return
            self.resolved = True
            self.handle, self.error = handle, error
        self.done.release()


class CommitQueue:
    """FIFO of pending writes that wakes the commit thread once per batch, not once per write.

    ``take`` can hold out for ``target`` writes: writers released by the previous commit
    need a moment to come back, and committing without them makes batches alternate
    between one straggler and everyone else (two syncs where one would do).
    """

    def __init__(self) -> None:
        self._items: deque[PendingWrite] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._wanted = 1
        self._closed = False

    def put(self, pending: PendingWrite) -> bool:
        """Enqueue; False once closed (the caller raises, nothing was queued)."""
        with self._cond:
            if self._closed:
                return False
            self._items.append(pending)
            if len(self._items) >= self._wanted:
                self._cond.notify()
        return True

    def take(self, target: int, max_wait_s: float, max_records: int, max_bytes: int) -> list[PendingWrite]:
        """The next batch (oldest first); empty only when closed."""
        items = self._items
        with self._cond:
            while not items and not self._closed:
                self._cond.wait()
            if self._closed:
                return []
            if len(items) < target and max_wait_s > 0:
                self._wanted = target
                deadline = time.monotonic() + max_wait_s
                while len(items) < target and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._cond.wait(remaining):
                        break
                self._wanted = 1
                if self._closed:
                    return []
            batch = [items.popleft()]
            size = len(batch[0].record)
            while items and len(batch) < max_records and size < max_bytes:
                pending = items.popleft()
                batch.append(pending)
                size += len(pending.record)
            return batch

    def close(self) -> list[PendingWrite]:
        """Refuse further puts, wake the commit thread, and hand back what was never taken."""
        with self._cond:
            self._closed = True
            left = list(self._items)
            self._items.clear()
            self._cond.notify_all()
        return left
