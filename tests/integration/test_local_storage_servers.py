"""The HDFS and S3 servers the project starts: files written, read, renamed and deleted through
fsspec (the clients the checkpoint code uses), and still there after a SIGKILL and a restart."""

from __future__ import annotations

import logging
import socket
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pytest

from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.s3 import LocalS3

pytestmark = pytest.mark.integration


def _webhdfs(hdfs: LocalHdfs) -> Any:
    return fsspec.filesystem(
        "webhdfs", host="127.0.0.1", port=hdfs.webhdfs_port, user=hdfs.user, skip_instance_cache=True
    )


def _s3(store: LocalS3) -> Any:
    return fsspec.filesystem("s3", skip_instance_cache=True, **store.storage_options())


def _round_trip(fs: Any, root: str) -> None:
    fs.pipe_file(f"{root}/a", b"first")
    with fs.open(f"{root}/big", "wb") as handle:
        handle.write(b"x" * (3 << 20))
    assert fs.cat_file(f"{root}/a") == b"first"
    assert fs.cat_file(f"{root}/big", start=10, end=20) == b"x" * 10
    fs.mv(f"{root}/a", f"{root}/b")
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)) == ["b", "big"]
    fs.rm_file(f"{root}/big")
    assert not fs.exists(f"{root}/big")


def test_hdfs_serves_webhdfs_and_keeps_data_across_a_kill(local_hdfs: LocalHdfs) -> None:
    assert local_hdfs.url.startswith("hdfs://127.0.0.1:")
    fs = _webhdfs(local_hdfs)
    root = f"/servers-{uuid.uuid4().hex}"
    _round_trip(fs, root)
    local_hdfs.kill()
    assert not local_hdfs.is_running()
    local_hdfs.restart()
    assert fs.cat_file(f"{root}/b") == b"first"
    fs.pipe_file(f"{root}/after", b"again")
    assert fs.cat_file(f"{root}/after") == b"again"


def test_s3_enforces_its_key_and_keeps_data_across_a_kill(local_s3: LocalS3) -> None:
    fs = _s3(local_s3)
    root = f"{local_s3.bucket}/servers-{uuid.uuid4().hex}"
    _round_trip(fs, root)
    wrong = fsspec.filesystem(
        "s3", skip_instance_cache=True, **{**local_s3.storage_options(), "secret": "not-the-secret"}
    )
    with pytest.raises(PermissionError):
        wrong.ls(local_s3.bucket)
    local_s3.kill()
    local_s3.restart()
    fs.invalidate_cache()
    assert fs.cat_file(f"{root}/b") == b"first"


def test_reprs_hold_no_secret(local_s3: LocalS3) -> None:
    assert local_s3.secret_key not in repr(local_s3)
    assert local_s3.secret_key not in local_s3.log_tail(1000)


def test_an_internal_port_taken_before_weed_binds_it_is_picked_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a busy machine does between our pick of a free port and weed's bind: the port is
    taken (here by a socket bound and not listening, which the pre-start check cannot see). weed
    exits naming the port; the store starts again on fresh internal ports, its endpoint kept."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        store = LocalS3(tmp_path / "s3")
        store._ports["s3.port.iceberg"] = port
        endpoint = store.endpoint_url
        with caplog.at_level(logging.WARNING, logger="reliable_kafka.local.s3"), store:
            assert store._ports["s3.port.iceberg"] != port
            assert store.endpoint_url == endpoint
            _round_trip(_s3(store), f"{store.bucket}/{uuid.uuid4().hex}")
    assert f"s3.port.iceberg port {port} was taken before it bound it" in caplog.text
