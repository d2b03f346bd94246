"""The checkpoint lease (reliable_kafka/checkpoint_lease.py) on each store it runs on: a local
directory, the session's real HDFS (WebHDFS) and its real S3 store (SeaweedFS). The lease's clocks
are a fake that moves only when the lease waits, so "the holder renewed meanwhile" and "the
timeout passed" are steps of the test, not races; one test runs the real renewal thread.

BEHAVIOURS.md, round 4: "One driver per checkpoint: a second driver on a held checkpoint is refused
naming the holder; a driver that lost its lease writes nothing more; a dead holder's lease is taken
over within a bound." The drivers themselves (a child driver process refusing, paused, killed) are
in tests/e2e/test_checkpoint_lease.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import msgpack
import pytest

from reliable_kafka.checkpoint import Checkpoint, CheckpointWriter, read_checkpoint
from reliable_kafka.checkpoint_lease import (
    TIMEOUT_SETTING,
    CheckpointLease,
    CheckpointLeaseHeldError,
    CheckpointLeaseLostError,
)
from reliable_kafka.checkpoint_lease_files import LEASE_DIRECTORY, file_name, lease_files
from reliable_kafka.scheduler.driver_write_ahead_log import checkpoint_dir_to_log_dir
from reliable_kafka.scheduler.received_block_events import EVENT_MAGIC
from reliable_kafka.scheduler.received_block_tracker import ReceivedBlockTracker
from reliable_kafka.settings import WriteAheadLogSettings
from reliable_kafka.util.filesystems import FilesystemOptions, options_from_spark_conf
from reliable_kafka.util.wal_at import write_ahead_log_at
from tests.small_disk import small_tmpfs
from tests.support import wait_until
from tests.support.scheduler_fakes import block_info
from wal.failure_log import already_reported

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000
TIMEOUT_S = TIMEOUT_MS / 1000
REPO = Path(__file__).resolve().parents[2]


class FakeLeaseClock:
    """Moves only in :meth:`sleep` (the lease's wait while it watches a holder), or when told;
    ``on_sleep`` runs after each step: what other drivers do meanwhile."""

    def __init__(self) -> None:
        self.mono = 5_000.0
        self.wall = 1_900_000_000_000
        self.slept = 0.0
        self.on_sleep: list[Callable[[], None]] = []

    def monotonic(self) -> float:
        return self.mono

    def wall_ms(self) -> int:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += int(seconds * 1000)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        self.slept += seconds
        for step in self.on_sleep:
            step()


@dataclasses.dataclass
class Store:
    name: str
    checkpoint: str
    options: FilesystemOptions

    def acquire(self, clock: FakeLeaseClock | None = None, app: str = "app-1", **kwargs) -> CheckpointLease:
        return CheckpointLease.acquire(
            self.checkpoint,
            timeout_ms=kwargs.pop("timeout_ms", TIMEOUT_MS),
            application_id=app,
            options=self.options,
            clock=clock,
        )

    def sequences(self) -> list[int]:
        return lease_files(self.checkpoint, self.options).sequences()


@pytest.fixture(params=["local", "hdfs", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    run = f"lease-{uuid.uuid4().hex[:10]}"
    if request.param == "local":
        yield Store("local", str(tmp_path / run), FilesystemOptions())
    elif request.param == "hdfs":
        hdfs = request.getfixturevalue("local_hdfs")
        yield Store(
            "hdfs", f"{hdfs.url}/{run}", options_from_spark_conf(hdfs.spark_conf().items(), environ={})
        )
    else:
        s3 = request.getfixturevalue("local_s3")
        options = options_from_spark_conf(s3.spark_conf().items(), environ={})
        yield Store("s3", f"s3a://{s3.bucket}/{run}", options)


@pytest.fixture
def local(tmp_path: Path) -> Store:
    return Store("local", str(tmp_path / "checkpoint"), FilesystemOptions())


@pytest.fixture
def clock() -> FakeLeaseClock:
    return FakeLeaseClock()


def lease_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "reliable_kafka.checkpoint_lease" and r.levelno >= logging.WARNING
    ]


# ---------------------------------------------------------------- the store's exclusive create


def test_a_local_lease_number_appears_only_with_its_bytes_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver reading the lease while the holder renews it never finds the new number empty:
    with an ``O_EXCL`` create the number showed an empty file until the write, and a starting
    driver named "an unreadable or vanished lease record" instead of its holder (a parallel run)."""
    import reliable_kafka.checkpoint_lease_files as module

    files = lease_files(str(tmp_path / "checkpoint"))
    files.prepare()
    seen_while_writing: list[bytes | None] = []
    write_synced = module.write_synced

    def write_watched(fd: int, data: bytes) -> None:
        seen_while_writing.append(files.read(7))
        write_synced(fd, data)

    monkeypatch.setattr(module, "write_synced", write_watched)
    assert files.create(7, b"renewed")
    assert not files.create(7, b"another driver")
    assert seen_while_writing == [None, b"renewed"]
    assert files.read(7) == b"renewed"
    lease_directory = tmp_path / "checkpoint" / LEASE_DIRECTORY
    assert sorted(os.listdir(lease_directory)) == [file_name(7)]  # no name of a writer's own left
    assert (lease_directory / file_name(7)).stat().st_mode & 0o777 == 0o600


def test_of_drivers_creating_one_lease_number_at_once_exactly_one_succeeds(store: Store) -> None:
    files = lease_files(store.checkpoint, store.options)
    files.prepare()
    assert files.exclusive
    assert files.create(1, b"first")
    assert not files.create(1, b"second")
    assert files.read(1) == b"first"
    contenders = 4
    start = threading.Barrier(contenders)
    won: list[bytes] = []

    def contend(data: bytes) -> None:
        start.wait()
        if files.create(2, data):
            won.append(data)

    threads = [threading.Thread(target=contend, args=(f"driver-{i}".encode(),)) for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1, won
    assert files.read(2) == won[0]
    assert files.sequences() == [1, 2]  # nothing else, no temporary names left behind


# ---------------------------------------------------------------- taking, refusing, taking over


def test_a_second_driver_is_refused_naming_the_holder_while_it_renews(
    store: Store, clock: FakeLeaseClock
) -> None:
    holder = store.acquire(clock, app="app-holder")
    assert holder.epoch == 1
    # While the second driver watches, the holder renews, as a live driver's thread does.
    clock.on_sleep.append(holder.renew)
    with pytest.raises(CheckpointLeaseHeldError) as refused:
        store.acquire(clock, app="app-second")
    message = str(refused.value)
    for part in (f"pid {os.getpid()}", "application app-holder", "epoch 1", "last renewed", TIMEOUT_SETTING):
        assert part in message, message
    assert refused.value.holder is not None and refused.value.holder.application_id == "app-holder"
    assert clock.slept < TIMEOUT_S  # refused at the holder's first renewal, not after the bound
    assert store.sequences() == [1, 2]  # the refused driver created nothing
    assert holder.check() == 1


def test_a_lease_not_renewed_for_the_timeout_is_taken_over_and_its_holder_writes_nothing_more(
    store: Store, clock: FakeLeaseClock, caplog: pytest.LogCaptureFixture
) -> None:
    paused = store.acquire(clock, app="app-paused")
    caplog.set_level(logging.INFO, "reliable_kafka.checkpoint_lease")
    successor = store.acquire(clock, app="app-successor")
    # Taken over after watching for the timeout, and no longer than a poll after it.
    assert TIMEOUT_S <= clock.slept <= TIMEOUT_S * 1.1
    assert successor.epoch == 2 and successor.check() == 2
    (warning,) = lease_warnings(caplog)
    assert "Took over the lease" in warning and "application app-paused" in warning
    assert "not renewed for" in warning
    successor.renew()
    successor.renew()  # removes number 2, the one the paused driver would renew to
    assert store.sequences() == [3, 4]
    # The paused driver wakes: its fence refuses at once (the timeout passed on its clock too), and
    # its renewal finds higher numbers than its own.
    with pytest.raises(CheckpointLeaseLostError, match="last renewed"):
        paused.check()
    with pytest.raises(CheckpointLeaseLostError, match=r"taken over by .*application app-successor"):
        paused.renew()
    with pytest.raises(CheckpointLeaseLostError, match="taken over"):
        paused.check()
    paused.release()
    assert store.sequences() == [3, 4]  # the old holder wrote no lease file after the takeover
    assert successor.check() == 2


def test_a_released_lease_is_taken_at_once(store: Store, clock: FakeLeaseClock) -> None:
    first = store.acquire(clock)
    first.renew()
    first.release()
    with pytest.raises(CheckpointLeaseLostError, match="released"):
        first.check()
    second = store.acquire(clock)
    assert clock.slept == 0
    assert second.epoch == 4  # 1 taken, 2 renewed, 3 released
    assert store.sequences() == [3, 4]  # each holder cleans up behind it


def test_the_renewal_thread_keeps_a_second_driver_out_until_the_holder_stops(store: Store) -> None:
    """Real clocks and the real renewal thread, with a short timeout."""
    holder = store.acquire(app="app-holder", timeout_ms=2000)
    lost: list[BaseException] = []
    holder.start_renewing(lost.append)
    try:
        with pytest.raises(CheckpointLeaseHeldError, match="application app-holder"):
            store.acquire(app="app-second", timeout_ms=2000)
    finally:
        holder.release()
    second = store.acquire(app="app-second", timeout_ms=2000)
    assert second.epoch > holder.epoch
    second.release()
    assert lost == []


def test_a_failed_renewal_is_tried_again_within_a_second_not_an_interval_later(local: Store) -> None:
    """A store back from an outage must see a renewal before the fence's window (two thirds of the
    timeout from the last success) closes: the S3 outage test once had writers refused for want
    of a renewal that came an interval after the failed one. Timeout 60 s: an interval is 6 s."""
    holder = local.acquire(app="app-holder", timeout_ms=60_000)
    files = holder._files
    attempts: list[bool] = []
    create = files.create

    def fail_first(sequence: int, data: bytes) -> bool:
        attempts.append(True)
        if len(attempts) == 1:
            raise OSError(errno.ECONNREFUSED, "the store is down")
        return create(sequence, data)

    files.create = fail_first  # type: ignore[method-assign]
    holder.start_renewing(lambda lost: None)
    try:
        # The first attempt comes after an interval (6 s), its retry a second later; an
        # interval later (12 s) would be past this bound.
        wait_until(lambda: len(attempts) >= 2, timeout_s=10.5, what="the failed renewal's retry")
    finally:
        holder.release()
    assert holder.epoch >= 1


# ---------------------------------------------------------------- ways a holder is known dead


def test_a_lease_whose_holder_process_was_killed_is_taken_over_at_once(
    local: Store, clock: FakeLeaseClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A driver restarted on the host of a killed one does not wait for the timeout."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, threading; from reliable_kafka.checkpoint_lease import CheckpointLease; "
            "CheckpointLease.acquire(sys.argv[1], timeout_ms=60000, application_id='app-killed'); "
            "print('held', flush=True); threading.Event().wait()",
            local.checkpoint,
        ],
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        },
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    caplog.set_level(logging.INFO, "reliable_kafka.checkpoint_lease")
    successor = local.acquire(clock)
    assert clock.slept == 0 and successor.epoch == 2
    (warning,) = lease_warnings(caplog)
    assert "application app-killed" in warning and "its process is gone" in warning


def test_a_lease_last_renewed_long_ago_by_its_holders_clock_is_taken_over_without_watching(
    local: Store, clock: FakeLeaseClock, caplog: pytest.LogCaptureFixture
) -> None:
    local.acquire(clock, app="app-old")
    clock.advance(2 * TIMEOUT_S)  # this process lives on, so only the renewal's age tells
    caplog.set_level(logging.INFO, "reliable_kafka.checkpoint_lease")
    successor = local.acquire(clock)
    assert clock.slept == 0 and successor.epoch == 2
    assert "by its own clock" in lease_warnings(caplog)[0]


def test_an_unreadable_lease_record_is_watched_then_taken_over(
    local: Store, clock: FakeLeaseClock, caplog: pytest.LogCaptureFixture
) -> None:
    directory = Path(local.checkpoint) / LEASE_DIRECTORY
    directory.mkdir(parents=True)
    (directory / file_name(7)).write_bytes(b'{"torn')
    caplog.set_level(logging.INFO, "reliable_kafka.checkpoint_lease")
    lease = local.acquire(clock)
    assert clock.slept >= TIMEOUT_S and lease.epoch == 8
    assert "unreadable" in lease_warnings(caplog)[0]


# ---------------------------------------------------------------- the fence


def test_writes_are_allowed_for_two_thirds_of_the_timeout_after_a_renewal(
    local: Store, clock: FakeLeaseClock
) -> None:
    lease = local.acquire(clock)
    clock.advance(TIMEOUT_S * 0.6)
    assert lease.check() == 1
    clock.advance(TIMEOUT_S * 0.1)
    with pytest.raises(CheckpointLeaseLostError, match="until a renewal succeeds"):
        lease.check()
    lease.renew()  # nobody took it over meanwhile: good again
    assert lease.check() == 1


def test_a_lapse_with_no_failed_renewal_is_reported_once_and_its_refusals_as_reported(
    local: Store, clock: FakeLeaseClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A renewal that hangs on a store gone quiet has failed nothing yet: the fence reports the
    lapse itself, once, so the writers above log each refusal as a line at DEBUG (seen: the block
    tracker's "failed again" at WARNING on every retry of an S3 outage on a loaded machine)."""
    lease = local.acquire(clock)
    caplog.set_level(logging.DEBUG, "reliable_kafka.checkpoint_lease")
    clock.advance(TIMEOUT_S)
    refusals = []
    for _ in range(3):
        with pytest.raises(CheckpointLeaseLostError, match="until a renewal succeeds") as refused:
            lease.check()
        refusals.append(refused.value)
    assert all(already_reported(error) for error in refusals)
    assert len(lease_warnings(caplog)) == 1
    lease.renew()
    assert lease.check() == 1
    clock.advance(TIMEOUT_S)  # a second lapse is reported again
    with pytest.raises(CheckpointLeaseLostError):
        lease.check()
    assert len(lease_warnings(caplog)) == 2


def test_a_renewal_whose_answer_was_lost_is_known_as_ours(local: Store, clock: FakeLeaseClock) -> None:
    lease = local.acquire(clock)
    files = lease._files  # the store under the lease, made to fail once
    create = files.create

    def create_then_fail(sequence: int, data: bytes) -> bool:
        create(sequence, data)
        raise OSError("connection reset after the write landed")

    files.create = create_then_fail  # type: ignore[method-assign]
    with pytest.raises(OSError, match="connection reset"):
        lease.renew()
    files.create = create  # type: ignore[method-assign]
    lease.renew()  # finds number 2 there as its own: not lost
    assert local.sequences() == [1, 2]
    lease.renew()
    assert local.sequences() == [2, 3]
    assert lease.check() == 1


def test_checkpoint_and_metadata_log_writes_carry_the_epoch_and_stop_once_the_lease_is_lost(
    local: Store, clock: FakeLeaseClock
) -> None:
    lease = local.acquire(clock)
    checkpoint = Checkpoint(
        checkpoint_time_ms=3000,
        zero_time_ms=0,
        batch_duration_ms=1000,
        checkpoint_duration_ms=1000,
        last_generated_batch_time_ms=3000,
    )
    writer = CheckpointWriter(local.checkpoint, fence=lease)
    tracker = ReceivedBlockTracker.create(
        [0], local.checkpoint, WriteAheadLogSettings(driver_allow_batching=False, fsync=False), fence=lease
    )
    try:
        assert writer.write(checkpoint)
        assert tracker.add_block(block_info(0))
        assert read_checkpoint(local.checkpoint).lease_epoch == 1
        log = write_ahead_log_at(checkpoint_dir_to_log_dir(local.checkpoint))
        (record,) = list(log.read_all())
        assert msgpack.unpackb(record[len(EVENT_MAGIC) :], strict_map_key=False)["lease"] == 1
        metadata = Path(local.checkpoint) / "metadata"
        before = metadata.read_bytes()
        # Another driver takes over (the holder was paused for the timeout).
        successor = local.acquire(clock)
        assert not writer.write(dataclasses.replace(checkpoint, checkpoint_time_ms=4000))
        assert not tracker.add_block(block_info(0))
        assert metadata.read_bytes() == before
        assert len(list(log.read_all())) == 1
        assert successor.epoch == 2
        log.close()
    finally:
        tracker.stop()


def test_a_holder_that_loses_its_lease_hears_it_once_on_the_renewal_thread(local: Store) -> None:
    """A real renewal thread: paused (its store calls made to wait) while another driver takes the
    lease over, it reports the loss once and renews no more."""
    holder = local.acquire(app="app-holder", timeout_ms=1000)
    lost: list[CheckpointLeaseLostError] = []
    holder.start_renewing(lost.append)
    files = holder._files  # the store under the lease, made to stall
    resume = threading.Event()
    create = files.create

    def stalled_create(sequence: int, data: bytes) -> bool:
        resume.wait()
        return create(sequence, data)

    files.create = stalled_create  # type: ignore[method-assign]
    successor = local.acquire(app="app-successor", timeout_ms=1000)
    resume.set()
    wait_until(lambda: lost, what="the holder to hear of the takeover")
    (error,) = lost
    assert "application app-successor" in str(error)
    with pytest.raises(CheckpointLeaseLostError):
        holder.check()
    holder.release()
    assert successor.check() == successor.epoch
    successor.release()


def test_a_driver_started_onto_a_full_disk_takes_the_lease_once_it_has_room(tmp_path: Path) -> None:
    """A real full disk (a small tmpfs, filled): the start rides the fault out, as a driver
    restarted during a fault campaign's disk-full window must; past the timeout it fails."""
    with small_tmpfs(tmp_path / "disk", 1 << 20) as disk:
        checkpoint = disk / "checkpoint"
        checkpoint.mkdir()
        filler = disk / "filler"
        with filler.open("wb") as f, contextlib.suppress(OSError):
            f.write(b"\0" * (1 << 21))  # past the size: the disk is full
        clock = FakeLeaseClock()

        def free_after_three_attempts() -> None:
            if clock.slept >= 3 and filler.exists():
                filler.unlink()

        clock.on_sleep.append(free_after_three_attempts)
        lease = CheckpointLease.acquire(
            str(checkpoint), timeout_ms=TIMEOUT_MS, application_id="app", clock=clock
        )
        assert lease.epoch == 1 and clock.slept >= 3
        lease.release()

        with filler.open("wb") as f, contextlib.suppress(OSError):
            f.write(b"\0" * (1 << 21))
        stuck = FakeLeaseClock()
        with pytest.raises(OSError) as raised:
            CheckpointLease.acquire(
                str(disk / "other"), timeout_ms=TIMEOUT_MS, application_id="app", clock=stuck
            )
        assert raised.value.errno == errno.ENOSPC and stuck.slept >= TIMEOUT_S
