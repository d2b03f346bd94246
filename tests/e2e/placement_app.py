"""The executor-placement application (tests/e2e/cluster_child.py) as its tests drive it: start it
on a Spark cluster, produce to its topics, read what it wrote, wait for a receiver's relaunch.

Their tests pass ``started=applications`` (tests/e2e/conftest.py), so that a failed assertion
does not leave an application running (one ran for 47 minutes)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import group_params
from tests.e2e.kill_harness import ChildApp, RecordingProducer
from tests.spark_backends import SparkBackend, local_cluster_backend
from tests.support import read_json_lines, wait_until

PARTITIONS = 2
RELAUNCH_BOUND_S = 30.0
BATCH_MS = 1000  # the child's batch interval
# The dynamic allocation tests' slow sink: start_producers' 30 records/s at 100 ms each, in the one
# task slot the batches have, make a batch three times the batch interval. At 50 ms a loaded
# machine's producers (fewer records per batch) left the load near scalingUpRatio, and whether an
# interval counted as a surge depended on the load beside the test.
SURGE_SINK_MS_PER_RECORD = 100
CHILD = "tests.e2e.cluster_child"
# The same, as a file for spark-submit: it imports nothing from the tests.
CHILD_FILE = Path(__file__).with_name("cluster_child.py")


def read_output(path: Path) -> list[dict[str, Any]]:
    return read_json_lines(path)


def of_kind(entries: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [entry for entry in entries if entry["kind"] == kind]


def received(entries: list[dict[str, Any]]) -> Counter[tuple[str, int, int]]:
    return Counter((e["t"], e["p"], e["o"]) for e in of_kind(entries, "rec"))


def acked(producers: dict[str, RecordingProducer]) -> set[tuple[str, int, int]]:
    return {(topic, p, o) for topic, producer in producers.items() for (p, o) in producer.acked}


def app_args(
    cluster: LocalCluster,
    output: Path,
    topics: list[str],
    *,
    checkpoint: str,
    wal: bool,
    storage_level: str,
    master: str,
    conf: Sequence[str] = (),
    probe_fetch: bool = False,
    extra_args: Sequence[str] = (),
) -> tuple[list[str], str]:
    """The application's arguments (``conf``: ``KEY=VALUE`` entries for its SparkConf) and the
    group it reads as: what :func:`start_app` runs here, and tests/yarn/ submits to YARN."""
    group = unique_name("exec-group")
    zk_quorum, timeouts = group_params(cluster)
    args = [
        *("--zk", zk_quorum, "--group", group, "--topics", ",".join(topics)),
        *("--checkpoint", checkpoint, "--output", str(output)),
        *("--wal", "on" if wal else "off", "--storage-level", storage_level),
        *("--kafka-params", json.dumps({**timeouts, **cluster.client_config()})),
        *(["--probe-fetch"] if probe_fetch else []),
        *("--master", master),
        *(arg for entry in conf for arg in ("--conf", entry)),
        *extra_args,
    ]
    return args, group


def start_app(
    cluster: LocalCluster,
    tmp_path: Path,
    topics: list[str],
    *,
    started: list[ChildApp],
    wal: bool,
    storage_level: str,
    probe_fetch: bool = False,
    spark: SparkBackend | None = None,
    checkpoint: str | None = None,
    conf: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> tuple[ChildApp, Path, str]:
    """The application on ``spark`` (local-cluster by default), checkpointing to ``checkpoint``
    (a directory under ``tmp_path`` by default) with ``conf`` added to its SparkConf."""
    output = tmp_path / "output.jsonl"
    spark = spark or local_cluster_backend()
    args, group = app_args(
        cluster,
        output,
        topics,
        checkpoint=checkpoint or str(tmp_path / "checkpoint"),
        wal=wal,
        storage_level=storage_level,
        master=spark.master,
        conf=[*spark.conf, *(f"{key}={value}" for key, value in (conf or {}).items())],
        probe_fetch=probe_fetch,
        extra_args=extra_args,
    )
    child = ChildApp(0, args, tmp_path, module=CHILD)
    started.append(child)
    child.wait_started()
    return child, output, group


def start_producers(cluster: LocalCluster, topics: list[str]) -> dict[str, RecordingProducer]:
    """30 messages/s per topic: enough to fill blocks, little enough for a loaded 2-core machine."""
    producers = {topic: RecordingProducer(cluster, topic, PARTITIONS, per_tick=3) for topic in topics}
    for producer in producers.values():
        producer.start()
    return producers


def await_first_slow_batch(output: Path, after_ms: float, up_ratio: float = 0.9) -> dict[str, Any]:
    """The "begin" of the first batch after ``after_ms`` (a batch time) whose processing took at
    least ``up_ratio`` of the batch interval: from there on a scale-up is due. The app's first
    batches, slow while Python workers start, come before ``after_ms``; a scale-up on waiting
    batches may come before any slow batch completes, hence the wait."""

    def slow() -> list[int]:
        return sorted(
            done["batch"]
            for done in of_kind(read_output(output), "batch_done")
            if done["batch"] > after_ms and done["processing_ms"] >= up_ratio * BATCH_MS
        )

    wait_until(lambda: bool(slow()), timeout_s=120, what=f"a batch taking {up_ratio} of the batch interval")
    (begin,) = [b for b in of_kind(read_output(output), "begin") if b["batch"] == slow()[0]]
    return begin


def await_scheduling_delay_back(output: Path, surge_ms: float, up_ms: float) -> tuple[int, int]:
    """The largest scheduling delay of the batches after ``surge_ms``, at least the batch interval
    (the surge built a backlog), and that of the first batch after it and after the scale-up at
    ``up_ms`` whose delay is back under the batch interval (the backlog is gone)."""

    def fell_back() -> tuple[int, int] | None:
        done = sorted(
            (
                d
                for d in of_kind(read_output(output), "batch_done")
                if d["batch"] > surge_ms and d["scheduling_ms"] is not None
            ),
            key=lambda d: d["batch"],
        )
        if not done:
            return None
        peak = max(range(len(done)), key=lambda i: done[i]["scheduling_ms"])
        if done[peak]["scheduling_ms"] < BATCH_MS:
            return None
        back = [d for d in done[peak + 1 :] if d["batch"] > up_ms and d["scheduling_ms"] < BATCH_MS]
        return (done[peak]["scheduling_ms"], back[0]["scheduling_ms"]) if back else None

    wait_until(
        lambda: fell_back() is not None,
        timeout_s=240,
        what="the scheduling delay up to the batch interval or more, then back under it",
    )
    found = fell_back()
    assert found is not None
    return found


def surge_timeline(entries: list[dict[str, Any]], after_ms: float) -> list[tuple[Any, ...]]:
    """For a failed allocation assertion: each batch's time, records and processing time, and each
    decision's time, action, ratio and basis, after ``after_ms``, in order."""
    batches = [
        (done["batch"], "batch", done["records"], done["processing_ms"])
        for done in of_kind(entries, "batch_done")
        if done["batch"] > after_ms
    ]
    scalings = [
        (d["time_ms"], d["action"], d["ratio"], d["basis"])
        for d in of_kind(entries, "scaling")
        if d["time_ms"] > after_ms
    ]
    return sorted(batches + scalings)


