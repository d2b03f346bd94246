"""In-memory stand-ins for the pieces around a receiver: a tracker, a listener, a receiver."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from reliable_kafka.receiver import BlockGeneratorListener, ReceivedBlockInfo, Receiver, ReceiverControl
from reliable_kafka.storage import StreamBlockId


class FakeTracker:
    """A ReceiverTrackerEndpoint that remembers every call."""

    def __init__(self, *, accept_registration: bool = True, accept_blocks: bool = True) -> None:
        self.accept_registration = accept_registration
        self.accept_blocks = accept_blocks
        self.lock = threading.Lock()
        self.events: list[tuple[str, Any]] = []
        self.blocks: list[ReceivedBlockInfo] = []
        self.errors: list[tuple[int, str, str]] = []
        self.fatal: list[tuple[int, str, str]] = []  # the deregistrations that ended the stream
        self.controls: list[ReceiverControl] = []

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        with self.lock:
            self.events.append(("register", (stream_id, receiver_type, host, executor_id)))
            self.controls.append(control)
        return self.accept_registration

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        with self.lock:
            self.events.append(("add_block", info.block_id))
            if self.accept_blocks:
                self.blocks.append(info)
        return self.accept_blocks

    def report_error(self, stream_id: int, message: str, error: str) -> None:
        with self.lock:
            self.events.append(("report_error", message))
            self.errors.append((stream_id, message, error))

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        with self.lock:
            self.events.append(("deregister", (stream_id, message, error)))
            if fatal:
                self.fatal.append((stream_id, message, error))
        return True

    def event_names(self) -> list[str]:
        with self.lock:
            return [name for name, _ in self.events]


class RecordingListener(BlockGeneratorListener):
    """Records every callback in order; ``push_error`` makes on_push_block fail for chosen calls."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[Any, ...]] = []
        self.pushed: list[tuple[StreamBlockId, list[Any]]] = []
        self.errors: list[tuple[str, BaseException]] = []
        self.fail_push: Callable[[int], bool] = lambda push_index: False
        self.on_push: Callable[[StreamBlockId, list[Any]], None] = lambda block_id, records: None

    def on_add_data(self, data: Any, metadata: Any) -> None:
        self.calls.append(("add", data, metadata))

    def on_generate_block(self, block_id: StreamBlockId) -> None:
        self.calls.append(("generate", block_id))

    def on_push_block(self, block_id: StreamBlockId, records: list[Any]) -> None:
        with self.lock:
            index = len(self.pushed)
            self.calls.append(("push", block_id, list(records)))
            self.pushed.append((block_id, list(records)))
        self.on_push(block_id, records)
        if self.fail_push(index):
            raise RuntimeError(f"push {index} failed on purpose")

    def on_error(self, message: str, error: BaseException) -> None:
        with self.lock:
            self.calls.append(("error", message))
            self.errors.append((message, error))

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def pushed_records(self) -> list[Any]:
        with self.lock:
            return [record for _, records in self.pushed for record in records]


class ThreadedReceiver(Receiver):
    """Runs ``body(receiver, stop_event)`` on ``num_threads`` receiving threads."""

    def __init__(
        self,
        body: Callable[[ThreadedReceiver, threading.Event], None] | None = None,
        *,
        num_threads: int = 1,
        storage_level: str = "MEMORY_AND_DISK_SER",
    ) -> None:
        super().__init__(storage_level)
        self.body = body or (lambda receiver, stopping: stopping.wait())
        self.num_threads = num_threads
        self.starts = 0
        self.stops = 0
        self.threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def on_start(self) -> None:
        self.starts += 1
        self._stopping = threading.Event()
        stopping = self._stopping
        self.threads = [
            self.start_receiving_thread(lambda: self.body(self, stopping), name=f"receiving-{index}")
            for index in range(self.num_threads)
        ]

    def on_stop(self) -> None:
        self.stops += 1
        self._stopping.set()
