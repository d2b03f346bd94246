"""Stateful streams across driver crashes (issue 24): a running word count (``updateStateByKey``,
receiver WAL on, ``getOrCreate``) SIGKILLed three times at random points while messages flow, then
drained by a final run. Its totals must count every produced word (nothing lost from the state)
and exceed the produced counts only by records the receivers read twice (a block stored but not
committed when its driver died: at-least-once state, as in Spark).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import group_params
from tests.e2e.kill_harness import SEED_VARIABLE, ChildApp, RecordingProducer, kill_seed
from tests.e2e.state_kill_child import word_of
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KILLS = 3
PARTITIONS = 2
CHILD = "tests.e2e.state_kill_child"
# Every batch time of the test runs at least once, most of them in the final run (a restart
# regenerates its down time, tens of seconds of driver start here), and a batch costs about a
# second of two busy cores whatever its size: 4 s batches keep that drain well ahead of the clock.
BATCH_S = 4
STATE_CHECKPOINT_S = 8
# Own batches before a kill: after one a run may not have written a state checkpoint yet (one
# every other batch), after three it has.
MOST_BATCHES_BEFORE_KILL = 3


@dataclass
class WordCountOutput:
    """What the runs wrote: each batch's input records (the last run's version of a batch time
    wins: a re-run reads the same blocks) and each run's totals by batch time."""

    inputs: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    totals: dict[int, dict[int, dict[str, int]]] = field(default_factory=lambda: defaultdict(dict))
    # Batch times whose input more than one run wrote (re-run after a kill), and their records.
    rerun_records: dict[int, int] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> WordCountOutput:
        output = cls()
        if not path.exists():
            return output
        for line in path.read_text().splitlines():
            try:
                entry: dict[str, Any] = json.loads(line)
            except ValueError:
                continue  # torn by a kill
            if entry["kind"] == "in":
                if entry["batch"] in output.inputs:
                    output.rerun_records[entry["batch"]] = len(entry["recs"])
                output.inputs[entry["batch"]] = [(p, o, w) for p, o, w in entry["recs"]]
            else:
                output.totals[entry["run"]][entry["batch"]] = entry["totals"]
        return output

    def offsets(self) -> set[tuple[int, int]]:
        return {(p, o) for recs in self.inputs.values() for p, o, _ in recs}

    def read_twice(self) -> Counter[str]:
        """Per word, the extra deliveries of records that are in more than one batch."""
        seen: Counter[tuple[int, int, str]] = Counter(r for recs in self.inputs.values() for r in recs)
        extra: Counter[str] = Counter()
        for (_, _, word), times in seen.items():
            extra[word] += times - 1
        return extra


@pytest.mark.brokers("3.9")
@pytest.mark.timeout(900)  # four driver starts and the drain of every pending batch, on a shared machine
# Executor placement only: what this test adds is the state checkpoint across kills, the same
# wherever the receivers run; the receivers' own recovery in driver placement is the driver kill
# test's (tests/e2e/test_kill_recovery.py, both placements).
@pytest.mark.parametrize("placement", ["executors"])
def test_running_totals_survive_driver_kills(
    local_cluster: LocalCluster, tmp_path: Path, placement: str
) -> None:
    seed = kill_seed()
    rng = random.Random(seed)
    print(f"state kill test seed {seed} ({SEED_VARIABLE}={seed} replays its kill delays)")
    topic, group = unique_name("state-kill"), unique_name("group")
    local_cluster.create_topic(topic, partitions=PARTITIONS)
    output_path = tmp_path / "output.jsonl"
    zk_quorum, timeouts = group_params(local_cluster)
    kafka_params = {"auto.offset.reset": "smallest", **timeouts, **local_cluster.client_config()}
    child_args = [
        *("--zk", zk_quorum, "--group", group, "--topic", topic),
        *("--checkpoint", str(tmp_path / "checkpoint"), "--output", str(output_path)),
        *("--kafka-params", json.dumps(kafka_params), "--placement", placement),
        *("--batch-s", str(BATCH_S), "--state-checkpoint-s", str(STATE_CHECKPOINT_S)),
    ]
    producer = RecordingProducer(local_cluster, topic, PARTITIONS, per_tick=2)
    producer.start()
    children: list[ChildApp] = []
    phases: list[str] = []  # where the time goes, for the report: the test must stay short
    started = time.monotonic()
    try:
        for run in range(KILLS):
            child = ChildApp(run, child_args, tmp_path, module=CHILD)
            children.append(child)
            child.wait_started()
            # A random number of this run's own batches (so some runs die before their first
            # state checkpoint, some after), then a random moment inside the next one.
            batches = rng.randint(1, MOST_BATCHES_BEFORE_KILL)
            wait_until(
                lambda child=child, batches=batches: (
                    child.check_alive()
                    and len(WordCountOutput.read(output_path).totals.get(child.run, {})) >= batches
                ),
                timeout_s=120,
                what=f"run {run} to output {batches} batches",
            )
            time.sleep(rng.uniform(0.0, BATCH_S))  # a random point in the batch, not an event to wait for
            producer.check_flowing()
            child.kill()
            phases.append(f"run {run} killed at {time.monotonic() - started:.0f} s after {batches} batches")

        final = ChildApp(KILLS, child_args, tmp_path, module=CHILD)
        children.append(final)
        final.wait_started()
        phases.append(f"final run started at {time.monotonic() - started:.0f} s")
        producer.finish()
        produced = Counter(word_of(v) for v in producer.acked.values())
        wait_until(
            lambda: (
                final.check_alive() and set(producer.acked) <= WordCountOutput.read(output_path).offsets()
            ),
            timeout_s=300,
            what="the final run to read every produced message",
        )
        phases.append(f"final run read everything at {time.monotonic() - started:.0f} s")
        assert final.stop_gracefully() == 0, final.log_tail()
    finally:
        producer.finish() if producer.is_alive() else None
        for child in children:
            child.kill()

    output = WordCountOutput.read(output_path)
    last_batch = max(output.totals[KILLS])
    totals = Counter(output.totals[KILLS][last_batch])
    read_twice = output.read_twice()
    excess = totals - produced
    print(
        f"state kill test ({placement}): produced {sum(produced.values())}, totals {sum(totals.values())}, "
        f"excess {sum(excess.values())}, records read twice {sum(read_twice.values())}, "
        f"batches re-run {len(output.rerun_records)} with {sum(output.rerun_records.values())} records, "
        f"runs {KILLS + 1}, {time.monotonic() - started:.0f} s ({'; '.join(phases)}); "
        f"per word produced {dict(sorted(produced.items()))} totals {dict(sorted(totals.items()))}"
    )
    # Nothing lost from the state: every produced word is counted...
    assert not produced - totals, f"lost from the totals: {dict(produced - totals)} (seed {seed})"
    # ...and counted more than once only where a receiver read a record again after a kill.
    assert not excess - read_twice, (
        f"totals exceed produced + read twice: {dict(excess - read_twice)} (seed {seed})\n"
        + "\n".join(c.warnings() for c in children)
    )
    # The restarts restored state: with an empty state the totals would be far below the produced counts.
    restored = [c.log_path.read_text() for c in children[1:]]
    assert any("Restored the state of" in log for log in restored), "no run restored a state checkpoint"
