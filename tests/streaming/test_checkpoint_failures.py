"""Checkpoint writes failing for a while (issue 10, items 6 and 7): the first failure logs its
traceback, each retry one line, the first success again a recovery line; a path that is a
regular file says "not a directory"."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from pyspark import SparkContext

from reliable_kafka.checkpoint import CheckpointWriter, ensure_checkpoint_dir, read_checkpoint
from reliable_kafka.context import StreamingContext
from tests.streaming.sample_checkpoint import CHECKPOINT


def test_an_unwritable_checkpoint_logs_one_traceback_then_lines_then_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "checkpoint"
    writer = CheckpointWriter(directory)
    assert writer.write(CHECKPOINT)
    # The storage goes away: a regular file where the directory was.
    shutil.rmtree(directory)
    directory.write_bytes(b"in the way")
    caplog.set_level(logging.INFO, logger="reliable_kafka.checkpoint")
    for _ in range(5):
        assert not writer.write(CHECKPOINT)
    directory.unlink()
    assert writer.write(CHECKPOINT)
    assert read_checkpoint(directory) == CHECKPOINT
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 15  # 5 checkpoints x 3 attempts
    assert sum(r.exc_info is not None for r in caplog.records) == 1
    assert "not a directory" in failures[0].getMessage()
    assert any("succeeded again after 15 failure(s)" in r.getMessage() for r in caplog.records)


def test_a_checkpoint_path_that_is_a_regular_file_is_not_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        ensure_checkpoint_dir(path)
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        ensure_checkpoint_dir(path / "below")


def test_streaming_context_checkpoint_on_a_regular_file_says_not_a_directory(
    spark_context: SparkContext, tmp_path: Path
) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"")
    ssc = StreamingContext(spark_context, 1)
    with pytest.raises(NotADirectoryError, match="not a directory"):
        ssc.checkpoint(str(path))
