"""What a fault campaign (benchmarks/chaos.py) saw and whether it kept its promises.

:class:`SinkWatcher` follows the application's sink file (tests/e2e/cluster_child.py's JSON lines)
while the campaign runs, so that each record's first and later deliveries carry the wall time at
which they became visible, and tells when processing resumed after a fault. :func:`audit` then
checks the run: no acknowledged message lost, at most one block per partition delivered again
per fault, committed offsets never moved backwards, every fault recovered within the bound.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.kill_harness import blocks_to_cover

# (partition, offset)
Position = tuple[int, int]


@dataclass
class Fault:
    """One injected fault. Once lifted (the server started again, the disk freed, the driver's
    replacement launched), it has recovered when every partition delivered a record the
    producer had not yet had acknowledged at that moment (past ``baseline``)."""

    kind: str
    at: float  # wall seconds, when the injection began
    detail: str = ""
    lifted_at: float | None = None
    baseline: dict[int, int] = field(default_factory=dict)  # partition -> highest acked offset
    recovered_at: float | None = None

    def recovery_s(self) -> float | None:
        if self.recovered_at is None or self.lifted_at is None:
            return None
        return self.recovered_at - self.lifted_at


@dataclass
class Delivery:
    batch: int  # batch time, ms
    seen_at: float  # wall seconds the campaign read it


class SinkWatcher(threading.Thread):
    """Tails the sink file; keeps every delivery, every block's ranges and the receivers' executors."""

    def __init__(self, path: Path, partitions: int, poll_s: float = 0.5) -> None:
        super().__init__(name="sink-watcher", daemon=True)
        self._path, self._partitions, self._poll_s = path, partitions, poll_s
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self.deliveries: dict[Position, list[Delivery]] = defaultdict(list)
        self.blocks: dict[int, set[tuple[int, int]]] = defaultdict(set)  # partition -> [from, until)
        self.highest: dict[int, int] = {}
        self.receiver_starts: list[tuple[float, str]] = []  # (wall time, executor id)
        self.job_errors: list[str] = []
        self.app_ids: list[str] = []
        self._pending: list[Fault] = []
        self._offset = 0
        self._partial = b""

    def run(self) -> None:
        while not self._stop_event.wait(self._poll_s):
            self.poll()

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.poll()

    def watch(self, fault: Fault) -> None:
        with self._lock:
            self._pending.append(fault)

    def receiver_executor(self, since: float) -> str | None:
        """The executor the receiver last started on, if it started after ``since``."""
        with self._lock:
            starts = [executor for at, executor in self.receiver_starts if at >= since]
        return starts[-1] if starts else None

    def delivered(self) -> set[Position]:
        with self._lock:
            return set(self.deliveries)

    def poll(self) -> None:
        try:
            with self._path.open("rb") as sink:
                sink.seek(self._offset)
                data = sink.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        now = time.time()
        with self._lock:
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line torn by a kill: its batch runs again
                self._take(entry, now)
            for fault in [f for f in self._pending if self._resumed_after(f)]:
                fault.recovered_at = now
                self._pending.remove(fault)

    def _take(self, entry: dict[str, Any], now: float) -> None:
        kind = entry.get("kind")
        if kind == "rec":
            p, o, batch = entry["p"], entry["o"], entry["batch"]
            seen = self.deliveries[(p, o)]
            if all(d.batch != batch for d in seen):  # a batch run again keeps its time
                seen.append(Delivery(batch, now))
            self.highest[p] = max(o, self.highest.get(p, -1))
        elif kind == "begin":
            for block in entry["blocks"]:
                for _topic, p, start, until in block["ranges"]:
                    self.blocks[p].add((start, until))
        elif kind == "receiver_started":
            self.receiver_starts.append((entry["time"], entry["executor_id"]))
        elif kind == "tracker" and entry.get("app_id"):
            self.app_ids.append(entry["app_id"])
        elif kind == "job_error":
            self.job_errors.append(str(entry.get("error", ""))[:300])

    def _resumed_after(self, fault: Fault) -> bool:
        return all(self.highest.get(p, -1) > fault.baseline.get(p, -1) for p in range(self._partitions))


@dataclass
class Audit:
    violations: list[str] = field(default_factory=list)
    duplicates_by_fault: dict[int, int] = field(default_factory=dict)  # fault index -> records
    superseded: set[int] = field(default_factory=set)  # hit again before recovering, in time
    lost: int = 0

    @property
    def passed(self) -> bool:
        return not self.violations


def superseded(faults: list[Fault], index: int, recovery_bound_s: float) -> bool:
    """The next fault came while this one was still within its bound, unrecovered: from then
    on the stream recovers from both, and the next one's bound is what holds."""
    if index + 1 >= len(faults):
        return False
    fault, following = faults[index], faults[index + 1]
    if fault.recovered_at is not None and fault.recovered_at <= following.at:
        return False  # it had recovered (late) before the next fault: no excuse
    return fault.lifted_at is None or following.at < fault.lifted_at + recovery_bound_s


