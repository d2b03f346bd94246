"""Blocks kept on executors, read by batch partitions: the block's file on the same host, a fetch from
the receiver's block server, the write-ahead log, else Spark's "Could not compute split" error.
Real files, a real block server socket and a real WAL; no Spark needed for the read chain itself."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import msgpack
import pytest

from reliable_kafka.dstream.batch_rdd import create_block_rdd
from reliable_kafka.dstream.block_partition import BlockNotFoundError, BlockPartition
from reliable_kafka.receiver.descriptor import ReceiverDescriptor, ReceiverDescriptorError
from reliable_kafka.receiver.receiver_task import ReceiverTaskDescription
from reliable_kafka.receiver.tracker_endpoint import (
    BlockLocation,
    ReceivedBlockInfo,
    ReceivedBlockStoreResult,
)
from reliable_kafka.rpc import new_secret
from reliable_kafka.storage.block_format import decode_block, encode_block
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_server import BlockServer
from reliable_kafka.storage.executor_block_store import ExecutorBlockStore
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from wal import FileBasedWriteAheadLog

BLOCK = StreamBlockId(0, 7)
DATA = encode_block([1, 2, 3])


@pytest.fixture
def store(tmp_path: Path) -> ExecutorBlockStore:
    store = ExecutorBlockStore("app-1-stream-0", local_dir=tmp_path / "local", memory_dir=tmp_path / "shm")
    (tmp_path / "local").mkdir()
    (tmp_path / "shm").mkdir()
    yield store
    store.close()


def test_a_partition_reads_the_block_file_on_the_host_keeping_it(store: ExecutorBlockStore) -> None:
    store.put(BLOCK, DATA, StorageLevel.MEMORY_AND_DISK_SER)
    location = BlockLocation("host-a", "1", store.path_of(BLOCK), None)
    partition = BlockPartition(BLOCK.name, location=location)
    assert decode_block(BlockPartition.decode(partition.encode()).read()) == [1, 2, 3]
    assert partition.preferred_locations == ["host-a"]


def test_a_partition_on_another_host_fetches_from_the_receivers_block_server(
    store: ExecutorBlockStore,
) -> None:
    secret = new_secret()
    store.put(BLOCK, DATA, StorageLevel.MEMORY_ONLY_SER)
    server = BlockServer(lambda name: store.get(StreamBlockId.parse(name)), secret, host="127.0.0.1").start()
    try:
        # No file here (another host): the path is one this host does not have.
        location = BlockLocation("127.0.0.1", "1", "/nonexistent/elsewhere/input-0-7", server.address[1])
        partition = BlockPartition.decode(
            BlockPartition(BLOCK.name, location=location, fetch_secret=secret).encode()
        )
        assert decode_block(partition.read()) == [1, 2, 3]
        assert secret not in repr(partition).encode()
    finally:
        server.stop()


def test_a_block_gone_from_its_executor_is_read_from_the_wal(tmp_path: Path) -> None:
    with FileBasedWriteAheadLog(str(tmp_path / "wal")) as log:
        handle = log.write(DATA, 1000)
    location = BlockLocation("127.0.0.1", "1", str(tmp_path / "gone"), 1)  # port 1: nothing listens
    partition = BlockPartition(
        BLOCK.name, wal_record_handle=handle, location=location, fetch_secret=b"s" * 32
    )
    assert decode_block(partition.read()) == [1, 2, 3]


def test_a_block_in_no_place_fails_as_spark_does_and_says_the_wal_was_off(tmp_path: Path) -> None:
    location = BlockLocation("127.0.0.1", "3", str(tmp_path / "gone"), None)
    with pytest.raises(BlockNotFoundError) as raised:
        BlockPartition(BLOCK.name, location=location).read()
    message = str(raised.value)
    assert message.startswith("Could not compute split, block input-0-7 not found")
    assert "executor 3 on 127.0.0.1" in message
    assert "write-ahead log is off" in message


def test_in_executor_placement_the_driver_ships_no_block_bytes(spark_context, tmp_path: Path) -> None:
    location = BlockLocation("nohost", "9", str(tmp_path / "nothing"), None)
    info = ReceivedBlockInfo(0, 3, None, ReceivedBlockStoreResult(BLOCK, 3, None, location))
    rdd = create_block_rdd(spark_context, [info], None)
    assert rdd.num_with_driver_bytes == 0
    assert rdd.num_from_block_manager == 1
    assert rdd.block_ids == [BLOCK.name]


def test_a_batch_task_reads_the_blocks_kept_on_one_host_and_prefers_that_host(
    spark_context, store: ExecutorBlockStore
) -> None:
    """Consecutive blocks kept on one host are one partition preferring it; the receiver moved to
    another host, its blocks there are the next partition, preferring that one."""
    blocks = {StreamBlockId(0, n): encode_block([n * 10, n * 10 + 1]) for n in range(1, 5)}
    hosts = ["host-a", "host-a", "host-b", "host-b"]
    infos = []
    for (block_id, data), host in zip(blocks.items(), hosts, strict=True):
        store.put(block_id, data, StorageLevel.MEMORY_AND_DISK_SER)
        # Both "hosts" are this machine: each block's file is readable wherever the task runs.
        location = BlockLocation(host, "1", store.path_of(block_id), None)
        result = ReceivedBlockStoreResult(block_id, 2, None, location, num_bytes=len(data))
        infos.append(ReceivedBlockInfo(0, 2, None, result))

    rdd = create_block_rdd(spark_context, infos, None, max_partition_bytes=128 << 20, parallelism=4)

    assert rdd.getNumPartitions() == 2
    assert preferred_locations(rdd) == [["host-a"], ["host-b"]]
    assert rdd.glom().collect() == [[10, 11, 20, 21], [30, 31, 40, 41]]
    one_each = create_block_rdd(spark_context, infos, None, max_partition_bytes=0)
    assert preferred_locations(one_each) == [["host-a"], ["host-a"], ["host-b"], ["host-b"]]


def preferred_locations(rdd) -> list[list[str]]:
    """What Spark's scheduler sees for each partition of the batch RDD's source."""
    source = rdd._prev_jrdd.rdd()
    partitions = source.partitions()
    found = []
    for index in range(len(partitions)):
        locations = source.preferredLocations(partitions[index])
        found.append([str(locations.apply(i)) for i in range(locations.size())])
    return found


def test_block_locations_survive_the_metadata_log_and_old_records_have_none() -> None:
    location = BlockLocation("h", "2", "/p", 4040)
    result = ReceivedBlockStoreResult(BLOCK, 3, None, location)
    assert ReceivedBlockStoreResult.from_dict(msgpack.unpackb(msgpack.packb(result.to_dict()))) == result
    old = {"block_id": BLOCK.name, "num_records": 3, "wal_record_handle": None}
    assert ReceivedBlockStoreResult.from_dict(old).location is None
    assert ReceivedBlockStoreResult.from_dict(old).num_bytes is None
    sized = ReceivedBlockStoreResult(BLOCK, 3, None, location, num_bytes=len(DATA))
    assert ReceivedBlockStoreResult.from_dict(msgpack.unpackb(msgpack.packb(sized.to_dict()))) == sized
    assert "num_bytes" not in result.to_dict()  # unsized records stay as older versions read them


def test_a_receiver_task_description_is_plain_data_and_hides_its_secret() -> None:
    secret = new_secret()
    description = ReceiverTaskDescription(
        stream_id=2,
        receiver=ReceiverDescriptor(
            "reliable_kafka.kafka.receiver.receiver_factory:kafka_receiver", {"reliable": True}
        ),
        settings={"receiver": {"block_interval_ms": 200}},
        checkpoint_dir="/cp",
        tracker_host="driver-host",
        tracker_port=4100,
        secret=secret,
        app_id="app-1",
        launch=3,
    )
    raw = description.encode()
    assert msgpack.unpackb(raw)["tracker"] == ["driver-host", 4100]
    assert ReceiverTaskDescription.decode(raw) == description
    assert secret.hex() not in repr(description) and str(secret) not in repr(description)


def test_a_descriptor_names_a_module_function_and_must_build_a_receiver() -> None:
    with pytest.raises(ReceiverDescriptorError, match="module:function"):
        ReceiverDescriptor("no_colon_here")
    with pytest.raises(ReceiverDescriptorError, match="cannot load receiver factory"):
        ReceiverDescriptor("reliable_kafka.nowhere:factory").build()
    with pytest.raises(ReceiverDescriptorError, match="not a Receiver"):
        ReceiverDescriptor("builtins:dict").build()


def test_the_kafka_stream_rebuilds_its_receiver_from_its_descriptor() -> None:
    from reliable_kafka.kafka.receiver.receiver_factory import kafka_receiver_descriptor
    from reliable_kafka.kafka.receiver.reliable_receiver import ReliableKafkaReceiver

    descriptor = kafka_receiver_descriptor(
        reliable=True,
        zookeeper_connect="zk:2181",
        group_id="g",
        topics={"t": 1},
        kafka_params={"auto.offset.reset": "smallest"},
        storage_level=StorageLevel.MEMORY_AND_DISK_SER,
        store_max_attempts=2,
    )
    crossed = ReceiverDescriptor.from_dict(msgpack.unpackb(msgpack.packb(descriptor.to_dict())))
    receiver = crossed.build()
    assert isinstance(receiver, ReliableKafkaReceiver)
    assert receiver.storage_level == StorageLevel.MEMORY_AND_DISK_SER
    assert receiver.store_max_attempts == 2
    assert receiver.topics == {"t": 1}


def test_replica_locations_survive_the_metadata_log_and_unreplicated_records_are_unchanged() -> None:
    location, replica = BlockLocation("h", "2", "/p", 4040), BlockLocation("g", "3", "/q", 4041)
    result = ReceivedBlockStoreResult(BLOCK, 3, None, location, replica)
    assert ReceivedBlockStoreResult.from_dict(msgpack.unpackb(msgpack.packb(result.to_dict()))) == result
    # A block with one copy is written as before replication existed, and such records parse.
    single = ReceivedBlockStoreResult(BLOCK, 3, None, location)
    assert "replica" not in single.to_dict()
    assert ReceivedBlockStoreResult.from_dict(single.to_dict()).replica is None


def test_a_block_whose_holder_is_gone_is_read_from_its_replica_before_the_wal(
    store: ExecutorBlockStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = new_secret()
    store.put(BLOCK, DATA, StorageLevel.MEMORY_AND_DISK_SER_2)
    peer = BlockServer(lambda name: store.get(StreamBlockId.parse(name)), secret, host="127.0.0.2").start()
    try:
        with FileBasedWriteAheadLog(str(tmp_path / "wal")) as log:
            handle = log.write(encode_block(["from the wal"]), 1000)
        gone = BlockLocation("127.0.0.1", "1", str(tmp_path / "gone"), 1)  # port 1: nothing listens
        replica = BlockLocation("127.0.0.2", "2", "/nonexistent/elsewhere/input-0-7", peer.address[1])
        partition = BlockPartition.decode(
            BlockPartition(
                BLOCK.name, wal_record_handle=handle, location=gone, fetch_secret=secret, replica=replica
            ).encode()
        )
        assert partition.replica == replica
        assert partition.preferred_locations == ["127.0.0.1", "127.0.0.2"]
        from_replica = instruments.BLOCKS_FROM_REPLICA.value
        with caplog.at_level(logging.WARNING):
            assert decode_block(partition.read()) == [1, 2, 3]
        assert instruments.BLOCKS_FROM_REPLICA.value == from_replica + 1
        assert "block input-0-7 read from its second copy on executor 2 on 127.0.0.2" in caplog.text
        # The first copy, when there, is read first and the replica's counter does not move.
        store_copy = BlockLocation("127.0.0.1", "1", store.path_of(BLOCK), None)
        assert decode_block(BlockPartition(BLOCK.name, location=store_copy, replica=replica).read()) == [
            1,
            2,
            3,
        ]
        assert instruments.BLOCKS_FROM_REPLICA.value == from_replica + 1
    finally:
        peer.stop()


def test_a_block_with_both_copies_gone_and_no_wal_names_both_executors(tmp_path: Path) -> None:
    first = BlockLocation("127.0.0.1", "3", str(tmp_path / "gone"), None)
    second = BlockLocation("127.0.0.2", "4", str(tmp_path / "gone-too"), None)
    with pytest.raises(
        BlockNotFoundError, match=re.escape("executors 3 on 127.0.0.1 and 4 on 127.0.0.2, neither")
    ):
        BlockPartition(BLOCK.name, location=first, replica=second).read()
