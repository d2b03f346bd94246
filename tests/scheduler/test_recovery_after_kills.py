"""Driver kills, one after another, against the real ReceivedBlockTracker on a real metadata
write-ahead log and the job generator's own restart decisions (``plan_restart``): no block is
ever run under two batch times, and none is lost (issue 21).

Each run of the driver is a sequence of the steps the real one takes, interleaved at random as
its threads may interleave them: receivers add blocks; the job generator allocates a batch and
checkpoints (the batch pending); the job begins its output, ends it; the scheduler drops the job
set, the tracker logs the completion, the generator checkpoints again and cleans up. A kill
lands after any step; the next run recovers from the log and the last checkpoint. What a batch
delivered is recorded when its output begins, as the kill test's sink does: a batch that began
and was killed has delivered its records.

The first run is not killed before its first checkpoint: a first start (no checkpoint) gives a
dead run's pending batches to its first new batch by design (see test_driver_recovery.py).
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reliable_kafka.checkpoint import Checkpoint
from reliable_kafka.scheduler.job_generator import plan_restart
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.settings import WriteAheadLogSettings
from tests.support import ManualClock
from tests.support.scheduler_fakes import block_info

BATCH_MS = 1000
STREAM = 0


class Killed(Exception):
    """SIGKILL: the run stops between two steps."""


@dataclass
class Survivors:
    """What outlives a kill besides the metadata log: the checkpoint file and the sink's output."""

    checkpoint: Checkpoint | None = None
    delivered: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    added: set[int] = field(default_factory=set)
    trace: list[str] = field(default_factory=list)


