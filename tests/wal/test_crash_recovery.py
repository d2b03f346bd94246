"""Kill -9 a writing process at random moments; every acknowledged record must come back intact."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.wal.crash_writer import payload
from wal import BatchedWriteAheadLog, FileBasedWriteAheadLog, WriteAheadLog

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("crash_writer.py")
KILLS_PER_MODE = 8  # 3 modes: 24 kills in all


def run_and_kill(mode: str, directory: Path, run: int, rng: random.Random) -> set[int]:
    """Start the writer, SIGKILL it at a random moment, return the sequence numbers it acknowledged."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, str(SCRIPT), mode, str(directory), str(run)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    assert child.stdout is not None
    lines: list[bytes] = []
    ready = threading.Event()

    def pump() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(line)
            if line == b"ready\n":
                ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    assert ready.wait(30), "writer never started"
    time.sleep(rng.uniform(0.0, 0.3))
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    reader.join(30)
    acked = set()
    for line in lines:
        # A line cut by the kill has no newline: its write returned, but we cannot know which; skip it.
        if line.endswith(b"\n") and line != b"ready\n":
            got_run, seq = map(int, line.split())
            assert got_run == run
            acked.add(seq)
    return acked


def recover(mode: str, directory: Path) -> list[bytes]:
    inner = FileBasedWriteAheadLog(str(directory), close_file_after_write=(mode == "close-after-write"))
    log: WriteAheadLog = BatchedWriteAheadLog(inner) if mode == "batched" else inner
    try:
        return list(log.read_all())  # must never raise
    finally:
        log.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["rolling", "close-after-write", "batched"])
def test_records_acknowledged_before_sigkill_survive_recovery(mode, tmp_path, caplog):
    rng = random.Random(f"crash-{mode}")
    directory = tmp_path / "wal"
    acked: dict[int, set[int]] = {}
    total_acked = 0
    for run in range(KILLS_PER_MODE):
        acked[run] = run_and_kill(mode, directory, run, rng)
        total_acked += len(acked[run])
        # Recover after every kill: the next run continues the same log, after whatever tail this left.
        with caplog.at_level(logging.WARNING, logger="wal"):
            recovered = recover(mode, directory)
        seen: dict[int, list[int]] = defaultdict(list)
        for record in recovered:
            got_run, seq, _ = record.split(b":", 2)
            assert record == payload(int(got_run), int(seq)), "recovered record is damaged"
            seen[int(got_run)].append(int(seq))
        for r in range(run + 1):
            missing = acked[r] - set(seen[r])
            assert not missing, f"run {r}: acknowledged records lost: {sorted(missing)[:10]}"
            writers = 4 if mode == "batched" else 1
            for lane in range(writers):
                mine = [s for s in seen[r] if s % writers == lane]
                assert mine == sorted(mine), f"run {r}: records out of write order"
                assert len(mine) == len(set(mine)), f"run {r}: duplicated records"
    assert total_acked > 20 * KILLS_PER_MODE // 4, "the writer hardly wrote anything before the kills"
