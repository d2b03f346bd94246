"""What the tests share: waiting on a condition or an event under one liveness bound."""

from tests.support.waiting import DEFAULT_TIMEOUT_S, wait_for_event, wait_until

__all__ = ["DEFAULT_TIMEOUT_S", "wait_for_event", "wait_until"]
