"""Moving a group's offsets from ZooKeeper to Kafka the way Kafka 0.8.2 taught: run on ZooKeeper,
restart with dual commit, then with Kafka only. No record is skipped, and none is read twice
beyond one block per partition per restart."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.local import LocalCluster
from reliable_kafka.storage import StorageLevel, decode_block
from tests.cluster_backends import unique_name
from tests.kafka.harness import (
    FAST_GROUP_PARAMS,
    STORE_PARAMS,
    CommittedOffsets,
    RunningReceiver,
    produce,
    streaming_settings,
)
from tests.support import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PARTITION = 6000
# Each phase runs until the group committed this share of everything, so the next one takes
# over mid-stream; the last one reads to the end.
PHASES = (("zookeeper", 1 / 3), ("dual", 2 / 3), ("kafka", 1.0))


def blocks_of(running: RunningReceiver) -> list[list[tuple[Any, ...]]]:
    with running.tracker.lock:
        infos = list(running.tracker.blocks)
    return [decode_block(running.block_manager.get(info.block_id)) for info in infos]  # type: ignore[arg-type]


def committed_at_least(committed: CommittedOffsets, topic: str, target: int) -> Callable[[], bool]:
    return lambda: sum(committed.highest(topic, p) or 0 for p in range(PARTITIONS)) >= target


def test_zookeeper_then_dual_then_kafka_skips_nothing_and_rereads_at_most_a_block_per_restart(
    local_cluster: LocalCluster, admin_zk: Any, tmp_path: Path
) -> None:
    topic, group = unique_name("migrate"), unique_name("g")
    local_cluster.create_topic(topic, PARTITIONS)
    produce(local_cluster.client_config(), topic, PARTITIONS, PER_PARTITION)
    total = PARTITIONS * PER_PARTITION
    runs: list[list[list[tuple[Any, ...]]]] = []
    for store, share in PHASES:
        committed = CommittedOffsets(store, admin_zk, local_cluster.client_config(), group)
        receiver = ReliableKafkaReceiver(
            local_cluster.zookeeper_connect,
            group,
            {topic: 1},
            {**local_cluster.client_config(), **FAST_GROUP_PARAMS, **STORE_PARAMS[store]},
            StorageLevel.MEMORY_AND_DISK_SER,
            consume_batch_size=500,
        )
        running = RunningReceiver(
            receiver, None, settings=streaming_settings(wal=False, max_rate=4000), stream_id=len(runs)
        )
        try:
            target = int(total * share)
            wait_until(
                committed_at_least(committed, topic, target),
                timeout_s=60,
                what=f"{store} to commit {target} records",
            )
        finally:
            running.stop()
        runs.append(blocks_of(running))
        if store == "dual":
            # Both stores agree after a graceful stop: either could carry the group on.
            for p in range(PARTITIONS):
                assert len(set(committed.values(topic, p))) == 1, committed.values(topic, p)
        committed.close()

    final = CommittedOffsets("kafka", admin_zk, local_cluster.client_config(), group)
    try:
        assert [final.in_kafka(topic, p) for p in range(PARTITIONS)] == [PER_PARTITION] * PARTITIONS
    finally:
        final.close()
    assert all(run for run in runs), "a phase read nothing: the handover was not mid-stream"
    for p in range(PARTITIONS):
        per_run = [[{r[4] for r in block if r[3] == p} for block in run] for run in runs]
        seen = [offset for run in per_run for block in run for offset in block]
        assert set(seen) == set(range(PER_PARTITION)), f"partition {p}: records skipped"
        for before, after in itertools.pairwise(per_run):
            duplicates = {o for block in before for o in block} & {o for block in after for o in block}
            assert not duplicates or any(duplicates <= block for block in before), (
                f"partition {p}: a restart re-read {len(duplicates)} records, more than one block"
            )
