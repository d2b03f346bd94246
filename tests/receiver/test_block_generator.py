"""BlockGenerator: callbacks, block cutting, stop ordering, errors, rate limit (BEHAVIOURS.md,
"BlockGenerator and receiver")."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from reliable_kafka.receiver import (
    BlockGenerator,
    BlockGeneratorState,
    BlockGeneratorStateError,
    ManualClock,
    RateLimiter,
)
from reliable_kafka.storage import StreamBlockId, StreamBlockIdGenerator
from tests.support import wait_until
from tests.support.receiver_fakes import RecordingListener

INTERVAL_MS = 200


def manual_generator(listener: RecordingListener, **kwargs: Any) -> tuple[BlockGenerator, ManualClock]:
    """A generator whose timer only ticks when the test moves the clock."""
    clock = ManualClock(0)
    generator = BlockGenerator(listener, 0, block_interval_ms=INTERVAL_MS, clock=clock, **kwargs)
    return generator, clock


def test_no_callbacks_on_start_add_data_none_with_callback_once_per_item_multiple_once_per_call() -> None:
    listener = RecordingListener()
    generator, _ = manual_generator(listener)
    generator.start()
    assert listener.calls == []

    generator.add_data("a")
    generator.add_data("b")
    assert listener.calls == []

    generator.add_data_with_callback("c", {"offset": 1})
    generator.add_data_with_callback("d", {"offset": 2})
    assert listener.calls == [("add", "c", {"offset": 1}), ("add", "d", {"offset": 2})]

    generator.add_multiple_data_with_callback(iter(["e", "f", "g"]), {"offset": 5})
    assert listener.calls[2:] == [("add", ["e", "f", "g"], {"offset": 5})]
    generator.stop()
    assert listener.pushed_records() == list("abcdefg")


def test_one_block_interval_produces_on_generate_block_then_on_push_block_with_data_in_order() -> None:
    listener = RecordingListener()
    generator, clock = manual_generator(listener)
    generator.start()
    records = list(range(100))
    for record in records:
        generator.add_data(record)
    assert listener.calls == []  # nothing is cut before the interval ends

    clock.advance(INTERVAL_MS)
    wait_until(lambda: len(listener.pushed) == 1, what="the first block")
    (generate, block_id), (push, pushed_id, pushed) = listener.calls
    assert (generate, push) == ("generate", "push")
    assert isinstance(block_id, StreamBlockId) and block_id.stream_id == 0
    assert pushed_id == block_id
    assert pushed == records

    clock.advance(INTERVAL_MS)  # an interval without data makes no block
    generator.add_data("next")
    clock.advance(INTERVAL_MS)
    wait_until(lambda: len(listener.pushed) == 2, what="the second block")
    assert listener.pushed[1][1] == ["next"]
    assert listener.pushed[1][0] != block_id
    generator.stop()


def test_stop_refuses_new_data_then_cuts_and_pushes_a_final_block_then_reports_stopped() -> None:
    listener = RecordingListener()
    generator, _ = manual_generator(listener)
    seen_at_push: list[tuple[BlockGeneratorState, bool]] = []
    add_during_stop: list[BaseException] = []

    def on_push(block_id: StreamBlockId, records: list[Any]) -> None:
        seen_at_push.append((generator.state, generator.is_stopped()))
        try:
            generator.add_data("too late")
        except BlockGeneratorStateError as exc:
            add_during_stop.append(exc)

    listener.on_push = on_push
    generator.start()
    generator.add_data(1)
    generator.add_data_with_callback(2, None)
    generator.add_multiple_data_with_callback([3, 4], None)
    generator.stop()  # the manual clock never ticked: only stop cuts this block

    assert listener.names() == ["add", "add", "generate", "push"]
    assert listener.pushed_records() == [1, 2, 3, 4]
    # Data was refused before the final block was cut and pushed, and stopped came after the push.
    state_at_push, stopped_at_push = seen_at_push[0]
    assert state_at_push in (
        BlockGeneratorState.STOPPED_ADDING_DATA,
        BlockGeneratorState.STOPPED_GENERATING_BLOCKS,
    )
    assert not stopped_at_push
    assert len(add_during_stop) == 1
    assert generator.state is BlockGeneratorState.STOPPED_ALL and generator.is_stopped()


def test_after_stop_every_add_raises_and_a_second_stop_is_harmless() -> None:
    listener = RecordingListener()
    generator, _ = manual_generator(listener)
    generator.start()
    generator.add_data("only")
    generator.stop()
    calls = list(listener.calls)
    for add in (
        lambda: generator.add_data("x"),
        lambda: generator.add_data_with_callback("x", None),
        lambda: generator.add_multiple_data_with_callback(["x"], None),
    ):
        with pytest.raises(BlockGeneratorStateError, match="has not been started or has been stopped"):
            add()
    generator.stop()
    assert listener.calls == calls
    assert generator.is_stopped()
    with pytest.raises(BlockGeneratorStateError, match="not Initialized"):
        generator.start()


def test_adding_before_start_raises() -> None:
    generator, _ = manual_generator(RecordingListener())
    with pytest.raises(BlockGeneratorStateError, match="Initialized"):
        generator.add_data(1)


def test_errors_in_on_push_block_reach_on_error_and_later_blocks_are_still_pushed() -> None:
    listener = RecordingListener()
    listener.fail_push = lambda index: index == 0
    generator, clock = manual_generator(listener)
    generator.start()
    generator.add_data("first")
    clock.advance(INTERVAL_MS)
    wait_until(lambda: len(listener.errors) == 1, what="on_error")
    message, error = listener.errors[0]
    assert "Error pushing block input-0-" in message
    assert isinstance(error, RuntimeError) and "push 0 failed on purpose" in str(error)
    generator.add_data("second")
    generator.stop()
    assert [records for _, records in listener.pushed] == [["first"], ["second"]]


def test_errors_in_on_generate_block_reach_on_error_and_keep_the_data() -> None:
    listener = RecordingListener()
    failures = iter([True])

    def on_generate_block(block_id: StreamBlockId) -> None:
        if next(failures, False):
            raise RuntimeError("generate failed on purpose")
        listener.calls.append(("generate", block_id))

    listener.on_generate_block = on_generate_block  # type: ignore[method-assign]
    generator, clock = manual_generator(listener)
    generator.start()
    generator.add_data("kept")
    clock.advance(INTERVAL_MS)
    wait_until(lambda: len(listener.errors) == 1, what="on_error")
    assert "Error in block updating thread" in listener.errors[0][0]
    generator.stop()
    assert listener.pushed_records() == ["kept"]


def test_stop_called_from_the_push_thread_does_not_deadlock() -> None:
    listener = RecordingListener()
    generator, clock = manual_generator(listener)
    listener.on_push = lambda block_id, records: generator.stop()
    generator.start()
    generator.add_data(1)
    clock.advance(INTERVAL_MS)
    wait_until(generator.is_stopped, what="the generator to stop itself")
    generator.stop()  # from another thread: returns once stopped
    assert listener.pushed_records() == [1]


def test_generators_sharing_an_id_counter_never_reuse_an_id() -> None:
    ids = StreamBlockIdGenerator(0)
    listeners = [RecordingListener(), RecordingListener()]
    generators = [BlockGenerator(lst, 0, block_interval_ms=10, block_ids=ids) for lst in listeners]
    for generator in generators:
        generator.start()
    for n in range(50):
        for generator in generators:
            generator.add_data(n)
        time.sleep(0.002)
    for generator in generators:
        generator.stop()
    block_ids = [block_id for lst in listeners for block_id, _ in lst.pushed]
    assert len(block_ids) == len(set(block_ids)) > 2


def test_rate_limit_with_max_rate_r_keeps_throughput_within_5_percent_of_r() -> None:
    # Spark's "block generator throttling" test: R = 1000 records/s for 2 s, 100 ms blocks. On a
    # clock the test moves, so that neither the machine's load nor its scheduler decides the
    # count: the limiter's waits advance the time, and each block interval that ends meanwhile is
    # cut before the next record is added.
    max_rate, interval_ms, run_ms = 1000, 100, 2000
    listener = RecordingListener()
    clock = ManualClock(0)
    now_ms = [0.0]

    def sleep(seconds: float) -> None:
        target_ms = now_ms[0] + seconds * 1000
        while clock.get_time_ms() + interval_ms <= target_ms:
            blocks = len(listener.pushed)
            clock.advance(interval_ms)
            wait_until(
                lambda n=blocks: len(listener.pushed) > n, what=f"the block of {clock.get_time_ms()} ms"
            )
        now_ms[0] = target_ms

    limiter = RateLimiter(max_rate, monotonic=lambda: now_ms[0] / 1000, sleep=sleep)
    generator = BlockGenerator(
        listener, 0, block_interval_ms=interval_ms, max_rate=max_rate, clock=clock, rate_limiter=limiter
    )
    generator.start()
    assert generator.get_current_limit() == max_rate
    added = 0
    while now_ms[0] < run_ms and added < 10 * max_rate:  # an unlimited generator ends, and fails below
        generator.add_data(added)
        added += 1
    generator.stop()

    received = listener.pushed_records()
    assert received == list(range(added))
    expected = max_rate * run_ms / 1000
    assert expected * 0.95 <= len(received) <= expected * 1.05, len(received)
    # The first and last blocks are partial; the others average R * interval records.
    middle = [len(records) for _, records in listener.pushed[1:-1]]
    per_block = max_rate * interval_ms / 1000
    assert per_block * 0.95 <= sum(middle) / len(middle) <= per_block * 1.05, middle


def test_an_item_standing_for_many_records_takes_that_many_permits() -> None:
    class CountingLimiter(RateLimiter):
        def __init__(self) -> None:
            super().__init__(None)
            self.permits: list[int] = []

        def acquire(self, permits: int = 1) -> None:
            self.permits.append(permits)

    limiter = CountingLimiter()
    listener = RecordingListener()
    generator = BlockGenerator(listener, 0, rate_limiter=limiter)
    generator.start()
    generator.add_data_with_callback("a chunk of 200 records", "meta", 200)
    generator.add_data_with_callback("one record", "meta")
    generator.stop()
    assert limiter.permits == [200, 1]
    assert listener.pushed_records() == ["a chunk of 200 records", "one record"]


def test_update_rate_reaches_the_generators_limiter() -> None:
    generator = BlockGenerator(RecordingListener(), 0, max_rate=1000)
    generator.update_rate(100)
    assert generator.get_current_limit() == 100
    generator.update_rate(10_000)
    assert generator.get_current_limit() == 1000
    generator.update_rate(0)
    assert generator.get_current_limit() == 1000


def test_adds_from_many_threads_are_atomic_with_block_cutting() -> None:
    # Each multiple-add carries its last value as metadata; the listener's view of "last value
    # added" at each cut must equal the last record of that block.
    listener = RecordingListener()
    last_added: dict[int, int] = {}
    snapshot_at_cut: dict[StreamBlockId, dict[int, int]] = {}

    def on_add_data(data: Any, metadata: Any) -> None:
        last_added[metadata[0]] = metadata[1]

    def on_generate_block(block_id: StreamBlockId) -> None:
        snapshot_at_cut[block_id] = dict(last_added)

    listener.on_add_data = on_add_data  # type: ignore[method-assign]
    listener.on_generate_block = on_generate_block  # type: ignore[method-assign]
    generator = BlockGenerator(listener, 0, block_interval_ms=5)
    generator.start()

    def feed(thread: int) -> None:
        for n in range(0, 2000, 10):
            generator.add_multiple_data_with_callback([(thread, n + i) for i in range(10)], (thread, n + 9))

    threads = [threading.Thread(target=feed, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    generator.stop()

    seen: dict[int, int] = {}
    for block_id, records in listener.pushed:
        for thread, n in records:
            seen[thread] = n
        assert snapshot_at_cut[block_id] == seen
    assert seen == {t: 1999 for t in range(4)}


class PreparingListener(RecordingListener):
    """Prepares each block as a tuple, on whatever thread cuts it; ``fail_prepare`` makes it raise."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared_on: list[str] = []
        self.pushed_on: list[str] = []
        self.fail_prepare = False
        self.on_push = lambda block_id, records: self.pushed_on.append(threading.current_thread().name)

    def prepare_block(self, block_id: StreamBlockId, records: list[Any]) -> Any:
        self.prepared_on.append(threading.current_thread().name)
        if self.fail_prepare:
            raise ValueError("cannot prepare")
        return ("prepared", *records)


