"""A direct stream's per-partition limit for one batch (``max_messages_per_partition``)."""

from __future__ import annotations

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.direct.rate_limit import max_messages_per_partition

A, B, C = (TopicAndPartition("t", p) for p in range(3))


def limits(lags: dict[TopicAndPartition, int], **kw: object) -> dict[TopicAndPartition, int] | None:
    args: dict[str, object] = {
        "batch_ms": 2000,
        "estimated_rate": None,
        "max_rate_per_partition": 0,
        "min_rate_per_partition": 1,
    }
    args.update(kw)
    return max_messages_per_partition(lags, **args)  # type: ignore[arg-type]


def test_no_rate_and_no_max_rate_means_no_limit() -> None:
    assert limits({A: 500, B: 0}) is None


def test_max_rate_alone_bounds_every_partition_alike() -> None:
    assert limits({A: 500, B: 0}, max_rate_per_partition=30) == {A: 60, B: 60}


def test_the_estimated_rate_is_shared_out_by_lag() -> None:
    # 300 records/s over 2 s, three quarters of the lag on A.
    assert limits({A: 3000, B: 1000, C: 0}, estimated_rate=300.0) == {A: 450, B: 150, C: 2}


def test_max_rate_caps_each_share_of_the_estimated_rate() -> None:
    assert limits({A: 3000, B: 1000}, estimated_rate=300.0, max_rate_per_partition=100) == {A: 200, B: 150}


def test_a_lagging_partition_always_gets_the_minimum_rate() -> None:
    # A share that rounds to nothing would leave B behind for as long as A lags.
    got = limits({A: 1_000_000, B: 1}, estimated_rate=100.0, min_rate_per_partition=5)
    assert got == {A: 199, B: 10}


def test_nothing_to_read_means_no_limit_under_backpressure() -> None:
    assert limits({A: 0, B: 0}, estimated_rate=300.0) is None


def test_no_estimate_yet_falls_back_to_max_rate() -> None:
    assert limits({A: 10, B: 10}, estimated_rate=0.0, max_rate_per_partition=7) == {A: 14, B: 14}