class DriverRun:
    """One driver process: recovers, then takes random steps until killed or ``max_steps``."""

    def __init__(
        self, checkpoint_dir: Path, survivors: Survivors, clock: ManualClock, rng: random.Random, run: int
    ) -> None:
        self.survivors, self.clock, self.rng, self.run = survivors, clock, rng, run
        settings = WriteAheadLogSettings(driver_rolling_interval_s=1, fsync=False)
        self.tracker = ReceivedBlockTracker.create(
            [STREAM], str(checkpoint_dir), settings, recover_from_write_ahead_log=True, now_ms=clock
        )
        self.job_sets: list[int] = []  # submitted, not completed, in order
        self.jobs: deque[list[int]] = deque()  # [time, stage]: the one job thread runs them in order
        self.events: deque[tuple[str, int]] = deque()  # the job generator's event loop
        self.last_generated: int | None = None
        self.max_completed: int | None = None
        self.kill_after: int | None = None
        self.steps = 0

    def step(self, what: str) -> None:
        self.survivors.trace.append(f"run {self.run} at {self.clock.now_ms}: {what}")
        self.steps += 1
        if self.kill_after is not None and self.steps >= self.kill_after:
            raise Killed

    def start(self) -> int:
        """What JobGenerator.start does; returns the time of the next batch the timer fires."""
        checkpoint = self.survivors.checkpoint
        pending = self.tracker.pending_batch_times()
        self.step(f"recovered pending {pending}, allocated {self.tracker.allocated_batch_times()}")
        if checkpoint is None:
            self.tracker.deallocate_batches(pending)
            start = (self.clock.now_ms // BATCH_MS + 1) * BATCH_MS
            self.zero = start - BATCH_MS
            return start
        self.zero = checkpoint.zero_time_ms
        plan = plan_restart(checkpoint, BATCH_MS, self.clock.now_ms, pending)
        if plan.to_return:
            self.tracker.deallocate_batches(plan.to_return)
            self.step(f"returned {plan.to_return}")
        self.last_generated = checkpoint.last_generated_batch_time_ms
        self.events.extend(("generate", t) for t in plan.to_reschedule)
        return plan.restart_time_ms

    def write_checkpoint(self, time_ms: int) -> None:
        last = time_ms if self.last_generated is None else max(self.last_generated, time_ms)
        self.survivors.checkpoint = Checkpoint(
            checkpoint_time_ms=time_ms,
            zero_time_ms=self.zero,
            batch_duration_ms=BATCH_MS,
            checkpoint_duration_ms=BATCH_MS,
            last_generated_batch_time_ms=last,
            pending_times_ms=tuple(self.job_sets),
        )
        self.step(f"checkpoint {time_ms}: last generated {last}, pending {self.job_sets}")

    def process_event(self) -> None:
        kind, time_ms = self.events.popleft()
        if kind == "generate":
            self.tracker.allocate_blocks_to_batch(time_ms)
            self.last_generated = (
                time_ms if self.last_generated is None else max(self.last_generated, time_ms)
            )
            self.job_sets.append(time_ms)
            self.jobs.append([time_ms, 0])
            self.step(f"allocated {time_ms}")
            self.events.append(("checkpoint", time_ms))
        elif kind == "checkpoint":
            self.write_checkpoint(time_ms)
        elif kind == "clear":
            self.write_checkpoint(time_ms)
            self.events.append(("cleanup", time_ms))
        elif kind == "cleanup":
            upto = self.max_completed
            assert upto is not None
            if self.job_sets:
                upto = min(upto, min(self.job_sets) - BATCH_MS)
            # ReceiverTracker.cleanup_old_blocks_and_batches: never past a pending batch.
            threshold = min([upto - BATCH_MS, *self.tracker.pending_batch_times()])
            if threshold < self.clock.now_ms:
                self.tracker.cleanup_old_batches(threshold, wait_for_completion=True)
                self.step(f"cleaned up to {threshold}")

    def progress_job(self) -> None:
        job = self.jobs[0]
        time_ms, stage = job
        if stage == 0:
            blocks = self.tracker.get_blocks_of_batch_and_stream(time_ms, STREAM)
            for info in blocks:
                self.survivors.delivered[info.block_id.unique_id].add(time_ms)
            job[1] = 1
            self.step(f"batch {time_ms} began with {[info.block_id.unique_id for info in blocks]}")
        else:
            self.step(f"batch {time_ms} ended")
            self.jobs.popleft()
            self.job_sets.remove(time_ms)
            self.step(f"job set {time_ms} done")
            self.tracker.mark_batch_completed(time_ms)
            self.max_completed = time_ms if self.max_completed is None else max(self.max_completed, time_ms)
            self.step(f"completed {time_ms}")
            self.events.append(("clear", time_ms))

    def add_block(self) -> None:
        info = block_info(STREAM)
        self.tracker.add_block(info)
        self.survivors.added.add(info.block_id.unique_id)
        self.step(f"added block {info.block_id.unique_id}")

    def live(self, next_batch: int, max_steps: int, *, receiving: bool = True, timer: bool = True) -> int:
        """Random steps; returns the time of the next batch the timer fires."""
        for _ in range(max_steps):
            if timer and self.clock.now_ms >= next_batch:
                self.events.append(("generate", next_batch))
                next_batch += BATCH_MS
            choice = self.rng.random()
            if choice < 0.35 and self.events:
                self.process_event()
            elif choice < 0.65 and self.jobs:
                self.progress_job()
            elif choice < 0.8 and receiving:
                self.add_block()
            else:
                self.clock.now_ms += self.rng.randrange(50, 700)
        return next_batch

    def drain(self, next_batch: int) -> None:
        """A graceful stop of the last run: receivers stopped, batches until every block is in
        one, then the timer stopped and every batch processed."""
        while self.tracker.has_unallocated_received_blocks():
            next_batch = self.live(next_batch, 10, receiving=False)
        while self.jobs or self.events:
            self.live(next_batch, 10, receiving=False, timer=False)


def kill_runs(checkpoint_dir: Path, seed: int, kills: int) -> Survivors:
    rng = random.Random(seed)
    clock = ManualClock(100_000)
    survivors = Survivors()
    for run in range(kills + 1):
        # The restart takes a while: on a new batch boundary or between two.
        clock.now_ms += rng.randrange(200, 6000)
        driver = DriverRun(checkpoint_dir, survivors, clock, rng, run)
        try:
            if run < kills and survivors.checkpoint is not None:
                # Often early: a restarted run killed before its own first checkpoint.
                driver.kill_after = rng.choice([rng.randrange(1, 8), rng.randrange(1, 80)])
            next_batch = driver.live(driver.start(), 80)
            if run == kills:
                driver.drain(next_batch)
            else:
                while survivors.checkpoint is None:
                    next_batch = driver.live(next_batch, 10)
        except Killed:
            survivors.trace.append(f"run {run} killed")
        finally:
            driver.tracker.stop()
    return survivors


@pytest.mark.parametrize("seed", range(40))
def test_no_block_runs_under_two_batch_times_or_is_lost_across_successive_kills(
    tmp_path: Path, seed: int
) -> None:
    survivors = kill_runs(tmp_path, seed, kills=4)

    twice = {block: sorted(times) for block, times in survivors.delivered.items() if len(times) > 1}
    lost = sorted(survivors.added - set(survivors.delivered))
    trace = "\n".join(survivors.trace)
    assert not twice, f"blocks run under two batch times {twice}:\n{trace}"
    assert not lost, f"blocks never run {lost}:\n{trace}"
