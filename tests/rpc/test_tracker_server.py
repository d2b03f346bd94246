"""The tracker seam over the socket: a driver-side server in front of a recording tracker, and
the executor-side endpoint (alone, and under a real ReceiverSupervisor)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reliable_kafka.receiver import ReceiverControl, ReceiverSupervisor, ReceiverTrackerEndpoint
from reliable_kafka.receiver.remote_tracker import RemoteTrackerEndpoint
from reliable_kafka.receiver.tracker_endpoint import (
    BlockLocation,
    ReceivedBlockInfo,
    ReceivedBlockStoreResult,
)
from reliable_kafka.rpc import ConnectionClosed, RemoteError
from reliable_kafka.scheduler.tracker_server import ReceiverTrackerServer, RemoteReceiverControl
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage import StreamBlockId
from reliable_kafka.storage.block_manager import BlockManager
from tests.rpc.helpers import PATIENCE_S
from tests.support import wait_for_event, wait_until
from tests.support.receiver_fakes import FakeTracker, ThreadedReceiver
from wal import RecordHandle


class RecordingControl:
    """The executor side's ReceiverControl: remembers every message from the tracker."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def _record(self, name: str, value: Any) -> None:
        with self.lock:
            self.messages.append((name, value))

    def update_rate_limit(self, rate: int) -> None:
        self._record("update_rate_limit", rate)

    def stop_receiver(self, message: str) -> None:
        self._record("stop_receiver", message)

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        self._record("cleanup_old_blocks", thresh_time_ms)

    def remove_blocks(self, block_ids: list[str]) -> None:
        self._record("remove_blocks", block_ids)

    def received(self) -> list[tuple[str, Any]]:
        with self.lock:
            return list(self.messages)


@pytest.fixture
def tracker() -> FakeTracker:
    return FakeTracker()


@pytest.fixture
def server(tracker: FakeTracker, secret: bytes) -> Iterator[ReceiverTrackerServer]:
    server = ReceiverTrackerServer(tracker, secret).start()
    yield server
    server.stop()


def endpoint_to(server: ReceiverTrackerServer, secret: bytes, **kwargs: Any) -> RemoteTrackerEndpoint:
    return RemoteTrackerEndpoint.connect(*server.address, secret, **kwargs)


def block_info(stream_id: int, unique_id: int) -> ReceivedBlockInfo:
    handle = RecordHandle(f"/checkpoint/receivedData/{stream_id}/log-1-2", unique_id * 100, 99)
    result = ReceivedBlockStoreResult(StreamBlockId(stream_id, unique_id), 10, handle)
    return ReceivedBlockInfo(stream_id, 10, {"offset_ranges": [["events", 0, 5, 15]]}, result)


def lost_deregistrations(tracker: FakeTracker) -> list[tuple[int, str, str]]:
    with tracker.lock:
        return [args for name, args in tracker.events if name == "deregister" and "Lost" in args[1]]


def test_the_remote_endpoint_satisfies_the_seam_and_the_proxy_the_control_protocol() -> None:
    assert issubclass(RemoteTrackerEndpoint, ReceiverTrackerEndpoint)
    assert issubclass(RemoteReceiverControl, ReceiverControl)
    assert issubclass(RecordingControl, ReceiverControl)


