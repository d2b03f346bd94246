"""Every thread an RPC test starts (readers, workers, handshakes, accept loops) must end with it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from reliable_kafka.rpc import new_secret


@pytest.fixture(autouse=True)
def no_thread_outlives_its_test() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    # A liveness bound, not a speed check: closing wakes every thread at once.
    deadline = time.monotonic() + 15.0
    while (left := set(threading.enumerate()) - before) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not left, f"threads still running after the test: {sorted(t.name for t in left)}"


@pytest.fixture
def secret() -> bytes:
    return new_secret()
