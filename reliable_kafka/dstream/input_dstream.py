"""Spark's ``InputDStream``: a stream with no parents, fed from outside, registered with the graph.

Subclasses implement ``compute(valid_time_ms)``, ``start()``/``stop()`` if they hold
resources, and ``checkpoint_data()``/``restore_checkpoint_data()`` if a restart needs more than
the graph (the direct Kafka stream's offset ranges). Receiver-based streams set
``is_receiver_input = True`` (the graph and the receiver tracker find them by it) and may set
``rate_controller`` to a ``StreamingListener`` that the context attaches to the listener
bus (backpressure).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, ClassVar

from reliable_kafka.dstream.dstream import DStream

if TYPE_CHECKING:
    from collections.abc import Callable

    from reliable_kafka.dstream.streaming_context import StreamingContextLike
    from reliable_kafka.scheduler.listener_events import BatchInfo
    from reliable_kafka.scheduler.rate_controller import RateController

logger = logging.getLogger(__name__)


class InputDStream(DStream):
    is_receiver_input: ClassVar[bool] = False

    def __init__(self, ssc: StreamingContextLike) -> None:
        super().__init__(ssc)
        self.id: int = ssc.next_input_stream_id()
        self.last_valid_time_ms: int | None = None
        self.rate_controller: RateController | None = None
        ssc.graph.add_input_stream(self)

    @property
    def name(self) -> str:
        """Spark's display name: ``QueueInputDStream`` with id 0 is ``"Queue stream [0]"``."""
        words = re.findall(r"[A-Z][a-z0-9]*", type(self).__name__.replace("InputDStream", "Stream"))
        return f"{' '.join(words).lower().capitalize()} [{self.id}]"

    @property
    def slide_duration_ms(self) -> int:
        batch = self._ssc.graph.batch_duration_ms
        if batch is None:
            raise RuntimeError("Batch duration has not been set")
        return batch

    @property
    def dependencies(self) -> list[DStream]:
        return []

    def is_time_valid(self, time_ms: int) -> bool:
        if not super().is_time_valid(time_ms):
            return False
        start_time = self.graph.start_time_ms if self.graph is not None else None
        if start_time is not None and time_ms <= start_time:
            # A batch before this run's start, recomputed for the state restored from a state
            # checkpoint: expected after every restart, once per batch since that checkpoint.
            logger.debug("Input of %d ms recomputed for restored state", time_ms)
            return True
        if self.last_valid_time_ms is not None and time_ms < self.last_valid_time_ms:
            # Expected when a restart regenerates old batches; worth a trace otherwise.
            logger.warning(
                "isTimeValid called with %d ms whereas the last valid time is %d ms",
                time_ms,
                self.last_valid_time_ms,
            )
        self.last_valid_time_ms = time_ms
        return True

    def on_batch_completed(self, batch_info: BatchInfo) -> None:
        """A batch completed (``batch_info`` says whether its output operations failed); called on
        the job thread, in order, before the job generator learns of it. Nothing by default."""

    def checkpoint_data(self) -> dict[str, Any] | None:
        """What this stream needs, beyond the graph that setupFunc rebuilds, to go on after a
        driver restart (Spark's ``DStreamCheckpointData``): plain JSON data, written with every
        checkpoint on the job generator's thread, the thread that computes batches. None: nothing."""
        return None

    def restore_checkpoint_data(self, data: dict[str, Any]) -> None:
        """Take back what :meth:`checkpoint_data` returned in the checkpoint being restored."""
        raise ValueError(f"{self} keeps no checkpoint data, yet the checkpoint holds some for it")

    def late_input_metadata(self, time_ms: int) -> Callable[[], dict[str, Any]] | None:
        """What the batch's input info learns only once its jobs ran (receiver streams: counts
        kept by the executors); None: nothing."""
        return None

    def input_info(self, time_ms: int) -> tuple[int, dict[str, Any]] | None:
        """What this stream put into batch ``time_ms`` for listeners (Spark's ``reportInfo`` to
        the ``InputInfoTracker``): its record count and metadata, once the batch's RDD is
        computed. None: the receiver tracker reports for it, or nothing is known."""
        return None

    def start(self) -> None:
        """Called when the streaming context starts."""

    def stop(self) -> None:
        """Called when the streaming context stops."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id})"