def audit(
    watcher: SinkWatcher,
    acked: set[Position],
    faults: list[Fault],
    *,
    recovery_bound_s: float,
    offset_regressions: list[str],
    notes: list[str],
    leftovers: list[str],
) -> Audit:
    """``notes``: violations the campaign saw itself (an application that ended on its own)."""
    result = Audit()
    delivered = watcher.delivered()
    lost = sorted(acked - delivered)
    result.lost = len(lost)
    if lost:
        result.violations.append(f"{len(lost)} acknowledged messages never delivered, first {lost[:5]}")
    # Each later delivery of a record belongs to the last fault before the campaign saw it.
    again: dict[tuple[int, int], set[int]] = defaultdict(set)  # (fault, partition) -> offsets
    for (p, o), deliveries in watcher.deliveries.items():
        for delivery in deliveries[1:]:
            index = max((i for i, f in enumerate(faults) if f.at <= delivery.seen_at), default=-1)
            again[(index, p)].add(o)
    for (index, p), offsets in sorted(again.items()):
        result.duplicates_by_fault[index] = result.duplicates_by_fault.get(index, 0) + len(offsets)
        name = f"fault {index} ({faults[index].kind})" if index >= 0 else "before any fault"
        held_in = blocks_to_cover(offsets, sorted(watcher.blocks[p]))
        if index < 0 or held_in is None or held_in > 1:
            result.violations.append(
                f"{name}: partition {p} delivered {len(offsets)} records again "
                f"({min(offsets)}..{max(offsets)}), in {held_in} blocks"
            )
    result.violations.extend(offset_regressions)
    result.violations.extend(notes)
    for i, fault in enumerate(faults):
        recovery = fault.recovery_s()
        if recovery is not None and recovery <= recovery_bound_s:
            continue
        if superseded(faults, i, recovery_bound_s):
            result.superseded.add(i)
            continue
        took = "never resumed" if recovery is None else f"resumed after {recovery:.0f} s"
        result.violations.append(f"fault {i} ({fault.kind}, {fault.detail}): {took}")
    result.violations.extend(f"left behind: {what}" for what in leftovers)
    return result


def table(faults: list[Fault], result: Audit, seed: int, kinds: list[str]) -> str:
    """One row per kind: faults, those hit again before recovering (their recovery is the next
    one's), recovery p50/max of the others, records delivered again after them."""
    rows = [f"{'fault':<16} {'count':>5} {'hit again':>9} {'p50 s':>7} {'max s':>7} {'dups':>6}"]
    for kind in kinds:
        indices = [i for i, f in enumerate(faults) if f.kind == kind]
        timed = [i for i in indices if i not in result.superseded]
        times = [t for i in timed if (t := faults[i].recovery_s()) is not None]
        p50 = f"{statistics.median(times):.1f}" if times else "-"
        worst = f"{max(times):.1f}" if times else "-"
        if len(times) < len(timed):
            worst = "never"
        dups = sum(result.duplicates_by_fault.get(i, 0) for i in indices)
        hit_again = len(indices) - len(timed)
        rows.append(f"{kind:<16} {len(indices):>5} {hit_again:>9} {p50:>7} {worst:>7} {dups:>6}")
    total_dups = sum(result.duplicates_by_fault.values())
    rows.append(f"{'total':<16} {len(faults):>5} {len(result.superseded):>9}{'':>16} {total_dups:>6}")
    rows.append(f"seed {seed}; lost {result.lost}; {'PASS' if result.passed else 'FAIL'}")
    return "\n".join(rows)
