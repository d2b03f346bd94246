"""Zero data loss across driver crashes: the user's application is SIGKILLed again and again while
messages flow, and restarted each time with ``StreamingContext.getOrCreate``.

What its foreachRDD wrote across all runs must hold every produced message; records read twice
by the receiver must fit, per partition and per kill, in one block; and every batch that had
begun (so was allocated) but not finished when the driver died must run again, from the
write-ahead logs, after the restart.
"""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, log_end_offsets, wait_until
from tests.e2e.kill_harness import ChildApp, Output, RecordingProducer, blocks_to_cover

pytestmark = [pytest.mark.integration, pytest.mark.slow]

logger = logging.getLogger(__name__)

KILLS = 5
PARTITIONS = 2


def test_no_loss_across_driver_kills(local_cluster: LocalCluster, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    logger.info("kill test seed %d", seed)
    topic, group = unique_name("kill"), unique_name("group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    output_path = tmp_path / "output.jsonl"
    kafka_params = {
        "auto.offset.reset": "smallest",
        # A killed driver's group membership must expire quickly for the next run to own the partitions.
        "zookeeper.session.timeout.ms": "4000",
        **local_cluster.client_config(),
    }
    child_args = [
        *("--zk", local_cluster.zookeeper_connect, "--group", group, "--topic", topic),
        *("--checkpoint", str(tmp_path / "checkpoint"), "--output", str(output_path)),
        *("--kafka-params", json.dumps(kafka_params)),
    ]
    producer = RecordingProducer(local_cluster, topic, PARTITIONS, per_tick=8, limit=6000)
    producer.start()
    children: list[ChildApp] = []
    try:
        for run in range(KILLS):
            child = ChildApp(run, child_args, tmp_path)
            children.append(child)
            child.wait_started()
            # Odd runs die inside a batch on purpose: begun (allocated, records written), not
            # ended. Even runs die at a random point once batches are flowing.
            ready = Output.has_unfinished_batch_with_records if run % 2 else Output.has_ended_batch
            try:
                wait_until(
                    lambda child=child, ready=ready: (
                        child.check_alive() and ready(Output.read(output_path), child.run)
                    ),
                    timeout_s=90,
                    what=f"run {run} to be processing batches",
                )
            except AssertionError:
                child.check_alive()  # a run that died by itself is a failure, not a kill
                logger.warning("run %d: not processing batches yet; killing anyway", run)
            if not run % 2:
                time.sleep(rng.uniform(0.5, 4.0))
            child.kill()
            logger.info("run %d killed", run)
        producer.finish()

        final = ChildApp(KILLS, child_args, tmp_path)
        children.append(final)
        final.wait_started()
        expected = set(producer.acked)
        wait_until(
            lambda: final.check_alive() and expected <= Output.read(output_path).offsets(),
            timeout_s=240,
            what="the final run to output every produced message",
        )
        assert final.stop_gracefully() == 0, final.log_tail()
    finally:
        producer.finish() if producer.is_alive() else None
        for child in children:
            child.kill()

    output = Output.read(output_path)
    logger.info(
        "kill test: %d produced; per run (batches, records): %s; unfinished batches %s; "
        "duplicates per partition and level %s",
        len(producer.acked),
        {
            run: (len(bs), sum(len(b.records) for b in bs.values()))
            for run, bs in sorted(output.batches.items())
        },
        output.unfinished(),
        {p: [len(offsets) for offsets in levels] for p, levels in output.duplicate_levels().items()},
    )
    delivered = {
        (p, o): v for runs in output.batches.values() for b in runs.values() for p, o, v in b.records
    }
    # Zero loss, and nothing that was not produced.
    assert delivered == producer.acked, f"seed {seed}"

    # Batches begun but not finished before a kill ran again, from the WAL, with the same records.
    unfinished = [(run, t) for run, t in output.unfinished() if run < KILLS]
    assert any(output.batches[run][t].records for run, t in unfinished), "no kill landed inside a batch"
    for run, t in unfinished:
        assert t in output.recovered[run + 1], f"batch {t} of run {run} not recovered as pending"
        reruns = [
            r for r in range(run + 1, KILLS + 1) if output.batches[r].get(t) and output.batches[r][t].ended
        ]
        assert reruns, f"batch {t} begun in run {run} never completed after the restart"
        assert output.batches[run][t].records <= output.batches[reruns[0]][t].records

    # Records read twice: at most one block per partition per kill (a stored block whose offsets
    # the kill kept from being committed). Each level (read twice, three times...) is covered by
    # whole blocks; all levels together need no more blocks than there were kills.
    blocks = output.block_ranges()
    for partition, levels in output.duplicate_levels().items():
        ranges = [(start, until) for p, start, until in blocks if p == partition]
        needed = [blocks_to_cover(offsets, ranges) for offsets in levels]
        assert None not in needed, f"partition {partition}: duplicates outside any block (seed {seed})"
        assert sum(needed) <= KILLS, (  # type: ignore[arg-type]
            f"partition {partition}: duplicates need {needed} blocks for {KILLS} kills: "
            f"{[sorted(offsets) for offsets in levels]} (seed {seed})"
        )

    # The graceful stop of the last run committed everything.
    assert committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end_offsets(
        local_cluster, topic, PARTITIONS
    )
