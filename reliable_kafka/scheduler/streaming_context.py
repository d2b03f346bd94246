"""What the job scheduler and the job generator use of the context and its DStream graph, one
protocol each.

Protocols, not imports: the scheduler comes before the DStreams and the context in the package's
layering (``tests/test_import_graph.py``). The context, the composition root, hands the scheduler
itself (these properties), its graph, the listener bus and the receiver tracker's factory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.checkpoint import Checkpoint
    from reliable_kafka.checkpoint_lease import WriteFence
    from reliable_kafka.scheduler.job import Job
    from reliable_kafka.scheduler.listener_events import BatchInfo
    from reliable_kafka.settings import StreamingSettings
    from reliable_kafka.state_checkpoint import StateStreamRecord
    from reliable_kafka.util.clock import Clock


class InputStream(Protocol):
    """An input DStream, as the scheduler sees it."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def is_receiver_input(self) -> bool: ...

    def input_info(self, time_ms: int) -> tuple[int, dict[str, Any]] | None:
        """(records, metadata) of the batch it just computed; None for receiver streams."""
        ...

    def late_input_metadata(self, time_ms: int) -> Callable[[], dict[str, Any]] | None:
        """Metadata of the batch known only once its jobs ran; None: none."""
        ...

    def checkpoint_data(self) -> Any: ...

    def on_batch_completed(self, batch_info: BatchInfo) -> None: ...


class StreamGraph(Protocol):
    """The ``DStreamGraph``, as the scheduler sees it."""

    @property
    def zero_time_ms(self) -> int | None: ...

    @property
    def remember_duration_ms(self) -> int | None: ...

    @property
    def input_streams(self) -> Sequence[InputStream]: ...

    def get_input_streams(self) -> Sequence[InputStream]: ...

    def get_receiver_input_streams(self) -> Sequence[Any]:
        """The ``ReceiverInputDStream``s (``scheduler.receiver_input.ReceiverInputStream`` to the
        receiver tracker; ``late_input_metadata(time_ms)`` to the job generator)."""
        ...

    def get_max_input_stream_remember_duration(self) -> int | None: ...

    def start(self, zero_time_ms: int, start_time_ms: int | None = None) -> None: ...

    def stop(self) -> None: ...

    def generate_jobs(self, time_ms: int) -> list[Job]: ...

    def clear_metadata(self, time_ms: int) -> None: ...

    def write_state_checkpoints(self, time_ms: int, handle: dict[str, Any] | str) -> bool: ...

    def state_records(self) -> tuple[StateStreamRecord, ...]: ...


class GeneratorContext(Protocol):
    """What the job generator uses of the ``StreamingContext``: the graph, the clock, the batch
    interval and the checkpoint settings."""

    @property
    def settings(self) -> StreamingSettings: ...

    @property
    def graph(self) -> StreamGraph: ...

    @property
    def sparkContext(self) -> SparkContext: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def batch_duration_ms(self) -> int: ...

    @property
    def checkpoint_dir(self) -> str | None: ...

    @property
    def checkpoint_duration_ms(self) -> int: ...

    @property
    def checkpoint_fence(self) -> WriteFence | None:
        """The driver's lease on the checkpoint directory, held from start (None: none)."""
        ...

    @property
    def initial_checkpoint(self) -> Checkpoint | None: ...


class SchedulerContext(GeneratorContext, Protocol):
    """What the job scheduler uses of the ``StreamingContext``: its own (errors to
    ``awaitTermination``) and what it hands the job generator it builds."""

    def notify_error(self, error: BaseException) -> None:
        """Reports an error to ``awaitTermination``."""
        ...
