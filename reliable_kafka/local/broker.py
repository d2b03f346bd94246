"""One Kafka broker on 127.0.0.1: ZooKeeper mode (0.9, 3.9) or KRaft combined broker+controller (4).

Every broker keeps its log dir across kills and restarts, so data written before survives, and is
sized for a shared 2-core machine: a small heap, the serial collector, two network and I/O threads.
"""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.local.distribution import (
    DEFAULT_KAFKA,
    KafkaDistribution,
    kafka_classpath,
    kafka_distribution,
)
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.java import JavaServer, ManagedServer, find_java
from reliable_kafka.local.ports import LOOPBACK, free_port, port_in_use, wait_port_free
from reliable_kafka.local.secured import ClusterSecurity, write_private
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger(__name__)

# librdkafka cannot ask a 0.9 broker for its API versions (that request came in 0.10);
# it must be told which protocol to speak.
KAFKA_09_CLIENT_CONFIG: dict[str, str] = {
    "api.version.request": "false",
    "broker.version.fallback": "0.9.0.1",
}

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
log4j.logger.kafka.server.KafkaConfig=WARN
log4j.logger.org.apache.kafka.clients=WARN
"""

_LOG4J2_CONFIG = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = warn
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
"""

# What every modern broker (3.9, 4) is told: one node, small, quick to react.
_SMALL_MODERN_BROKER: dict[str, Any] = {
    "num.partitions": 1,
    "default.replication.factor": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 4,
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    # A group's first member need not wait 3 s for others: tests start one consumer at a time.
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "group.max.session.timeout.ms": 300000,
    # The cleaner wants more than 1 MiB of dedupe buffer per thread; the default
    # 128 MiB does not fit the small heap this broker runs with.
    "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
    "num.network.threads": 2,
    "num.io.threads": 2,
    "background.threads": 2,
    "num.recovery.threads.per.data.dir": 1,
    "num.replica.fetchers": 1,
    "log.segment.bytes": 64 * 1024 * 1024,
    "log.retention.hours": 168,
    "message.max.bytes": 10 * 1024 * 1024,
    "replica.fetch.max.bytes": 10 * 1024 * 1024,
}

# C1 only: less JIT work while a broker starts on two shared cores; a test broker never runs long
# enough for C2's faster code to pay that back.
_MODERN_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)


def _endpoint_ports(registration: Mapping[str, Any]) -> set[int]:
    ports = set()
    for endpoint in registration.get("endpoints") or ():
        if isinstance(endpoint, str) and ":" in endpoint:
            tail = endpoint.rsplit(":", 1)[1]
            if tail.isdigit():
                ports.add(int(tail))
    if isinstance(registration.get("port"), int) and registration["port"] > 0:
        ports.add(registration["port"])
    return ports


