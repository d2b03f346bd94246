"""Spark's ``StreamingListenerBus``: delivers listener events to every listener on its own thread."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from reliable_kafka.scheduler.listener_events import StreamingListenerEvent

logger = logging.getLogger(__name__)

_STOP = object()


class StreamingListenerBus:
    """Delivers events to every listener, in posting order, on one daemon thread.

    Events posted before ``start`` are kept and delivered once it runs (as Spark's bus does);
    events posted after ``stop`` are dropped. A listener that raises is logged and keeps receiving.
    """

    def __init__(self, name: str = "StreamingListenerBus") -> None:
        self.name = name
        self._queue: queue.SimpleQueue[StreamingListenerEvent | object] = queue.SimpleQueue()
        self._listeners: tuple[Any, ...] = ()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._undelivered = 0
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add_listener(self, listener: Any) -> None:
        with self._lock:
            # Copy on write: the bus thread iterates a snapshot without holding the lock.
            self._listeners = (*self._listeners, listener)

    def remove_listener(self, listener: Any) -> None:
        with self._lock:
            self._listeners = tuple(existing for existing in self._listeners if existing is not listener)

    @property
    def listeners(self) -> tuple[Any, ...]:
        return self._listeners

    def start(self) -> None:
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def post(self, event: StreamingListenerEvent) -> None:
        with self._lock:
            if self._stopped:
                logger.debug("%s is stopped; dropping %s", self.name, type(event).__name__)
                return
            self._undelivered += 1
            self._queue.put(event)

    def stop(self) -> None:
        """Deliver what was posted so far, then end the thread (joined unless called from it)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            thread = self._thread
            self._queue.put(_STOP)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def wait_until_empty(self, timeout_s: float) -> bool:
        """True once every event posted so far has been delivered; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._undelivered == 0, timeout_s)

    def in_listener_thread(self) -> bool:
        return self._thread is not None and self._thread is threading.current_thread()

    def _run(self) -> None:
        while (event := self._queue.get()) is not _STOP:
            assert isinstance(event, StreamingListenerEvent)
            for listener in self._listeners:
                self._deliver(listener, event)
            with self._idle:
                self._undelivered -= 1
                self._idle.notify_all()

    @staticmethod
    def _deliver(listener: Any, event: StreamingListenerEvent) -> None:
        callback = getattr(listener, event.listener_method, None)
        if callback is None:
            return
        try:
            callback(event)
        except Exception:
            # One broken listener must not silence the others or stop the bus.
            logger.exception(
                "Listener %s threw an exception on %s", type(listener).__name__, type(event).__name__
            )
