"""Task slots and receivers: the arithmetic of ``task_slots`` and the streak rule of ``slot_watch``
(no Spark here; the rules against a real Spark are in tests/e2e/test_task_slots_e2e.py)."""

from __future__ import annotations

import logging

import pytest

from reliable_kafka.scheduler.slot_watch import SlotStarvation, SlotUse
from reliable_kafka.scheduler.task_slots import (
    ReceiverSlotsError,
    TaskSlots,
    check_cluster_receivers,
    declared_cluster_cores,
    local_master_cores,
    split_local_receivers,
)


@pytest.mark.parametrize(
    ("master", "cores"),
    [
        ("local", 1),
        ("local[1]", 1),
        ("local[2]", 2),
        ("local[*]", 8),
        ("local[3, 4]", 3),
        ("local[*,2]", 8),
        ("local-cluster[2,1,1024]", None),
        ("spark://h:7077", None),
        ("yarn", None),
    ],
)
def test_local_master_cores(master: str, cores: int | None) -> None:
    assert local_master_cores(master, processors=8) == cores


@pytest.mark.parametrize(
    ("master", "conf", "cores"),
    [
        ("local-cluster[2,1,1024]", {}, 2),
        ("local-cluster[ 3 , 2 , 512 ]", {}, 6),
        ("spark://h:7077", {"spark.cores.max": "5"}, 5),
        ("yarn", {"spark.executor.instances": "4", "spark.executor.cores": "2"}, 8),
        ("yarn", {"spark.executor.instances": "4"}, None),
        ("k8s://https://h", {}, None),
    ],
)
def test_declared_cluster_cores(master: str, conf: dict[str, str], cores: int | None) -> None:
    assert declared_cluster_cores(master, conf) == cores


def local(cores: int, task_cpus: int = 1) -> TaskSlots:
    return TaskSlots(f"local[{cores}]", cores, task_cpus, local=True, declared=True, dynamic_allocation=False)


def test_local_receivers_leave_one_slot(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "reliable_kafka.scheduler.task_slots")
    assert split_local_receivers([2, 0, 1], local(2)) == ([0], [1, 2])
    (line,) = [r.getMessage() for r in caplog.records]
    assert "local[2] has 2 task slot(s)" in line
    assert "receiver(s) 0 run as tasks (1 slot(s)) and 1, 2 in the driver process" in line
    assert "leaving 1 slot(s) for batches" in line


def test_local_receivers_that_fit_all_run_as_tasks(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "reliable_kafka.scheduler.task_slots")
    assert split_local_receivers([0, 1], local(3)) == ([0, 1], [])
    assert not caplog.records  # nothing to say when nothing moves


def test_one_local_slot_runs_every_receiver_in_the_driver() -> None:
    assert split_local_receivers([0, 1], local(1)) == ([], [0, 1])


def test_task_cpus_divide_the_cores() -> None:
    assert split_local_receivers([0, 1, 2], local(4, task_cpus=2)) == ([0], [1, 2])


def cluster(cores: int, *, declared: bool = True, dynamic: bool = False) -> TaskSlots:
    return TaskSlots(
        "local-cluster[2,1,1024]", cores, 1, local=False, declared=declared, dynamic_allocation=dynamic
    )


def test_cluster_with_no_slot_left_for_batches_is_refused() -> None:
    with pytest.raises(ReceiverSlotsError) as raised:
        check_cluster_receivers(3, cluster(2))
    message = str(raised.value)
    assert "3 receiver(s)" in message
    assert "2 task slot(s) (2 core(s), local-cluster[2,1,1024])" in message
    assert "spark.cores.max" in message and "spark.streaming.receiver.placement=driver" in message
    with pytest.raises(ReceiverSlotsError):
        check_cluster_receivers(2, cluster(2))  # equal: still no slot for batches
    check_cluster_receivers(1, cluster(2))


@pytest.mark.parametrize(
    ("declared", "dynamic", "why"), [(True, True, "dynamic allocation"), (False, False, "more executors")]
)
def test_cluster_that_may_grow_only_warns(
    caplog: pytest.LogCaptureFixture, declared: bool, dynamic: bool, why: str
) -> None:
    caplog.set_level(logging.WARNING, "reliable_kafka.scheduler.task_slots")
    check_cluster_receivers(3, cluster(2, declared=declared, dynamic=dynamic))
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "3 receiver(s)" in record.getMessage() and why in record.getMessage()


STARVED = SlotUse(waiting_batch_tasks=4, running_batch_tasks=0, running_tasks=2, slots=2)


def test_starvation_is_reported_once_per_streak() -> None:
    rule = SlotStarvation(1000, receivers=lambda: 2, streak=3)
    assert [rule.observe(STARVED) for _ in range(2)] == [None, None]
    message = rule.observe(STARVED)
    assert message is not None
    assert "no batch task has run for 3 batch intervals (1000 ms each)" in message
    assert "hold all 2 task slot(s); 2 of them are receivers" in message
    assert [rule.observe(STARVED) for _ in range(5)] == [None] * 5  # the same streak
    assert rule.observe(None) is None  # no streaming job running: the streak ends
    assert [rule.observe(STARVED) for _ in range(3)][-1] is not None  # a new streak, reported again


@pytest.mark.parametrize(
    "use",
    [
        SlotUse(waiting_batch_tasks=4, running_batch_tasks=1, running_tasks=2, slots=2),  # tasks run
        SlotUse(waiting_batch_tasks=4, running_batch_tasks=0, running_tasks=1, slots=2),  # a slot free
        SlotUse(waiting_batch_tasks=0, running_batch_tasks=0, running_tasks=2, slots=2),  # nothing waits
    ],
)
def test_batches_that_can_run_are_not_starved(use: SlotUse) -> None:
    rule = SlotStarvation(1000, receivers=lambda: 1, streak=1)
    assert rule.observe(use) is None
    assert rule.observe(STARVED) is not None
