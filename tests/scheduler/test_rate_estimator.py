"""PIDRateEstimator (BEHAVIOURS.md, "Backpressure"): Spark's PIDRateEstimatorSuite."""

from __future__ import annotations

import random

import pytest

from reliable_kafka.scheduler.rate_estimator import PIDRateEstimator, RateEstimator
from reliable_kafka.settings import BackpressureSettings


def test_the_settings_choose_a_pid_estimator_with_their_gains() -> None:
    settings = BackpressureSettings(pid_proportional=2.0, pid_integral=0.5, pid_derived=0.1, pid_min_rate=7.0)
    estimator = RateEstimator.create(settings, batch_interval_ms=1000)
    assert isinstance(estimator, PIDRateEstimator)
    assert (estimator.proportional, estimator.integral, estimator.derivative, estimator.min_rate) == (
        2.0,
        0.5,
        0.1,
        7.0,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 1.0, 0.2, 0.0, 100.0), "batch interval"),
        ((100, -1.0, 0.2, 0.0, 100.0), "Proportional"),
        ((100, 1.0, -0.2, 0.0, 100.0), "Integral"),
        ((100, 1.0, 0.2, -1.0, 100.0), "Derivative"),
        ((100, 1.0, 0.2, 0.0, 0.0), "Minimum rate"),
    ],
)
def test_the_estimator_checks_its_ranges(args: tuple, message: str) -> None:
    interval, p, i, d, min_rate = args
    with pytest.raises(ValueError, match=message):
        PIDRateEstimator(interval, proportional=p, integral=i, derivative=d, min_rate=min_rate)


def pid(interval_ms: int = 20, p: float = 1.0, i: float = 0.0, d: float = 0.0, min_rate: float = 10.0):
    return PIDRateEstimator(interval_ms, proportional=p, integral=i, derivative=d, min_rate=min_rate)


def test_no_estimate_on_the_first_batch() -> None:
    assert pid().compute(10, 10, 10, 0) is None


def test_an_estimate_from_the_second_batch_on() -> None:
    p = pid()
    p.compute(10, 10, 10, 0)
    assert p.compute(20, 5, 4, 0) is not None


def test_no_estimate_without_time_passing_between_batches() -> None:
    p = pid()
    p.compute(10, 10, 10, 0)
    assert p.compute(10, 5, 4, 0) is None


def test_no_estimate_without_records() -> None:
    p = pid()
    p.compute(10, 10, 10, 0)
    assert p.compute(20, 0, 4, 0) is None
    assert p.compute(30, 0, 4, 0) is None


def test_no_estimate_without_processing_delay() -> None:
    p = pid()
    p.compute(10, 10, 10, 0)
    assert p.compute(20, 10, 0, 0) is None
    assert p.compute(30, 10, 0, 0) is None


def test_the_estimate_never_goes_below_the_min_rate() -> None:
    p = pid(p=1.0, i=1.0, min_rate=5.0)
    # One record per 20 ms batch and a growing backlog push the estimate down as far as it goes.
    results = [p.compute(t * 20, 1, 20, 100) for t in range(50)]
    assert results[0] is None
    assert results[1:] == [5.0] * 49


def test_without_backlog_the_estimate_follows_the_processing_speed_up() -> None:
    p = pid(p=1.0, i=1.0)
    results = [p.compute(t * 20, (t + 1) * 20, 20, 0) for t in range(50)]
    assert results[0] is None
    assert results[1:] == [(t + 1) * 1000.0 for t in range(1, 50)]


def test_without_backlog_the_estimate_follows_the_processing_speed_down() -> None:
    p = pid(p=1.0, i=1.0)
    results = [p.compute(t * 20, (50 - t) * 20, 20, 0) for t in range(50)]
    assert results[0] is None
    assert results[1:] == [(50 - t) * 1000.0 for t in range(1, 50)]


def test_with_a_backlog_the_estimate_stays_below_the_processing_speed() -> None:
    rng = random.Random(42)
    p = pid(p=1.0, i=0.01, min_rate=10.0)
    elements = [rng.randint(1000, 1999) for _ in range(50)]
    scheduling_delays = [rng.randint(1, 19) for _ in range(50)]
    results = [p.compute(t * 20, elements[t], 20, scheduling_delays[t]) for t in range(50)]
    assert results[0] is None
    for n in range(1, 50):
        rate = results[n]
        assert rate is not None
        assert 10.0 <= rate < elements[n] / 20 * 1000
