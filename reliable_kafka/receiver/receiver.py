"""Spark's ``Receiver``: the user-facing base class of everything that receives data."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.storage_level import StorageLevel

if TYPE_CHECKING:
    from reliable_kafka.receiver.receiver_supervisor import ReceiverSupervisor

logger = logging.getLogger(__name__)


class Receiver(ABC):
    """Receives data from a source and stores it through its supervisor.

    ``on_start`` must return quickly: start threads that receive (see
    :meth:`start_receiving_thread`) and return. ``on_stop`` must make those threads end;
    the supervisor joins them after it returns.

    ``store`` buffers one record into a block generator (cheap, returns at once, not reliable);
    ``store_many``, ``store_iterator`` and ``store_bytes`` store a whole block and return only
    once it is stored and reported to the tracker, so a reliable receiver may then commit the
    source offsets of exactly those records.
    """

    def __init__(self, storage_level: StorageLevel | str | Any) -> None:
        self.storage_level = StorageLevel.of(storage_level)
        self._stream_id: int | None = None
        # Which launch of its stream this receiver is (1 + relaunches by the tracker), set by the
        # runner that launches it: a source never reached at a stream's first launch is a
        # mistake to report, one gone at a later launch an outage to ride out.
        self.launch = 1
        self._supervisor: ReceiverSupervisor | None = None
        self._receiving_threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()

    @abstractmethod
    def on_start(self) -> None:
        """Start receiving; called on (re)start once the tracker accepted the receiver."""

    @abstractmethod
    def on_stop(self) -> None:
        """Stop receiving; called on stop and before each restart."""

    @property
    def preferred_location(self) -> str | None:
        """The host this receiver should run on, if it matters."""
        return None

    @property
    def stream_id(self) -> int:
        if self._stream_id is None:
            raise RuntimeError(f"{type(self).__name__} has no stream id yet; the input stream assigns it")
        return self._stream_id

    def set_receiver_id(self, stream_id: int, *, launch: int = 1) -> None:
        """The stream this receiver serves, and which launch of it this is (see :attr:`launch`)."""
        self._stream_id = stream_id
        self.launch = launch

    @property
    def supervisor(self) -> ReceiverSupervisor:
        if self._supervisor is None:
            raise RuntimeError(f"{type(self).__name__} has not been attached to a supervisor")
        return self._supervisor

    def attach_supervisor(self, supervisor: ReceiverSupervisor) -> None:
        """One live supervisor at a time; a new one may take over once the last has terminated
        (the tracker relaunches the same receiver object)."""
        current = self._supervisor
        if current is not None and current is not supervisor and not current.is_terminated():
            raise RuntimeError(f"{type(self).__name__} {self._stream_id} already has a running supervisor")
        self._supervisor = supervisor

    def store(self, item: Any) -> None:
        """Buffer one record; it is stored with the next block the default generator cuts."""
        self.supervisor.push_single(item)

    def store_many(self, records: list[Any], metadata: dict[str, Any] | None = None) -> None:
        """Store the records as one block; returns once it is stored and reported."""
        self.supervisor.push_records(records, metadata)

    def store_iterator(self, iterator: Iterable[Any], metadata: dict[str, Any] | None = None) -> None:
        """Store everything the iterator yields as one block; returns once stored and reported."""
        self.supervisor.push_iterator(iterator, metadata)

    def store_bytes(
        self,
        data: bytes,
        metadata: dict[str, Any] | None = None,
        num_records: int | None = None,
        *,
        block_id: StreamBlockId | None = None,
    ) -> None:
        """Store a block already in the block format; returns once stored and reported.
        ``num_records``, if known, is what the tracker counts for the block. ``block_id`` (a
        block generator's) makes retries of one block store it under one id; by default each
        call takes a new one."""
        self.supervisor.push_bytes(data, metadata, block_id, num_records=num_records)

    def report_error(self, message: str, error: BaseException | None) -> None:
        """Tell the tracker about an error without stopping."""
        self.supervisor.report_error(message, error)

    def restart(self, message: str, error: BaseException | None = None, delay_ms: int | None = None) -> None:
        """Stop, wait ``delay_ms`` (default: the configured restart delay), start again.
        Asynchronous: it runs on a thread of the supervisor, so any thread may call it.
        A :class:`FatalReceiverError` stops instead: no restart can mend it."""
        if isinstance(error, FatalReceiverError):
            self.stop(message, error)
            return
        self.supervisor.restart_receiver(message, error, delay_ms)

    def stop(self, message: str, error: BaseException | None = None) -> None:
        """Stop the receiver and its supervisor for good; with a :class:`FatalReceiverError`,
        its stream too (the tracker launches it no more, ``awaitTermination`` raises the error)."""
        self.supervisor.stop(message, error)

    def is_started(self) -> bool:
        return self.supervisor.is_receiver_started()

    def is_stopped(self) -> bool:
        return self.supervisor.is_receiver_stopped()

    def start_receiving_thread(self, target: Callable[[], None], name: str) -> threading.Thread:
        """Start a daemon thread that the supervisor joins when the receiver stops.

        An exception escaping ``target`` restarts the receiver: a receiving thread that died
        silently would leave its share of the source unread.
        """

        def run() -> None:
            try:
                target()
            except Exception as exc:
                if self.is_stopped():
                    logger.warning("Receiving thread %s failed while stopping: %s", name, exc)
                else:
                    self.restart(f"Error in receiving thread {name}", exc)

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._threads_lock:
            self._receiving_threads.append(thread)
        thread.start()
        return thread

    def join_receiving_threads(self, timeout_s: float) -> None:
        """Wait for the threads of :meth:`start_receiving_thread` (the supervisor calls this
        after ``on_stop``); a thread still running after ``timeout_s`` in all is logged and left."""
        with self._threads_lock:
            threads, self._receiving_threads = self._receiving_threads, []
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            if thread is threading.current_thread():
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                logger.warning("Receiving thread %s did not stop within %s s", thread.name, timeout_s)
