"""The driver checkpoint and the write-ahead logs on a real HDFS (WebHDFS) and a real S3 store:
atomic, verified checkpoint switches, leftovers of a crash, damaged objects, and block reads through
what a batch partition carries (no Spark here: the streaming tests are in tests/e2e)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from reliable_kafka.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointWriter,
    ensure_checkpoint_dir,
    read_checkpoint,
    write_checkpoint,
)
from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.util.filesystems import (
    FilesystemOptions,
    RemoteDirectory,
    locate,
    options_from_spark_conf,
)
from reliable_kafka.util.wal_at import write_ahead_log_at
from wal import CorruptRecordError, SegmentNotFoundError

pytestmark = pytest.mark.integration

CHECKPOINT = Checkpoint(
    checkpoint_time_ms=3000,
    zero_time_ms=0,
    batch_duration_ms=1000,
    checkpoint_duration_ms=1000,
    last_generated_batch_time_ms=3000,
    pending_times_ms=(3000,),
    written_at_ms=1,
)


@dataclasses.dataclass
class Store:
    name: str
    root: str
    options: FilesystemOptions
    server: Any

    def url(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def fs(self) -> Any:
        return locate(self.root, self.options).fs

    def path(self, url: str) -> str:
        return locate(url, self.options).path


@pytest.fixture(params=["hdfs", "s3"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    run = f"t-{uuid.uuid4().hex[:12]}"
    if request.param == "hdfs":
        hdfs = request.getfixturevalue("local_hdfs")
        options = options_from_spark_conf(hdfs.spark_conf().items(), environ={})
        yield Store("hdfs", f"{hdfs.url}/{run}", options, hdfs)
    else:
        s3 = request.getfixturevalue("local_s3")
        options = options_from_spark_conf(s3.spark_conf().items(), environ={})
        yield Store("s3", f"s3a://{s3.bucket}/{run}", options, s3)


def test_checkpoints_replace_each_other_verifiably(store: Store) -> None:
    directory = store.url("cp")
    assert read_checkpoint(directory, store.options) is None
    assert ensure_checkpoint_dir(directory, store.options) == directory
    for time_ms in (3000, 4000, 5000):  # the 2nd and 3rd replace an existing object
        written = write_checkpoint(
            directory, dataclasses.replace(CHECKPOINT, checkpoint_time_ms=time_ms), store.options
        )
        assert written == f"{directory}/metadata"
        assert read_checkpoint(directory, store.options).checkpoint_time_ms == time_ms
    fs = store.fs()
    fs.invalidate_cache()
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(store.path(directory), detail=False)] == ["metadata"]


def test_a_refused_rename_is_an_error_not_silence(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = store.url("cp")
    write_checkpoint(directory, CHECKPOINT, store.options)
    fs = store.fs()
    monkeypatch.setattr(type(fs), "mv", lambda self, *a, **k: None)  # as WebHDFS answering false
    with pytest.raises(OSError, match="refused to rename"):
        write_checkpoint(directory, dataclasses.replace(CHECKPOINT, checkpoint_time_ms=9000), store.options)
    monkeypatch.undo()
    # The old object was deleted before the second, refused rename: the new one is read instead.
    assert read_checkpoint(directory, store.options).checkpoint_time_ms == 9000
    writer = CheckpointWriter(directory, store.options)
    assert writer.write(dataclasses.replace(CHECKPOINT, checkpoint_time_ms=10000))
    fs.invalidate_cache()
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(store.path(directory), detail=False)] == ["metadata"]


def test_a_crash_mid_switch_is_recovered_from_the_leftover_and_a_torn_one_ignored(store: Store) -> None:
    directory = store.url("cp")
    fs = store.fs()
    base = store.path(directory)
    fs.makedirs(base, exist_ok=True)
    newer = dataclasses.replace(CHECKPOINT, checkpoint_time_ms=7000)
    # The state after "delete metadata" and before "rename": two complete uploads and a torn one.
    fs.pipe_file(f"{base}/.metadata.a.tmp", CHECKPOINT.to_bytes())
    fs.pipe_file(f"{base}/.metadata.b.tmp", newer.to_bytes())
    fs.pipe_file(f"{base}/.metadata.c.tmp", newer.to_bytes()[:25])
    assert read_checkpoint(directory, store.options) == newer
    writer = CheckpointWriter(directory, store.options)
    assert writer.write(dataclasses.replace(CHECKPOINT, checkpoint_time_ms=8000))
    fs.invalidate_cache()
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(base, detail=False)] == ["metadata"]


def test_a_half_written_checkpoint_is_a_clear_error_naming_the_url(store: Store) -> None:
    directory = store.url("cp")
    write_checkpoint(directory, CHECKPOINT, store.options)
    store.fs().pipe_file(f"{store.path(directory)}/metadata", CHECKPOINT.to_bytes()[:40])
    with pytest.raises(CheckpointError, match=f"{directory}/metadata"):
        read_checkpoint(directory, store.options)


def test_wal_records_are_read_back_through_a_batch_partitions_directory(store: Store) -> None:
    checkpoint = store.url("cp")
    log_url = f"{checkpoint}/receivedData/0"
    records = [f"block {i}".encode() * 100 for i in range(5)]
    with write_ahead_log_at(log_url, store.options, rolling_interval_s=1, fsync=False) as log:
        handles = [log.write(record, 1000 + i * 10) for i, record in enumerate(records)]
        assert list(log.read_all()) == records
    carried = RemoteDirectory(checkpoint, store.options)
    for handle, record in zip(handles, records, strict=True):
        partition = BlockPartition.decode(
            BlockPartition(
                f"input-0-{handle.offset}", wal_record_handle=handle, wal_directory=carried
            ).encode()
        )
        assert partition.read() == record
    assert store.options.for_scheme(store.name)  # the options really were needed and carried


def test_damaged_segments_fail_their_reads_and_recovery_skips_them(store: Store) -> None:
    log_url = store.url("cp", "receivedData", "1")
    with write_ahead_log_at(log_url, store.options, fsync=False) as log:
        first, second, third = (log.write(f"record {i}".encode() * 50, 1000 + i) for i in range(3))
    fs = store.fs()
    # Every write closed its segment (the store publishes on close): one object per record.
    assert len({first.path, second.path, third.path}) == 3
    fs.pipe_file(first.path, fs.cat_file(first.path)[:30])  # truncated object
    fs.rm_file(second.path)  # deleted object
    with write_ahead_log_at(log_url, store.options) as log:
        with pytest.raises(CorruptRecordError):
            log.read(first)
        with pytest.raises(SegmentNotFoundError):
            log.read(second)
        assert list(log.read_all()) == [b"record 2" * 50]


def test_clean_deletes_the_segments_it_claims(store: Store) -> None:
    log_url = store.url("cp", "receivedBlockMetadata")
    with write_ahead_log_at(log_url, store.options, rolling_interval_s=1, fsync=False) as log:
        for i in range(4):
            log.write(b"event", 1000 + i * 2000)
        log.clean(6000, wait_for_completion=True)
        assert list(log.read_all()) == [b"event", b"event"]
    fs = store.fs()
    fs.invalidate_cache()
    assert len(fs.ls(store.path(log_url), detail=False)) == 2