def test_prepare_block_runs_on_the_cutting_thread_and_its_result_is_what_is_pushed() -> None:
    listener = PreparingListener()
    generator, clock = manual_generator(listener)
    generator.start()
    generator.add_data_with_callback("a", 1)
    generator.add_data_with_callback("b", 2)
    clock.advance(INTERVAL_MS)
    wait_until(lambda: len(listener.pushed) == 1, what="the first block")
    generator.add_data("c")
    generator.stop()  # the last block is cut, and prepared, by the stopping thread
    assert [records for _, records in listener.pushed] == [["prepared", "a", "b"], ["prepared", "c"]]
    assert listener.prepared_on == ["BlockGenerator-0", threading.current_thread().name]
    assert listener.pushed_on == ["BlockGenerator-0-push"] * 2
    assert listener.errors == []


def test_a_failing_prepare_block_is_reported_and_the_records_are_pushed_as_they_are() -> None:
    listener = PreparingListener()
    listener.fail_prepare = True
    generator, clock = manual_generator(listener)
    generator.start()
    generator.add_data("a")
    clock.advance(INTERVAL_MS)
    wait_until(lambda: len(listener.pushed) == 1, what="the block")
    generator.stop()
    assert listener.pushed[0][1] == ["a"]
    assert [message for message, _ in listener.errors] == [
        f"Error preparing block {listener.pushed[0][0]}; pushing its records as they are"
    ]
    assert isinstance(listener.errors[0][1], ValueError)


