"""Every thread a test starts must have ended when it ends: a stop joins what a start began.

``no_thread_outlives_its_test`` is an autouse fixture for the packages whose classes own threads
(receiver, rpc, storage, util); a package's conftest imports it to turn it on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support.waiting import wait_until

# A liveness bound, not a speed check: a stop wakes its threads at once, but a loaded machine
# (an RPC test's readers, workers and accept loops all ending together) may take seconds.
THREADS_END_WITHIN_S = 15.0


@pytest.fixture(autouse=True)
def no_thread_outlives_its_test() -> Iterator[None]:
    before = set(threading.enumerate())
    yield

    def left() -> set[threading.Thread]:
        return {thread for thread in threading.enumerate() if thread not in before and thread.is_alive()}

    try:
        wait_until(lambda: not left(), THREADS_END_WITHIN_S, "the test's threads to end")
    except AssertionError:
        raise AssertionError(
            f"threads still running after the test: {sorted(thread.name for thread in left())}"
        ) from None
