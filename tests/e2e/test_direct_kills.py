"""Direct streams under kills (tests/e2e/direct_child.py on ``local-cluster[2,2,1024]``): the
driver SIGKILLed again and again and restarted with ``getOrCreate``, and an executor SIGKILLed
while its task reads a range.

A direct stream stores nothing: Kafka's log is the copy and the checkpoint holds each batch's
ranges. So after a driver kill the batches the dead run left pending run again with exactly the
same ranges, and an output keyed by a batch's ranges (an idempotent sink) sees every record once.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import produce
from tests.e2e.kill_harness import ChildApp, RecordingProducer, kill_seed
from tests.e2e.processes import executor_jvm_above, kill_tree
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.brokers("3.9")]

logger = logging.getLogger(__name__)

MODULE = "tests.e2e.direct_child"
PARTITIONS = 2
# Three, as the receiver's kill test: each run starts a local-cluster (three JVMs), and the seed,
# new each run, moves the kill points from run to run.
KILLS = 3

Ranges = tuple[tuple[str, int, int, int], ...]


@dataclass
class DirectOutput:
    begun: dict[tuple[int, int], Ranges] = field(default_factory=dict)  # (run, batch) -> ranges
    ended: dict[tuple[int, int], tuple[Ranges, list[tuple[int, int, str]]]] = field(default_factory=dict)
    job_errors: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> DirectOutput:
        out = cls()
        if not path.exists():
            return out
        for line in path.read_text().splitlines():
            try:
                entry: dict[str, Any] = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill
            key = (entry.get("run", -1), entry.get("batch", -1))
            ranges: Ranges = tuple(tuple(r) for r in entry.get("ranges", []))  # type: ignore[misc]
            if entry["kind"] == "begin":
                out.begun[key] = ranges
            elif entry["kind"] == "batch":
                out.ended[key] = (ranges, [tuple(r) for r in entry["records"]])  # type: ignore[misc]
            elif entry["kind"] == "job_error":
                out.job_errors.append(entry["error"])
        return out

    def has_ended_batch_with_records(self, run: int) -> bool:
        return any(r == run and records for (r, _), (_, records) in self.ended.items())

    def by_ranges(self) -> dict[tuple[int, Ranges], list[tuple[int, int, str]]]:
        """What an idempotent sink keyed by (batch, ranges) keeps: each key's output once."""
        kept: dict[tuple[int, Ranges], list[tuple[int, int, str]]] = {}
        for (_, batch), (ranges, records) in sorted(self.ended.items()):
            kept.setdefault((batch, ranges), records)
        return kept


def child_args(cluster: LocalCluster, topic: str, tmp_path: Path, *more: str) -> list[str]:
    return [
        *("--brokers", cluster.bootstrap_servers, "--topic", topic),
        *("--checkpoint", str(tmp_path / "checkpoint"), "--output", str(tmp_path / "output.jsonl")),
        *more,
    ]


