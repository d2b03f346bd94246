"""The batch RDD's fallback for a block whose write-ahead log record is unreadable: the
recovery source's kind picks the registered function; without a source the WAL error stands."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgpack
import pytest

from reliable_kafka.dstream.batch_rdd import BlockPartition
from reliable_kafka.dstream.block_recovery import BlockRecoveryError, recover_block, register_block_recovery
from reliable_kafka.storage.block_format import decode_block, encode_block
from wal import RecordHandle, WriteAheadLogError


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
