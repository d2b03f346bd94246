"""Run chosen tests many times in a row under the suite's parallel layout and count their passes.

    python -m tests.support.flake_loop [--runs 10] [--alongside 'COMMAND'] [TEST_ID ...] [-- PYTEST_ARGS]

Each round runs every chosen test once, together, under the parallel layout (``-n auto``: the
end-to-end tests spread over the workers), on every broker and Spark cluster its id names,
with a kill seed of its own (``RELIABLE_KAFKA_KILL_SEED``: the kill tests' schedules replay from
it). Without test ids it runs the watch list ``tests/support/flake_watch.txt``: every test that
failed in a CI run or a pre-check of the last rounds, and the slowest end-to-end tests.
``--alongside`` starts a command (another suite, say) for the whole loop, so the tests run on a
loaded machine: started again whenever it ends before the loop does, stopped at the end. It
prints, per test, passes out of runs and the seeds of the rounds it failed in, and exits 1 when
any test failed a round. A failed round's pytest output is kept (its path printed with the
round), so that a failure seen once can be read, not only counted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.parallel_layout import SELECT_EVERY_TEST

WATCH_LIST = Path(__file__).with_name("flake_watch.txt")
ROOT = Path(__file__).resolve().parents[2]
FAILED_ROUNDS = Path(tempfile.gettempdir()) / "reliable-kafka-flake-loop"


@dataclass
class Tally:
    passes: int = 0
    runs: int = 0
    failed_seeds: list[int] = field(default_factory=list)


def watch_list() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in WATCH_LIST.read_text().splitlines())
    return [line for line in lines if line]


def outcomes(junit_xml: Path) -> dict[str, bool]:
    """Each test's outcome in a round, by the name pytest's JUnit report gives it (module and
    test name): passed (or skipped) is True."""
    found: dict[str, bool] = {}
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        failed = any(child.tag in ("failure", "error") for child in case)
        found[name] = found.get(name, True) and not failed
    return found


def junit_name(test_id: str) -> str:
    """``tests/e2e/test_x.py::test_y[a]`` as the JUnit report names it: ``tests.e2e.test_x::test_y[a]``."""
    path, _, rest = test_id.partition("::")
    return f"{path.removesuffix('.py').replace('/', '.')}::{rest}"


class AlongsideLoad:
    """The ``--alongside`` command, kept running for the whole loop: a suite run beside the rounds
    ends long before ten of them do, and the rounds after it would run on a quiet machine."""

    def __init__(self, command: str) -> None:
        self._argv = shlex.split(command)
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def keep_running(self) -> None:
        if self._process is None or self._process.poll() is not None:
            # Its own session: stopping it stops whatever it started (pytest's workers, servers).
            self._process = subprocess.Popen(self._argv, cwd=ROOT, start_new_session=True)
            self.starts += 1

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            self._process.wait()


def run_round(
    test_ids: list[str], seed: int, pytest_args: list[str], work: Path
) -> tuple[dict[str, bool], str]:
    """Each test's outcome, and pytest's output."""
    report = work / f"round-{seed}.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "auto"]
    command += [*SELECT_EVERY_TEST, "--junitxml", str(report), *pytest_args, *test_ids]
    env = {**os.environ, "RELIABLE_KAFKA_KILL_SEED": str(seed)}
    completed = subprocess.run(command, cwd=ROOT, env=env, check=False, capture_output=True, text=True)
    if not report.exists():
        sys.exit(f"pytest wrote no report (exit {completed.returncode}):\n{completed.stdout[-4000:]}")
    return outcomes(report), completed.stdout + completed.stderr


def keep_output(seed: int, output: str) -> Path:
    FAILED_ROUNDS.mkdir(mode=0o700, exist_ok=True)
    path = FAILED_ROUNDS / f"round-{seed}.log"
    path.write_text(output)
    return path


def main(argv: list[str] | None = None) -> int:
    own_args = list(argv if argv is not None else sys.argv[1:])
    pytest_args: list[str] = []
    if "--" in own_args:  # what follows goes to pytest as it is
        cut = own_args.index("--")
        own_args, pytest_args = own_args[:cut], own_args[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("test_ids", nargs="*", help="pytest ids (default: tests/support/flake_watch.txt)")
    parser.add_argument("--runs", type=int, default=10, help="rounds, each running every test once (10)")
    parser.add_argument("--alongside", help="a command to run for the whole loop, to load the machine")
    parser.add_argument("--seed", type=int, help="the first round's kill seed (later ones follow from it)")
    args = parser.parse_args(own_args)
    test_ids = args.test_ids or watch_list()
    seeds = random.Random(args.seed).sample(range(1, 2**31), args.runs)
    load = AlongsideLoad(args.alongside) if args.alongside else None
    tallies: dict[str, Tally] = defaultdict(Tally)
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="reliable-kafka-flake-loop-") as work:
            for number, seed in enumerate(seeds, start=1):
                if load is not None:
                    load.keep_running()
                results, output = run_round(test_ids, seed, pytest_args, Path(work))
                for test_id in test_ids:
                    passed = results.get(junit_name(test_id))
                    tally = tallies[test_id]
                    tally.runs += 1
                    if passed:
                        tally.passes += 1
                    else:  # failed, or not run at all (a wrong id counts as a failure)
                        tally.failed_seeds.append(seed)
                failed = [t for t in test_ids if not results.get(junit_name(t))]
                elapsed = time.monotonic() - started
                kept = f", output in {keep_output(seed, output)}" if failed else ""
                print(
                    f"round {number}/{args.runs} (seed {seed}): {len(failed)} failed, {elapsed:.0f} s{kept}",
                    *(f"  failed: {t}" for t in failed),
                    sep="\n",
                    flush=True,
                )
    finally:
        if load is not None:
            load.stop()
            print(f"the command alongside started {load.starts} time(s)")
    print(f"\n{'passes':>7}  test (seeds of the failed rounds)")
    for test_id in test_ids:
        tally = tallies[test_id]
        seeds_text = f"  failed with seeds {tally.failed_seeds}" if tally.failed_seeds else ""
        print(f"{tally.passes:>3}/{tally.runs:<3}  {test_id}{seeds_text}")
    print(f"seeds: {json.dumps(seeds)}")
    return 0 if all(t.passes == t.runs for t in tallies.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
