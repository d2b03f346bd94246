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
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets
from tests.e2e.kill_harness import ChildApp, Output, RecordingProducer
from tests.e2e.remote_stores import STORES, RemoteStore, remote_store
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
OUTAGE_S = 15.0
# An operation's streak ends when one write gets through, as some do while the store comes back
# (HDFS leaves safe mode within seconds of its restart): two streaks per outage, not one per retry.
MAX_STREAKS = 2
# Layers above a retrying one: they report the same failure the layer below retried.
ECHOING_LAYERS = ("wal.batched", "reliable_kafka.scheduler.received_block_tracker")
_RECORD_START = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (\w+) (\S+) (.*)$")


@dataclass
class LogRecord:
    level: str
    logger: str
    message: str
    traceback: bool = False
    # The lines after the record's first (its traceback, for a record not ours to explain).
    more: list[str] = field(default_factory=list)


def log_records(text: str) -> list[LogRecord]:
    """The child's Python log records (``%(asctime)s %(levelname)s %(name)s %(message)s``), each
    with whether a traceback followed it."""
    records: list[LogRecord] = []
    for line in text.splitlines():
        match = _RECORD_START.match(line)
        if match:
            records.append(LogRecord(*match.groups()))
        elif records:
            records[-1].traceback |= line.startswith("Traceback (most recent call last)")
            records[-1].more.append(line)
    return records


def failed_operation(message: str) -> str | None:
    """What failed, from a FailureLog streak's first line ("<what> failed (<detail>): ...")."""
    match = re.match(r"^(?:\[receiver \d+\]: )?(.*?) failed[ :(]", message)
    return match.group(1) if match and " failed again" not in message else None


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
    records = log_records(child.log_path.read_text(errors="replace"))
    loud = [r for r in records if r.level in ("WARNING", "ERROR")]
    with_traceback = [r for r in loud if r.traceback]
    print(f"{store.name} outage: {len(loud)} warning/error records, {len(with_traceback)} with a traceback")
    for record in with_traceback:
        print("  traceback:", record.logger, record.message[:160])
    # No traceback storm: a traceback only on the first failure of an operation's streak, and
    # one streak per operation (a relaunched receiver continues its predecessor's).
    operations = Counter(failed_operation(r.message) for r in with_traceback)
    unexplained = [r for r in with_traceback if failed_operation(r.message) is None]
    # In full: a record no FailureLog wrote (a library's) needs its traceback to be explained.
    shown = [f"{r.logger}: {r.message}\n" + "\n".join(r.more[-40:]) for r in unexplained]
    assert not unexplained, "\n".join(shown)
    assert all(n <= MAX_STREAKS for n in operations.values()), operations
    # One line per retry: a layer above the one that retries says "failed again" at DEBUG.
    echoes = [r for r in loud if r.logger in ECHOING_LAYERS and " failed again" in r.message]
    assert not echoes, [r.message[:200] for r in echoes[:5]]
