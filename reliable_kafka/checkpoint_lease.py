"""The checkpoint lease: one driver at a time writes a checkpoint directory.

Two drivers on one checkpoint (a restart by mistake while the old driver still runs, a second YARN
attempt while a partitioned first one lives on) would both write the driver checkpoint and the
metadata log, and both run every batch. So ``StreamingContext.start()`` takes a lease on the
directory, renews it while the context runs and releases it on ``stop()``, and every batch, every
checkpoint and every metadata-log write first asks the lease whether it is still this driver's
(:meth:`check`).

The lease is a sequence of small JSON files, ``<checkpoint>/_lease/<sequence>.json`` (host, pid,
Spark application id, time of renewal: never a secret), each made by an exclusive create, so that
of two drivers creating the same number exactly one succeeds (``checkpoint_lease_files.py``: how
each store does it). The highest number says who holds the lease. In steps:

1. **take**: no file yet, or the highest one is marked released: create the next number. That
   number is this driver's *epoch*, the fencing token stamped on every checkpoint and
   metadata-log record it writes.
2. **renew**, every tenth of the timeout: create the next number again, unless that number or a
   higher one exists. Another driver creates one only to take the lease over: this driver lost
   it, refuses every write from then on and stops its context.
3. **fence**: a write goes ahead only while the lease is not lost and its last renewal *started*
   less than two thirds of the timeout ago on this process's monotonic clock. A challenger takes
   over only after seeing no renewal for the whole timeout on its own clock, so a driver that was
   paused (SIGSTOP, a long pause, cut off from the store) stops writing before another starts.
4. **release**, on a clean stop: create the next number marked released. The next driver takes
   the one after at once.

A driver starting on a lease held by another watches it:

- renewed meanwhile (a higher number appears): the holder lives, and ``start()`` fails naming it
  (:class:`CheckpointLeaseHeldError`);
- its holder's process is gone (same machine, same pid namespace: ``util/process_identity.py``),
  or its last renewal is more than twice the timeout old by its holder's clock, or it was not
  renewed for the whole timeout of watching: taken over, with one WARNING naming the old holder.

Limits: the fence is the driver's own check before each write, not the store's (neither HDFS nor S3
can refuse a write by token), so a write that passed the check and then took more than a third of
the timeout to land can land after a takeover. Driver hosts whose clocks are more than the timeout
apart can take a live holder's renewal time for an old one. Never delete ``_lease`` while a driver
may be running.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn, Protocol

from reliable_kafka.checkpoint_lease_files import LeaseFiles, file_name, lease_files
from reliable_kafka.util.clock import wall_clock_ms
from reliable_kafka.util.filesystems import FilesystemOptions
from reliable_kafka.util.plain_fields import int_field, optional_str_field, str_field
from reliable_kafka.util.process_identity import current_identity, is_gone
from wal.failure_log import FailureLog, mark_reported

logger = logging.getLogger(__name__)

FORMAT = "reliable-kafka-checkpoint-lease"
FORMAT_VERSION = 1
TIMEOUT_SETTING = "spark.streaming.checkpoint.leaseTimeout"
_RENEWALS_PER_TIMEOUT = 10
_POLLS_PER_RENEWAL = 2
# Writes are allowed for this fraction of the timeout after a renewal started; the rest is the
# margin for a write in flight when the check passed.
_VALID_FRACTION = 2 / 3
# After a failed renewal, the next one comes this soon (or at the interval, if shorter).
_RETRY_AFTER_FAILURE_S = 1.0
# A renewal older than this many timeouts by its holder's own clock is not watched for.
_STALE_BY_HOLDER_CLOCK = 2
_READ_ATTEMPTS = 5


class CheckpointLeaseError(RuntimeError):
    """Base of the lease's errors."""


class CheckpointLeaseHeldError(CheckpointLeaseError):
    """Another driver holds the checkpoint: ``start()`` refuses; the message names it."""

    def __init__(self, message: str, holder: LeaseRecord | None) -> None:
        super().__init__(message)
        self.holder = holder


class CheckpointLeaseLostError(CheckpointLeaseError):
    """This driver does not hold the checkpoint (any more, or for now): nothing is written."""


