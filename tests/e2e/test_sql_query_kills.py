"""A ``reliable-kafka`` query's driver SIGKILLed three times mid-stream, restarted from its
checkpoint each time: the idempotent sink holds every record once, and the group's committed
offsets are the last committed batch's end."""

from __future__ import annotations

import json
from pathlib import Path

import pyspark
import pytest

from reliable_kafka.local import LocalCluster
from reliable_kafka.sql.version_check import UnsupportedPysparkError, require_stream_readers
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets
from tests.e2e.kill_harness import ChildApp, RecordingProducer
from tests.support import wait_until


def _stream_readers() -> bool:
    try:
        require_stream_readers(pyspark.__version__)
    except UnsupportedPysparkError:
        return False
    return True


pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.brokers("3.9"),
    pytest.mark.skipif(not _stream_readers(), reason='format("reliable-kafka") needs pyspark 4.2+'),
]

MODULE = "tests.e2e.sql_query_child"
PARTITIONS = 2
KILLS = 3


def batches(sink: Path) -> dict[int, list[tuple[int, int, str]]]:
    return {
        int(path.stem.removeprefix("batch-")): [tuple(row) for row in json.loads(path.read_text())]
        for path in sink.glob("batch-*.json")
    }


@pytest.mark.timeout(600)
def test_every_record_once_and_the_group_at_the_last_batch_across_driver_kills(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic, group = unique_name("sql-kills"), unique_name("sql-kills-group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    sink = tmp_path / "sink"
    args = [
        *("--brokers", local_cluster.bootstrap_servers, "--zookeeper", local_cluster.zookeeper_connect),
        *(
            "--group",
            group,
            "--topic",
            topic,
            "--checkpoint",
            str(tmp_path / "checkpoint"),
            "--sink",
            str(sink),
        ),
    ]
    producer = RecordingProducer(local_cluster, topic, PARTITIONS, per_tick=2)
    producer.start()
    try:
        for run in range(KILLS):
            child = ChildApp(run, args, tmp_path, module=MODULE)
            try:
                child.wait_started()
                seen = len(batches(sink))
                # Killed while batches go on: after one more than this run's first.
                wait_until(
                    lambda child=child, seen=seen: child.check_alive() and len(batches(sink)) >= seen + 1,
                    timeout_s=120,
                    what=f"run {run}'s batches",
                )
                producer.check_flowing()
            finally:
                child.kill()
    finally:
        producer.finish()
    # The rest in one batch: the backlog of the runs' start-ups, read at once.
    last = ChildApp(
        KILLS, [*args, "--available-now", "--max-offsets-per-trigger", "1000000"], tmp_path, module=MODULE
    )
    try:
        assert last.process.wait(240) == 0, last.log_tail()
    finally:
        last.kill()

    written = batches(sink)
    records = [row for batch in written.values() for row in batch]
    assert len(records) == len(set(records)), "a record in two batches"
    assert {(p, o): v for p, o, v in records} == producer.acked
    ends = log_end_offsets(local_cluster, topic, PARTITIONS)
    last_end = {p: max(o for q, o, _ in records if q == p) + 1 for p in range(PARTITIONS)}
    assert last_end == ends
    assert committed_offsets(local_cluster, group, topic, PARTITIONS) == last_end
