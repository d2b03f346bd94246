"""ReceiverSchedulingPolicy (BEHAVIOURS.md: "Receivers are spread evenly over executors, preferred
hosts honoured"): Spark's ReceiverSchedulingPolicySuite, with many executors."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from reliable_kafka.scheduler.receiver_scheduling_policy import (
    ExecutorCacheTaskLocation,
    HostTaskLocation,
    ReceiverSchedulingPolicy,
    ReceiverState,
    ReceiverTrackingInfo,
    accepts,
)

policy = ReceiverSchedulingPolicy()


@dataclass
class FakeReceiver:
    stream_id: int
    preferred_location: str | None = None


def executor(host: str, n: int) -> ExecutorCacheTaskLocation:
    return ExecutorCacheTaskLocation(host, str(n))


def executors_on(*hosts: str, per_host: int = 1) -> list[ExecutorCacheTaskLocation]:
    return [executor(host, n) for host in hosts for n in range(per_host)]


def test_reschedule_with_no_executors_gives_nothing() -> None:
    assert policy.reschedule_receiver(0, "host1", {}, []) == []


def test_reschedule_honours_the_preferred_location() -> None:
    executors = executors_on("host2", "host3")
    locations = policy.reschedule_receiver(0, "host1", {}, executors)
    assert locations == [HostTaskLocation("host1"), *executors]


def test_reschedule_returns_every_idle_executor() -> None:
    executors = executors_on("host1", "host2", "host3")
    infos = {1: ReceiverTrackingInfo(1, ReceiverState.ACTIVE, running_executor=executors[0])}
    assert policy.reschedule_receiver(0, None, infos, executors) == executors[1:]


def test_reschedule_without_idle_executors_returns_the_least_weighted() -> None:
    e1, e2, e3 = executors_on("host1", "host2", "host3")
    infos = {
        # e1: 1 running + 1/2 scheduled = 1.5; e2: 1/2 + 1/3 + ... see below
        0: ReceiverTrackingInfo(0, ReceiverState.ACTIVE, running_executor=e1),
        1: ReceiverTrackingInfo(1, ReceiverState.SCHEDULED, scheduled_locations=(e1, e2)),
        2: ReceiverTrackingInfo(2, ReceiverState.SCHEDULED, scheduled_locations=(e2, e3)),
        3: ReceiverTrackingInfo(3, ReceiverState.ACTIVE, running_executor=e3),
        4: ReceiverTrackingInfo(4, ReceiverState.INACTIVE),
    }
    # weights: e1 = 1.5, e2 = 1.0, e3 = 1.5
    assert policy.reschedule_receiver(5, None, infos, [e1, e2, e3]) == [e2]


def test_more_receivers_than_executors_are_spread_evenly() -> None:
    receivers = [FakeReceiver(i) for i in range(6)]
    executors = executors_on("host1", "host2", "host3", per_host=2)[:2] + executors_on("host9")
    schedule = policy.schedule_receivers(receivers, executors)
    assert all(len(locations) == 1 for locations in schedule.values())
    assert Counter(locations[0] for locations in schedule.values()) == dict.fromkeys(executors, 2)


def test_more_executors_than_receivers_give_each_receiver_as_many_executors() -> None:
    receivers = [FakeReceiver(i) for i in range(3)]
    executors = executors_on("host1", "host2", "host3", per_host=2)
    schedule = policy.schedule_receivers(receivers, executors)
    assert [len(locations) for locations in schedule.values()] == [2, 2, 2]
    assigned = [loc for locations in schedule.values() for loc in locations]
    assert sorted(assigned, key=str) == sorted(executors, key=str)


def test_preferred_hosts_are_honoured_and_load_stays_even() -> None:
    executors = executors_on("host1", "host2", "host3", per_host=2)
    receivers = [FakeReceiver(i, f"host{i % 3 + 1}") for i in range(6)]
    schedule = policy.schedule_receivers(receivers, executors)
    for receiver in receivers:
        (location,) = schedule[receiver.stream_id]
        assert isinstance(location, ExecutorCacheTaskLocation)
        assert location.host == receiver.preferred_location
    assert Counter(loc[0] for loc in schedule.values()) == dict.fromkeys(executors, 1)


def test_an_unknown_preferred_host_is_kept_and_idle_executors_added() -> None:
    executors = executors_on("host1", "host2")
    receivers = [FakeReceiver(0, "elsewhere"), FakeReceiver(1)]
    schedule = policy.schedule_receivers(receivers, executors)
    assert schedule[0][0] == HostTaskLocation("elsewhere")
    assert schedule[1] == [executors[0]]
    assert schedule[0][1:] == [executors[1]]


def test_many_receivers_over_many_executors_differ_by_at_most_one() -> None:
    executors = executors_on(*(f"host{h}" for h in range(7)), per_host=3)
    receivers = [FakeReceiver(i, "host2" if i % 10 == 0 else None) for i in range(50)]
    schedule = policy.schedule_receivers(receivers, executors)
    load = Counter(locations[0] for locations in schedule.values())
    assert set(load) == set(executors)
    assert max(load.values()) - min(load.values()) <= 1
    for receiver in receivers:
        if receiver.preferred_location:
            assert schedule[receiver.stream_id][0].host == "host2"


def test_no_receivers_give_an_empty_schedule() -> None:
    assert policy.schedule_receivers([], executors_on("host1")) == {}


def test_no_executors_give_every_receiver_an_empty_list() -> None:
    assert policy.schedule_receivers([FakeReceiver(0), FakeReceiver(1)], []) == {0: [], 1: []}


def test_registration_is_accepted_on_a_scheduled_executor_or_host() -> None:
    locations = [executor("host1", 1), HostTaskLocation("host2")]
    assert accepts(locations, "host1", "1")
    assert not accepts(locations, "host1", "2")
    assert accepts(locations, "host2", "7")
    assert not accepts(locations, "host3", "1")
