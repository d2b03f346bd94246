"""FetchStallMonitor: a stall is reported once, again only after a recovery (a fake clock, no sleeps)."""

from __future__ import annotations

from reliable_kafka.kafka.client.fetch_stall import FetchStallError, FetchStallMonitor
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition as TP


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_stall_is_reported_once_and_again_only_after_a_recovery() -> None:
    clock = Clock()
    reports: list[tuple[str, BaseException]] = []
    monitor = FetchStallMonitor(8000, lambda m, e: reports.append((m, e)), clock=clock)
    assert monitor.probe_interval_s == 2.0
    probes: list[str | None] = []
    watch = monitor.watch(TP("t", 0), "b1:9092,b2:9092", lambda: probes.pop(0))

    watch.quiet()  # quiet for less than a probe interval: no probe
    assert not reports
    probes.extend(["the brokers are unreachable (Connection refused)"] * 4)
    for _ in range(3):
        clock.now += 2.0
        watch.quiet()
    assert not reports and len(probes) == 1  # 6 s without a fetch: not yet
    clock.now += 2.0
    watch.quiet()
    assert len(reports) == 1
    message, error = reports[0]
    assert isinstance(error, FetchStallError)
    assert "b1:9092,b2:9092" in message and "unreachable (Connection refused)" in message and "t-0" in message
    assert "fetch.stall.timeout.ms" in message

    probes.extend(["still refused"] * 5)
    for _ in range(5):
        clock.now += 2.0
        watch.quiet()
    assert len(reports) == 1  # one stall, one report

    watch.fetched()  # records again: the stall is over
    assert not monitor.reported
    probes.extend(["refused again"] * 4)
    for _ in range(4):
        clock.now += 2.0
        watch.quiet()
    assert len(reports) == 2 and "refused again" in reports[1][0]


def test_a_quiet_partition_whose_leader_answers_is_not_stalled() -> None:
    clock = Clock()
    reports: list[tuple[str, BaseException]] = []
    monitor = FetchStallMonitor(4000, lambda m, e: reports.append((m, e)), clock=clock)
    watch = monitor.watch(TP("t", 0), "b:9092", lambda: None)
    for _ in range(100):
        clock.now += 1.0
        watch.quiet()
    assert not reports


def test_the_receiver_recovers_only_when_every_stalled_partition_does() -> None:
    clock = Clock()
    reports: list[tuple[str, BaseException]] = []
    monitor = FetchStallMonitor(4000, lambda m, e: reports.append((m, e)), clock=clock)
    watches = [monitor.watch(TP("t", p), "b:9092", lambda: "down") for p in (0, 1)]
    for _ in range(4):
        clock.now += 1.0
        for watch in watches:
            watch.quiet()
    assert len(reports) == 1 and "t-0" in reports[0][0]
    watches[0].fetched()
    assert monitor.reported  # t-1 still cannot fetch
    watches[1].fetched()
    assert not monitor.reported


def test_a_partition_waiting_for_its_fetch_turn_is_not_stalled_and_its_quiet_time_starts_over() -> None:
    clock = Clock()
    reports: list[tuple[str, BaseException]] = []
    monitor = FetchStallMonitor(4000, lambda m, e: reports.append((m, e)), clock=clock)
    probes: list[str | None] = []
    watch = monitor.watch(TP("t", 0), "b:9092", lambda: probes.pop(0))
    for _ in range(100):  # held by fetch admission for 100 s: no probe, no report
        clock.now += 1.0
        watch.held()
    assert not reports
    # Admitted, quiet again, probes failing: a stall takes its whole timeout (4 s) from the hold,
    # not from the last fetch 100 s ago.
    probes.extend(["records past the position never arrive"] * 4)
    for _ in range(3):
        clock.now += 1.0
        watch.quiet()
    assert not reports and len(probes) == 1
    clock.now += 1.0
    watch.quiet()
    assert len(reports) == 1
