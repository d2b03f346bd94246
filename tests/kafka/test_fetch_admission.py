"""FetchAdmission on its own: at most ``slots`` partitions fetch, the others wait in line and take
their turn as admitted ones yield (after a quantum, once drained, or idle) or end; none starves.
Partitions with nothing to fetch wait idle, out of the line, until their log grows."""

from __future__ import annotations

from reliable_kafka.kafka.client.fetch_admission import Change, FetchAdmission
from reliable_kafka.kafka.client.shared_client import fetch_plan, prefetch_config, receiver_memory_bound
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

TPS = [TopicAndPartition("t", p) for p in range(5)]


def at_0(tps: list[TopicAndPartition]) -> dict[TopicAndPartition, int]:
    return dict.fromkeys(tps, 0)


AT_0 = at_0(TPS)


def admission(slots: int = 2, quantum: int = 100, idle_polls: int = 3) -> FetchAdmission:
    return FetchAdmission(slots, quantum_bytes=quantum, idle_polls=idle_polls)


def admitted(adm: FetchAdmission) -> list[int]:
    return [tp.partition for tp in TPS if adm.admitted(tp)]


def test_the_first_partitions_take_the_slots_and_the_rest_wait_paused() -> None:
    adm = admission()
    change = adm.add(AT_0)
    assert change.resume == TPS[:2] and change.pause == TPS[2:]
    assert admitted(adm) == [0, 1] and adm.waiting() == 3
    assert not adm.add(at_0(TPS[:1]))  # already known: no change


def test_a_partition_yields_after_its_quantum_and_the_longest_waiting_one_comes_in() -> None:
    adm = admission()
    adm.add(AT_0)
    assert not adm.took(TPS[0], 60)
    assert adm.took(TPS[0], 40) == Change(pause=[TPS[0]], resume=[TPS[2]])
    assert admitted(adm) == [1, 2]
    # Round robin: 0 went to the back of the line, behind 3 and 4.
    assert adm.took(TPS[1], 100) == Change(pause=[TPS[1]], resume=[TPS[3]])
    assert adm.took(TPS[2], 100) == Change(pause=[TPS[2]], resume=[TPS[4]])
    assert adm.took(TPS[3], 100) == Change(pause=[TPS[3]], resume=[TPS[0]])


def test_a_drained_partition_yields_at_its_first_empty_poll_an_idle_one_after_several() -> None:
    adm = admission(idle_polls=3)
    adm.add(AT_0)
    adm.took(TPS[0], 10)
    assert adm.empty(TPS[0]) == Change(pause=[TPS[0]], resume=[TPS[2]])
    # 1 took nothing since admitted: its first fetch may still be on the way.
    assert not adm.empty(TPS[1]) and not adm.empty(TPS[1])
    assert adm.empty(TPS[1]) == Change(pause=[TPS[1]], resume=[TPS[3]])


def test_records_reset_the_idle_count() -> None:
    adm = admission(idle_polls=2, quantum=1000)
    adm.add(AT_0)
    assert not adm.empty(TPS[1])
    assert not adm.took(TPS[1], 10)
    assert adm.empty(TPS[1]) == Change(pause=[TPS[1]], resume=[TPS[2]])  # drained now


def test_with_nobody_waiting_a_partition_keeps_its_slot_and_starts_a_new_turn() -> None:
    adm = admission(slots=2, quantum=100)
    adm.add(at_0(TPS[:2]))
    assert not adm.took(TPS[0], 500) and not adm.empty(TPS[0])
    assert admitted(adm) == [0, 1]
    adm.add(at_0(TPS[2:3]))  # now one waits: 0's new turn counts from its last yield point
    assert not adm.took(TPS[0], 99)
    assert adm.took(TPS[0], 1) == Change(pause=[TPS[0]], resume=[TPS[2]])


def test_a_partition_that_ends_frees_its_slot_and_one_that_waits_leaves_the_line() -> None:
    adm = admission()
    adm.add(AT_0)
    assert adm.remove([TPS[0], TPS[3]]) == Change(resume=[TPS[2]])
    assert admitted(adm) == [1, 2] and adm.waiting() == 1
    assert adm.remove([TPS[1]]) == Change(resume=[TPS[4]])
    assert adm.remove([TPS[2]]) == Change()


def test_reports_of_a_partition_not_admitted_change_nothing() -> None:
    adm = admission()
    adm.add(AT_0)
    assert not adm.took(TPS[4], 10_000) and not adm.empty(TPS[4])
    assert admitted(adm) == [0, 1]


def test_every_waiting_partition_gets_a_turn_whatever_the_admitted_ones_do() -> None:
    adm = admission(slots=2, quantum=100)
    adm.add(AT_0)
    turns = dict.fromkeys(TPS, 0)
    for _ in range(10):
        for tp in TPS:
            if adm.admitted(tp):
                turns[tp] += 1
                adm.took(tp, 100)
    assert min(turns.values()) >= 3


