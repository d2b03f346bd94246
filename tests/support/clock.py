"""The tests' manual clock: util's ManualClock, also usable where the code takes ``now_ms``."""

from __future__ import annotations

from reliable_kafka.util.clock import ManualClock as _UtilManualClock


class ManualClock(_UtilManualClock):
    """Milliseconds that move only when told to.

    One clock for both seams of the code: a ``Clock`` (``get_time_ms``, ``wait_till_time``; the job
    generator, the streaming context) and a ``now_ms`` callable (the block trackers, the executor
    block store). ``now_ms`` reads and sets the time, as ``set_time`` does.
    """

    def __call__(self) -> int:
        return self.get_time_ms()

    @property
    def now_ms(self) -> int:
        return self.get_time_ms()

    @now_ms.setter
    def now_ms(self, time_ms: int) -> None:
        self.set_time(time_ms)
