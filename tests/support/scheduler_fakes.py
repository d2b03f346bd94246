"""Helpers for the driver tests: block infos, a minimal streaming context."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from reliable_kafka.dstream.dstream_graph import DStreamGraph
from reliable_kafka.receiver.receiver import Receiver
from reliable_kafka.receiver.tracker_endpoint import ReceivedBlockInfo, ReceivedBlockStoreResult
from reliable_kafka.scheduler.receiver_tracker import ReceiverTracker
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.storage_level import StorageLevel
from wal import RecordHandle

_counter = iter(range(1_000_000))


def block_info(
    stream_id: int = 0,
    num_records: int | None = 10,
    *,
    handle: RecordHandle | None = None,
    metadata: dict[str, Any] | None = None,
    unique_id: int | None = None,
) -> ReceivedBlockInfo:
    block_id = StreamBlockId(stream_id, next(_counter) if unique_id is None else unique_id)
    return ReceivedBlockInfo(
        stream_id, num_records, metadata, ReceivedBlockStoreResult(block_id, num_records, handle)
    )


def block_ids(infos: list[ReceivedBlockInfo]) -> list[StreamBlockId]:
    return [info.block_id for info in infos]


class RecordingBus:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[Any] = []

    def post(self, event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def of_type(self, kind: type) -> list[Any]:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


class CounterReceiver(Receiver):
    """Stores 0, 1, 2, ... one record at a time; optionally stops itself after ``stop_after``."""

    def __init__(self, stop_after: int | None = None, preferred_location: str | None = None) -> None:
        super().__init__(StorageLevel.MEMORY_ONLY)
        self.stop_after = stop_after
        self._preferred = preferred_location
        self.next_value = 0
        self._stopping = threading.Event()

    @property
    def preferred_location(self) -> str | None:
        return self._preferred

    def on_start(self) -> None:
        self._stopping.clear()
        self.start_receiving_thread(self._receive, f"counter-{self.stream_id}")

    def on_stop(self) -> None:
        self._stopping.set()

    def _receive(self) -> None:
        while not self._stopping.is_set():
            self.store(self.next_value)
            self.next_value += 1
            if self.stop_after is not None and self.next_value >= self.stop_after:
                self.stop("counted enough")
                return
            time.sleep(0.0005)


class FakeStream:
    """What the tracker needs of a receiver input stream: an id and fresh receivers."""

    def __init__(self, stream_id: int, make_receiver: Callable[[], Receiver]) -> None:
        self.id = stream_id
        self.make_receiver = make_receiver
        self.receivers: list[Receiver] = []
        self.previous_launches = 0

    def preferred_location(self) -> str | None:
        return None

    def get_receiver(self) -> Receiver:
        receiver = self.make_receiver()
        self.receivers.append(receiver)
        return receiver


class FakeStreamingContext:
    """The parts of a StreamingContext the tracker and the input streams use. Without ``streams``
    the graph is a real DStreamGraph, so real input streams can register with it."""

    def __init__(
        self,
        streams: list[Any] | None,
        settings: StreamingSettings,
        *,
        checkpoint_dir: str | None = None,
        spark_context: Any = None,
        clock: Any = None,
        batch_duration_ms: int = 1000,
    ) -> None:
        self.settings = settings
        self.checkpoint_dir = checkpoint_dir
        self.sparkContext = spark_context
        self.batch_duration_ms = batch_duration_ms
        self.bus = RecordingBus()
        if streams is None:
            self.graph: Any = DStreamGraph()
            self.graph.set_batch_duration(batch_duration_ms)
        else:
            self.graph = SimpleNamespace(
                get_receiver_input_streams=lambda: list(streams),
                # Spark's default: input streams remember one batch.
                get_max_input_stream_remember_duration=lambda: batch_duration_ms,
            )
        self.clock = clock
        self._stream_ids = itertools.count()
        self.errors: list[BaseException] = []  # what awaitTermination would raise, in order

    def notify_error(self, error: BaseException) -> None:
        self.errors.append(error)

    def receiver_tracker(self, **kwargs: Any) -> ReceiverTracker:
        """A tracker on this context, as the real context builds it: its events on :attr:`bus`, its
        clock this context's, attached to the graph's receiver streams that read blocks."""
        tracker = ReceiverTracker(self, listener_bus=self.bus, clock=self.clock, **kwargs)
        for stream in self.graph.get_receiver_input_streams():
            if hasattr(stream, "attach_block_source"):  # FakeStream reads no blocks
                stream.attach_block_source(tracker)
        return tracker

    def check_accepts_new_streams(self) -> None:
        pass

    def next_input_stream_id(self) -> int:
        return next(self._stream_ids)


def quick_settings(**sections: dict[str, Any]) -> StreamingSettings:
    """Spark's defaults with short intervals, so receivers produce blocks and restart quickly."""
    receiver = {
        "block_interval_ms": 50,
        "restart_delay_ms": 50,
        "placement": "driver",
        **sections.pop("receiver", {}),
    }
    wal = {"fsync": False, **sections.pop("wal", {})}
    return StreamingSettings(receiver=receiver, wal=wal, **sections)
