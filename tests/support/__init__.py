"""What the tests share: waiting on a condition or an event under one liveness bound, a manual clock."""

from tests.support.clock import ManualClock
from tests.support.waiting import DEFAULT_TIMEOUT_S, wait_for_event, wait_until

__all__ = ["DEFAULT_TIMEOUT_S", "ManualClock", "wait_for_event", "wait_until"]