def test_every_call_reaches_the_tracker_and_every_control_message_the_receiver(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes
) -> None:
    lost: list[BaseException | None] = []
    endpoint = endpoint_to(server, secret, block_server=("exec-host", 4040), on_lost=lost.append)
    control = RecordingControl()
    try:
        assert endpoint.register_receiver(1, "KafkaReceiver", "exec-host", "7", control)
        assert tracker.events == [("register", (1, "KafkaReceiver", "exec-host", "7"))]
        assert server.block_server_of(1) == ("exec-host", 4040)
        assert server.registered_stream_ids() == [1]

        infos = [block_info(1, n) for n in range(3)]
        assert all(endpoint.add_block(info) for info in infos)
        assert tracker.blocks == infos  # equal after the round trip, WAL handles included

        endpoint.report_error(1, "partition 3 fell behind", "Traceback ...")
        assert tracker.errors == [(1, "partition 3 fell behind", "Traceback ...")]

        [proxy] = tracker.controls
        assert isinstance(proxy, RemoteReceiverControl)
        proxy.update_rate_limit(500)
        proxy.cleanup_old_blocks(1_700_000_000_000)
        proxy.remove_blocks(["input-1-0", "input-1-1"])
        proxy.stop_receiver("Stopped by driver")
        wait_until(lambda: len(control.received()) == 4, what="four control messages")
        assert control.received() == [
            ("update_rate_limit", 500),
            ("cleanup_old_blocks", 1_700_000_000_000),
            ("remove_blocks", ["input-1-0", "input-1-1"]),
            ("stop_receiver", "Stopped by driver"),
        ]

        assert endpoint.deregister_receiver(1, "Stopped by driver", "")
        assert tracker.events[-1] == ("deregister", (1, "Stopped by driver", ""))
        assert server.block_server_of(1) is None
    finally:
        endpoint.close()
    endpoint.connection.join(PATIENCE_S)
    wait_until(lambda: not server.connections(), what="the server to drop the connection")
    assert lost_deregistrations(tracker) == []  # it had deregistered itself
    assert lost == []  # closed on purpose


def test_a_refused_registration_keeps_no_control(secret: bytes) -> None:
    tracker = FakeTracker(accept_registration=False)
    server = ReceiverTrackerServer(tracker, secret).start()
    endpoint = endpoint_to(server, secret)
    control = RecordingControl()
    try:
        assert not endpoint.register_receiver(2, "KafkaReceiver", "h", "1", control)
        assert server.registered_stream_ids() == []
        tracker.controls[0].update_rate_limit(5)  # reaches the executor, which ignores it
    finally:
        endpoint.close()
        server.stop()
    assert control.received() == []


@pytest.mark.parametrize(
    ("method", "body", "error"),
    [
        ("register_receiver", {"stream_id": "1"}, "ValueError"),
        ("register_receiver", [1, 2], "ValueError"),
        (
            "register_receiver",
            {
                "stream_id": 1,
                "receiver_type": "R",
                "host": "h",
                "executor_id": "e",
                "block_server": {"host": 1},
            },
            "ValueError",
        ),
        ("add_block", {"stream_id": 1}, "ValueError"),
        ("add_block", None, "ValueError"),
        ("add_block", {**block_info(1, 1).to_dict(), "num_records": True}, "ValueError"),
        ("report_error", {"stream_id": 1, "message": "m"}, "ValueError"),
        ("deregister_receiver", {"stream_id": -1, "message": "m", "error": ""}, "ValueError"),
        ("deregister_receiver", {"stream_id": 1, "message": "m", "error": "", "fatal": 1}, "ValueError"),
        ("shutdown_driver", {}, "LookupError"),
    ],
)
def test_malformed_bodies_are_answered_with_remote_errors(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes, method: str, body: Any, error: str
) -> None:
    endpoint = endpoint_to(server, secret)
    try:
        with pytest.raises(RemoteError) as info:
            endpoint.connection.call(method, body)
        assert info.value.type_name == error
        assert tracker.events == []
        assert endpoint.add_block(block_info(1, 1))  # the connection and server serve on
    finally:
        endpoint.close()


def test_a_deregistration_that_ends_the_stream_says_so_across_the_wire(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes
) -> None:
    endpoint = endpoint_to(server, secret)
    try:
        assert endpoint.register_receiver(2, "KafkaReceiver", "h", "e", RecordingControl())
        assert endpoint.deregister_receiver(2, "restarting", "Traceback ...\nOSError: gone")
        assert endpoint.register_receiver(5, "KafkaReceiver", "h", "e", RecordingControl())
        assert endpoint.deregister_receiver(5, "topic missing", "Traceback ...", fatal=True)
    finally:
        endpoint.close()
    assert tracker.fatal == [(5, "topic missing", "Traceback ...")]


