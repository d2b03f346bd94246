"""A single Kafka 0.9.0.1 broker on 127.0.0.1, registered in a given ZooKeeper."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.local.distribution import kafka_classpath
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.java import JavaServer, ManagedServer
from reliable_kafka.local.ports import LOOPBACK, free_port, port_in_use, wait_port_free

_LOG4J_CONFIG = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.I0Itec.zkclient=WARN
log4j.logger.org.apache.zookeeper=WARN
"""


class LocalKafkaBroker(ManagedServer):
    """One broker whose log dir survives kills and restarts, so data written before survives."""

    DEFAULT_START_TIMEOUT_S = 120.0

    def __init__(
        self,
        work_dir: Path,
        zookeeper_connect: str,
        port: int | None = None,
        *,
        broker_id: int = 0,
        heap: str = "384m",
        zookeeper_session_timeout_ms: int = 4000,
    ) -> None:
        self.work_dir = work_dir
        self.zookeeper_connect = zookeeper_connect
        self.port = port or free_port()
        self.broker_id = broker_id
        self.heap = heap
        self.zookeeper_session_timeout_ms = zookeeper_session_timeout_ms
        super().__init__()
        self._last_registration_owner: int | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def registration_path(self) -> str:
        return f"/brokers/ids/{self.broker_id}"

    def _write_config(self) -> Path:
        log_dir = self.work_dir / "data"
        log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        properties = {
            "broker.id": self.broker_id,
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "host.name": LOOPBACK,
            "port": self.port,
            "advertised.host.name": LOOPBACK,
            "advertised.port": self.port,
            "log.dirs": log_dir,
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.connection.timeout.ms": 30000,
            # A killed broker's registration lives until its session expires; a short
            # session makes restarts quick while tolerating GC pauses on a small heap.
            "zookeeper.session.timeout.ms": self.zookeeper_session_timeout_ms,
            "num.partitions": 1,
            "default.replication.factor": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            "controlled.shutdown.enable": "false",
            # The cleaner wants more than 1 MiB of dedupe buffer per thread; the default
            # 128 MiB does not fit the small heap this broker runs with.
            "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
            "group.min.session.timeout.ms": 1000,
            "group.max.session.timeout.ms": 300000,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "log.segment.bytes": 64 * 1024 * 1024,
            "log.retention.hours": 168,
            "message.max.bytes": 10 * 1024 * 1024,
            "replica.fetch.max.bytes": 10 * 1024 * 1024,
        }
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        (self.work_dir / "log4j.properties").write_text(_LOG4J_CONFIG)
        return config

    def _registration_owner(self, zk: KazooClient) -> int | None:
        try:
            data, stat = zk.get(self.registration_path)
        except NoNodeError:
            return None
        registered = json.loads(data.decode("utf-8"))
        if int(registered.get("port", -1)) != self.port:
            raise ClusterStartError(
                f"Broker id {self.broker_id} is registered in ZooKeeper at {self.zookeeper_connect} by "
                f"another broker ({registered.get('host')}:{registered.get('port')}). Use a fresh "
                "ZooKeeper or another broker id."
            )
        return int(stat.ephemeralOwner)

    def start(self, timeout_s: float = 120.0) -> None:
        if self._server is not None and self._server.is_running():
            return
        if port_in_use(self.port) and not wait_port_free(self.port, 5.0):
            raise ClusterStartError(
                f"Cannot start Kafka: port {self.port} on {LOOPBACK} is already in use by another process."
            )
        self._wait_stale_registration_gone(timeout_s)
        config = self._write_config()
        self._server = JavaServer(
            "kafka",
            "kafka.Kafka",
            kafka_classpath(),
            [str(config)],
            self.work_dir / "server.log",
            heap=self.heap,
            jvm_options=[f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}"],
        )
        self._server.start()
        self._wait_registered(timeout_s)

    def _wait_stale_registration_gone(self, timeout_s: float) -> None:
        """Wait out a crashed predecessor's registration.

        Kafka 0.9 refuses to start while ``/brokers/ids/<id>`` still holds the ephemeral node of
        a killed broker; ZooKeeper removes it when that session expires.
        """
        zk = KazooClient(hosts=self.zookeeper_connect, timeout=10.0)
        zk.start(timeout=15.0)
        try:
            deadline = time.monotonic() + timeout_s
            while self._registration_owner(zk) is not None:
                if time.monotonic() > deadline:
                    raise ClusterStartError(
                        f"{self.registration_path} is still registered {timeout_s:.0f} s after the broker "
                        "stopped; is another broker with the same id running?"
                    )
                time.sleep(0.2)
        finally:
            zk.stop()
            zk.close()

    def _wait_registered(self, timeout_s: float) -> None:
        """Ready = a registration under /brokers/ids owned by a NEW session, and the port open.

        After a kill the old registration lingers until its session expires; waiting for a new
        owner is what tells a restarted broker from the ghost of the previous one.
        """
        assert self._server is not None
        zk = KazooClient(hosts=self.zookeeper_connect, timeout=10.0)
        zk.start(timeout=15.0)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if not self._server.is_running():
                    raise ClusterStartError(
                        f"Kafka exited with code {self._server.exit_code()} during start-up.",
                        self._server.log_tail(),
                    )
                owner = self._registration_owner(zk)
                if owner is not None and owner != self._last_registration_owner and port_in_use(self.port):
                    self._last_registration_owner = owner
                    return
                time.sleep(0.2)
        finally:
            zk.stop()
            zk.close()
        self._server.kill()
        raise ClusterStartError(
            f"Kafka did not register under {self.registration_path} within {timeout_s:.0f} s.",
            self._server.log_tail(),
        )