def test_the_plan_admits_as_many_partitions_as_a_fetch_and_a_quarter_each_fit_in_the_quarter() -> None:
    plan = fetch_plan(64 << 20, 256)
    assert (plan.slots, plan.fetch_bytes) == (12, 1 << 20)
    assert plan.slots * plan.slot_bytes <= 16 << 20 and plan.queue_bytes >= (1 << 20) // 4
    assert fetch_plan(16 << 20, 256).slots == 3
    few = fetch_plan(64 << 20, 4)  # fewer partitions than slots: their queues grow instead
    assert few.slots == 4 and few.slot_bytes == 4 << 20
    assert fetch_plan(1 << 20, 256).slots == 1
    # A fetch size set in kafkaParams is kept, and sizes the slots.
    assert fetch_plan(64 << 20, 256, {"max.partition.fetch.bytes": 256 << 10}).slots == 51
    config = prefetch_config(64 << 20, 256, {})
    assert config["max.partition.fetch.bytes"] == 1 << 20
    assert config["queued.max.messages.kbytes"] == plan.queue_bytes // 1024
    assert config["fetch.wait.max.ms"] == 10  # turns: no 500 ms long poll of caught-up partitions
    assert "fetch.wait.max.ms" not in prefetch_config(64 << 20, 4, {})


def test_the_memory_bound_does_not_grow_with_the_partitions_beyond_their_fixed_cost() -> None:
    def bound(partitions: int) -> int:
        return receiver_memory_bound(16 << 20, 8 << 20, brokers=1, partitions=partitions, record_bytes=1000)

    assert bound(512) - bound(256) == 256 * (64 << 10)


def test_a_partition_that_took_the_logs_last_record_yields_at_once() -> None:
    adm = admission(quantum=1000)
    adm.add(AT_0)
    assert not adm.took(TPS[0], 10)
    assert adm.took(TPS[0], 10, caught_up=True) == Change(pause=[TPS[0]], resume=[TPS[2]])


def test_a_caught_up_partition_waits_idle_out_of_the_line_and_the_last_one_keeps_its_slot() -> None:
    adm = admission(slots=1, quantum=1000)
    adm.add(at_0(TPS[:3]))
    assert adm.took(TPS[0], 10, next_offset=5, caught_up=True) == Change(pause=[TPS[0]], resume=[TPS[1]])
    assert adm.took(TPS[1], 10, next_offset=7, caught_up=True) == Change(pause=[TPS[1]], resume=[TPS[2]])
    # Nobody is ready: 2 keeps its slot however idle it is; 0 and 1 take no turns.
    assert not adm.took(TPS[2], 10, caught_up=True)
    for _ in range(5):
        assert not adm.empty(TPS[2])
    assert admitted(adm) == [2] and adm.waiting() == 0
    assert adm.idle_positions() == {TPS[0]: 5, TPS[1]: 7}


def test_an_idle_partition_is_ready_once_its_log_grows_or_the_broker_cannot_tell() -> None:
    adm = admission(slots=1, quantum=1000, idle_polls=2)
    adm.add(at_0(TPS[:4]))
    for tp in TPS[:3]:
        adm.took(tp, 10, next_offset=5, caught_up=True)
    assert admitted(adm) == [3] and set(adm.idle_positions()) == {TPS[0], TPS[1], TPS[2]}
    # 0's log ends where its thread stopped: still idle; 1's grew; 2's end is unknown.
    assert not adm.log_ends({TPS[0]: 5, TPS[1]: 6, TPS[2]: None})
    assert adm.waiting() == 2 and set(adm.idle_positions()) == {TPS[0]}
    # The idle admitted partition counted its empty polls while nobody waited: it yields at once.
    assert not adm.empty(TPS[3])
    assert adm.empty(TPS[3]) == Change(pause=[TPS[3]], resume=[TPS[1]])
    assert adm.empty(TPS[1]) == Change()  # its first fetch may still be on the way
    assert adm.empty(TPS[1]) == Change(pause=[TPS[1]], resume=[TPS[2]])


def test_an_idle_partition_comes_in_at_once_when_a_slot_is_free() -> None:
    adm = admission(slots=2, quantum=1000)
    adm.add(at_0(TPS[:3]))
    adm.took(TPS[0], 10, next_offset=3, caught_up=True)
    assert adm.remove([TPS[1]]) == Change(resume=[])  # 2 came in when 0 yielded: nobody else is ready
    assert adm.log_ends({TPS[0]: 4}) == Change(resume=[TPS[0]])


def test_a_partition_whose_next_offset_is_unknown_takes_turns_and_is_never_idle() -> None:
    adm = admission(slots=1, quantum=1000)
    adm.add({TPS[0]: -2, TPS[1]: -1})  # logical: the log start or end, as librdkafka resolves it
    assert adm.took(TPS[0], 10, caught_up=True) == Change(pause=[TPS[0]], resume=[TPS[1]])
    assert adm.idle_positions() == {} and adm.waiting() == 1
    # Once it took a record, its next offset is known.
    assert adm.took(TPS[1], 10, next_offset=42, caught_up=True) == Change(pause=[TPS[1]], resume=[TPS[0]])
    assert adm.idle_positions() == {TPS[1]: 42}


def test_a_partition_that_ends_while_idle_leaves_no_trace() -> None:
    adm = admission(slots=1, quantum=1000)
    adm.add(at_0(TPS[:2]))
    adm.took(TPS[0], 10, next_offset=1, caught_up=True)
    adm.remove([TPS[0]])
    assert adm.idle_positions() == {} and not adm.knows(TPS[0])
    assert not adm.log_ends({TPS[0]: 9})
    assert not adm.limited() and adm.limited(adding=1)
