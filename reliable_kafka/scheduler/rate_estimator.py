"""Spark's ``RateEstimator`` and its only implementation, the ``PIDRateEstimator``."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod

from reliable_kafka.settings import BackpressureSettings

logger = logging.getLogger(__name__)


class RateEstimator(ABC):
    """Turns what the last batch achieved into the rate (records/s) a stream should ingest at."""

    @abstractmethod
    def compute(
        self, time_ms: int, num_elements: int, processing_delay_ms: int, scheduling_delay_ms: int
    ) -> float | None:
        """The new rate, or None when there is no basis for one yet."""

    @staticmethod
    def create(settings: BackpressureSettings, batch_interval_ms: int) -> RateEstimator:
        """Spark's ``RateEstimator.create``: ``pid`` is the only estimator Spark ships."""
        return PIDRateEstimator(
            batch_interval_ms,
            proportional=settings.pid_proportional,
            integral=settings.pid_integral,
            derivative=settings.pid_derived,
            min_rate=settings.pid_min_rate,
        )


class PIDRateEstimator(RateEstimator):
    """A proportional-integral-derivative controller whose setpoint is the rate it last gave.

    The error is that rate minus the rate the last batch was processed at; the integral term is
    the backlog (scheduling delay x processing rate) spread over one batch interval; the result
    never drops below ``min_rate``. The first batch with data only calibrates (no estimate).
    """

    def __init__(
        self,
        batch_interval_ms: int,
        *,
        proportional: float = 1.0,
        integral: float = 0.2,
        derivative: float = 0.0,
        min_rate: float = 100.0,
    ) -> None:
        if batch_interval_ms <= 0:
            raise ValueError(f"Specified batch interval {batch_interval_ms} in PIDRateEstimator is invalid.")
        if proportional < 0:
            raise ValueError(f"Proportional term {proportional} in PIDRateEstimator should be >= 0.")
        if integral < 0:
            raise ValueError(f"Integral term {integral} in PIDRateEstimator should be >= 0.")
        if derivative < 0:
            raise ValueError(f"Derivative term {derivative} in PIDRateEstimator should be >= 0.")
        if min_rate <= 0:
            raise ValueError(f"Minimum rate in PIDRateEstimator should be > 0, got {min_rate}")
        self.batch_interval_ms = batch_interval_ms
        self.proportional = proportional
        self.integral = integral
        self.derivative = derivative
        self.min_rate = min_rate
        self._lock = threading.Lock()
        self._first_run = True
        self._latest_time_ms = -1
        self._latest_rate = -1.0
        self._latest_error = -1.0
        logger.info(
            "Created PIDRateEstimator with proportional = %s, integral = %s, derivative = %s, min rate = %s",
            proportional,
            integral,
            derivative,
            min_rate,
        )

    def compute(
        self, time_ms: int, num_elements: int, processing_delay_ms: int, scheduling_delay_ms: int
    ) -> float | None:
        logger.debug(
            "time = %d, # records = %d, processing time = %d, scheduling delay = %d",
            time_ms,
            num_elements,
            processing_delay_ms,
            scheduling_delay_ms,
        )
        with self._lock:
            if not (time_ms > self._latest_time_ms and num_elements > 0 and processing_delay_ms > 0):
                logger.debug("Rate estimation skipped")
                return None
            delay_since_update_s = (time_ms - self._latest_time_ms) / 1000
            processing_rate = num_elements / processing_delay_ms * 1000
            error = self._latest_rate - processing_rate
            # Records that could not be processed in earlier batches show up as scheduling delay;
            # spread over one interval they are the rate the last estimate overshot by.
            historical_error = scheduling_delay_ms * processing_rate / self.batch_interval_ms
            d_error = (error - self._latest_error) / delay_since_update_s
            new_rate = max(
                self._latest_rate
                - self.proportional * error
                - self.integral * historical_error
                - self.derivative * d_error,
                self.min_rate,
            )
            logger.debug(
                "latest rate = %s, error = %s, latest error = %s, historical error = %s, "
                "delay since update = %s, dError = %s",
                self._latest_rate,
                error,
                self._latest_error,
                historical_error,
                delay_since_update_s,
                d_error,
            )
            self._latest_time_ms = time_ms
            if self._first_run:
                self._latest_rate = processing_rate
                self._latest_error = 0.0
                self._first_run = False
                logger.debug("First run, rate estimation skipped")
                return None
            self._latest_rate = new_rate
            self._latest_error = error
            logger.debug("New rate = %s", new_rate)
            return new_rate
