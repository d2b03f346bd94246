"""Every thread an RPC test starts (readers, workers, handshakes, accept loops) must end with it."""

from __future__ import annotations

import pytest

from reliable_kafka.rpc import new_secret
from tests.support.threads import no_thread_outlives_its_test

__all__ = ["no_thread_outlives_its_test", "secret"]


@pytest.fixture
def secret() -> bytes:
    return new_secret()
