"""Block fetches between executors over the block server."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

from reliable_kafka.rpc import AuthenticationError, RemoteError, connect, new_secret
from reliable_kafka.storage import StreamBlockId
from reliable_kafka.storage.block_manager import BlockManager
from reliable_kafka.storage.block_server import BlockFetcher, BlockServer, fetch_block
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from tests.rpc.helpers import PATIENCE_S
from tests.support import wait_until
from tests.support.threads import no_thread_outlives_its_test  # noqa: F401 - autouse: on for this module

BIG_BLOCK = os.urandom(20 * 1024 * 1024)


@pytest.fixture
def secret() -> bytes:
    return new_secret()


@pytest.fixture
def blocks() -> dict[str, bytes]:
    return {"input-0-1": BIG_BLOCK, "input-0-2": b"small", "input-0-3": b""}


@pytest.fixture
def block_server(blocks: dict[str, bytes], secret: bytes) -> Iterator[BlockServer]:
    server = BlockServer(blocks.get, secret, host="127.0.0.1").start()
    yield server
    server.stop()


def test_a_20_mb_block_arrives_whole(block_server: BlockServer, secret: bytes) -> None:
    assert fetch_block(*block_server.address, secret, "input-0-1") == BIG_BLOCK


def test_a_missing_block_is_none_and_an_empty_one_is_empty(block_server: BlockServer, secret: bytes) -> None:
    served = instruments.BLOCKS_SERVED.value
    assert fetch_block(*block_server.address, secret, "input-0-404") is None
    assert fetch_block(*block_server.address, secret, "input-0-3") == b""
    assert instruments.BLOCKS_SERVED.value == served + 1  # the block sent; not the one it lacked


def test_a_fetch_with_the_wrong_secret_is_refused(block_server: BlockServer) -> None:
    with pytest.raises(AuthenticationError):
        fetch_block(*block_server.address, new_secret(), "input-0-1")


def test_a_block_above_the_frame_limit_is_an_error_not_a_truncated_block(secret: bytes) -> None:
    server = BlockServer(
        {"input-0-1": b"x" * 2048}.get, secret, host="127.0.0.1", max_frame_bytes=1024
    ).start()
    try:
        with pytest.raises(RemoteError, match="exceeds the limit of 1024 bytes"):
            fetch_block(*server.address, secret, "input-0-1")
        assert fetch_block(*server.address, secret, "input-0-404") is None  # the server serves on
    finally:
        server.stop()


def test_a_failing_read_and_a_bad_request_come_back_as_remote_errors(secret: bytes) -> None:
    def read_block(block_id: str) -> bytes | None:
        raise OSError(f"disk gone while reading {block_id}")

    server = BlockServer(read_block, secret, host="127.0.0.1").start()
    try:
        with pytest.raises(RemoteError, match="disk gone while reading input-0-1"):
            fetch_block(*server.address, secret, "input-0-1")
        connection = connect(*server.address, secret)
        try:
            with pytest.raises(RemoteError, match="expected"):
                connection.call("get_block", {"block_id": 7})
        finally:
            connection.close()
            connection.join(PATIENCE_S)
    finally:
        server.stop()


def test_a_block_manager_behind_the_server(secret: bytes) -> None:
    manager = BlockManager()
    block_id = StreamBlockId(3, 99)
    manager.put(block_id, b"records", StorageLevel.MEMORY_AND_DISK_SER)
    server = BlockServer(
        lambda name: manager.get(StreamBlockId.parse(name)), secret, host="127.0.0.1"
    ).start()
    try:
        assert fetch_block(*server.address, secret, block_id.name) == b"records"
        with pytest.raises(RemoteError, match="ValueError"):
            fetch_block(*server.address, secret, "not-a-block-id")
    finally:
        server.stop()
        manager.close()


def test_a_pooled_fetcher_reuses_its_connection_and_recovers_from_a_closed_one(
    block_server: BlockServer, secret: bytes
) -> None:
    fetcher = BlockFetcher(secret)
    try:
        results: list[bytes | None] = []
        lock = threading.Lock()

        def fetch() -> None:
            data = fetcher.fetch(*block_server.address, "input-0-2")
            with lock:
                results.append(data)

        threads = [threading.Thread(target=fetch) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE_S)
        assert results == [b"small"] * 8
        # Racing first fetches may each connect; all but one connection are closed at once.
        wait_until(lambda: len(block_server.connections()) == 1, what="one kept connection")

        for connection in block_server.connections():
            connection.close()  # the server side drops the kept connection
        assert fetcher.fetch(*block_server.address, "input-0-1") == BIG_BLOCK
    finally:
        fetcher.close()


def test_a_fixed_port_that_is_taken_is_followed_by_the_next_ones(secret: bytes) -> None:
    """As spark.blockManager.port: receivers sharing a host take successive ports."""
    first = BlockServer({"input-0-1": b"one"}.get, secret, host="127.0.0.1").start()
    try:
        port = first.address[1]
        second = BlockServer({"input-0-1": b"two"}.get, secret, host="127.0.0.1", port=port, port_retries=16)
        second.start()
        try:
            assert port < second.address[1] <= port + 16
            assert fetch_block(*second.address, secret, "input-0-1") == b"two"
        finally:
            second.stop()
        # Without retries, a taken port is the bind error.
        with pytest.raises(OSError):
            BlockServer({}.get, secret, host="127.0.0.1", port=port).start()
    finally:
        first.stop()


def test_the_receiver_settings_take_the_block_server_port_and_spark_port_retries() -> None:
    from reliable_kafka.settings import StreamingSettings

    conf = {"spark.streaming.receiver.blockServerPort": "42000", "spark.port.maxRetries": "4"}
    receiver = StreamingSettings.from_spark_conf(conf).receiver
    assert (receiver.block_server_port, receiver.port_max_retries) == (42000, 4)
    assert StreamingSettings.from_spark_conf({}).receiver.port_max_retries == 16


def test_only_a_server_made_to_keep_replicas_keeps_them_and_a_bad_request_is_a_remote_error(
    block_server: BlockServer, secret: bytes
) -> None:
    fetcher = BlockFetcher(secret, timeout_s=PATIENCE_S)
    kept: dict[str, tuple[bytes, StorageLevel]] = {}

    def keep(name: str, data: bytes, level: StorageLevel) -> str:
        kept[name] = (data, level)
        return f"/copies/{name}"

    keeper = BlockServer(
        lambda name: kept[name][0] if name in kept else None, secret, host="127.0.0.1", keep_replica=keep
    ).start()
    try:
        with pytest.raises(RemoteError, match="serves no method 'keep_replica'"):
            fetcher.keep_replica(*block_server.address, "input-0-9", b"x", StorageLevel.MEMORY_AND_DISK_SER_2)
        path = fetcher.keep_replica(*keeper.address, "input-0-9", b"x", StorageLevel.MEMORY_AND_DISK_SER_2)
        assert path == "/copies/input-0-9"
        assert kept == {"input-0-9": (b"x", StorageLevel.MEMORY_AND_DISK_SER_2)}
        assert fetcher.fetch(*keeper.address, "input-0-9") == b"x"  # served like the server's own
        connection = connect(*keeper.address, secret)
        try:
            with pytest.raises(RemoteError, match="keep_replica: expected"):
                connection.call("keep_replica", {"block_id": "input-0-9", "data": "not bytes", "level": {}})
        finally:
            connection.close()
            connection.join(PATIENCE_S)
    finally:
        fetcher.close()
        keeper.stop()
