"""A clean asked for while the interpreter exits (by a writer its owner never closed) is dropped with
one warning: ``concurrent.futures`` refuses new work then, and the error used to reach whatever
thread asked, every batch, until the process was killed (issue 14)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# atexit hooks run after concurrent.futures stopped taking work: the moment a forgotten timer hits.
CHILD = """
import atexit, logging, sys
from wal import FileBasedWriteAheadLog
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
log = FileBasedWriteAheadLog(sys.argv[1])
log.write(b"record", 1_000)
atexit.register(lambda: [log.clean(5_000, wait_for_completion=False) for _ in range(3)])
"""


def test_clean_during_interpreter_exit_is_dropped_with_one_warning(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "wal")], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "cannot schedule new futures" not in done.stderr
    assert done.stderr.count("cleaning refused, the interpreter is exiting") == 1, done.stderr
