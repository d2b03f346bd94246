"""Merge a run's test durations into ``tests/durations.json``, the order of a parallel run.

    python -m pytest ... --record-durations /tmp/run.json
    python -m tests.support.durations /tmp/run.json [more.json ...]

Each test's seconds (setup + call + teardown) replace what the file held for it; tests the run
did not include keep theirs, and tests no longer collected are dropped by ``--prune``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from tests.parallel_layout import DURATIONS_FILE, SELECT_EVERY_TEST

ROOT = Path(__file__).resolve().parents[2]


def collected_ids() -> set[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    listing = subprocess.run(
        [*command, *SELECT_EVERY_TEST],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return {line for line in listing.stdout.splitlines() if "::" in line}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("runs", nargs="+", type=Path, help="files written by --record-durations")
    parser.add_argument("--prune", action="store_true", help="drop the tests that are no longer collected")
    args = parser.parse_args(argv)
    merged: dict[str, float] = json.loads(DURATIONS_FILE.read_text()) if DURATIONS_FILE.exists() else {}
    for run in args.runs:
        merged.update(json.loads(run.read_text()))
    if args.prune:
        keep = collected_ids()
        merged = {node_id: seconds for node_id, seconds in merged.items() if node_id in keep}
    DURATIONS_FILE.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n")
    print(f"{DURATIONS_FILE}: {len(merged)} tests, {sum(merged.values()) / 60:.0f} test-minutes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
