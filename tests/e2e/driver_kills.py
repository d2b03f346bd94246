"""The driver kill test's run (tests/e2e/test_kill_recovery.py, and on remote checkpoint stores
tests/e2e/test_remote_kill_recovery.py): the child application SIGKILLed again and again while
messages flow, restarted with ``getOrCreate``, and what it wrote checked for loss and duplicates."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import committed_offsets, group_params, log_end_offsets
from tests.e2e.kill_harness import (
    SEED_VARIABLE,
    ChildApp,
    Output,
    RecordingProducer,
    blocks_to_cover,
    kill_seed,
)
from tests.e2e.processes import describe, zookeeper_processes
from tests.support import wait_until

logger = logging.getLogger(__name__)

# Three: a kill at a random point (run 0), one inside a held batch (run 1), another at a random
# point (run 2), then the final run. Each CI run draws a new seed, so the random kill points move
# from run to run; two more kills a run cost the suite a restart and catch-up each, on every broker.
KILLS = 3
PARTITIONS = 2


def assert_no_loss_across_driver_kills(
    local_cluster: LocalCluster,
    tmp_path: Path,
    placement: str,
    checkpoint: str,
    *,
    kills: int = KILLS,
    spark_conf: dict[str, str] | None = None,
    batch_s: int = 1,
    sink_delay_ms: int = 250,
    final_output_timeout_s: float = 240,
) -> None:
    """``kills`` SIGKILLed runs of tests/e2e/kill_child.py and a final one stopped gracefully, with
    the checkpoint (a path or a URL) in ``checkpoint``, ``spark_conf`` added to the child's
    SparkConf and batches of ``batch_s`` seconds: nothing lost, duplicates within one block per
    partition per kill, pending batches run again from the write-ahead log, everything committed
    at the end. ``final_output_timeout_s``: how long the final run may take to output everything
    (it first re-runs every batch the kills left pending)."""
    seed = kill_seed()
    rng = random.Random(seed)
    # Printed, not only logged: pytest shows a failed test's stdout.
    print(f"kill test seed {seed} ({SEED_VARIABLE}={seed} replays its kill delays)")
    logger.info("kill test seed %d", seed)
    topic, group = unique_name("kill"), unique_name("group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    output_path = tmp_path / "output.jsonl"
    zk_quorum, timeouts = group_params(local_cluster)
    # Servers of other tests on this worker (a secured cluster kept for its module) may include
    # a ZooKeeper: only one started during this test would be ours.
    zookeepers_before = set(zookeeper_processes(os.getpid()))
    kafka_params = {"auto.offset.reset": "smallest", **timeouts, **local_cluster.client_config()}
    child_args = [
        *("--zk", zk_quorum, "--group", group, "--topic", topic),
        *("--checkpoint", checkpoint, "--output", str(output_path)),
        *("--kafka-params", json.dumps(kafka_params)),
        *("--placement", placement),
        *("--batch-s", str(batch_s), "--sink-delay-ms", str(sink_delay_ms)),
    ]
    if spark_conf:
        # In a file, not on the command line: it may hold credentials.
        conf_file = tmp_path / "spark-conf.json"
        conf_file.touch(mode=0o600)
        conf_file.write_text(json.dumps(spark_conf))
        child_args += ["--spark-conf-file", str(conf_file)]
    producer = RecordingProducer(local_cluster, topic, PARTITIONS, per_tick=8)
    producer.start()
    children: list[ChildApp] = []
    try:
        for run in range(kills):
            hold_file = tmp_path / f"hold-run-{run}"
            if run % 2:
                hold_file.touch()
            child = ChildApp(run, [*child_args, "--hold-file", str(hold_file)], tmp_path)
            children.append(child)
            child.wait_started()
            # Odd runs die inside a batch on purpose: begun (allocated, records written), not
            # ended, held there by the child's sink until the kill. Even runs die at a random
            # point once batches are flowing. Either way only once the run's own receiver is
            # reading: what it reads again must come from the run killed just before it.
            ready = Output.has_held_batch if run % 2 else Output.has_ended_batch
            try:
                wait_until(
                    lambda child=child, ready=ready: (
                        child.check_alive()
                        and (out := Output.read(output_path)).is_reading(child.run)
                        and ready(out, child.run)
                    ),
                    timeout_s=90,
                    what=f"run {run} to be processing batches",
                )
            except AssertionError:
                child.check_alive()  # a run that died by itself is a failure, not a kill
                logger.warning("run %d: not processing batches yet; killing anyway", run)
            if not run % 2:
                time.sleep(rng.uniform(0.5, 4.0))
            producer.check_flowing()
            if not zk_quorum:
                # Zero loss with no ZooKeeper at all: none was started, none is running.
                running = [pid for pid in zookeeper_processes(os.getpid()) if pid not in zookeepers_before]
                assert not running, f"a ZooKeeper started during the test runs: {describe(running)}"
            child.kill()
            logger.info("run %d killed (%d messages sent so far)", run, producer.sent)

        final = ChildApp(kills, child_args, tmp_path)
        children.append(final)
        final.wait_started()
        wait_until(
            lambda: final.check_alive() and Output.has_ended_batch(Output.read(output_path), kills),
            timeout_s=90,
            what="the final run to be processing batches",
        )
        producer.check_flowing()
        producer.finish()
        expected = set(producer.acked)
        wait_until(
            lambda: final.check_alive() and expected <= Output.read(output_path).offsets(),
            timeout_s=final_output_timeout_s,
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
        "duplicates per partition and level %s; read again per run and partition %s",
        len(producer.acked),
        {
            run: (len(bs), sum(len(b.records) for b in bs.values()))
            for run, bs in sorted(output.batches.items())
        },
        output.unfinished(),
        {p: [len(offsets) for offsets in levels] for p, levels in output.duplicate_levels().items()},
        {run: {p: len(o) for p, o in output.read_again_by(run).items()} for run in range(1, kills + 1)},
    )
    delivered = {
        (p, o): v for runs in output.batches.values() for b in runs.values() for p, o, v in b.records
    }
    # Zero loss, and nothing that was not produced.
    assert delivered == producer.acked, f"seed {seed}"

    # Batches begun but not finished before a kill ran again, from the WAL, with the same records.
    unfinished = [(run, t) for run, t in output.unfinished() if run < kills]
    assert any(output.batches[run][t].records for run, t in unfinished), "no kill landed inside a batch"
    for run, t in unfinished:
        assert t in output.recovered[run + 1], f"batch {t} of run {run} not recovered as pending"
        reruns = [
            r for r in range(run + 1, kills + 1) if output.batches[r].get(t) and output.batches[r][t].ended
        ]
        assert reruns, f"batch {t} begun in run {run} never completed after the restart"
        assert output.batches[run][t].records <= output.batches[reruns[0]][t].records

    # Records read twice: what run r + 1's receiver read again was stored by run r (the run killed
    # just before), in at most one block per partition: the block whose offsets the kill kept
    # from being committed. Blocks of older runs must not be needed.
    read_again = {run: output.read_again_by(run) for run in range(1, kills + 1)}
    assert_duplicates_bounded(output, read_again, children, seed, kills)

    # The graceful stop of the last run committed everything.
    assert committed_offsets(local_cluster, group, topic, PARTITIONS) == log_end_offsets(
        local_cluster, topic, PARTITIONS
    )


def assert_duplicates_bounded(
    output: Output,
    read_again: dict[int, dict[int, set[int]]],
    children: list[ChildApp],
    seed: int,
    kills: int = KILLS,
) -> None:
    """Each restart read again at most one block per partition of the run killed before it, and
    that explains every record delivered twice."""
    for run, partitions in read_again.items():
        for partition, offsets in partitions.items():
            needed = blocks_to_cover(offsets, output.killed_run_ranges(run - 1, partition))
            assert needed == 1, (
                f"run {run}, partition {partition}: offsets read again {sorted(offsets)} need "
                f"{needed} blocks of the killed run {run - 1} (None: not inside its blocks) (seed {seed})\n"
                + "\n".join(children[r].warnings() for r in (run - 1, run))
            )
    # And that is every duplicate: nothing was delivered twice for another reason.
    for partition, unexplained in output.unexplained_duplicates(kills).items():
        assert not unexplained, (
            f"partition {partition}: duplicates {sorted(unexplained)} not read again after a kill "
            f"(seed {seed}); delivered by:\n" + "\n".join(output.holders(partition, unexplained))
        )
