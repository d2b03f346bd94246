"""``util.interpreter_exit``: CPython's private exit hook, checked on the interpreter that runs us."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import atexit, concurrent.futures
from reliable_kafka.util.interpreter_exit import before_atexit

pool = concurrent.futures.ThreadPoolExecutor(1)

def ours():
    # Before atexit, and while executors still take work (what a graceful stop at exit needs).
    print("ours", pool.submit(lambda: "pool works").result(), flush=True)

atexit.register(lambda: print("atexit", flush=True))
print("before_atexit", before_atexit(ours), flush=True)
"""


def test_the_callback_runs_at_exit_before_atexit_while_executors_still_work() -> None:
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["before_atexit True", "ours pool works", "atexit"]
