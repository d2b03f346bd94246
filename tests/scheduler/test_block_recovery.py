"""The batch RDD's fallback for a block whose write-ahead log record is unreadable: the
recovery source's kind picks the registered function; without a source the WAL error stands."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgpack
import pytest

from reliable_kafka.dstream.block_partition import BlockNotFoundError, BlockPartition
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.storage.block_format import decode_block, encode_block
from reliable_kafka.storage.block_recovery import BlockRecoveryError, recover_block, register_block_recovery
from reliable_kafka.util import instruments
from wal import FileBasedWriteAheadLog, RecordHandle, WriteAheadLogError


def from_the_source(source: Mapping[str, Any]) -> bytes:
    return encode_block(source["records"])


def test_an_unreadable_record_is_read_from_the_recovery_source(tmp_path: Path) -> None:
    register_block_recovery("test-source", from_the_source)
    gone = RecordHandle(str(tmp_path / "log-1-2"), 0, 10)
    source = {"kind": "test-source", "records": [1, 2, 3]}
    partition = BlockPartition("input-0-1", None, gone, recovery=source)
    assert BlockPartition.decode(partition.encode()) == partition
    assert msgpack.unpackb(partition.encode())["recovery"] == source
    assert decode_block(partition.read()) == [1, 2, 3]


def test_without_a_recovery_source_the_wal_error_stands(tmp_path: Path) -> None:
    gone = RecordHandle(str(tmp_path / "log-1-2"), 0, 10)
    with pytest.raises(WriteAheadLogError):
        BlockPartition("input-0-1", None, gone).read()


def test_an_unknown_kind_is_an_error_that_names_it() -> None:
    with pytest.raises(BlockRecoveryError, match="nowhere"):
        recover_block({"kind": "nowhere"})
    with pytest.raises(BlockRecoveryError, match="nowhere"):
        recover_block({"kind": "nowhere", "module": "os"})


def test_a_block_whose_receiver_is_gone_is_read_from_the_wal_with_one_info_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After a restart every block of the dead receivers failed its fetch first: each printed a
    WARNING (8-33 per restart) without saying that the write-ahead log then served it."""
    with FileBasedWriteAheadLog(str(tmp_path / "wal")) as log:
        handle = log.write(encode_block([1, 2]), 1000)
    with socket.socket() as closed:  # a port nothing listens on: the receiver's, gone
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    gone = BlockLocation("127.0.0.1", "1", path=str(tmp_path / "no-such-block-file"), port=port)
    partition = BlockPartition("input-0-1", None, handle, gone, fetch_secret=b"s" * 32)
    with caplog.at_level(logging.INFO, logger="reliable_kafka.dstream.batch_rdd"):
        assert decode_block(partition.read()) == [1, 2]
    lines = [
        (r.levelno, r.getMessage()) for r in caplog.records if r.name == "reliable_kafka.dstream.batch_rdd"
    ]
    assert len(lines) == 1, lines
    level, message = lines[0]
    assert level == logging.INFO
    assert message.startswith("block input-0-1 read from the write-ahead log: its receiver's copy on ")
    assert "ConnectionRefusedError" in message


def test_without_the_wal_a_block_whose_executor_is_gone_is_read_again_from_its_source(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """WAL off: the executor's copy was the only one; with a source the block is read again
    (Kafka, for its exact offset ranges) instead of failing the batch."""
    register_block_recovery("test-source", from_the_source)
    gone = BlockLocation("127.0.0.9", "7", path=str(tmp_path / "no-such-block-file"), port=None)
    source = {"kind": "test-source", "records": [4, 5]}
    reread = instruments.BLOCKS_REREAD.value
    with caplog.at_level(logging.WARNING, logger="reliable_kafka.dstream.batch_rdd"):
        assert decode_block(BlockPartition("input-0-1", None, None, gone, recovery=source).read()) == [4, 5]
    assert instruments.BLOCKS_REREAD.value == reread + 1
    assert "block input-0-1: it was kept on executor 7 on 127.0.0.9, which no longer has it" in caplog.text
    assert "reading it again from its source" in caplog.text
    # Without a source, the error Spark gives.
    with pytest.raises(BlockNotFoundError, match="Could not compute split, block input-0-1 not found"):
        BlockPartition("input-0-1", None, None, gone).read()


def test_without_the_wal_a_lost_block_kafka_no_longer_has_fails_naming_the_block(tmp_path: Path) -> None:
    def nothing_left(source: Mapping[str, Any]) -> bytes:
        raise BlockRecoveryError("records lost: events/0 [5, 9): retention removed them")

    register_block_recovery("retention-source", nothing_left)
    gone = BlockLocation("127.0.0.9", "7", path=None, port=None)
    partition = BlockPartition("input-0-2", None, None, gone, recovery={"kind": "retention-source"})
    with pytest.raises(BlockRecoveryError, match=r"block input-0-2: .*records lost: events/0 \[5, 9\)"):
        partition.read()