def test_a_lost_receiver_connection_deregisters_once_and_fires_on_lost(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes
) -> None:
    lost = threading.Event()
    causes: list[BaseException | None] = []

    def on_lost(cause: BaseException | None) -> None:
        causes.append(cause)
        lost.set()

    endpoint = endpoint_to(server, secret, on_lost=on_lost)
    assert endpoint.register_receiver(3, "KafkaReceiver", "h", "e", RecordingControl())
    [driver_side] = server.connections()
    driver_side.close()  # as if the network between them broke

    wait_for_event(lost, what="the executor side to notice")
    wait_until(lambda: lost_deregistrations(tracker), what="the driver side to deregister")
    [(stream_id, message, error)] = lost_deregistrations(tracker)
    assert stream_id == 3
    assert message.startswith("Lost connection to the receiver on 127.0.0.1:")
    assert error == ""
    assert len(causes) == 1
    assert isinstance(causes[0], ConnectionClosed | OSError)
    with pytest.raises(ConnectionClosed):
        endpoint.add_block(block_info(3, 1))
    endpoint.close()
    endpoint.connection.join(PATIENCE_S)
    assert len(lost_deregistrations(tracker)) == 1
    assert server.block_server_of(3) is None


def test_an_executor_that_goes_away_is_deregistered_by_the_driver(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes
) -> None:
    endpoint = endpoint_to(server, secret)
    assert endpoint.register_receiver(4, "KafkaReceiver", "h", "e", RecordingControl())
    assert endpoint.register_receiver(5, "KafkaReceiver", "h", "e", RecordingControl())
    endpoint.close()  # the executor's process ends without deregistering
    wait_until(lambda: len(lost_deregistrations(tracker)) == 2, what="both receivers to be deregistered")
    assert sorted(sid for sid, _, _ in lost_deregistrations(tracker)) == [4, 5]


def test_a_relaunched_receiver_is_not_deregistered_by_its_stale_predecessor(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes
) -> None:
    old = endpoint_to(server, secret, block_server=("old-host", 1))
    new = endpoint_to(server, secret, block_server=("new-host", 2))
    try:
        assert old.register_receiver(6, "KafkaReceiver", "old-host", "1", RecordingControl())
        assert new.register_receiver(6, "KafkaReceiver", "new-host", "2", RecordingControl())
        assert server.block_server_of(6) == ("new-host", 2)
        assert old.deregister_receiver(6, "late stop of the old one", "")
        old.close()
        old.connection.join(PATIENCE_S)
        assert new.add_block(block_info(6, 1))  # a call after the old connection's close was handled
        wait_until(lambda: len(server.connections()) == 1, what="the server to drop the old connection")
        assert [name for name in tracker.event_names() if name == "deregister"] == []
        assert server.block_server_of(6) == ("new-host", 2)
    finally:
        new.close()
    wait_until(lambda: lost_deregistrations(tracker), what="the new one's loss")
    assert [sid for sid, _, _ in lost_deregistrations(tracker)] == [6]


def test_stopping_the_server_deregisters_nothing_but_tells_the_receiver(
    tracker: FakeTracker, secret: bytes
) -> None:
    server = ReceiverTrackerServer(tracker, secret).start()
    lost = threading.Event()
    endpoint = endpoint_to(server, secret, on_lost=lambda cause: lost.set())
    assert endpoint.register_receiver(7, "KafkaReceiver", "h", "e", RecordingControl())
    server.stop()
    wait_for_event(lost, what="the receiver to learn that the driver is gone")
    endpoint.close()
    endpoint.connection.join(PATIENCE_S)
    assert tracker.event_names() == ["register"]


