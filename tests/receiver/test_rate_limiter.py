"""RateLimiter: Spark's update rules, the token bucket's schedule, and a measured rate."""

from __future__ import annotations

import time

from reliable_kafka.receiver import RateLimiter


class FakeTime:
    """Monotonic time that moves only when the limiter sleeps (or the test says so)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.now += seconds


def fake_limiter(max_rate: int | None, **kwargs: float) -> tuple[RateLimiter, FakeTime]:
    fake = FakeTime()
    return RateLimiter(max_rate, monotonic=fake.monotonic, sleep=fake.sleep, **kwargs), fake  # type: ignore[arg-type]


def test_rate_updates_below_the_max_apply_above_it_are_capped_and_zero_is_ignored() -> None:
    limiter = RateLimiter(1000)
    assert limiter.get_current_limit() == 1000
    limiter.update_rate(300)
    assert limiter.get_current_limit() == 300
    limiter.update_rate(5000)
    assert limiter.get_current_limit() == 1000
    limiter.update_rate(0)
    limiter.update_rate(-5)
    assert limiter.get_current_limit() == 1000


def test_without_a_max_the_limiter_is_unlimited_until_an_update() -> None:
    limiter, fake = fake_limiter(None)
    assert limiter.get_current_limit() is None
    limiter.acquire(1_000_000)
    assert fake.slept == 0
    limiter.update_rate(200)
    assert limiter.get_current_limit() == 200
    assert RateLimiter(0).get_current_limit() is None  # Spark: maxRate <= 0 means unlimited


def test_initial_rate_is_capped_by_the_max() -> None:
    assert RateLimiter(1000, initial_rate=100).get_current_limit() == 100
    assert RateLimiter(1000, initial_rate=5000).get_current_limit() == 1000
    assert RateLimiter(None, initial_rate=70).get_current_limit() == 70


def test_permits_are_spaced_one_interval_apart_and_the_first_is_free() -> None:
    limiter, fake = fake_limiter(100)
    for _ in range(101):
        limiter.acquire()
    # 101 permits at 100/s: the first at once, then one every 10 ms.
    assert abs(fake.slept - 1.0) < 1e-9


def test_idle_time_banks_at_most_one_second_of_permits() -> None:
    limiter, fake = fake_limiter(100)
    limiter.acquire()
    fake.now += 10.0  # idle for 10 s: only 1 s worth (100 permits) is banked
    start = fake.slept
    for _ in range(100):
        limiter.acquire()
    assert fake.slept == start
    limiter.acquire()  # pays for the free one
    limiter.acquire()
    assert abs(fake.slept - start - 0.01) < 1e-9


def test_an_update_applies_to_the_measured_rate() -> None:
    limiter = RateLimiter(10_000)
    limiter.update_rate(500)
    count, started = 0, time.monotonic()
    while time.monotonic() - started < 1.0:
        limiter.wait_to_push()
        count += 1
    # 1 s at 500/s: 500 paid-for permits plus the free first one.
    assert 475 <= count <= 526, count
