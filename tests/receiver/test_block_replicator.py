"""Second copies of a receiver's blocks on peer receivers' block servers: real block servers on
two loopback "hosts", real executor block stores, the peer list a plain function (the tracker's)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from reliable_kafka.receiver.block_replicator import BlockReplicator
from reliable_kafka.receiver.receiver_task import replica_keeper
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.rpc import new_secret
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_server import BlockFetcher, BlockServer
from reliable_kafka.storage.executor_block_store import ExecutorBlockStore
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments

LEVEL = StorageLevel.MEMORY_AND_DISK_SER_2
SECRET = new_secret()


class Peer:
    """A receiver's block store and block server on ``host``, keeping peers' copies."""

    def __init__(self, tmp_path: Path, host: str, executor_id: str) -> None:
        (tmp_path / executor_id).mkdir()
        self.store = ExecutorBlockStore(f"peer-{executor_id}", local_dir=tmp_path / executor_id)

        self.server = BlockServer(
            lambda name: self.store.get(StreamBlockId.parse(name)),
            SECRET,
            host=host,
            keep_replica=replica_keeper(self.store),  # as a receiver task keeps its peers' copies
        ).start()
        self.location = BlockLocation(host, executor_id, None, self.server.address[1])

    def close(self) -> None:
        self.server.stop()
        self.store.close()


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[dict[str, Peer]]:
    made = {
        "other-host": Peer(tmp_path, "127.0.0.2", "2"),
        "second-other-host": Peer(tmp_path, "127.0.0.3", "3"),
        "same-host": Peer(tmp_path, "127.0.0.1", "4"),
    }
    yield made
    for peer in made.values():
        peer.close()


@pytest.fixture
def client() -> Iterator[BlockFetcher]:
    fetcher = BlockFetcher(SECRET, timeout_s=10)
    yield fetcher
    fetcher.close()


def test_the_second_copy_is_stored_on_the_first_peer_before_replicate_returns(
    peers: dict[str, Peer], client: BlockFetcher
) -> None:
    order = [peers["other-host"].location, peers["second-other-host"].location]
    replicator = BlockReplicator(0, "127.0.0.1", lambda: order, client)
    kept = instruments.REPLICAS_KEPT.value
    block = StreamBlockId(0, 1)
    replica = replicator.replicate(block, b"records", LEVEL)
    holder = peers["other-host"]
    assert replica == BlockLocation("127.0.0.2", "2", holder.store.path_of(block), holder.server.address[1])
    assert holder.store.get(block) == b"records"
    assert not peers["second-other-host"].store.contains(block)
    assert instruments.REPLICAS_KEPT.value == kept + 1


def test_a_dead_peer_costs_only_its_copies_the_next_peer_keeps_them(
    peers: dict[str, Peer], client: BlockFetcher, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[int] = []

    def tracker_peers() -> list[BlockLocation]:
        asked.append(1)
        return [peers["other-host"].location, peers["second-other-host"].location]

    replicator = BlockReplicator(0, "127.0.0.1", tracker_peers, client)
    assert replicator.replicate(StreamBlockId(0, 1), b"a", LEVEL).executor_id == "2"
    peers["other-host"].server.stop()
    with caplog.at_level(logging.WARNING):
        assert replicator.replicate(StreamBlockId(0, 2), b"b", LEVEL).executor_id == "3"
        # The dead peer is dropped: the next block goes straight to the live one, no new warning.
        assert replicator.replicate(StreamBlockId(0, 3), b"c", LEVEL).executor_id == "3"
    assert caplog.text.count("Could not keep the second copy of block input-0-2 on executor 2") == 1
    assert caplog.text.count("Could not keep the second copy") == 1
    assert len(asked) == 1  # a peer on another host is known: no need to ask the tracker again
    assert peers["second-other-host"].store.get(StreamBlockId(0, 3)) == b"c"


def test_with_no_peer_a_block_keeps_one_copy_and_a_warning_says_so_once_per_stream(
    peers: dict[str, Peer], client: BlockFetcher, caplog: pytest.LogCaptureFixture
) -> None:
    registered: list[BlockLocation] = []
    replicator = BlockReplicator(5, "127.0.0.1", lambda: list(registered), client)
    with caplog.at_level(logging.INFO, logger="reliable_kafka.receiver.block_replicator"):
        for unique_id in range(20):
            assert replicator.replicate(StreamBlockId(5, unique_id), b"x", LEVEL) is None
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "input-5-0 of stream 5 is stored with 1 copy instead of 2" in warnings[0].getMessage()
        assert f"(storage level {LEVEL.name})" in warnings[0].getMessage()
        # A peer registers: the next block has two copies again, said once at INFO.
        registered.append(peers["other-host"].location)
        assert replicator.replicate(StreamBlockId(5, 20), b"x", LEVEL) is not None
        assert replicator.replicate(StreamBlockId(5, 21), b"x", LEVEL) is not None
    assert caplog.text.count("Blocks of stream 5 have two copies again") == 1
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_a_peer_on_the_same_host_serves_until_one_on_another_host_registers(
    peers: dict[str, Peer], client: BlockFetcher
) -> None:
    registered = [peers["same-host"].location]
    replicator = BlockReplicator(0, "127.0.0.1", lambda: list(registered), client)
    assert replicator.replicate(StreamBlockId(0, 1), b"a", LEVEL).executor_id == "4"
    # The tracker lists other hosts first; the replicator asks again while it has only this host.
    registered.insert(0, peers["other-host"].location)
    assert replicator.replicate(StreamBlockId(0, 2), b"b", LEVEL).executor_id == "2"


def test_a_second_push_of_the_same_block_is_a_success_other_bytes_an_error(
    peers: dict[str, Peer], client: BlockFetcher
) -> None:
    """A receiver retries a failed store with the same id: the copy kept by the first try stands."""
    host, port = peers["other-host"].server.address
    block = StreamBlockId(0, 1)
    first = client.keep_replica(host, port, block.name, b"same", LEVEL)
    assert client.keep_replica(host, port, block.name, b"same", LEVEL) == first
    with pytest.raises(Exception, match="already stored"):
        client.keep_replica(host, port, block.name, b"other", LEVEL)
