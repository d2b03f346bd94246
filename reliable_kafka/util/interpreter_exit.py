"""Run a callback when the interpreter exits, before ``atexit``'s hooks.

The risk, named: ``threading._register_atexit`` is CPython's private hook (3.9 on), the one
``concurrent.futures`` itself uses to refuse new work at exit. It runs on the main thread once
the main module has finished, before ``atexit``'s hooks, while threads and executors still work.
Where it is missing (another interpreter, a future CPython), this falls back to ``atexit``,
whose hooks run later: after ``concurrent.futures`` refused new work, and after hooks registered
later than ours (every kazoo client registers one). ``tests/util/test_interpreter_exit.py``
checks the order on the interpreter CI runs.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable


def before_atexit(callback: Callable[[], None]) -> bool:
    """Registers ``callback``; True if it runs before ``atexit``'s hooks, False if it is one of them."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        atexit.register(callback)
        return False
    register(callback)
    return True