class WriteFence(Protocol):
    """What a writer of the checkpoint directory asks before each write."""

    def check(self) -> int:
        """The epoch to stamp on the write; raises :class:`CheckpointLeaseLostError` when the
        write must not happen."""
        ...


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One lease file: who holds the lease, since which epoch, renewed when (holder's wall clock)."""

    sequence: int
    epoch: int
    owner: str  # a random id of the holding lease, telling its files from another's
    host: str
    pid: int
    application_id: str | None
    renewed_at_ms: int
    process: str | None = None  # util.process_identity of the holder
    released: bool = False

    def to_bytes(self) -> bytes:
        document = {"format": FORMAT, "version": FORMAT_VERSION, **dataclasses.asdict(self)}
        return json.dumps(document, sort_keys=True).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> LeaseRecord:
        d = json.loads(data.decode("utf-8"))
        if not isinstance(d, Mapping) or d.get("format") != FORMAT or d.get("version") != FORMAT_VERSION:
            raise ValueError("not a checkpoint lease record of this version")
        return cls(
            sequence=int_field(d, "sequence"),
            epoch=int_field(d, "epoch"),
            owner=str_field(d, "owner"),
            host=str_field(d, "host"),
            pid=int_field(d, "pid"),
            application_id=optional_str_field(d, "application_id"),
            renewed_at_ms=int_field(d, "renewed_at_ms"),
            process=optional_str_field(d, "process"),
            released=d.get("released") is True,
        )

    def describe(self, now_ms: int) -> str:
        renewed = datetime.fromtimestamp(self.renewed_at_ms / 1000, tz=UTC).isoformat(timespec="seconds")
        return (
            f"host {self.host}, pid {self.pid}, application {self.application_id or '(unknown)'}, "
            f"epoch {self.epoch}, last renewed {renewed} ({(now_ms - self.renewed_at_ms) / 1000:.1f} s ago)"
        )


class LeaseClock(Protocol):
    """The lease's clocks: monotonic seconds for its bounds, wall milliseconds for its records."""

    def monotonic(self) -> float: ...

    def wall_ms(self) -> int: ...

    def sleep(self, seconds: float) -> None: ...


class SystemLeaseClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return wall_clock_ms()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class CheckpointLease:
    """A lease this driver holds (:meth:`acquire` takes one); a :class:`WriteFence`."""

    def __init__(
        self,
        directory: str,
        files: LeaseFiles,
        record: LeaseRecord,
        *,
        timeout_ms: int,
        clock: LeaseClock,
        renewal_started: float,
    ) -> None:
        self._directory = directory
        self._files = files
        self._record = record
        self._timeout_s = timeout_ms / 1000
        self._clock = clock
        self._lock = threading.Lock()
        self._renewal_started = renewal_started
        self._lost: CheckpointLeaseLostError | None = None
        self._released = False
        self._finished = threading.Event()
        self._thread: threading.Thread | None = None
        self._renew_failures = FailureLog(logger, f"renewing the lease on checkpoint {directory}")
        # Whether the fence has said, since the last renewal, that it refuses writes.
        self._lapse_reported = False

    # ------------------------------------------------------------ taking

    @classmethod
    def acquire(
        cls,
        directory: str,
        *,
        timeout_ms: int,
        application_id: str | None,
        options: FilesystemOptions | None = None,
        clock: LeaseClock | None = None,
    ) -> CheckpointLease:
        """Take the lease on the checkpoint ``directory``, waiting at most ``timeout_ms`` (plus a
        poll) to tell a dead holder from a live one; raises :class:`CheckpointLeaseHeldError`
        if another driver holds it."""
        clock = clock or SystemLeaseClock()
        files = lease_files(directory, options)
        # A store that fails to write (a full disk, an outage) fails the start only once it has
        # failed for the lease's timeout: a driver restarted into a passing fault rides it out,
        # as its checkpoint writes do.
        if not files.exclusive:
            logger.warning(
                "The lease on checkpoint %s is best effort: this store offers no exclusive create "
                "known to reliable-kafka, so two drivers started at the same moment may both run",
                directory,
            )
        failures = FailureLog(logger, f"taking the lease on checkpoint {directory}")
        deadline = clock.monotonic() + timeout_ms / 1000
        while True:
            try:
                return cls._acquire(directory, files, timeout_ms, application_id, clock)
            except OSError as exc:  # not CheckpointLeaseHeldError: a held lease is no store error
                if clock.monotonic() >= deadline:
                    raise
                failures.failed(exc, f"trying again until {timeout_ms / 1000:g} s have passed")
                clock.sleep(min(1.0, timeout_ms / 1000 / _RENEWALS_PER_TIMEOUT))

    @classmethod
    def _acquire(
        cls,
        directory: str,
        files: LeaseFiles,
        timeout_ms: int,
        application_id: str | None,
        clock: LeaseClock,
    ) -> CheckpointLease:
        files.prepare()
        owner = uuid.uuid4().hex
        watch = _HolderWatch(directory, timeout_ms / 1000, clock)
        while True:
            latest = _latest(files)
            reason = watch.why_free(latest)
            if reason is None:
                clock.sleep(watch.poll_s)
                continue
            sequence = 1 if latest is None else latest[0] + 1
            started = clock.monotonic()
            record = LeaseRecord(
                sequence=sequence,
                epoch=sequence,
                owner=owner,
                host=socket.gethostname(),
                pid=os.getpid(),
                application_id=application_id,
                renewed_at_ms=clock.wall_ms(),
                process=current_identity(),
            )
            if not files.create(sequence, record.to_bytes()) and not _is_ours(files, sequence, owner):
                # Another driver created the number first: it holds the lease now.
                winner = _record_at(files, sequence)
                raise CheckpointLeaseHeldError(
                    _held_message(directory, winner, sequence, timeout_ms, clock.wall_ms()), winner
                )
            lease = cls(directory, files, record, timeout_ms=timeout_ms, clock=clock, renewal_started=started)
            lease._announce(latest, reason)
            for old in [s for s in files.sequences() if s < sequence - 1]:
                lease._remove_quietly(old)
            return lease

    def _announce(self, latest: tuple[int, LeaseRecord | None] | None, reason: str) -> None:
        previous = None if latest is None else latest[1]
        if latest is None or (previous is not None and previous.released):
            logger.info("Took the lease on checkpoint %s (epoch %d, %s)", self._directory, self.epoch, reason)
            return
        who = _who(previous, latest[0], self._clock.wall_ms())
        logger.warning(
            "Took over the lease on checkpoint %s from %s: %s. This driver holds epoch %d; the old "
            "holder, should it still run, writes nothing more there",
            self._directory,
            who,
            reason,
            self.epoch,
        )

    # ------------------------------------------------------------ holding

    @property
    def epoch(self) -> int:
        return self._record.epoch

    @property
    def url(self) -> str:
        return self._directory

    @property
    def renewal_interval_s(self) -> float:
        return self._timeout_s / _RENEWALS_PER_TIMEOUT

    def check(self) -> int:
        """The fence (module docstring, step 3): this driver's epoch, or
        :class:`CheckpointLeaseLostError` if it must not write now."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
            if self._released:
                raise CheckpointLeaseLostError(
                    f"The lease on checkpoint {self._directory} was released (the context stopped): "
                    "nothing more is written there"
                )
            since = self._clock.monotonic() - self._renewal_started
            if since >= self._timeout_s * _VALID_FRACTION:
                refused = CheckpointLeaseLostError(
                    f"The lease on checkpoint {self._directory} was last renewed {since:.1f} s ago "
                    f"({TIMEOUT_SETTING} is {self._timeout_s:g} s): another driver may take it "
                    "over, so nothing is written there until a renewal succeeds"
                )
                if not self._renew_failures.failing and not self._lapse_reported:
                    # No renewal has failed yet: one hangs on a store that stopped answering, or
                    # the renewal thread got no CPU. The fence says it itself, once per lapse.
                    logger.warning("%s", refused)
                    self._lapse_reported = True
                # The renewals' lines or the one above report it: each writer refused meanwhile
                # says so in one line, not with a traceback and a line per retry.
                mark_reported(refused)
                raise refused
            return self._record.epoch

    def renew(self) -> None:
        """One renewal (step 2; the renewal thread's work, callable directly). Raises
        :class:`CheckpointLeaseLostError` once another driver holds the lease, and ``OSError``
        when the store fails (the lease stays good until the fence's bound)."""
        with self._lock:
            self._raise_if_over()
            current = self._record
        sequence = current.sequence + 1
        started = self._clock.monotonic()
        # Listed first: a successor's renewals remove the number it took over with, so a driver
        # waking from a long pause would otherwise create that number again, and write a file.
        present = self._files.sequences()
        higher = [s for s in present if s >= sequence]
        if higher and not (higher == [sequence] and _is_ours(self._files, sequence, current.owner)):
            self._lose(higher[-1])
        record = dataclasses.replace(current, sequence=sequence, renewed_at_ms=self._clock.wall_ms())
        created = self._files.create(sequence, record.to_bytes())
        if not created and not _is_ours(self._files, sequence, current.owner):
            self._lose(sequence)
        with self._lock:
            self._record = record
            if created:
                # An earlier attempt's file, found now, started at an unknown time: not counted.
                self._renewal_started = started
                self._lapse_reported = False
        # The one before stays (a starting driver may be reading it); older ones go, a stray one
        # that a paused driver's renewal landed late included.
        for old in present:
            if old < sequence - 1:
                self._remove_quietly(old)

    def start_renewing(self, on_lost: Callable[[CheckpointLeaseLostError], None]) -> None:
        """Renew on a daemon thread until :meth:`release`; ``on_lost`` hears (on that thread,
        once) that another driver took the lease over."""
        thread = threading.Thread(
            target=self._renew_until_released, args=(on_lost,), name="checkpoint-lease-renewal", daemon=True
        )
        self._thread = thread
        thread.start()

    def _renew_until_released(self, on_lost: Callable[[CheckpointLeaseLostError], None]) -> None:
        wait_s = self.renewal_interval_s
        while not self._finished.wait(wait_s):
            try:
                self.renew()
            except CheckpointLeaseLostError as lost:
                if not self._finished.is_set():
                    on_lost(lost)
                return
            except Exception as exc:
                self._renew_failures.failed(exc, f"it stays valid {self._valid_for():.1f} s more")
                # Soon, not an interval later: the fence's window runs from the last success, and
                # a store back from an outage must see a renewal before writers are refused. A
                # renewal attempt against a store that is down takes seconds of its client's own
                # retries; an interval on top of that closed the window after a 15 s outage.
                wait_s = min(self.renewal_interval_s, _RETRY_AFTER_FAILURE_S)
                continue
            self._renew_failures.succeeded()
            wait_s = self.renewal_interval_s

    def _valid_for(self) -> float:
        with self._lock:
            since = self._clock.monotonic() - self._renewal_started
        return max(0.0, self._timeout_s * _VALID_FRACTION - since)

    def release(self) -> None:
        """Stop renewing and refuse every write from now on; unless the lease was lost, mark it
        released in the store (step 4) so that the next driver takes it at once."""
        with self._lock:
            if self._released:
                return
            self._released = True
            lost = self._lost
        self._finished.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout_s)
            if thread.is_alive():
                logger.warning(
                    "The lease on checkpoint %s is not marked released: its renewal is stuck on the "
                    "store. The next driver takes it over once it expires",
                    self._directory,
                )
                return
        if lost is not None:
            return
        current = self._record
        sequence = current.sequence + 1
        record = dataclasses.replace(
            current, sequence=sequence, renewed_at_ms=self._clock.wall_ms(), released=True
        )
        if not self._files.create(sequence, record.to_bytes()) and not _is_ours(
            self._files, sequence, current.owner
        ):
            holder = _record_at(self._files, sequence)
            logger.warning(
                "The lease on checkpoint %s was taken over by %s before this driver released it",
                self._directory,
                _who(holder, sequence, self._clock.wall_ms()),
            )
            return
        self._remove_quietly(sequence - 2)
        self._remove_quietly(sequence - 1)
        logger.info("Released the lease on checkpoint %s (epoch %d)", self._directory, self.epoch)

    # ------------------------------------------------------------ internals

    def _raise_if_over(self) -> None:
        if self._lost is not None:
            raise self._lost
        if self._released:
            raise CheckpointLeaseLostError(f"The lease on checkpoint {self._directory} was released")

    def _lose(self, sequence: int) -> NoReturn:
        holder = _record_at(self._files, sequence)
        lost = CheckpointLeaseLostError(
            f"The lease on checkpoint {self._directory} was taken over by "
            f"{_who(holder, sequence, self._clock.wall_ms())}: this driver (epoch {self.epoch}) "
            "writes nothing more there and stops its streaming context"
        )
        with self._lock:
            if self._lost is None:
                self._lost = lost
            raise self._lost

    def _remove_quietly(self, sequence: int) -> None:
        """Old files are only clutter: a failure to remove one is not worth more than a line."""
        if sequence < 1:
            return
        try:
            self._files.remove(sequence)
        except OSError as exc:
            logger.debug(
                "Could not remove lease file %s in %s: %s", file_name(sequence), self._files.url, exc
            )


class _HolderWatch:
    """A starting driver's view of the lease's holder (the module docstring's list)."""

    def __init__(self, directory: str, timeout_s: float, clock: LeaseClock) -> None:
        self._directory = directory
        self._timeout_s = timeout_s
        self._clock = clock
        self._seen: tuple[int, float] | None = None  # the number watched, and since when
        self.poll_s = timeout_s / _RENEWALS_PER_TIMEOUT / _POLLS_PER_RENEWAL

    def why_free(self, latest: tuple[int, LeaseRecord | None] | None) -> str | None:
        """Why the lease may be taken now; None to keep watching; raises if a live driver holds it."""
        if latest is None:
            return "no driver held it before"
        sequence, record = latest
        now_ms = self._clock.wall_ms()
        if record is not None:
            at_once = self._free_at_once(record, now_ms)
            if at_once is not None:
                return at_once
        now = self._clock.monotonic()
        if self._seen is None:
            self._seen = (sequence, now)
            logger.info(
                "Checkpoint %s is leased to %s. Waiting up to %g s (%s) to see whether that driver "
                "lives: a live one renews its lease every %g s, a dead one's lease is taken over",
                self._directory,
                _who(record, sequence, now_ms),
                self._timeout_s,
                TIMEOUT_SETTING,
                self._timeout_s / _RENEWALS_PER_TIMEOUT,
            )
            return None
        if sequence != self._seen[0]:
            timeout_ms = int(self._timeout_s * 1000)
            raise CheckpointLeaseHeldError(
                _held_message(self._directory, record, sequence, timeout_ms, now_ms), record
            )
        if now - self._seen[1] >= self._timeout_s:
            return f"not renewed for {now - self._seen[1]:.1f} s ({TIMEOUT_SETTING})"
        return None

    def _free_at_once(self, record: LeaseRecord, now_ms: int) -> str | None:
        """Why the lease may be taken without watching its holder; None if it must be watched."""
        if record.released:
            return f"released by {record.describe(now_ms)}"
        if is_gone(record.process):
            return "its process is gone"
        age_ms = now_ms - record.renewed_at_ms
        if age_ms >= _STALE_BY_HOLDER_CLOCK * self._timeout_s * 1000:
            return f"not renewed for {age_ms / 1000:.1f} s by its own clock"
        return None


def _held_message(
    directory: str, holder: LeaseRecord | None, sequence: int, timeout_ms: int, now_ms: int
) -> str:
    return (
        f"Checkpoint {directory} is in use by another driver: {_who(holder, sequence, now_ms)}. Two "
        "drivers on one checkpoint would both write it and run every batch twice. Stop that driver "
        "(a clean stop releases the checkpoint at once), then start this one; if that driver is dead, "
        f"start this one again: a lease not renewed for {TIMEOUT_SETTING} ({timeout_ms / 1000:g} s) is "
        "taken over"
    )


def _who(record: LeaseRecord | None, sequence: int, now_ms: int) -> str:
    if record is None:
        return f"an unreadable or vanished lease record ({file_name(sequence)})"
    return record.describe(now_ms)


def _latest(files: LeaseFiles) -> tuple[int, LeaseRecord | None] | None:
    """The highest number and its record (None: unreadable); None when there is no file."""
    for _ in range(_READ_ATTEMPTS):
        sequences = files.sequences()
        if not sequences:
            return None
        data = files.read(sequences[-1])
        if data is not None:
            return sequences[-1], _parse(data, sequences[-1])
        # Removed between the listing and the read: list again.
    return sequences[-1], None


def _record_at(files: LeaseFiles, sequence: int) -> LeaseRecord | None:
    data = files.read(sequence)
    return None if data is None else _parse(data, sequence)


def _is_ours(files: LeaseFiles, sequence: int, owner: str) -> bool:
    """Whether the file exists as this lease's: a create whose answer was lost, then retried."""
    record = _record_at(files, sequence)
    return record is not None and record.owner == owner


def _parse(data: bytes, sequence: int) -> LeaseRecord | None:
    try:
        record = LeaseRecord.from_bytes(data)
    except (ValueError, UnicodeDecodeError):
        return None
    return record if record.sequence == sequence else None