class _Broker(ManagedServer):
    """What the ZooKeeper-mode and the KRaft broker share: config file, JVM, client settings."""

    DEFAULT_START_TIMEOUT_S = 120.0

    def __init__(
        self,
        work_dir: Path,
        port: int | None,
        *,
        kafka: str,
        broker_id: int,
        heap: str,
        extra_properties: Mapping[str, Any] | None,
        security: ClusterSecurity | None,
    ) -> None:
        self.work_dir = work_dir
        # Secured: the SSL listener's (the cluster's own tooling speaks mTLS as User:admin).
        self.port = port or free_port()
        self.broker_id = broker_id
        self.heap = heap
        self.distribution: KafkaDistribution = kafka_distribution(kafka)
        self.extra_properties = dict(extra_properties or {})
        self.security = security
        # Secured 3.9 and 4 also listen for SASL_SSL (0.9's SASL is GSSAPI only: not offered).
        self.sasl_ssl_port: int | None = (
            free_port() if security is not None and not self.distribution.legacy_protocol else None
        )
        super().__init__()

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def sasl_ssl_servers(self) -> str | None:
        return None if self.sasl_ssl_port is None else f"{LOOPBACK}:{self.sasl_ssl_port}"

    def _secured_properties(self) -> dict[str, Any]:
        if self.security is None:
            return {}
        if self.sasl_ssl_port is None:
            return self.security.legacy_broker_properties(self.port)
        return self.security.broker_properties(self.sasl_ssl_port, self.port, kraft=self.distribution.kraft)

    @property
    def log_dir(self) -> Path:
        return self.work_dir / "data"

    def client_config(self) -> dict[str, str]:
        """What a confluent-kafka client needs to reach this broker, and nothing else."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.security is not None:
            config = self.security.admin_config(self.bootstrap_servers)
        if self.distribution.legacy_protocol:
            config.update(KAFKA_09_CLIENT_CONFIG)
        return config

    def _properties(self) -> dict[str, Any]:
        raise NotImplementedError

    def _write_config(self) -> Path:
        self.log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        properties = {**self._properties(), **self._secured_properties(), **self.extra_properties}
        config = self.work_dir / "server.properties"
        # Owner-only: a secured broker's file holds its store password and the PLAIN users'.
        write_private(config, "".join(f"{key}={value}\n" for key, value in properties.items()))
        (self.work_dir / "log4j.properties").write_text(_LOG4J_CONFIG)
        (self.work_dir / "log4j2.properties").write_text(_LOG4J2_CONFIG)
        return config

    def _jvm_options(self) -> list[str]:
        options = [
            f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.work_dir / 'logs'}",
        ]
        if not self.distribution.legacy_protocol:
            options += _MODERN_JVM_OPTIONS
        if self.security is not None:
            options += self.security.broker_jvm_options()
        return options

    def _check_port_free(self) -> None:
        for port in (self.port, self.sasl_ssl_port):
            if port is not None and port_in_use(port) and not wait_port_free(port, 5.0):
                raise ClusterStartError(
                    f"Cannot start Kafka: port {port} on {LOOPBACK} is already in use by another process."
                )

    def _launch(self, config: Path) -> None:
        self._server = JavaServer(
            "kafka",
            "kafka.Kafka",
            kafka_classpath(self.distribution.kind),
            [str(config)],
            self.work_dir / "server.log",
            heap=self.heap,
            jvm_options=self._jvm_options(),
        )
        self._server.start()

    def _fail_if_exited(self) -> None:
        assert self._server is not None
        if not self._server.is_running():
            raise ClusterStartError(
                f"Kafka {self.distribution.version} exited with code {self._server.exit_code()} "
                "during start-up.",
                self._server.log_tail(),
            )

    def _give_up(self, what: str, timeout_s: float) -> ClusterStartError:
        assert self._server is not None
        self._server.kill()
        return ClusterStartError(
            f"Kafka {self.distribution.version} {what} within {timeout_s:.0f} s.", self._server.log_tail()
        )

    def _answers_metadata(self, admin: AdminClient) -> bool:
        """True once this broker lists itself in a Metadata answer: it has joined the cluster."""
        try:
            metadata = admin.list_topics(timeout=2)
        except Exception:
            return False
        return self.broker_id in metadata.brokers

    def _admin(self) -> AdminClient:
        # The broker refuses connections until it listens; LibrdkafkaLog logs librdkafka's
        # complaints about that below WARNING.
        return AdminClient(
            with_logger(
                {
                    **self.client_config(),
                    "socket.connection.setup.timeout.ms": 2000,
                    "reconnect.backoff.max.ms": 500,
                }
            )
        )


class LocalKafkaBroker(_Broker):
    """A ZooKeeper-mode broker (Kafka 0.9 or 3.9) registered in a given ZooKeeper."""

    def __init__(
        self,
        work_dir: Path,
        zookeeper_connect: str,
        port: int | None = None,
        *,
        kafka: str = DEFAULT_KAFKA,
        broker_id: int = 0,
        heap: str = "384m",
        zookeeper_session_timeout_ms: int = 4000,
        extra_properties: Mapping[str, Any] | None = None,
        security: ClusterSecurity | None = None,
    ) -> None:
        super().__init__(
            work_dir,
            port,
            kafka=kafka,
            broker_id=broker_id,
            heap=heap,
            extra_properties=extra_properties,
            security=security,
        )
        if self.distribution.kraft:
            raise ValueError(f"Kafka {self.distribution.kind} has no ZooKeeper mode; use LocalKRaftBroker")
        self.zookeeper_connect = zookeeper_connect
        self.zookeeper_session_timeout_ms = zookeeper_session_timeout_ms
        self._last_registration_owner: int | None = None

    @property
    def registration_path(self) -> str:
        return f"/brokers/ids/{self.broker_id}"

    def _properties(self) -> dict[str, Any]:
        common: dict[str, Any] = {
            "broker.id": self.broker_id,
            "log.dirs": self.log_dir,
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.connection.timeout.ms": 30000,
            # A killed broker's registration lives until its session expires; a short
            # session makes restarts quick while tolerating GC pauses on a small heap.
            "zookeeper.session.timeout.ms": self.zookeeper_session_timeout_ms,
            "controlled.shutdown.enable": "false",
        }
        listener = f"PLAINTEXT://{LOOPBACK}:{self.port}"
        if self.distribution.legacy_protocol:
            # 0.9's old names for the PLAINTEXT listener; a secured one has none.
            plaintext = {
                "host.name": LOOPBACK,
                "port": self.port,
                "advertised.host.name": LOOPBACK,
                "advertised.port": self.port,
            }
            return {
                **common,
                "listeners": listener,
                **({} if self.security is not None else plaintext),
                "num.partitions": 1,
                "default.replication.factor": 1,
                "offsets.topic.replication.factor": 1,
                "offsets.topic.num.partitions": 4,
                "auto.create.topics.enable": "true",
                "delete.topic.enable": "true",
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
        return {**common, **_SMALL_MODERN_BROKER, "listeners": listener, "advertised.listeners": listener}

    def _registration_owner(self, zk: KazooClient) -> int | None:
        try:
            data, stat = zk.get(self.registration_path)
        except NoNodeError:
            return None
        registered = json.loads(data.decode("utf-8"))
        if self.port not in _endpoint_ports(registered):
            raise ClusterStartError(
                f"Broker id {self.broker_id} is registered in ZooKeeper at {self.zookeeper_connect} by "
                f"another broker ({registered.get('endpoints') or registered.get('port')}). Use a fresh "
                "ZooKeeper or another broker id."
            )
        return int(stat.ephemeralOwner)

    def start(self, timeout_s: float = 120.0) -> None:
        if self._server is not None and self._server.is_running():
            return
        self._check_port_free()
        self._wait_stale_registration_gone(timeout_s)
        config = self._write_config()
        self._launch(config)
        self._wait_registered(timeout_s)

    def _wait_stale_registration_gone(self, timeout_s: float) -> None:
        """Wait out a crashed predecessor's registration.

        Kafka refuses to start while ``/brokers/ids/<id>`` still holds the ephemeral node of
        a killed broker; ZooKeeper removes it when that session expires.
        """
        zk = kazoo_client(self.zookeeper_connect, timeout=10.0)
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
            stop_kazoo(zk)

    def _wait_registered(self, timeout_s: float) -> None:
        """Ready = a registration under /brokers/ids owned by a NEW session, the port open, and
        (3.9) the broker naming itself in a Metadata answer.

        After a kill the old registration lingers until its session expires; waiting for a new
        owner is what tells a restarted broker from the ghost of the previous one.
        """
        assert self._server is not None
        deadline = time.monotonic() + timeout_s
        zk = kazoo_client(self.zookeeper_connect, timeout=10.0)
        zk.start(timeout=15.0)
        try:
            while True:
                if time.monotonic() > deadline:
                    raise self._give_up(f"did not register under {self.registration_path}", timeout_s)
                self._fail_if_exited()
                owner = self._registration_owner(zk)
                if owner is not None and owner != self._last_registration_owner and port_in_use(self.port):
                    self._last_registration_owner = owner
                    break
                time.sleep(0.2)
        finally:
            stop_kazoo(zk)
        if self.distribution.legacy_protocol:
            return
        admin = self._admin()
        while not self._answers_metadata(admin):
            if time.monotonic() > deadline:
                raise self._give_up("registered but did not answer a Metadata request", timeout_s)
            self._fail_if_exited()
            time.sleep(0.2)


def _new_cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage random-uuid`` makes one: 16 random bytes, base64url."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        # Kafka never hands out an id that starts with '-': it would read as a command-line flag.
        if not cluster_id.startswith("-"):
            return cluster_id


class LocalKRaftBroker(_Broker):
    """Kafka 4 in KRaft mode: one process that is both broker and its own controller quorum.

    No ZooKeeper: the metadata lives in the controller's log under the same data dir, which is
    formatted once (``kafka-storage format``) and kept across kills and restarts.
    """

    def __init__(
        self,
        work_dir: Path,
        port: int | None = None,
        *,
        kafka: str = "4",
        broker_id: int = 0,
        controller_port: int | None = None,
        heap: str = "384m",
        extra_properties: Mapping[str, Any] | None = None,
        security: ClusterSecurity | None = None,
    ) -> None:
        super().__init__(
            work_dir,
            port,
            kafka=kafka,
            broker_id=broker_id,
            heap=heap,
            extra_properties=extra_properties,
            security=security,
        )
        if not self.distribution.kraft:
            raise ValueError(f"Kafka {self.distribution.kind} has no KRaft mode; use LocalKafkaBroker")
        self.controller_port = controller_port or free_port()

    def _secured_properties(self) -> dict[str, Any]:
        if self.security is None:
            return {}
        properties = super()._secured_properties()
        # The controller's listener is mTLS too: a PLAINTEXT one would make anyone reaching it
        # User:ANONYMOUS, which the broker's own controller connection would then need as super user.
        properties["listeners"] += f",CONTROLLER://{LOOPBACK}:{self.controller_port}"
        properties["listener.security.protocol.map"] = "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL"
        return properties

    def _properties(self) -> dict[str, Any]:
        listener = f"PLAINTEXT://{LOOPBACK}:{self.port}"
        return {
            "process.roles": "broker,controller",
            "node.id": self.broker_id,
            "controller.quorum.voters": f"{self.broker_id}@{LOOPBACK}:{self.controller_port}",
            "listeners": f"{listener},CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": listener,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.log_dir,
            **_SMALL_MODERN_BROKER,
            # The controller refuses a restarted broker's registration while the killed one's
            # session lives (9 s by default); a short one makes restarts quick, as in ZooKeeper mode.
            "broker.heartbeat.interval.ms": 500,
            "broker.session.timeout.ms": 4000,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
        }

    def _format_storage(self, config: Path) -> None:
        """``kafka-storage format``, once: a restart must find the metadata log it left."""
        if (self.log_dir / "meta.properties").exists():
            return
        command = [
            find_java(),
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            "-cp",
            kafka_classpath(self.distribution.kind),
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            _new_cluster_id(),
            "--config",
            str(config),
        ]
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=120, stdin=subprocess.DEVNULL
        )
        if result.returncode != 0:
            raise ClusterStartError(
                f"'kafka-storage format' for Kafka {self.distribution.version} failed "
                f"(exit {result.returncode}).",
                (result.stdout + result.stderr)[-4000:],
            )

    def start(self, timeout_s: float = 120.0) -> None:
        if self._server is not None and self._server.is_running():
            return
        self._check_port_free()
        if port_in_use(self.controller_port) and not wait_port_free(self.controller_port, 5.0):
            raise ClusterStartError(
                f"Cannot start Kafka's controller: port {self.controller_port} on {LOOPBACK} is already "
                "in use by another process."
            )
        config = self._write_config()
        self._format_storage(config)
        self._launch(config)
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        """Ready = the metadata quorum (this one node) is up and the broker answers Metadata with itself.

        A KRaft broker lists itself only once it has caught up with the metadata log and been
        unfenced by the controller, so a Metadata answer naming it covers both.
        """
        deadline = time.monotonic() + timeout_s
        admin = self._admin()
        while not self._answers_metadata(admin):
            if time.monotonic() > deadline:
                raise self._give_up("did not answer Metadata as a member of its KRaft quorum", timeout_s)
            self._fail_if_exited()
            time.sleep(0.2)