def test_a_real_supervisor_runs_over_the_socket_and_stops_on_the_drivers_word(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes
) -> None:
    """The driver's stop_receiver arrives as a notification; the supervisor's stop deregisters
    over the same connection and waits for the reply, from the notification's own thread."""
    endpoint = endpoint_to(server, secret, block_server=("worker-1", 7077))
    receiver = ThreadedReceiver()
    receiver.set_receiver_id(8)
    settings = StreamingSettings.from_spark_conf({}, receiver={"block_interval_ms": 20})
    manager = BlockManager()
    supervisor = ReceiverSupervisor(
        receiver, endpoint, manager, settings=settings, host="worker-1", executor_id="exec-1"
    )
    try:
        supervisor.start()
        assert tracker.events[0] == ("register", (8, "ThreadedReceiver", "worker-1", "exec-1"))
        receiver.store_many(["a", "b"], {"offsets": {"events-0": 2}})
        [info] = tracker.blocks
        assert (info.num_records, info.metadata) == (2, {"offsets": {"events-0": 2}})
        assert manager.get(info.block_id) is not None

        [control] = tracker.controls
        control.update_rate_limit(1000)
        wait_until(lambda: supervisor.get_current_rate_limit() == 1000, what="the rate update")
        control.stop_receiver("Stopped by driver")
        assert supervisor.await_termination(PATIENCE_S)
        assert tracker.events[-1] == ("deregister", (8, "Stopped by driver", ""))
    finally:
        supervisor.stop("test over")
        endpoint.close()
        manager.close()
    assert lost_deregistrations(tracker) == []


def test_a_supervisor_stopped_by_on_lost_ends_and_the_driver_deregisters_it(
    tracker: FakeTracker, server: ReceiverTrackerServer, secret: bytes
) -> None:
    """How the executor's receiver task uses on_lost: stop the supervisor, so the task ends."""
    receiver = ThreadedReceiver()
    receiver.set_receiver_id(9)
    settings = StreamingSettings.from_spark_conf({}, receiver={"block_interval_ms": 20})
    manager = BlockManager()
    supervisor: list[ReceiverSupervisor] = []
    endpoint = endpoint_to(server, secret, on_lost=lambda cause: supervisor[0].stop("Lost the driver", cause))
    supervisor.append(ReceiverSupervisor(receiver, endpoint, manager, settings=settings))
    try:
        supervisor[0].start()
        [driver_side] = server.connections()
        driver_side.close()
        with pytest.raises((ConnectionClosed, OSError)):
            supervisor[0].await_termination(PATIENCE_S)  # re-raises the cause it stopped with
        assert supervisor[0].is_terminated()
        wait_until(lambda: lost_deregistrations(tracker), what="the driver side to deregister")
        assert [sid for sid, _, _ in lost_deregistrations(tracker)] == [9]
    finally:
        supervisor[0].stop("test over")
        endpoint.close()
        manager.close()


def test_a_receiver_asks_where_to_keep_second_copies_other_hosts_first_never_its_own_executor(
    server: ReceiverTrackerServer, secret: bytes
) -> None:
    # (stream, host, executor): 0 asks; 3 shares its executor; 1 and 4 are on another host.
    receivers = [(0, "h1", "1"), (1, "h2", "2"), (2, "h1", "3"), (3, "h1", "1"), (4, "h3", "4")]
    endpoints = {
        sid: endpoint_to(server, secret, block_server=(host, 5000 + sid)) for sid, host, _ in receivers
    }
    try:
        assert endpoints[0].replica_peers(0) == []  # not registered yet: nowhere
        for sid, host, executor in receivers:
            assert endpoints[sid].register_receiver(sid, "KafkaReceiver", host, executor, RecordingControl())
        assert endpoints[0].replica_peers(0) == [
            BlockLocation("h2", "2", None, 5001),
            BlockLocation("h3", "4", None, 5004),
            BlockLocation("h1", "3", None, 5002),
        ]
        # Each receiver starts after its own stream id: copies spread over the peers.
        # (every other receiver is on another host than 1's and 4's).
        assert [peer.port for peer in endpoints[1].replica_peers(1)] == [5002, 5003, 5004, 5000]
        assert [peer.port for peer in endpoints[4].replica_peers(4)] == [5000, 5001, 5002, 5003]
        with pytest.raises(RemoteError, match="stream_id"):
            endpoints[0].connection.call("replica_peers", {"stream": 0})
    finally:
        for endpoint in endpoints.values():
            endpoint.close()
