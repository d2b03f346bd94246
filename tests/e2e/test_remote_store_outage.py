"""The checkpoint's store down for ~15 s (its server SIGKILLed, then restarted on the same data)
while the kill test's application streams: it stalls, retries, and resumes with nothing lost and
everything committed once the store is back.

Its log is measured (printed), not bounded: each retry is one line ("failed again ..., N failures
in a row"), but the first failure of every streak carries its traceback, and every relaunch of a
receiver starts a new streak: on HDFS one run logged 250 warning lines with 44 traceback headers
(chained causes included) over the outage and the NameNode's safe mode after it; on S3, whose
client retries by itself, 3 lines and 4."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets, wait_until
from tests.e2e.kill_harness import ChildApp, Output, RecordingProducer
from tests.e2e.remote_stores import STORES, RemoteStore, remote_store

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
OUTAGE_S = 15.0


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> RemoteStore:
    return remote_store(request, request.param)


@pytest.mark.brokers("3.9")
def test_the_store_down_for_15_s_loses_nothing(
    local_cluster: LocalCluster, tmp_path: Path, store: RemoteStore
) -> None:
    topic, group = unique_name("outage"), unique_name("group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    output_path = tmp_path / "output.jsonl"
    conf_file = tmp_path / "spark-conf.json"
    conf_file.touch(mode=0o600)
    conf_file.write_text(json.dumps({**store.spark_conf, "spark.streaming.blockInterval": "1000ms"}))
    kafka_params = {
        "auto.offset.reset": "smallest",
        "zookeeper.session.timeout.ms": "6000",
        **local_cluster.client_config(),
    }
    args = [
        *("--zk", local_cluster.zookeeper_connect, "--group", group, "--topic", topic),
        *("--checkpoint", store.checkpoint, "--output", str(output_path)),
        *("--kafka-params", json.dumps(kafka_params), "--batch-s", "3"),
        *("--spark-conf-file", str(conf_file), "--sink-delay-ms", "0", "--report-delay-ms", "0"),
    ]
    producer = RecordingProducer(local_cluster, topic, PARTITIONS, per_tick=4)
    producer.start()
    child = ChildApp(0, args, tmp_path)
    try:
        child.wait_started()
        wait_until(
            lambda: child.check_alive() and Output.has_ended_batch(Output.read(output_path), 0),
            timeout_s=120,
            what="batches to flow",
        )
        store.server.kill()
        time.sleep(OUTAGE_S)
        child.check_alive()
        store.server.restart()
        producer.check_flowing()
        time.sleep(5)
        producer.finish()
        expected = set(producer.acked)
        wait_until(
            lambda: child.check_alive() and expected <= Output.read(output_path).offsets(),
            timeout_s=300,
            what="every produced message in the output after the outage",
        )
        assert child.stop_gracefully() == 0, child.log_tail()
    finally:
        if producer.is_alive():
            producer.finish()
        child.kill()
        if not store.server.is_running():
            store.server.restart()
    output = Output.read(output_path)
    delivered = {
        (p, o): v for runs in output.batches.values() for b in runs.values() for p, o, v in b.records
    }
    assert delivered == producer.acked
    assert committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end_offsets(
        local_cluster, topic, PARTITIONS
    )
    log = child.log_path.read_text(errors="replace")
    tracebacks = log.count("Traceback (most recent call last)")
    warnings = sum(" WARNING " in line or " ERROR " in line for line in log.splitlines())
    print(f"{store.name} outage: {warnings} warning/error lines, {tracebacks} tracebacks")
