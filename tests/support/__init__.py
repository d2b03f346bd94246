"""What the tests share: waiting on a condition or an event under one liveness bound, a manual clock;
the fakes of the pieces around a receiver (receiver_fakes) and around the scheduler (scheduler_fakes),
the producer that waits for every ack (producing), the complete JSON lines a child wrote so far
(json_lines), and the check that no thread outlives its test (threads)."""

from tests.support.clock import ManualClock
from tests.support.json_lines import read_json_lines
from tests.support.waiting import DEFAULT_TIMEOUT_S, wait_for_event, wait_until

__all__ = ["DEFAULT_TIMEOUT_S", "ManualClock", "read_json_lines", "wait_for_event", "wait_until"]