# Six driver starts, and the last one runs every batch of the time the stream was down.
@pytest.mark.timeout(900)
def test_no_loss_and_identical_reruns_across_driver_kills(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    seed = kill_seed()
    print(f"kill test seed {seed} (RELIABLE_KAFKA_KILL_SEED={seed} replays its kill delays)")
    rng = random.Random(seed)
    topic = unique_name("direct-kill")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    args = child_args(local_cluster, topic, tmp_path)
    output_path = tmp_path / "output.jsonl"
    producer = RecordingProducer(local_cluster, topic, PARTITIONS, per_tick=8)
    producer.start()
    children: list[ChildApp] = []
    try:
        for run in range(KILLS):
            child = ChildApp(run, args, tmp_path, module=MODULE)
            children.append(child)
            child.wait_started()
            wait_until(
                lambda child=child: (
                    child.check_alive()
                    and DirectOutput.read(output_path).has_ended_batch_with_records(child.run)
                ),
                timeout_s=120,
                what=f"run {run} to output a batch",
            )
            time.sleep(rng.uniform(0.2, 3.0))  # a random point of the run's batches
            producer.check_flowing()
            child.kill()
            logger.info("run %d killed (%d messages sent so far)", run, producer.sent)
        final = ChildApp(KILLS, args, tmp_path, module=MODULE)
        children.append(final)
        final.wait_started()
        producer.check_flowing()
        producer.finish()
        expected = {(p, o) for p, o in producer.acked}
        wait_until(
            lambda: (
                final.check_alive()
                and expected
                <= {
                    (p, o)
                    for records in DirectOutput.read(output_path).by_ranges().values()
                    for p, o, _ in records
                }
            ),
            timeout_s=240,
            what="the final run to output every produced message",
        )
        assert final.stop_gracefully() == 0, final.log_tail()
    finally:
        if producer.is_alive():
            producer.finish()
        for child in children:
            child.kill()

    output = DirectOutput.read(output_path)
    assert not output.job_errors, output.job_errors[:2]
    # A batch time's ranges are the same in every run that ran it: pending batches ran again
    # with their checkpointed ranges, never recomputed.
    ranges_of_batch: dict[int, set[Ranges]] = defaultdict(set)
    for (_, batch), ranges in output.begun.items():
        ranges_of_batch[batch].add(ranges)
    assert all(len(ranges) == 1 for ranges in ranges_of_batch.values()), {
        batch: ranges for batch, ranges in ranges_of_batch.items() if len(ranges) > 1
    }
    # Exactly once through the idempotent sink: every acknowledged record, none twice.
    kept = [(p, o, v) for records in output.by_ranges().values() for p, o, v in records]
    assert len(kept) == len(set(kept)), "a record in two different batches"
    assert {(p, o): v for p, o, v in kept} == producer.acked, f"seed {seed}"
    # Each kill left work behind that a later run finished: a begun batch re-run, with its ranges.
    reruns = [key for key in output.begun if key not in output.ended and key[0] < KILLS]
    for run, batch in reruns:
        assert any(r > run and b == batch for r, b in output.ended), (
            f"batch {batch} of run {run} never re-ran"
        )
    logger.info(
        "direct kill test: %d records, %d batches, %d batches begun but not ended by a kill, %d outputs "
        "of a batch more than once",
        len(kept),
        len(ranges_of_batch),
        len(reruns),
        len(output.ended) - len(output.by_ranges()),
    )


def test_an_executor_killed_while_it_reads_a_range_loses_nothing(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = unique_name("direct-executor-kill")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    per_partition = 3000
    produce(
        local_cluster, topic, [(None, f"m-{i}".encode(), i % PARTITIONS) for i in range(per_partition * 2)]
    )
    marker = tmp_path / "holding"
    # 1000 records per partition per batch: the second batch's range of partition 0 holds 1500.
    args = child_args(local_cluster, topic, tmp_path, "--max-rate", "1000")
    child = ChildApp(0, [*args, "--hold-at", "0:1500", "--hold-marker", str(marker)], tmp_path, module=MODULE)
    try:
        child.wait_started()
        wait_until(
            lambda: child.check_alive() and marker.exists() and marker.read_text(),
            timeout_s=120,
            what="a task held at 0:1500",
        )
        worker = int(marker.read_text())
        victims = kill_tree(executor_jvm_above(worker))
        logger.info("killed the executor reading partition 0 at 1500: %s", victims)
        output_path = tmp_path / "output.jsonl"
        wait_until(
            lambda: (
                child.check_alive()
                and sum(len(records) for _, records in DirectOutput.read(output_path).ended.values())
                >= per_partition * 2
            ),
            timeout_s=240,
            what="every record output after the executor kill",
        )
        assert child.stop_gracefully() == 0, child.log_tail()
    finally:
        child.kill()

    output = DirectOutput.read(output_path)
    assert not output.job_errors, output.job_errors[:2]
    records = [(p, o) for _, recs in output.ended.values() for p, o, _ in recs]
    assert len(records) == len(set(records)), "a record output twice"
    assert set(records) == {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}
    held = [
        key
        for key, (ranges, _) in output.ended.items()
        if any(r[1] == 0 and r[2] <= 1500 < r[3] for r in ranges)
    ]
    assert len(held) == 1 and output.begun.keys() == output.ended.keys(), "the held batch failed or ran twice"
