"""Driving the kill test's child application (tests/e2e/kill_child.py) and reading what it wrote;
the seed of the kill tests' schedules."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from reliable_kafka.local import LocalCluster
from tests.support.producing import in_order_once

REPO_ROOT = Path(__file__).resolve().parents[2]


class ChildApp:
    """One run of the child: its own session, so that a kill takes its JVM and Python workers too."""

    def __init__(
        self, run: int, args: list[str], log_dir: Path, module: str = "tests.e2e.kill_child"
    ) -> None:
        self.run = run
        self.log_path = log_dir / f"child-run-{run}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYSPARK_PYTHON": sys.executable}
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, "--run", str(run), *args],
                cwd=REPO_ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self.started = threading.Event()
        threading.Thread(target=self._read_stdout, name=f"child-{run}-stdout", daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == b"started":
                self.started.set()

    def wait_started(self, timeout_s: float = 240.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.started.wait(0.2):
            self.check_alive()
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"run {self.run} did not start in {timeout_s} s:\n{self.log_tail()}")

    def check_alive(self) -> bool:
        """True while running; a run that ended by itself failed, and says why in its log."""
        code = self.process.poll()
        if code is not None:
            raise AssertionError(f"run {self.run} exited with {code} on its own:\n{self.log_tail()}")
        return True

    def kill(self) -> None:
        """SIGKILL the whole process group (driver, JVM, Python workers): a driver machine crash."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(60)

    def stop_gracefully(self, timeout_s: float = 240.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def warnings(self, most: int = 30) -> str:
        """The run's WARNING and ERROR log lines (reliable_kafka's and kazoo's), for failure messages."""
        found = [
            line
            for line in self.log_path.read_text(errors="replace").splitlines()
            if " WARNING " in line or " ERROR " in line
        ]
        return f"run {self.run} warnings:\n" + "\n".join(found[-most:])


class RecordingProducer(threading.Thread):
    """Sends ``m-<n>`` round-robin over the partitions, ``per_tick`` every 100 ms, until
    :meth:`finish`; keeps the (partition, offset) -> value of every acknowledged message."""

    def __init__(self, cluster: LocalCluster, topic: str, partitions: int, per_tick: int) -> None:
        super().__init__(name="recording-producer", daemon=True)
        self._producer = Producer(in_order_once(cluster.client_config(**{"linger.ms": 5})))
        self._topic, self._partitions, self._per_tick = topic, partitions, per_tick
        self._stop_sending = threading.Event()
        self.acked: dict[tuple[int, int], str] = {}
        self.errors: list[Any] = []
        self.sent = 0
        self._last_send = time.monotonic()

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.acked[(message.partition(), message.offset())] = message.value().decode()

    def run(self) -> None:
        while not self._stop_sending.wait(0.1):
            for _ in range(self._per_tick):
                value = f"m-{self.sent}".encode()
                self._producer.produce(
                    self._topic, value, partition=self.sent % self._partitions, on_delivery=self._on_delivery
                )
                self.sent += 1
            self._last_send = time.monotonic()
            self._producer.poll(0)

    def check_flowing(self, within_s: float = 2.0) -> None:
        """Messages are still being sent (the last batch less than ``within_s`` ago)."""
        assert self.is_alive(), "the producer thread has stopped"
        idle = time.monotonic() - self._last_send
        assert idle < within_s, f"the producer has sent nothing for {idle:.1f} s"
        assert not self.errors, self.errors[:3]

    def finish(self) -> None:
        self._stop_sending.set()
        self.join()
        assert self._producer.flush(60) == 0 and not self.errors, self.errors[:3]
        assert len(self.acked) == self.sent


@dataclass(frozen=True)
class Block:
    """One block as a batch held it: its id and its [from, until) offsets per partition."""

    id: str
    ranges: tuple[tuple[int, int, int], ...]

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> Block:
        return cls(entry["id"], tuple((p, start, until) for p, start, until in entry["ranges"]))


@dataclass
class BatchRun:
    """One batch as one run wrote it."""

    blocks: list[Block]
    records: set[tuple[int, int, str]] = field(default_factory=set)
    ended: bool = False


@dataclass
class Output:
    """Everything the child runs wrote, by run and batch time."""

    batches: dict[int, dict[int, BatchRun]] = field(default_factory=lambda: defaultdict(dict))
    recovered: dict[int, list[int]] = field(default_factory=dict)
    # Blocks each run found in the metadata log at start: stored by earlier runs, not read by it.
    recovered_blocks: dict[int, list[Block]] = field(default_factory=dict)
    # Batch times each run's sink holds (see kill_child's --hold-file): begun, not ended.
    held: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))

    @classmethod
    def read(cls, path: Path) -> Output:
        output = cls()
        if not path.exists():
            return output
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill: its batch has no "end" and runs again
            run, kind = entry["run"], entry["kind"]
            if kind == "recovered":
                output.recovered[run] = entry["pending"]
                output.recovered_blocks[run] = [Block.from_entry(b) for b in entry["blocks"]]
            elif kind == "begin":
                output.batches[run][entry["batch"]] = BatchRun([Block.from_entry(b) for b in entry["blocks"]])
            elif kind == "rec":
                output.batches[run][entry["batch"]].records.add((entry["p"], entry["o"], entry["v"]))
            elif kind == "end":
                output.batches[run][entry["batch"]].ended = True
            elif kind == "held":
                output.held[run].add(entry["batch"])
        return output

    def offsets(self) -> set[tuple[int, int]]:
        return {(p, o) for runs in self.batches.values() for b in runs.values() for p, o, _ in b.records}

    def has_ended_batch(self, run: int) -> bool:
        return any(b.ended for b in self.batches.get(run, {}).values())

    def has_held_batch(self, run: int) -> bool:
        return bool(self.held.get(run))

    def unfinished(self) -> list[tuple[int, int]]:
        """(run, batch time) of every batch begun but not ended in its run."""
        return sorted((run, t) for run, bs in self.batches.items() for t, b in bs.items() if not b.ended)

    def is_reading(self, run: int) -> bool:
        """A batch of ``run`` holds a block its own receiver stored (not one it recovered)."""
        recovered = {block.id for block in self.recovered_blocks.get(run, [])}
        return any(block.id not in recovered for block in self.blocks_of_run(run))

    def blocks_of_run(self, run: int) -> set[Block]:
        """Every block in a batch begun in ``run``."""
        return {block for b in self.batches.get(run, {}).values() for block in b.blocks}

    def blocks_stored_before(self, run: int) -> set[Block]:
        """Blocks that earlier runs stored: those in their batches and those ``run`` recovered."""
        earlier = {block for r in self.batches if r < run for block in self.blocks_of_run(r)}
        return earlier | set(self.recovered_blocks.get(run, []))

    def blocks_stored_by(self, run: int) -> set[Block]:
        """Blocks ``run``'s own receiver stored: those in its batches and those it left in the log
        for ``run + 1`` to recover, except blocks stored before it (recovered, or re-run from an
        earlier run's batch).

        A block ``run`` stored but never put in a batch it began (still unallocated, or in a batch
        that had not begun, when it was killed) is delivered by a later run from the log: it is
        still ``run``'s read. Counting only the blocks of ``run``'s batches took the block
        ``run`` read again after the kill before it for a duplicate nobody read twice.
        """
        before = {block.id for block in self.blocks_stored_before(run)}
        left = set(self.recovered_blocks.get(run + 1, []))
        return {block for block in self.blocks_of_run(run) | left if block.id not in before}

    def read_again_by(self, run: int) -> dict[int, set[int]]:
        """partition -> offsets that ``run``'s receiver read although an earlier run had stored them."""
        stored = _offsets(self.blocks_stored_before(run))
        read = _offsets(self.blocks_stored_by(run))
        found = {p: offsets & stored.get(p, set()) for p, offsets in read.items()}
        return {p: offsets for p, offsets in found.items() if offsets}

    def killed_run_ranges(self, run: int, partition: int) -> list[tuple[int, int]]:
        """[from, until) of ``partition`` in the blocks run ``run`` stored (the run killed before
        ``run + 1``): in its batches, or left in the log for ``run + 1`` to recover."""
        blocks = self.blocks_of_run(run) | set(self.recovered_blocks.get(run + 1, []))
        return sorted(
            {(start, until) for block in blocks for p, start, until in block.ranges if p == partition}
        )

    def duplicate_levels(self) -> dict[int, list[set[int]]]:
        """partition -> [offsets delivered in 2+ batches, in 3+ batches, ...].

        A batch run again after a kill keeps its batch time, so replays of unfinished batches are
        not counted: these are records the receiver read (and stored) more than once.
        """
        batch_times: dict[tuple[int, int], set[int]] = defaultdict(set)
        for batches in self.batches.values():
            for t, b in batches.items():
                for p, o, _ in b.records:
                    batch_times[(p, o)].add(t)
        levels: dict[int, list[set[int]]] = defaultdict(list)
        for (p, o), times in batch_times.items():
            for level in range(len(times) - 1):
                while len(levels[p]) <= level:
                    levels[p].append(set())
                levels[p][level].add(o)
        return dict(levels)

    def unexplained_duplicates(self, last_run: int) -> dict[int, set[int]]:
        """partition -> offsets delivered in two batch times that no run from 1 to ``last_run``
        read again: duplicates that the receivers' one-block re-read after a kill does not explain."""
        read_again = [self.read_again_by(run) for run in range(1, last_run + 1)]
        found = {
            p: set().union(*levels) - set().union(*(partitions.get(p, set()) for partitions in read_again))
            for p, levels in self.duplicate_levels().items()
        }
        return {p: offsets for p, offsets in found.items() if offsets}

    def holders(self, partition: int, offsets: set[int]) -> list[str]:
        """Where these offsets of ``partition`` were delivered: one line per (run, batch, block)
        holding some of them, with the block's range of them and whether the batch ended; what a
        failed duplicate bound needs to tell a block in two batches from a block read twice."""
        found: dict[tuple[int, int, str], set[int]] = defaultdict(set)
        for run, batches in self.batches.items():
            recovered = {block.id for block in self.recovered_blocks.get(run, [])}
            for t, b in batches.items():
                for block in b.blocks:
                    for p, start, until in block.ranges:
                        held = {o for o in offsets if p == partition and start <= o < until}
                        if held:
                            tag = "recovered" if block.id in recovered else "read"
                            found[(run, t, f"{block.id} ({tag}, ended={b.ended})")] |= held
        return [
            f"run {run} batch {t} block {what}: offsets {min(held)}-{max(held)} ({len(held)})"
            for (run, t, what), held in sorted(found.items())
        ]


def blocks_to_cover(offsets: set[int], blocks: list[tuple[int, int]]) -> int | None:
    """Fewest of ``blocks`` ([from, until) ranges) that hold every offset; None if they cannot."""
    remaining, used = sorted(offsets), 0
    while remaining:
        first = remaining[0]
        ends = [until for start, until in blocks if start <= first < until]
        if not ends:
            return None
        end = max(ends)
        remaining = [o for o in remaining if o >= end]
        used += 1
    return used


def _offsets(blocks: Any) -> dict[int, set[int]]:
    """partition -> every offset in ``blocks``."""
    offsets: dict[int, set[int]] = defaultdict(set)
    for block in blocks:
        for p, start, until in block.ranges:
            offsets[p].update(range(start, until))
    return offsets


SEED_VARIABLE = "RELIABLE_KAFKA_KILL_SEED"


def kill_seed() -> int:
    """The seed of the kill schedule: ``RELIABLE_KAFKA_KILL_SEED`` when set, else a fresh one.

    It draws only the random delays before the even runs' kills; where the other kills land
    depends on how fast the machine runs the batches, so a seed replays a schedule, not a run."""
    fixed = os.environ.get(SEED_VARIABLE)
    return int(fixed) if fixed else random.randrange(1 << 30)