def await_relaunch(output: Path, stream_id: int, killed_at: float) -> dict[str, Any]:
    """The first start of the stream's receiver after the kill (with ``killed_at`` added)."""

    def relaunches() -> list[dict[str, Any]]:
        starts = of_kind(read_output(output), "receiver_started")
        return [e for e in starts if e["stream"] == stream_id and e["time"] > killed_at]

    wait_until(lambda: bool(relaunches()), timeout_s=90, what=f"receiver {stream_id} relaunched")
    return {**relaunches()[0], "killed_at": killed_at}


def records_keep_coming(output: Path, more: int = 30) -> None:
    before = len(received(read_output(output)))
    wait_until(
        lambda: len(received(read_output(output))) > before + more, timeout_s=120, what=f"{more} more records"
    )


def assert_duplicates_within_one_block(
    entries: list[dict[str, Any]], counts: Counter[tuple[str, int, int]], lost_topic: str
) -> None:
    """Records delivered twice come only from receiver 0 (``lost_topic``'s, the one whose host or
    executor was lost), and per partition fit in one of its blocks."""
    duplicates = {key for key, n in counts.items() if n > 1}
    assert all(topic == lost_topic for topic, _, _ in duplicates), sorted(duplicates)[:10]
    ranges = [
        (partition, start, until)
        for entry in of_kind(entries, "begin")
        for block in entry["blocks"]
        if block["id"].startswith("input-0-")
        for _, partition, start, until in block["ranges"]
    ]
    for partition in range(PARTITIONS):
        again = {o for _, p, o in duplicates if p == partition}
        assert not again or any(
            p == partition and start <= min(again) and max(again) < until for p, start, until in ranges
        ), f"partition {partition}: {sorted(again)} read again, more than one block"


def lose_receivers_host(
    spark: SparkBackend, session: int, executor_id: str, host: str, app_id: str, output: Path
) -> dict[str, Any]:
    """Lose the host of receiver 0's executor ``executor_id``, then wait for the receiver's
    relaunch and for records to keep coming; the relaunch's entry, with ``killed_at``."""
    killed_at = time.time()  # before: the relaunch may come while a lost host restarts
    spark.lose_host_of(session, executor_id, host, app_id, 0)
    relaunched = await_relaunch(output, 0, killed_at=killed_at)
    records_keep_coming(output)
    return relaunched


def drain_and_stop(
    child: ChildApp, output: Path, producers: dict[str, RecordingProducer]
) -> tuple[set[tuple[str, int, int]], list[dict[str, Any]]]:
    """Wait for every acknowledged record in the output, then stop the application gracefully:
    the acknowledged records and the output's entries."""
    expected = acked(producers)
    wait_until(lambda: expected <= set(received(read_output(output))), timeout_s=180, what="every record")
    assert child.stop_gracefully() == 0, child.log_tail()
    return expected, read_output(output)
