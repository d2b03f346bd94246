"""A single-node ZooKeeper on 127.0.0.1, run from the jars in the pyspark wheel."""

from __future__ import annotations

import socket
from pathlib import Path

from reliable_kafka.local.distribution import zookeeper_classpath
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.java import JavaServer, ManagedServer
from reliable_kafka.local.ports import LOOPBACK, free_port, port_in_use, wait_port_free

_LOG4J2_CONFIG = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""


def four_letter_word(port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send one of ZooKeeper's four-letter commands (``ruok``, ``srvr``...) and return the reply."""
    with socket.create_connection((LOOPBACK, port), timeout=timeout_s) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class LocalZooKeeper(ManagedServer):
    """ZooKeeper with its data under ``work_dir``; restartable with its data kept."""

    DEFAULT_START_TIMEOUT_S = 60.0

    def __init__(
        self,
        work_dir: Path,
        port: int | None = None,
        *,
        tick_time_ms: int = 500,
        sasl_jaas: Path | None = None,
    ) -> None:
        """``sasl_jaas``: a JAAS file with a ``Server`` section; clients may then log in with SASL
        (DIGEST-MD5), and nodes created with ``sasl`` ACLs are theirs."""
        self.work_dir = work_dir
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.sasl_jaas = sasl_jaas
        super().__init__()

    @property
    def connect_string(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def _write_config(self) -> Path:
        data_dir = self.work_dir / "data"
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = self.work_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={LOOPBACK}",
                    "maxClientCnxns=0",
                    # Sessions of 1..20 ticks: short enough that a killed broker's
                    # registration expires quickly, long enough for a GC pause.
                    f"minSessionTimeout={2 * self.tick_time_ms}",
                    f"maxSessionTimeout={40 * self.tick_time_ms}",
                    "4lw.commands.whitelist=*",
                    "admin.enableServer=false",
                    "autopurge.purgeInterval=0",
                    *(
                        ["authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"]
                        if self.sasl_jaas is not None
                        else []
                    ),
                    "",
                ]
            )
        )
        (self.work_dir / "log4j2.properties").write_text(_LOG4J2_CONFIG)
        return config

    def start(self, timeout_s: float = 60.0) -> None:
        if self._server is not None and self._server.is_running():
            return
        if port_in_use(self.port) and not wait_port_free(self.port, 5.0):
            raise ClusterStartError(
                f"Cannot start ZooKeeper: port {self.port} on {LOOPBACK} is already in use by another "
                "process. Stop it or choose another port."
            )
        config = self._write_config()
        self._server = JavaServer(
            "zookeeper",
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            zookeeper_classpath(),
            [str(config)],
            self.work_dir / "zookeeper.log",
            heap="128m",
            jvm_options=[
                # C1 only, as the brokers: a local ZooKeeper never runs long enough for C2.
                "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
                "-Dzookeeper.jmx.log4j.disable=true",
                *([f"-Djava.security.auth.login.config={self.sasl_jaas}"] if self.sasl_jaas else []),
            ],
        )
        self._server.start()
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._server is not None
        self._server.await_ready(
            self._serves, "ZooKeeper", f"serve requests on port {self.port}", timeout_s, poll_s=0.1
        )

    def _serves(self) -> bool:
        # 'ruok' says imok as soon as the process runs; 'srvr' answers "not currently serving
        # requests" until sessions can be opened, and a client connecting before that has its
        # connection dropped (kazoo warns about it) and retries.
        try:
            return four_letter_word(self.port, "srvr").startswith("Zookeeper version")
        except OSError:
            return False
