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

from reliable_kafka.dstream.batch_rdd import BlockPartition
from reliable_kafka.dstream.block_recovery import BlockRecoveryError, recover_block, register_block_recovery
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.storage.block_format import decode_block, encode_block
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
