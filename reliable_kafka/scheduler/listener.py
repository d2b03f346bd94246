"""Spark's streaming listener API: the event payloads, the ``StreamingListener`` base class and the
bus that delivers events to listeners on its own thread.

Payloads are frozen dataclasses with snake_case fields (``batch_info.processing_delay_ms``) for
our own code, plus read-only camelCase aliases (``batchInfo.processingDelay``) so that pyspark
listener code reads the same names. Unlike pyspark's py4j objects the aliases are attributes,
not methods, and times are plain ints in milliseconds (``None`` where Spark has an empty Option).

Listener methods are pyspark's camelCase names (``onBatchCompleted``). The base class forwards
each of them to a snake_case twin (``on_batch_completed``) so that internal listeners, such as the
rate controllers, can be written in our own style; override either, not both.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

logger = logging.getLogger(__name__)


def _alias(name: str) -> property:
    """A read-only camelCase view of the snake_case field ``name``."""
    return property(lambda self: getattr(self, name), doc=f"Alias of ``{name}``.")


# ---------------------------------------------------------------- payloads


@dataclass(frozen=True, slots=True)
class StreamInputInfo:
    """What one input stream put into one batch."""

    input_stream_id: int
    num_records: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    METADATA_KEY_DESCRIPTION: ClassVar[str] = "Description"

    @property
    def metadata_description(self) -> str | None:
        value = self.metadata.get(self.METADATA_KEY_DESCRIPTION)
        return None if value is None else str(value)

    inputStreamId = _alias("input_stream_id")
    numRecords = _alias("num_records")
    metadataDescription = _alias("metadata_description")


@dataclass(frozen=True, slots=True)
class OutputOperationInfo:
    """One output operation (one ``Job``) of one batch."""

    batch_time_ms: int
    id: int
    name: str
    description: str
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    failure_reason: str | None = None

    @property
    def duration_ms(self) -> int | None:
        if self.start_time_ms is None or self.end_time_ms is None:
            return None
        return self.end_time_ms - self.start_time_ms

    batchTime = _alias("batch_time_ms")
    startTime = _alias("start_time_ms")
    endTime = _alias("end_time_ms")
    failureReason = _alias("failure_reason")
    duration = _alias("duration_ms")


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """Spark's ``BatchInfo``. Delays follow Spark: scheduling = start - submission, processing =
    end - start, total = scheduling + processing; each is ``None`` until its times are known."""

    batch_time_ms: int
    stream_id_to_input_info: Mapping[int, StreamInputInfo]
    submission_time_ms: int
    processing_start_time_ms: int | None
    processing_end_time_ms: int | None
    output_operation_infos: Mapping[int, OutputOperationInfo] = field(default_factory=dict)

    @property
    def scheduling_delay_ms(self) -> int | None:
        if self.processing_start_time_ms is None:
            return None
        return self.processing_start_time_ms - self.submission_time_ms

    @property
    def processing_delay_ms(self) -> int | None:
        if self.processing_start_time_ms is None or self.processing_end_time_ms is None:
            return None
        return self.processing_end_time_ms - self.processing_start_time_ms

    @property
    def total_delay_ms(self) -> int | None:
        scheduling, processing = self.scheduling_delay_ms, self.processing_delay_ms
        if scheduling is None or processing is None:
            return None
        return scheduling + processing

    @property
    def num_records(self) -> int:
        return sum(info.num_records for info in self.stream_id_to_input_info.values())

    batchTime = _alias("batch_time_ms")
    streamIdToInputInfo = _alias("stream_id_to_input_info")
    submissionTime = _alias("submission_time_ms")
    processingStartTime = _alias("processing_start_time_ms")
    processingEndTime = _alias("processing_end_time_ms")
    outputOperationInfos = _alias("output_operation_infos")
    schedulingDelay = _alias("scheduling_delay_ms")
    processingDelay = _alias("processing_delay_ms")
    totalDelay = _alias("total_delay_ms")
    numRecords = _alias("num_records")


@dataclass(frozen=True, slots=True)
class ReceiverInfo:
    """The state of one receiver as the tracker last saw it."""

    stream_id: int
    name: str
    active: bool
    location: str
    executor_id: str = ""
    last_error_message: str = ""
    last_error: str = ""
    last_error_time_ms: int = -1

    streamId = _alias("stream_id")
    executorId = _alias("executor_id")
    lastErrorMessage = _alias("last_error_message")
    lastError = _alias("last_error")
    lastErrorTime = _alias("last_error_time_ms")


# ---------------------------------------------------------------- events


class StreamingListenerEvent:
    """Base of every event; ``listener_method`` names the ``StreamingListener`` method it goes to."""

    __slots__ = ()
    listener_method: ClassVar[str]


@dataclass(frozen=True, slots=True)
class StreamingListenerStreamingStarted(StreamingListenerEvent):
    time_ms: int
    listener_method: ClassVar[str] = "onStreamingStarted"

    time = _alias("time_ms")


@dataclass(frozen=True, slots=True)
class StreamingListenerReceiverStarted(StreamingListenerEvent):
    receiver_info: ReceiverInfo
    listener_method: ClassVar[str] = "onReceiverStarted"

    receiverInfo = _alias("receiver_info")


@dataclass(frozen=True, slots=True)
class StreamingListenerReceiverError(StreamingListenerEvent):
    receiver_info: ReceiverInfo
    listener_method: ClassVar[str] = "onReceiverError"

    receiverInfo = _alias("receiver_info")


@dataclass(frozen=True, slots=True)
class StreamingListenerReceiverStopped(StreamingListenerEvent):
    receiver_info: ReceiverInfo
    listener_method: ClassVar[str] = "onReceiverStopped"

    receiverInfo = _alias("receiver_info")


@dataclass(frozen=True, slots=True)
class StreamingListenerStreamingError(StreamingListenerEvent):
    """Something wrong with the stream as a whole, not one receiver or batch (not in Spark):
    batches waiting for task slots that receivers hold, for example."""

    time_ms: int
    message: str
    listener_method: ClassVar[str] = "onStreamingError"

    time = _alias("time_ms")


@dataclass(frozen=True, slots=True)
class StreamingListenerBatchSubmitted(StreamingListenerEvent):
    batch_info: BatchInfo
    listener_method: ClassVar[str] = "onBatchSubmitted"

    batchInfo = _alias("batch_info")


@dataclass(frozen=True, slots=True)
class StreamingListenerBatchStarted(StreamingListenerEvent):
    batch_info: BatchInfo
    listener_method: ClassVar[str] = "onBatchStarted"

    batchInfo = _alias("batch_info")


@dataclass(frozen=True, slots=True)
class StreamingListenerBatchCompleted(StreamingListenerEvent):
    batch_info: BatchInfo
    listener_method: ClassVar[str] = "onBatchCompleted"

    batchInfo = _alias("batch_info")


@dataclass(frozen=True, slots=True)
class StreamingListenerOutputOperationStarted(StreamingListenerEvent):
    output_operation_info: OutputOperationInfo
    listener_method: ClassVar[str] = "onOutputOperationStarted"

    outputOperationInfo = _alias("output_operation_info")


@dataclass(frozen=True, slots=True)
class StreamingListenerOutputOperationCompleted(StreamingListenerEvent):
    output_operation_info: OutputOperationInfo
    listener_method: ClassVar[str] = "onOutputOperationCompleted"

    outputOperationInfo = _alias("output_operation_info")


# ---------------------------------------------------------------- listener


class StreamingListener:
    """Override the callbacks you need; every one defaults to doing nothing."""

    def onStreamingStarted(self, streamingStarted: StreamingListenerStreamingStarted) -> None:
        self.on_streaming_started(streamingStarted)

    def onReceiverStarted(self, receiverStarted: StreamingListenerReceiverStarted) -> None:
        self.on_receiver_started(receiverStarted)

    def onReceiverError(self, receiverError: StreamingListenerReceiverError) -> None:
        self.on_receiver_error(receiverError)

    def onReceiverStopped(self, receiverStopped: StreamingListenerReceiverStopped) -> None:
        self.on_receiver_stopped(receiverStopped)

    def onStreamingError(self, streamingError: StreamingListenerStreamingError) -> None:
        self.on_streaming_error(streamingError)

    def onBatchSubmitted(self, batchSubmitted: StreamingListenerBatchSubmitted) -> None:
        self.on_batch_submitted(batchSubmitted)

    def onBatchStarted(self, batchStarted: StreamingListenerBatchStarted) -> None:
        self.on_batch_started(batchStarted)

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        self.on_batch_completed(batchCompleted)

    def onOutputOperationStarted(
        self,
        outputOperationStarted: StreamingListenerOutputOperationStarted,
    ) -> None:
        self.on_output_operation_started(outputOperationStarted)

    def onOutputOperationCompleted(
        self,
        outputOperationCompleted: StreamingListenerOutputOperationCompleted,
    ) -> None:
        self.on_output_operation_completed(outputOperationCompleted)

    def on_streaming_started(self, event: StreamingListenerStreamingStarted) -> None:
        pass

    def on_receiver_started(self, event: StreamingListenerReceiverStarted) -> None:
        pass

    def on_receiver_error(self, event: StreamingListenerReceiverError) -> None:
        pass

    def on_receiver_stopped(self, event: StreamingListenerReceiverStopped) -> None:
        pass

    def on_streaming_error(self, event: StreamingListenerStreamingError) -> None:
        pass

    def on_batch_submitted(self, event: StreamingListenerBatchSubmitted) -> None:
        pass

    def on_batch_started(self, event: StreamingListenerBatchStarted) -> None:
        pass

    def on_batch_completed(self, event: StreamingListenerBatchCompleted) -> None:
        pass

    def on_output_operation_started(self, event: StreamingListenerOutputOperationStarted) -> None:
        pass

    def on_output_operation_completed(self, event: StreamingListenerOutputOperationCompleted) -> None:
        pass


# ---------------------------------------------------------------- bus

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