def test_max_buffered_bytes_holds_adds_while_storing_stalls_then_lets_them_in_order() -> None:
    listener = RecordingListener()
    stored = threading.Event()  # the block store stalls until set
    listener.on_push = lambda block_id, records: stored.wait()
    generator, clock = manual_generator(listener, max_buffered_bytes=100, block_queue_size=1)
    generator.start()
    added: list[int] = []

    def add_all() -> None:
        for item in range(12):
            generator.add_data_with_callback(item, None, num_bytes=30)
            added.append(item)

    adder = threading.Thread(target=add_all, daemon=True)
    adder.start()
    wait_until(lambda: generator.adds_waiting == 1)
    assert added == [0, 1, 2]  # a fourth 30-byte item would pass 100 bytes
    assert generator.buffered_bytes == 90
    clock.advance(INTERVAL_MS)  # the cut block is stuck in the push: no room comes from cutting
    wait_until(lambda: len(listener.pushed) == 1)
    assert generator.adds_waiting == 1 and added == [0, 1, 2]
    stored.set()
    while adder.is_alive():
        clock.advance(INTERVAL_MS)
        adder.join(0.05)
    generator.stop()
    assert listener.pushed_records() == list(range(12))
    assert generator.buffered_bytes == 0


def test_an_add_larger_than_the_bound_goes_in_alone_and_stop_releases_a_waiting_add() -> None:
    listener = RecordingListener()
    generator, _ = manual_generator(listener, max_buffered_bytes=100)
    generator.start()
    generator.add_data_with_callback("big", None, num_bytes=500)  # nothing else buffered: in
    errors: list[BaseException] = []

    def add_one_more() -> None:
        try:
            generator.add_data_with_callback("late", None, num_bytes=10)
        except BlockGeneratorStateError as exc:
            errors.append(exc)

    adder = threading.Thread(target=add_one_more, daemon=True)
    adder.start()
    wait_until(lambda: generator.adds_waiting == 1)
    generator.stop()
    adder.join(10)
    assert not adder.is_alive()
    assert len(errors) == 1  # refused once adding stopped, never added after the final block
    assert listener.pushed_records() == ["big"]
