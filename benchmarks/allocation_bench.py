"""Streaming dynamic allocation off and on, under the same rate steps, in one run.

    python benchmarks/allocation_bench.py [--idle 40] [--high 60] [--low 60] [--interval 10]
        [--high-rate 60] [--low-rate 10] [--sink-ms-per-record 20]

On a real local ZooKeeper + Kafka 3.9 (LocalCluster's default) and Spark's
``local-cluster[2,2,1024]`` with ``spark.executor.cores=1``, 512 MB executors and no locality wait
(the blocks' holder is the receiver's executor, whose one core it holds): two workers host
four one-core executors, which the standalone master starts at once. The application is
tests/e2e/cluster_child.py (one ``createStream``, 1 s batches, the write-ahead log on), its sink
slow on purpose: ``--sink-ms-per-record`` in the batch tasks, so that more executors process a
batch faster. Each run, first with ``spark.streaming.dynamicAllocation.enabled=false`` then with
it on (``--interval`` seconds, minExecutors 2, maxExecutors 4), goes through the same steps on a
topic of its own: ``--idle`` seconds with nothing produced, ``--high`` seconds at ``--high-rate``
records/s, ``--low`` seconds at ``--low-rate``; then every record is waited for and the
application stopped. Printed per run:

- time to scale: from the first batch of the high step starting to the first scale-up decision
  after it, and to the executor count (sampled about every second) first exceeding what it was
  when the step began (on: the executor arriving; off: nothing to scale, "-");
- peak scheduling delay of the batches of the high and low steps;
- executor-seconds: the sampled executor count integrated over the steps (idle to the end of the
  low step), what the cluster gave the application;
- the decisions made (on).

The machine's load average is printed too: figures from a busy shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name
from tests.e2e.helpers import group_params
from tests.e2e.kill_harness import ChildApp, RecordingProducer
from tests.e2e.placement_app import of_kind, read_output, received

PARTITIONS = 2
MASTER = "local-cluster[2,2,1024]"
# No locality wait: blocks are held by the receiver's executor, whose one core the receiver holds.
CONF = ("spark.executor.cores=1", "spark.executor.memory=512m", "spark.locality.wait=0")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=40, help="seconds with nothing produced")
    parser.add_argument("--high", type=float, default=60, help="seconds at --high-rate")
    parser.add_argument("--low", type=float, default=60, help="seconds at --low-rate")
    parser.add_argument("--interval", type=int, default=10, help="scalingInterval, seconds")
    parser.add_argument(
        "--high-rate", type=int, default=60, help="records/s of the high step (a multiple of 10)"
    )
    parser.add_argument(
        "--low-rate", type=int, default=10, help="records/s of the low step (a multiple of 10)"
    )
    parser.add_argument("--sink-ms-per-record", type=int, default=20)
    parser.add_argument(
        "--work-dir", type=Path, help="keep each run's output here (default: a temporary one)"
    )
    return parser.parse_args(argv)


def run(cluster: LocalCluster, work: Path, args: argparse.Namespace, dynamic: bool) -> dict[str, Any]:
    name = "on" if dynamic else "off"
    out = work / name
    out.mkdir()
    topic = unique_name(f"allocation-{name}")
    cluster.create_topic(topic, partitions=PARTITIONS)
    zk_quorum, timeouts = group_params(cluster)
    conf = [*CONF, f"spark.streaming.dynamicAllocation.enabled={str(dynamic).lower()}"]
    if dynamic:
        conf += [
            f"spark.streaming.dynamicAllocation.scalingInterval={args.interval}s",
            "spark.streaming.dynamicAllocation.minExecutors=2",
            "spark.streaming.dynamicAllocation.maxExecutors=4",
        ]
    output = out / "output.jsonl"
    child_args = [
        *("--zk", zk_quorum, "--group", unique_name("allocation-group"), "--topics", topic),
        *("--checkpoint", str(out / "checkpoint"), "--output", str(output)),
        *("--wal", "on", "--storage-level", "MEMORY_AND_DISK_SER", "--master", MASTER),
        *("--kafka-params", json.dumps({**timeouts, **cluster.client_config()})),
        *("--sink-ms-per-record", str(args.sink_ms_per_record), "--allocation-events"),
        *(arg for entry in conf for arg in ("--conf", entry)),
    ]
    app = ChildApp(0, child_args, out, module="tests.e2e.cluster_child")
    try:
        app.wait_started(timeout_s=600)
        # The steps start once the receiver runs: executors register late on a loaded machine,
        # and an idle step without them would measure nothing.
        deadline = time.monotonic() + 600
        while not of_kind(read_output(output), "receiver_started"):
            if time.monotonic() > deadline or not app.check_alive():
                raise SystemExit(f"[{name}] the receiver did not start:\n{app.log_tail()}")
            time.sleep(1)
        print(f"[{name}] receiver started; idle {args.idle:.0f} s", flush=True)
        steps_began = time.time()
        time.sleep(args.idle)  # the idle step itself
        producers = []
        high_began = time.time()
        for rate, seconds in ((args.high_rate, args.high), (args.low_rate, args.low)):
            producer = RecordingProducer(cluster, topic, PARTITIONS, per_tick=max(1, rate // 10))
            producer.start()
            print(f"[{name}] {rate} records/s for {seconds:.0f} s", flush=True)
            time.sleep(seconds)  # the step itself
            producer.finish()
            producers.append(producer)
        steps_ended = time.time()
        expected = {(topic, p, o) for producer in producers for (p, o) in producer.acked}
        deadline = time.monotonic() + 600
        while not expected <= set(received(read_output(output))):
            if time.monotonic() > deadline or not app.check_alive():
                raise SystemExit(f"[{name}] not every record arrived:\n{app.log_tail()}")
            time.sleep(1)
        drained = time.time()
        app.stop_gracefully()
    finally:
        app.kill()
    entries = read_output(output)
    return summarise(entries, steps_began, high_began, steps_ended, drained, len(expected))


def summarise(
    entries: list[dict[str, Any]], began: float, high_began: float, ended: float, drained: float, records: int
) -> dict[str, Any]:
    samples = sorted(of_kind(entries, "executors"), key=lambda e: e["time"])
    before = [e["count"] for e in samples if e["time"] <= high_began][-1:] or [0]
    first_batch = next(
        (b["time"] for b in of_kind(entries, "begin") if b["blocks"] and b["time"] >= high_began), None
    )
    ups = [d["time_ms"] / 1000 for d in of_kind(entries, "scaling") if d["action"] == "up"]
    ups = [t for t in ups if first_batch is not None and t >= first_batch]
    grown = next((e["time"] for e in samples if e["time"] >= high_began and e["count"] > before[0]), None)
    delays = [b["scheduling_ms"] for b in of_kind(entries, "batch_done") if b["time"] >= high_began]
    decisions: dict[str, int] = {}
    for decision in of_kind(entries, "scaling"):
        decisions[decision["action"]] = decisions.get(decision["action"], 0) + 1
    return {
        "to_decide_s": None if first_batch is None or not ups else ups[0] - first_batch,
        "to_executor_s": None if first_batch is None or grown is None else grown - first_batch,
        "executors_before_high": before[0],
        "peak_scheduling_delay_s": max(delays, default=0) / 1000,
        "executor_seconds": executor_seconds(samples, began, ended),
        "drain_s": drained - ended,
        "records": records,
        "decisions": decisions,
    }


def executor_seconds(samples: list[dict[str, Any]], began: float, ended: float) -> float:
    """The executor count integrated over [began, ended], each sample holding until the next (the
    sampler's period stretches on a loaded machine)."""
    total = 0.0
    for sample, following in zip(samples, [*samples[1:], {"time": ended}], strict=True):
        start, end = max(sample["time"], began), min(following["time"], ended)
        if end > start:
            total += sample["count"] * (end - start)
    return total


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="allocation-bench-"))
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        with LocalCluster(work / "cluster") as cluster:
            results = {dynamic: run(cluster, work, args, dynamic) for dynamic in (False, True)}
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"\nload average {os.getloadavg()[0]:.1f}; steps: idle {args.idle:.0f} s, "
        f"{args.high_rate}/s for {args.high:.0f} s, {args.low_rate}/s for {args.low:.0f} s; "
        f"sink {args.sink_ms_per_record} ms/record; scaling interval {args.interval} s"
    )
    print(f"{'dynamic allocation':<20}{'off':>14}{'on':>14}")
    rows = (
        ("records", lambda r: str(r["records"])),
        ("executors at step up", lambda r: str(r["executors_before_high"])),
        ("time to decide", lambda r: seconds(r["to_decide_s"])),
        ("time to executor", lambda r: seconds(r["to_executor_s"])),
        ("peak sched. delay", lambda r: seconds(r["peak_scheduling_delay_s"])),
        ("executor-seconds", lambda r: f"{r['executor_seconds']:.0f}"),
        ("drain after steps", lambda r: seconds(r["drain_s"])),
        ("decisions", lambda r: " ".join(f"{k}:{v}" for k, v in sorted(r["decisions"].items())) or "-"),
    )
    for label, value in rows:
        print(f"{label:<20}{value(results[False]):>14}{value(results[True]):>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
