"""A receiver that fails to start (issue 10, item 1): its start and stop return, the tracker
starts it again after the restart delay with the error reported each time, and every stop of
the tracker returns. Real ZooKeeper and Kafka; the failure is real (an unknown librdkafka key,
a corrupt offset node)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.local import LocalCluster
from reliable_kafka.scheduler.listener import StreamingListenerReceiverStopped
from reliable_kafka.settings import ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from reliable_kafka.storage import StorageLevel
from tests.cluster_backends import unique_name
from tests.kafka.harness import RunningReceiver
from tests.support import wait_until
from tests.support.scheduler_fakes import FakeStream, FakeStreamingContext

pytestmark = pytest.mark.integration

RESTART_DELAY_MS = 300
FAST_GROUP_PARAMS = {
    "auto.offset.reset": "smallest",
    "zookeeper.session.timeout.ms": "2000",
    "rebalance.backoff.ms": "200",
    "rebalance.max.retries": "2",
}
SETTINGS = StreamingSettings(
    # In-process receivers: the tracker of these tests runs receivers of a fake stream.
    receiver=ReceiverSettings(block_interval_ms=100, restart_delay_ms=RESTART_DELAY_MS, placement="driver"),
    wal=WriteAheadLogSettings(enable=False),
)


def returns(call: Callable[[], object], what: str, timeout_s: float = 60.0) -> None:
    """Run ``call`` on a thread; fail (not hang) if it has not returned within ``timeout_s``."""
    thread = threading.Thread(target=call, name=f"test-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"{what} did not return"


def unknown_key(cluster: LocalCluster, admin_zk: Any, topic: str, group: str) -> tuple[dict[str, str], str]:
    return {"fetch.wiat.max.ms": "100"}, "fetch.wiat.max.ms"


def corrupt_offset_node(
    cluster: LocalCluster, admin_zk: Any, topic: str, group: str
) -> tuple[dict[str, str], str]:
    admin_zk.create(f"/consumers/{group}/offsets/{topic}/0", b"not-a-number", makepath=True)
    return {}, "not-a-number"


FAULTS = [pytest.param(unknown_key, id="unknown-key"), pytest.param(corrupt_offset_node, id="corrupt-node")]


def receiver_factory(
    cluster: LocalCluster, admin_zk: Any, fault: Any, prefix: str
) -> tuple[Callable[[], ReliableKafkaReceiver], str]:
    topic, group = unique_name(prefix), unique_name(prefix)
    cluster.create_topic(topic, partitions=1)
    extra, mark = fault(cluster, admin_zk, topic, group)

    def make() -> ReliableKafkaReceiver:
        return ReliableKafkaReceiver(
            cluster.zookeeper_connect,
            group,
            {topic: 1},
            {**cluster.client_config(), **FAST_GROUP_PARAMS, **extra},
            StorageLevel.MEMORY_AND_DISK_SER,
        )

    return make, mark


@pytest.mark.parametrize("fault", FAULTS)
def test_a_failed_start_stops_the_supervisor_with_its_error_and_every_call_returns(
    local_cluster: LocalCluster, admin_zk: Any, fault: Any
) -> None:
    make, mark = receiver_factory(local_cluster, admin_zk, fault, "failstart")
    holder: list[RunningReceiver] = []
    returns(lambda: holder.append(RunningReceiver(make(), None, settings=SETTINGS)), "supervisor start")
    run = holder[0]
    try:
        # The supervisor ends by itself, with the start's error, so that its launcher restarts it.
        wait_until(
            run.supervisor.is_terminated, timeout_s=60, what="the supervisor of a failed start to terminate"
        )
        with pytest.raises(Exception, match=mark):
            run.supervisor.await_termination(0)
        with run.tracker.lock:
            assert any(mark in error for _, error in run.tracker.deregistered + run.tracker.errors)
    finally:
        returns(run.stop, "supervisor stop")


@pytest.mark.parametrize("graceful", [True, False], ids=["graceful", "not-graceful"])
@pytest.mark.parametrize("fault", FAULTS)
def test_a_receiver_that_fails_to_start_is_restarted_after_the_delay_with_its_error_reported_each_time(
    local_cluster: LocalCluster, admin_zk: Any, fault: Any, graceful: bool
) -> None:
    make, mark = receiver_factory(local_cluster, admin_zk, fault, "restartfail")
    ssc = FakeStreamingContext([FakeStream(0, make)], SETTINGS)
    tracker = ssc.receiver_tracker()
    tracker.start()
    try:

        def failures_reported() -> list[Any]:
            return [
                event
                for event in ssc.bus.of_type(StreamingListenerReceiverStopped)
                if mark in event.receiver_info.last_error
            ]

        wait_until(
            lambda: len(failures_reported()) >= 3, timeout_s=90, what="three failed starts, each reported"
        )
        assert tracker.launch_count(0) >= 3
        times = [event.receiver_info.last_error_time_ms for event in failures_reported()]
        # Each attempt waits the restart delay after the last one failed (wall clock, no upper bound).
        assert all(later - earlier >= RESTART_DELAY_MS for earlier, later in itertools.pairwise(times))
    finally:
        returns(lambda: tracker.stop(graceful=graceful), "tracker stop")
    assert tracker.all_receivers_stopped()
