"""The state checkpoint file format and records (``reliable_kafka/state_checkpoint.py``), without Spark."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.checkpoint import Checkpoint
from reliable_kafka.state_checkpoint import (
    CODEC_MSGPACK,
    CODEC_NAMES,
    CODEC_PYTHON,
    StateCheckpointError,
    StateFile,
    StateSnapshot,
    StateStreamRecord,
    _partition_writer,
    clean,
    encode_records,
    frame,
    unframe,
)

PLAIN: list[Any] = [
    ("a", 1),
    (("t", 2), [1, 2.5, None, True]),
    ("nested", {"k": ("x", b"\x00")}),
    (7, "ü"),
]


def framed(records: list[Any]) -> tuple[bytes, StateFile]:
    codec, payload = encode_records(records)
    data, digest = frame(codec, payload)
    return data, StateFile("part-00000-x", digest, len(data), len(records), CODEC_NAMES[codec])


def test_plain_records_are_msgpack_and_keep_their_types() -> None:
    codec, _ = encode_records(PLAIN)
    assert codec == CODEC_MSGPACK
    data, expected = framed(PLAIN)
    back = unframe(data, expected, "f")
    assert back == PLAIN
    assert [type(k) for k, _ in back] == [type(k) for k, _ in PLAIN]  # tuple keys stay tuples (hashable)
    assert type(back[1][1]) is list


@pytest.mark.parametrize("value", [{1, 2}, frozenset({"a"}), 1 << 70, Path("/x")])
def test_values_that_are_not_plain_data_use_the_python_codec(value: Any) -> None:
    records = [("k", value)]
    codec, _ = encode_records(records)
    assert codec == CODEC_PYTHON
    data, expected = framed(records)
    assert unframe(data, expected, "f") == records


def test_damaged_files_are_refused_before_decoding() -> None:
    data, expected = framed([("k", {1})])  # pickled: must never be loaded unchecked
    with pytest.raises(StateCheckpointError, match="truncated"):
        unframe(data[:-5], expected, "dir/part")
    flipped = data[:20] + bytes([data[20] ^ 1]) + data[21:]
    with pytest.raises(StateCheckpointError, match="SHA-256"):
        unframe(flipped, expected, "dir/part")
    with pytest.raises(StateCheckpointError, match="not a state checkpoint file"):
        unframe(b"X" + data[1:], expected, "dir/part")
    other = StateFile(expected.name, "0" * 64, expected.size, expected.records, expected.codec)
    with pytest.raises(StateCheckpointError, match="dir/part fails its SHA-256"):
        unframe(data, other, "dir/part")


def test_records_round_trip_through_the_driver_checkpoint() -> None:
    snapshot = StateSnapshot(4000, "0-4000", (StateFile("part-00000-ab", "f" * 64, 60, 2, "msgpack"),), True)
    record = StateStreamRecord(0, "StateDStream(update=m.f, slide=1000ms)", (snapshot,))
    checkpoint = Checkpoint(5000, 0, 1000, 1000, 5000, state_streams=(record,))
    assert Checkpoint.from_bytes(checkpoint.to_bytes()) == checkpoint
    # A checkpoint from before state checkpoints reads as one without state.
    old = checkpoint.to_dict()
    del old["state_streams"]
    assert Checkpoint.from_dict(old).state_streams == ()


@pytest.mark.parametrize("name", ["../escape", ".hidden", "a/b"])
def test_file_names_that_leave_the_snapshot_directory_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="plain"):
        StateFile.from_dict({"name": name, "sha256": "0" * 64, "size": 1, "records": 0, "codec": "msgpack"})
    with pytest.raises(ValueError, match="plain"):
        StateSnapshot.from_dict({"time_ms": 1, "directory": name, "files": []})


def test_a_partition_file_is_written_owner_only_and_clean_keeps_the_newer(tmp_path: Path) -> None:
    state = tmp_path / "state"
    for snapshot_dir in ("0-2000", "0-4000", "0-6000", "1-2000"):
        (result,) = _partition_writer(str(state), snapshot_dir)(0, iter(PLAIN))
    written = StateFile.from_dict(result["file"])
    path = state / "1-2000" / written.name
    assert unframe(path.read_bytes(), written, "f") == PLAIN
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == stat.S_IMODE((state / "1-2000").stat().st_mode) == 0o700

    assert clean(str(state), {0: 4000}) == 1
    assert sorted(p.name for p in state.iterdir()) == ["0-4000", "0-6000", "1-2000"]
