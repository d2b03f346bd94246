"""Spark's ``RateController``: backpressure. A streaming listener that, after each completed batch,
asks a :class:`RateEstimator` for a new ingestion rate of one input stream and publishes it.

Estimation and publishing run on one daemon thread per controller (Spark's "stream-rate-update"
executor), so a slow receiver update never holds up the listener bus.
"""

from __future__ import annotations

import logging
import queue
import threading
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from reliable_kafka.scheduler.listener import StreamingListener
from reliable_kafka.scheduler.listener_events import BatchInfo, StreamingListenerBatchCompleted
from reliable_kafka.scheduler.rate_estimator import RateEstimator
from reliable_kafka.settings import StreamingSettings

logger = logging.getLogger(__name__)

_STOP = object()


@dataclass(frozen=True, slots=True)
class _BatchFigures:
    time_ms: int
    num_elements: int
    processing_delay_ms: int
    scheduling_delay_ms: int


class RateController(StreamingListener):
    """Computes and publishes the rate of stream ``stream_uid`` after every completed batch."""

    def __init__(self, stream_uid: int, rate_estimator: RateEstimator) -> None:
        self.stream_uid = stream_uid
        self.rate_estimator = rate_estimator
        self._rate_limit = -1
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_BatchFigures | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopped = False

    @staticmethod
    def is_back_pressure_enabled(settings: StreamingSettings) -> bool:
        return settings.backpressure.enabled

    @abstractmethod
    def publish(self, rate: int) -> None:
        """Deliver a new rate (records/s) to wherever the stream's data comes from."""

    def get_latest_rate(self) -> int:
        """The last rate published, -1 before the first."""
        return self._rate_limit

    def on_batch_completed(self, batch_completed: StreamingListenerBatchCompleted) -> None:
        figures = _figures(batch_completed.batch_info, self.stream_uid)
        if figures is None:
            return
        with self._lock:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"stream-rate-update-{self.stream_uid}", daemon=True
                )
                self._thread.start()
            self._queue.put(figures)

    def stop(self) -> None:
        """Finish the updates already queued, then end the thread."""
        with self._lock:
            self._stopped = True
            thread = self._thread
            self._queue.put(_STOP)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            assert isinstance(item, _BatchFigures)
            try:
                self._compute_and_publish(item)
            except Exception:
                logger.exception("Rate update of stream %d failed", self.stream_uid)

    def _compute_and_publish(self, figures: _BatchFigures) -> None:
        new_rate = self.rate_estimator.compute(
            figures.time_ms, figures.num_elements, figures.processing_delay_ms, figures.scheduling_delay_ms
        )
        if new_rate is None:
            return
        self._rate_limit = int(new_rate)
        self.publish(self._rate_limit)


class ReceiverRateController(RateController):
    """Publishes to the stream's receivers through the receiver tracker (``send_rate_update``)."""

    def __init__(
        self, stream_uid: int, rate_estimator: RateEstimator, send_rate_update: Callable[[int, int], None]
    ) -> None:
        super().__init__(stream_uid, rate_estimator)
        self._send_rate_update = send_rate_update

    def publish(self, rate: int) -> None:
        self._send_rate_update(self.stream_uid, rate)


def _figures(batch_info: BatchInfo, stream_uid: int) -> _BatchFigures | None:
    """Spark skips the update unless the batch has an end time, both delays and input info."""
    processing_end = batch_info.processing_end_time_ms
    work_delay = batch_info.processing_delay_ms
    wait_delay = batch_info.scheduling_delay_ms
    input_info = batch_info.stream_id_to_input_info.get(stream_uid)
    if processing_end is None or work_delay is None or wait_delay is None or input_info is None:
        return None
    return _BatchFigures(processing_end, input_info.num_records, work_delay, wait_delay)
