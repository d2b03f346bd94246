"""Receiver and ReceiverSupervisor life cycle (BEHAVIOURS.md, "BlockGenerator and receiver"),
against a real block manager, real threads, and an in-memory tracker."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.receiver import (
    ManualClock,
    ReceivedBlockHandler,
    ReceivedBlockStoreResult,
    Receiver,
    ReceiverSupervisor,
    ReceiverTrackerError,
    WriteAheadLogBasedBlockHandler,
)
from reliable_kafka.receiver.received_block import ReceivedBlock
from reliable_kafka.rpc.errors import ConnectionClosed
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage import BlockManager, StreamBlockId, decode_block, encode_block
from tests.support import wait_until
from tests.support.receiver_fakes import FakeTracker, RecordingListener, ThreadedReceiver


def make_settings(**receiver: Any) -> StreamingSettings:
    return StreamingSettings.from_spark_conf({}, receiver={"block_interval_ms": 20, **receiver})


def supervise(
    receiver: Receiver,
    tracker: FakeTracker | None = None,
    *,
    stream_id: int = 0,
    settings: StreamingSettings | None = None,
    **kwargs: Any,
) -> tuple[ReceiverSupervisor, FakeTracker, BlockManager]:
    receiver.set_receiver_id(stream_id)
    tracker = tracker or FakeTracker()
    manager = BlockManager()
    supervisor = ReceiverSupervisor(
        receiver, tracker, manager, settings=settings or make_settings(), **kwargs
    )
    return supervisor, tracker, manager


def stored_records(tracker: FakeTracker, manager: BlockManager) -> list[Any]:
    return [record for info in tracker.blocks for record in decode_block(manager.get(info.block_id))]


def test_receiver_every_store_variant_reaches_the_supervisor() -> None:
    receiver = ThreadedReceiver()
    supervisor, tracker, manager = supervise(receiver, executor_id="exec-1", host="worker-1")
    supervisor.start()
    assert tracker.events[0] == ("register", (0, "ThreadedReceiver", "worker-1", "exec-1"))
    assert receiver.is_started() and not receiver.is_stopped()

    receiver.store("single")
    receiver.store_many(["many-1", "many-2"], {"offsets": {"events-0": 2}})
    receiver.store_iterator(iter(["it-1", "it-2", "it-3"]))
    receiver.store_bytes(encode_block(["bytes-1"]), {"source": "raw"})
    receiver.store_bytes(encode_block(["bytes-2", "bytes-3"]), num_records=2)
    # The block stores are synchronous: reported before they return.
    assert [(info.num_records, info.metadata) for info in tracker.blocks] == [
        (2, {"offsets": {"events-0": 2}}),
        (3, None),
        (None, {"source": "raw"}),  # raw bytes of unknown count
        (2, None),
    ]
    wait_until(lambda: len(tracker.blocks) == 5, what="the single record's block")
    assert tracker.blocks[4].num_records == 1
    assert sorted(stored_records(tracker, manager)) == sorted(
        ["single", "many-1", "many-2", "it-1", "it-2", "it-3", "bytes-1", "bytes-2", "bytes-3"]
    )
    supervisor.stop("test over")
    assert receiver.is_stopped()


def test_store_bytes_stores_under_the_block_id_it_is_given() -> None:
    receiver = ThreadedReceiver()
    supervisor, tracker, manager = supervise(receiver)
    supervisor.start()
    data = encode_block(["retried"])
    for _ in range(2):  # a retry of the same block: same id, one copy
        receiver.store_bytes(data, None, 1, block_id=StreamBlockId(0, 1000))
    assert [info.block_id for info in tracker.blocks] == [StreamBlockId(0, 1000)] * 2
    assert manager.remove_blocks_older_than(2**62) == [StreamBlockId(0, 1000)]
    supervisor.stop("test over")


def test_receiver_restart_stops_then_starts_again_after_the_delay() -> None:
    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(receiver)
    supervisor.start()
    error = RuntimeError("connection lost")
    receiver.restart("source went away", error, delay_ms=100)
    wait_until(lambda: receiver.starts == 2, what="the second start")
    assert receiver.stops == 1 and receiver.is_started()
    names = tracker.event_names()
    assert names == ["register", "deregister", "register"]
    _, (stream_id, message, error_text) = tracker.events[1]
    assert stream_id == 0
    assert message == "Restarting receiver with delay 100ms: source went away"
    assert "RuntimeError: connection lost" in error_text
    supervisor.stop("test over")
    assert tracker.event_names()[-1] == "deregister"


class RestartWatchingClock(ManualClock):
    """Records the waits of the restart thread: (time when it began, time it waits for)."""

    def __init__(self, time_ms: int) -> None:
        super().__init__(time_ms)
        self.restart_waits: list[tuple[int, int]] = []

    def wait_till_time(self, target_ms: int, interrupt: threading.Event | None = None) -> int:
        if threading.current_thread().name.endswith("-restart"):
            self.restart_waits.append((self.get_time_ms(), target_ms))
        return super().wait_till_time(target_ms, interrupt)


def waiting_restart(
    start_ms: int, *, delay_ms: int
) -> tuple[ThreadedReceiver, RestartWatchingClock, ReceiverSupervisor, FakeTracker]:
    """A started supervisor whose receiver asked for a restart that now waits out its delay."""
    receiver = ThreadedReceiver()
    clock = RestartWatchingClock(start_ms)
    supervisor, tracker, _ = supervise(receiver, clock=clock)
    supervisor.start()
    receiver.restart("source went away", delay_ms=delay_ms)
    wait_until(lambda: bool(clock.restart_waits), what="the restart to wait")
    return receiver, clock, supervisor, tracker


def test_a_restart_waits_the_delay_on_the_supervisors_clock_before_starting_again() -> None:
    receiver, clock, supervisor, tracker = waiting_restart(1_000, delay_ms=2_000)
    assert clock.restart_waits == [(1_000, 3_000)]
    assert receiver.stops == 1 and receiver.starts == 1
    assert tracker.event_names() == ["register", "deregister"]
    clock.advance(1_999)
    assert receiver.starts == 1  # cannot start before the clock reaches the end of the delay
    clock.advance(1)
    wait_until(lambda: receiver.starts == 2, what="the start after the delay")
    assert tracker.event_names() == ["register", "deregister", "register"]
    supervisor.stop("test over")


def test_a_restart_waiting_out_its_delay_ends_when_the_supervisor_stops() -> None:
    receiver, _, supervisor, _ = waiting_restart(0, delay_ms=60_000)
    supervisor.stop("test over")  # joins the restart thread: the wait must end
    assert receiver.starts == 1 and supervisor.is_terminated()


def test_report_error_reaches_the_tracker_with_the_traceback() -> None:
    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(receiver)
    supervisor.start()
    try:
        raise ConnectionError("broker unreachable")
    except ConnectionError as exc:
        receiver.report_error("fetch failed", exc)
    receiver.report_error("no cause", None)
    (stream_id, message, error), second = tracker.errors
    assert (stream_id, message) == (0, "fetch failed")
    assert error.startswith("Traceback") and "ConnectionError: broker unreachable" in error
    assert second == (0, "no cause", "")
    assert receiver.is_started(), "reporting an error does not stop the receiver"
    supervisor.stop("test over")


def test_receiver_stop_joins_the_receiving_threads() -> None:
    finished: list[str] = []

    def body(receiver: ThreadedReceiver, stopping: threading.Event) -> None:
        while not stopping.wait(0.01):
            receiver.store(threading.current_thread().name)
        stopping.wait(0.05)  # ends a little after on_stop returned: stop must wait for it
        finished.append(threading.current_thread().name)

    receiver = ThreadedReceiver(body, num_threads=3)
    supervisor, tracker, manager = supervise(receiver)
    supervisor.start()
    wait_until(lambda: len(tracker.blocks) >= 1, what="some data")
    supervisor.stop("test over")
    assert sorted(finished) == ["receiving-0", "receiving-1", "receiving-2"]
    assert not any(thread.is_alive() for thread in receiver.threads)
    assert supervisor.await_termination(0)
    # Everything stored before the stop was flushed into blocks and reported.
    assert len(stored_records(tracker, manager)) > 0


def test_many_threads_storing_concurrently_lose_nothing() -> None:
    def body(receiver: ThreadedReceiver, stopping: threading.Event) -> None:
        name = threading.current_thread().name
        for n in range(1000):
            receiver.store(f"{name}/{n}")

    receiver = ThreadedReceiver(body, num_threads=10)
    supervisor, tracker, manager = supervise(receiver)
    supervisor.start()
    for thread in receiver.threads:
        thread.join()
    supervisor.stop("all stored")
    records = stored_records(tracker, manager)
    assert len(records) == 10_000
    assert set(records) == {f"receiving-{t}/{n}" for t in range(10) for n in range(1000)}
    assert sum(info.num_records or 0 for info in tracker.blocks) == 10_000


def test_many_threads_storing_blocks_concurrently_lose_nothing() -> None:
    def body(receiver: ThreadedReceiver, stopping: threading.Event) -> None:
        name = threading.current_thread().name
        for n in range(0, 1000, 50):
            receiver.store_many([f"{name}/{i}" for i in range(n, n + 50)])

    receiver = ThreadedReceiver(body, num_threads=10)
    supervisor, tracker, manager = supervise(receiver)
    supervisor.start()
    for thread in receiver.threads:
        thread.join()
    supervisor.stop("all stored")
    assert len(tracker.blocks) == 200
    assert len({info.block_id for info in tracker.blocks}) == 200
    assert len(set(stored_records(tracker, manager))) == 10_000


def test_a_receiving_thread_that_dies_restarts_the_receiver() -> None:
    def body(receiver: ThreadedReceiver, stopping: threading.Event) -> None:
        if receiver.starts == 1:
            raise OSError("socket closed")
        stopping.wait()

    receiver = ThreadedReceiver(body)
    supervisor, tracker, _ = supervise(receiver, settings=make_settings(restart_delay_ms=10))
    supervisor.start()
    wait_until(lambda: receiver.starts == 2, what="the restart")
    assert "OSError: socket closed" in tracker.events[1][1][2]
    supervisor.stop("test over")


def test_a_refused_registration_stops_the_supervisor() -> None:
    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(receiver, FakeTracker(accept_registration=False))
    supervisor.start()
    assert supervisor.await_termination(5)
    assert receiver.starts == 0 and not receiver.is_started()
    assert tracker.event_names() == ["register"]  # never started, so nothing to deregister


def test_a_failing_on_start_stops_with_the_error_and_await_termination_raises_it() -> None:
    class Broken(ThreadedReceiver):
        def on_start(self) -> None:
            raise ValueError("bad config")

    receiver = Broken()
    supervisor, tracker, _ = supervise(receiver)
    supervisor.start()
    with pytest.raises(ValueError, match="bad config"):
        supervisor.await_termination(5)
    assert tracker.event_names() == ["register", "deregister"]
    assert tracker.events[1][1][1] == "Error starting receiver 0"


def test_a_block_the_tracker_refuses_raises() -> None:
    receiver = ThreadedReceiver()
    supervisor, _, _ = supervise(receiver, FakeTracker(accept_blocks=False))
    supervisor.start()
    with pytest.raises(ReceiverTrackerError, match=r"Failed to add block input-0-\d+ to receiver tracker"):
        receiver.store_many([1])
    supervisor.stop("test over")


def test_storing_after_stop_raises_and_a_second_stop_is_harmless() -> None:
    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(receiver)
    supervisor.start()
    supervisor.stop("first")
    supervisor.stop("second")
    assert tracker.event_names() == ["register", "deregister"]
    with pytest.raises(RuntimeError, match="stopped"):
        receiver.store_many([1])
    with pytest.raises(RuntimeError, match="not been started or has been stopped"):
        receiver.store(1)


def test_control_messages_reach_every_block_generator_and_the_handler(tmp_path: Path) -> None:
    cleaned: list[int] = []

    class CountingHandler(ReceivedBlockHandler):
        def store_block(self, block_id: StreamBlockId, block: ReceivedBlock) -> ReceivedBlockStoreResult:
            return ReceivedBlockStoreResult(block_id, 0)

        def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
            cleaned.append(thresh_time_ms)

    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(
        receiver, settings=make_settings(max_rate=1000), received_block_handler=CountingHandler()
    )
    own = supervisor.create_block_generator(RecordingListener())
    supervisor.start()
    control = tracker.controls[0]
    control.update_rate_limit(300)
    assert supervisor.get_current_rate_limit() == 300 and own.get_current_limit() == 300
    control.update_rate_limit(5000)
    assert own.get_current_limit() == 1000
    later = supervisor.create_block_generator(RecordingListener())
    assert later.get_current_limit() == 1000  # a new generator starts at the latest rate
    control.cleanup_old_blocks(12345)
    assert cleaned == [12345]
    control.stop_receiver("Stopped by driver")
    assert supervisor.await_termination(5)
    assert own.is_stopped()
    assert tracker.events[-1][1][1] == "Stopped by driver"


def test_block_ids_are_unique_across_the_generators_of_a_stream() -> None:
    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(receiver, stream_id=4)
    listener = RecordingListener()
    listener.on_push = lambda block_id, records: supervisor.push_records(records, None, block_id)
    own = supervisor.create_block_generator(listener)
    supervisor.start()
    for n in range(200):
        receiver.store(n)
        own.add_data(n)
        if n % 50 == 0:
            receiver.store_many([n])
    supervisor.stop("test over")
    ids = [info.block_id for info in tracker.blocks]
    assert len(ids) == len(set(ids)) > 4
    assert {block_id.stream_id for block_id in ids} == {4}


def test_the_wal_is_used_when_enabled_and_needs_a_checkpoint_directory(tmp_path: Path) -> None:
    settings = StreamingSettings.from_spark_conf({}, wal={"enable": True, "fsync": False})
    with pytest.raises(
        ValueError, match="Cannot enable receiver write-ahead log without checkpoint directory"
    ):
        supervise(ThreadedReceiver(), settings=settings)

    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(
        receiver, settings=settings, checkpoint_dir=str(tmp_path), clock=ManualClock(7)
    )
    assert isinstance(supervisor.received_block_handler, WriteAheadLogBasedBlockHandler)
    supervisor.start()
    receiver.store_many(["durable"])
    handle = tracker.blocks[0].block_store_result.wal_record_handle
    assert handle is not None and handle.path.startswith(str(tmp_path / "receivedData" / "0"))
    supervisor.stop("test over")


def test_a_receiving_thread_may_stop_its_own_receiver() -> None:
    def body(receiver: ThreadedReceiver, stopping: threading.Event) -> None:
        receiver.store_many(["last words"])
        receiver.stop("source finished")

    receiver = ThreadedReceiver(body)
    supervisor, tracker, manager = supervise(receiver)
    supervisor.start()
    assert supervisor.await_termination(5)
    assert receiver.is_stopped()
    assert stored_records(tracker, manager) == ["last words"]
    assert tracker.events[-1][1][1] == "source finished"


def test_a_listener_may_stop_the_supervisor_from_its_generators_push_thread() -> None:
    # The reliable Kafka receiver stops itself from on_push_block when a block cannot be stored.
    receiver = ThreadedReceiver()
    supervisor, tracker, _ = supervise(receiver)
    listener = RecordingListener()
    own = supervisor.create_block_generator(listener)
    failure = OSError("disk full")
    listener.on_push = lambda block_id, records: receiver.stop("Error while storing block", failure)
    supervisor.start()
    own.add_data("doomed")
    with pytest.raises(OSError, match="disk full"):
        supervisor.await_termination(5)
    wait_until(own.is_stopped, what="the listener's generator to finish stopping")
    assert listener.pushed_records() == ["doomed"]
    assert "OSError: disk full" in tracker.events[-1][1][2]


def test_a_stopped_supervisor_cannot_be_started() -> None:
    receiver = ThreadedReceiver()
    supervisor, _, _ = supervise(receiver)
    supervisor.stop("never ran")
    with pytest.raises(RuntimeError, match="already started or stopped"):
        supervisor.start()
    assert receiver.starts == 0


def test_a_receiver_runs_again_under_a_new_supervisor_once_the_old_one_terminated() -> None:
    receiver = ThreadedReceiver()
    first, tracker, _ = supervise(receiver)
    first.start()
    with pytest.raises(RuntimeError, match="already has a running supervisor"):
        ReceiverSupervisor(receiver, tracker, BlockManager(), settings=make_settings())
    first.stop("relaunch")
    second = ReceiverSupervisor(receiver, tracker, BlockManager(), settings=make_settings())
    second.start()
    assert receiver.starts == 2 and receiver.is_started()
    second.stop("test over")


class OwnGeneratorReceiver(Receiver):
    """Buffers into a block generator of its own, as the Kafka receivers do."""

    def __init__(self, listener: RecordingListener) -> None:
        super().__init__("MEMORY_AND_DISK_SER")
        self.listener = listener
        self.generator: Any = None

    def on_start(self) -> None:
        self.generator = self.supervisor.create_block_generator(self.listener)
        self.generator.start()

    def on_stop(self) -> None:
        self.generator.stop()


def test_a_store_failure_stopping_the_receiver_during_a_restart_does_not_deadlock() -> None:
    # The restart's on_stop waits for the generator's push thread; the push thread's listener
    # fails to store the final block and stops the receiver, and that stop waits for the restart.
    listener = RecordingListener()
    receiver = OwnGeneratorReceiver(listener)
    failure = OSError("block store down")
    listener.on_push = lambda block_id, records: receiver.stop("Error while storing block", failure)
    # A manual clock cuts no block on a timer: the only block is the final one of the restart.
    supervisor, tracker, _ = supervise(receiver, clock=ManualClock())
    supervisor.start()
    receiver.generator.add_data("last")
    receiver.restart("source hiccup", delay_ms=0)
    with pytest.raises(OSError, match="block store down"):
        supervisor.await_termination(30)
    assert listener.pushed_records() == ["last"]
    assert receiver.is_stopped() and receiver.generator.is_stopped()
    assert tracker.event_names() == ["register", "deregister"]


class BlockingRegistrationTracker(FakeTracker):
    """Holds register_receiver (a round trip to the driver) until released."""

    def __init__(self) -> None:
        super().__init__()
        self.registering = threading.Event()
        self.release = threading.Event()

    def register_receiver(self, *args: Any) -> bool:
        self.registering.set()
        assert self.release.wait(30)
        return super().register_receiver(*args)


def test_a_stop_during_registration_is_seen_at_once_and_on_start_never_runs() -> None:
    receiver = ThreadedReceiver()
    tracker = BlockingRegistrationTracker()
    supervisor, _, _ = supervise(receiver, tracker)
    starter = threading.Thread(target=supervisor.start, name="test-starter")
    starter.start()
    assert tracker.registering.wait(5)
    stopper = threading.Thread(target=supervisor.stop, args=("stop while registering",), name="test-stopper")
    stopper.start()
    # Not behind the registration: the lifecycle lock is not held across it.
    wait_until(supervisor.is_stop_requested, what="the stop to be seen during the registration")
    tracker.release.set()
    starter.join(5)
    stopper.join(5)
    assert supervisor.await_termination(5)
    assert receiver.starts == 0 and receiver.stops == 0
    assert tracker.event_names() == ["register", "deregister"]  # the start path undid its register


def test_a_stop_during_on_start_is_seen_at_once_and_on_stop_runs_after_on_start_returned() -> None:
    entered, release = threading.Event(), threading.Event()
    calls: list[str] = []

    class SlowStart(ThreadedReceiver):
        def on_start(self) -> None:
            entered.set()
            assert release.wait(30)
            super().on_start()
            calls.append("on_start returned")

        def on_stop(self) -> None:
            calls.append("on_stop")
            super().on_stop()

    receiver = SlowStart()
    supervisor, tracker, _ = supervise(receiver)
    starter = threading.Thread(target=supervisor.start, name="test-starter")
    starter.start()
    assert entered.wait(5)
    stopper = threading.Thread(target=supervisor.stop, args=("stop while starting",), name="test-stopper")
    stopper.start()
    wait_until(supervisor.is_stop_requested, what="the stop to be seen during on_start")
    receiver.restart("asked meanwhile")  # dropped: the supervisor is stopping
    release.set()
    starter.join(5)
    stopper.join(5)
    assert supervisor.await_termination(5)
    assert calls == ["on_start returned", "on_stop"]
    assert tracker.event_names() == ["register", "deregister"]
    assert receiver.starts == 1


def test_on_start_may_stop_its_own_receiver() -> None:
    class GivesUp(ThreadedReceiver):
        def on_start(self) -> None:
            super().on_start()
            self.stop("nothing to read")

    receiver = GivesUp()
    supervisor, tracker, _ = supervise(receiver)
    supervisor.start()
    assert supervisor.await_termination(5)
    assert receiver.stops == 1
    assert tracker.event_names() == ["register", "deregister"]


class GoneTracker(FakeTracker):
    """The driver went away: its tracker's connection is closed (executor placement)."""

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        raise ConnectionClosed("connection closed by 192.0.2.2:40000")


def test_a_deregistration_the_gone_driver_cannot_take_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    supervisor, _, _ = supervise(ThreadedReceiver(), GoneTracker())
    supervisor.start()
    with caplog.at_level(logging.INFO, logger="reliable_kafka.receiver.receiver_supervisor"):
        supervisor.stop("the tracker connection was lost")
    (line,) = [r for r in caplog.records if r.getMessage().startswith("Could not deregister")]
    assert line.getMessage() == "Could not deregister receiver 0: connection closed by 192.0.2.2:40000"
    assert line.exc_info is None  # its loss was logged when it happened; no stack of ours for it
    assert supervisor.is_terminated()
