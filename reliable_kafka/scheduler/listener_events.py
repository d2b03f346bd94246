"""The values Spark's streaming listener API carries: the payloads (``BatchInfo``, ``ReceiverInfo``,
``StreamInputInfo``, ``OutputOperationInfo``) and the ``StreamingListener*`` events that wrap them.

Payloads are frozen dataclasses with snake_case fields (``batch_info.processing_delay_ms``) for
our own code, plus read-only camelCase aliases (``batchInfo.processingDelay``) so that pyspark
listener code reads the same names. Unlike pyspark's py4j objects the aliases are attributes,
not methods, and times are plain ints in milliseconds (``None`` where Spark has an empty Option).
Each event names the ``StreamingListener`` method it goes to (``listener_method``), which is all
the bus needs to deliver it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


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


# How a receiver runs (ReceiverInfo.runs_as; not in Spark, whose receivers are always tasks): as a
# Spark task, whose executor id is "driver" on a local master, or as a supervisor in the driver's
# own Python process (driver placement, or a local master's receivers beyond its spare slots).
RUNS_AS_TASK = "task"
RUNS_AS_DRIVER_PROCESS = "driver process"


@dataclass(frozen=True, slots=True)
class ReceiverInfo:
    """The state of one receiver as the tracker last saw it. ``runs_as`` (not in Spark) says how
    a registered receiver runs: ``"task"`` (a Spark task; on a local master its executor id is
    ``"driver"`` too) or ``"driver process"`` (a supervisor in the driver's Python process)."""

    stream_id: int
    name: str
    active: bool
    location: str
    executor_id: str = ""
    last_error_message: str = ""
    last_error: str = ""
    last_error_time_ms: int = -1
    # RUNS_AS_TASK or RUNS_AS_DRIVER_PROCESS once it registered; "" before.
    runs_as: str = ""

    streamId = _alias("stream_id")
    executorId = _alias("executor_id")
    runsAs = _alias("runs_as")
    lastErrorMessage = _alias("last_error_message")
    lastError = _alias("last_error")
    lastErrorTime = _alias("last_error_time_ms")


# What a scaling decision of streaming dynamic allocation did (ScalingDecision.action).
SCALE_UP = "up"
SCALE_DOWN = "down"
HOLD = "hold"


@dataclass(frozen=True, slots=True)
class ScalingDecision:
    """One decision of streaming dynamic allocation (not in Spark, which only logs it): what the
    scaling interval ending at ``time_ms`` measured and what was done.

    ``ratio``: the load, as a fraction of the batch interval (None: nothing to measure, no batch
    completed or running); ``basis`` says how it was measured, ``"processing time"`` (Spark's:
    the average processing time of the batches completed in the interval over the batch
    interval, ``batches`` of them) or ``"processing time, running batches so far"`` (ours, when
    higher: the batches still running at the interval's end counted too, at their processing
    time so far; ``batches`` counts both). ``executors``: the
    live executors when deciding (those being removed left out); ``target``: the executors
    wanted after it; ``executor_id``: the one removed by a ``"down"``; ``reason``: why, in words.
    """

    time_ms: int
    action: str
    ratio: float | None
    basis: str
    batches: int
    executors: int
    target: int
    executor_id: str | None = None
    reason: str = ""

    timeMs = _alias("time_ms")
    executorId = _alias("executor_id")


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


@dataclass(frozen=True, slots=True)
class StreamingListenerScalingDecision(StreamingListenerEvent):
    """A decision of streaming dynamic allocation, one per scaling interval (not in Spark)."""

    decision: ScalingDecision
    listener_method: ClassVar[str] = "onScalingDecision"
