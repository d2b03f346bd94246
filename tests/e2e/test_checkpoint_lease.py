"""One driver per checkpoint, with real drivers: a child driver process (tests/e2e/lease_child.py)
holds a local checkpoint, and a StreamingContext of this process starts on the same checkpoint.

- while the child runs, ``start()`` fails naming it; once it is SIGKILLed, the next ``start()``
  takes the checkpoint over at once (same host: its process is gone) and goes on from it;
- a SIGSTOPped child is taken over once its lease was not renewed for the timeout, and when it
  wakes it writes nothing to the checkpoint, runs no batch (its sink gets nothing), hears it lost
  the lease and stops.

The lease itself, on local disk, HDFS and S3, is tested in tests/integration/test_checkpoint_lease.py.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from pathlib import Path

import pytest
from pyspark import SparkContext

from reliable_kafka import StreamingContext
from tests.e2e.kill_harness import ChildApp
from tests.e2e.lease_child import STOPPED_BY_ERROR_EXIT, build
from tests.support import wait_until

LEASE_TIMEOUT_MS = 5000
BATCH_S = 2.0


@pytest.fixture
def checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    # This process's contexts lease with the child's timeout (the child sets it in its SparkConf).
    monkeypatch.setenv("RELIABLE_KAFKA_CHECKPOINT__LEASE_TIMEOUT_MS", str(LEASE_TIMEOUT_MS))
    return str(tmp_path / "checkpoint")


def start_holder(checkpoint: str, log_dir: Path, applications: list[ChildApp]) -> ChildApp:
    holder = ChildApp(
        1,
        [
            "--checkpoint",
            checkpoint,
            "--output",
            str(log_dir / "batches.txt"),
            "--batch-s",
            str(BATCH_S),
            "--lease-timeout",
            f"{LEASE_TIMEOUT_MS}ms",
            "--pause-file",
            str(log_dir / "pause"),
        ],
        log_dir,
        module="tests.e2e.lease_child",
    )
    applications.append(holder)
    holder.wait_started()
    # A batch run end to end: checkpointed, and through its sink.
    wait_until(
        lambda: (Path(checkpoint) / "metadata").exists() and (log_dir / "batches.txt").exists(),
        timeout_s=60,
        what="the child's first checkpoint and batch",
    )
    return holder


def metadata(checkpoint: str) -> dict[str, object]:
    return json.loads((Path(checkpoint) / "metadata").read_bytes())


def files_of(checkpoint: str) -> dict[str, tuple[int, int]]:
    """Every file of the checkpoint but the lease's: size and modification time."""
    return {
        str(path.relative_to(checkpoint)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(Path(checkpoint).rglob("*"))
        if path.is_file() and path.parent.name != "_lease"
    }


def lease_holders(checkpoint: str) -> list[tuple[int, int, bool]]:
    """(pid, epoch, released) of each lease file, lowest number first."""
    records = [json.loads(p.read_bytes()) for p in sorted((Path(checkpoint) / "_lease").glob("*.json"))]
    return [(r["pid"], r["epoch"], r["released"]) for r in records]


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): state T in /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[0] == "T"


def takeover_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Took over the lease" in r.getMessage()]


def test_a_second_driver_is_refused_while_the_first_runs_and_takes_over_once_it_is_killed(
    spark_context: SparkContext,
    checkpoint: str,
    tmp_path: Path,
    applications: list[ChildApp],
    caplog: pytest.LogCaptureFixture,
) -> None:
    holder = start_holder(checkpoint, tmp_path, applications)
    second = StreamingContext.getOrCreate(checkpoint, lambda: build(spark_context, BATCH_S))
    try:
        with pytest.raises(RuntimeError, match="in use by another driver") as refused:
            second.start()
    finally:
        second.stop(stopSparkContext=False)  # a failed start leaves it stopped; if not, it must be
    for part in (
        f"pid {holder.process.pid}",
        "application local-",
        "last renewed",
        "spark.streaming.checkpoint.leaseTimeout",
    ):
        assert part in str(refused.value), refused.value
    holder.check_alive()  # the refused start did not disturb it
    holder.kill()  # SIGKILL: no release
    caplog.set_level(logging.INFO, "reliable_kafka.checkpoint_lease")
    third = StreamingContext.getOrCreate(checkpoint, lambda: build(spark_context, BATCH_S))
    assert third.initial_checkpoint is not None
    holder_epoch = third.initial_checkpoint.lease_epoch
    assert holder_epoch is not None
    third.start()
    try:
        (warning,) = takeover_warnings(caplog)
        assert f"pid {holder.process.pid}" in warning and "its process is gone" in warning
        wait_until(lambda: metadata(checkpoint)["lease_epoch"] > holder_epoch, what="a checkpoint of its own")
    finally:
        third.stop(stopSparkContext=False)


def test_a_paused_driver_whose_checkpoint_was_taken_over_writes_nothing_when_it_wakes(
    spark_context: SparkContext,
    checkpoint: str,
    tmp_path: Path,
    applications: list[ChildApp],
    caplog: pytest.LogCaptureFixture,
) -> None:
    holder = start_holder(checkpoint, tmp_path, applications)
    pid = holder.process.pid
    # The child SIGSTOPs its driver process itself, between two batches' writes: a pause landing
    # inside a write would let that one write land on waking, a limit the lease documents. Its
    # JVM goes on, as in a long pause of the Python driver.
    (tmp_path / "pause").touch()
    wait_until(lambda: stopped(pid), timeout_s=60, what="the child to pause")
    paused_at_ms = time.time_ns() // 1_000_000
    try:
        left = metadata(checkpoint)
        caplog.set_level(logging.INFO, "reliable_kafka.checkpoint_lease")
        successor = StreamingContext.getOrCreate(checkpoint, lambda: build(spark_context, BATCH_S))
        successor.start()  # watches the lease for the timeout: not renewed, taken over
        try:
            # The paused driver writes nothing: a change is the successor's checkpoint.
            wait_until(lambda: metadata(checkpoint) != left, what="a checkpoint of the successor's")
        finally:
            successor.stop(stopSparkContext=False)  # released: from here on nothing may change
        before, successor_wrote = files_of(checkpoint), metadata(checkpoint)
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(
        lambda: holder.process.poll() is not None or files_of(checkpoint) != before,
        timeout_s=60,
        what="the woken driver to stop, or to write",
    )
    assert files_of(checkpoint) == before
    assert holder.process.wait(30) == STOPPED_BY_ERROR_EXIT
    log = holder.log_path.read_text(errors="replace")
    assert "was taken over by" in log and f"pid {os.getpid()}" in log, holder.log_tail()
    # The batch it was running when it paused may finish; none of the times it slept through ran.
    sunk = [int(line) for line in (tmp_path / "batches.txt").read_text().split()]
    assert sunk and max(sunk) <= paused_at_ms, (sunk, paused_at_ms)
    # The lease is the successor's, released; the woken driver added no record above it.
    successor_epoch = successor_wrote["lease_epoch"]
    assert lease_holders(checkpoint)[-1] == (os.getpid(), successor_epoch, True)
    (warning,) = takeover_warnings(caplog)
    assert f"pid {pid}" in warning and "not renewed for" in warning
    assert successor_epoch > left["lease_epoch"]
