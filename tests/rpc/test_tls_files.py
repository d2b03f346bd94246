"""TLS from the receiver settings' PEM files: the Spark keys, the tracker socket and a block fetch
by a batch partition, over real sockets with a certificate made in the test."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reliable_kafka.dstream.block_partition import BlockPartition
from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.rpc import connect, new_secret
from reliable_kafka.rpc.errors import FrameError
from reliable_kafka.rpc.tls import TlsFiles, tls_files
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage.block_server import BlockServer


@pytest.fixture
def pem_files(tmp_path: Path) -> TlsFiles:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl executable to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=reliable-kafka-test",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return TlsFiles(str(cert), str(key))


def test_the_spark_keys_set_the_files_and_cert_and_key_go_together() -> None:
    settings = StreamingSettings.from_spark_conf(
        {
            "spark.streaming.receiver.tls.certFile": "/etc/rk/cert.pem",
            "spark.streaming.receiver.tls.keyFile": "/etc/rk/key.pem",
            "spark.streaming.receiver.tls.caFile": "/etc/rk/ca.pem",
        }
    )
    tls = settings.receiver.tls()
    assert tls == TlsFiles("/etc/rk/cert.pem", "/etc/rk/key.pem", "/etc/rk/ca.pem")
    assert tls is not None and tls.trusted_cas == "/etc/rk/ca.pem"
    assert TlsFiles("/c.pem", "/k.pem").trusted_cas == "/c.pem"
    assert tls_files(None, None, None) is None
    with pytest.raises(ValueError, match="go together"):
        StreamingSettings.from_spark_conf({"spark.streaming.receiver.tls.certFile": "/etc/rk/cert.pem"})


def test_a_batch_partition_fetches_a_block_over_tls(pem_files: TlsFiles) -> None:
    secret = new_secret()
    blocks = {"input-0-1": b"block bytes"}
    server = BlockServer(blocks.get, secret, host="127.0.0.1", ssl_context=pem_files.server_context())
    server.start()
    try:
        location = BlockLocation("127.0.0.1", "1", None, server.address[1])
        partition = BlockPartition(
            "input-0-1", location=location, fetch_secret=secret, fetch_tls_ca=pem_files.cert_file
        )
        assert BlockPartition.decode(partition.encode()).read() == b"block bytes"
        # A client without TLS cannot talk to it: the server wants a TLS handshake first. The
        # client sees the reset, or reads the server's TLS alert as a frame too long to be one.
        with pytest.raises((OSError, FrameError)):
            connect("127.0.0.1", server.address[1], secret, timeout_s=2)
    finally:
        server.stop()
