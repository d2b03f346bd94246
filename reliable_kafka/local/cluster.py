"""ZooKeeper + one Kafka broker on 127.0.0.1 (or one KRaft broker alone), started, faulted and
cleaned up from Python."""

from __future__ import annotations

import atexit
import json
import logging
import re
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from reliable_kafka.local.broker import KAFKA_09_CLIENT_CONFIG, LocalKafkaBroker, LocalKRaftBroker
from reliable_kafka.local.distribution import DEFAULT_KAFKA, KafkaDistribution, kafka_distribution
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.secured import ClusterSecurity, SecuredClientSettings, grant_and_create_users
from reliable_kafka.local.zookeeper import LocalZooKeeper
from reliable_kafka.util.kafka_errors import kafka_error_of
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from reliable_kafka.util.librdkafka_log import with_logger

logger = logging.getLogger(__name__)

__all__ = ["KAFKA_09_CLIENT_CONFIG", "LocalCluster", "NoZooKeeperError"]

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

# Clusters created and not stopped yet. A script that forgets stop() (or dies of an exception
# outside a with block) would otherwise leave its temp dir behind: the JVMs die with the process
# (java.py), the files do not. Strong references: a cluster is only dropped from here by stop().
_UNSTOPPED: set[LocalCluster] = set()


@atexit.register
def _stop_unstopped_clusters() -> None:
    # Registered after java.py's hook (this module imports it first), so it runs before that one:
    # the servers are killed here, then the dir goes, and nothing writes into it afterwards.
    for cluster in list(_UNSTOPPED):
        try:
            cluster.stop()
        except Exception:
            logger.exception("Could not stop the local cluster in %s at exit", cluster.work_dir)


def create_topic_in_zookeeper(zk: KazooClient, name: str, partitions: int, broker_id: int = 0) -> None:
    """Create a topic on one broker by writing it into ZooKeeper, as Kafka 0.9's AdminUtils does.

    For the 0.9 broker: librdkafka's CreateTopics needs 0.10.1, and this avoids starting a JVM for
    ``kafka-topics.sh``. The broker's controller picks the topic up from there.
    """
    assignment = {str(p): [broker_id] for p in range(partitions)}
    zk.ensure_path("/config/topics")
    zk.ensure_path("/brokers/topics")
    try:
        zk.create(f"/config/topics/{name}", json.dumps({"version": 1, "config": {}}).encode())
        zk.create(f"/brokers/topics/{name}", json.dumps({"version": 1, "partitions": assignment}).encode())
    except NodeExistsError as exc:
        raise ValueError(f"topic {name!r} already exists") from exc


class NoZooKeeperError(RuntimeError):
    """Asked a KRaft cluster (Kafka 4) for its ZooKeeper: it has none."""


class LocalCluster:
    """A real Kafka broker, with a real ZooKeeper where the broker needs one, for the demo and the tests.

    ``kafka`` picks the broker: ``"3.9"`` (the default; ZooKeeper mode), ``"4"`` (KRaft, no
    ZooKeeper process at all) or ``"0.9"`` (the legacy protocol). Use as a context manager, or call
    :meth:`start` and :meth:`stop`. Everything lives under ``work_dir`` (a temporary directory
    unless given, removed on stop). The fault methods (:meth:`kill_broker`, :meth:`restart_broker`,
    :meth:`kill_zookeeper`...) keep the data dirs, so what was written before a crash can be read
    after it.
    """

    def __init__(
        self,
        work_dir: Path | None = None,
        *,
        kafka: str = DEFAULT_KAFKA,
        keep_work_dir: bool = False,
        zookeeper_port: int | None = None,
        kafka_port: int | None = None,
        secure: bool = False,
    ) -> None:
        """``zookeeper_port`` and ``kafka_port`` fix the ports on 127.0.0.1 (default: free ones,
        different on every start of a new cluster); secured, ``kafka_port`` is the SSL listener's.

        ``secure``: no PLAINTEXT listener, an authorizer, users and ACLs, a SASL ZooKeeper (see
        :mod:`reliable_kafka.local.secured`); :attr:`secured` then says how clients log in."""
        self.distribution: KafkaDistribution = kafka_distribution(kafka)
        if zookeeper_port is not None and self.distribution.kraft:
            raise ValueError(
                f"Kafka {self.distribution.version} runs in KRaft mode: it has no ZooKeeper port"
            )
        for name, port in (("zookeeper_port", zookeeper_port), ("kafka_port", kafka_port)):
            if port is not None and not 0 < port < 65536:
                raise ValueError(f"{name} must be 1-65535, got {port}")
        if zookeeper_port is not None and zookeeper_port == kafka_port:
            raise ValueError(f"ZooKeeper and Kafka cannot both listen on port {kafka_port}")
        self._owns_work_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="reliable-kafka-"))
        self.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._keep_work_dir = keep_work_dir
        self.security: ClusterSecurity | None = (
            ClusterSecurity(self.work_dir / "security", zookeeper=not self.distribution.kraft)
            if secure
            else None
        )
        self.zookeeper: LocalZooKeeper | None = None
        self.broker: LocalKafkaBroker | LocalKRaftBroker
        if self.distribution.kraft:
            self.broker = LocalKRaftBroker(
                self.work_dir / "kafka", kafka_port, kafka=self.distribution.kind, security=self.security
            )
        else:
            self.zookeeper = LocalZooKeeper(
                self.work_dir / "zookeeper",
                zookeeper_port,
                sasl_jaas=self.security.zookeeper_jaas if self.security else None,
            )
            self.broker = LocalKafkaBroker(
                self.work_dir / "kafka",
                self.zookeeper.connect_string,
                kafka_port,
                kafka=self.distribution.kind,
                security=self.security,
            )
        _UNSTOPPED.add(self)

    @property
    def kafka(self) -> str:
        """The broker kind: ``3.9``, ``4`` or ``0.9``."""
        return self.distribution.kind

    @property
    def has_zookeeper(self) -> bool:
        return self.zookeeper is not None

    def _zookeeper(self) -> LocalZooKeeper:
        if self.zookeeper is None:
            raise NoZooKeeperError(
                f"Kafka {self.distribution.version} runs in KRaft mode: this cluster has no ZooKeeper. "
                "Use kafka='3.9' or '0.9' for what needs one, or start a LocalZooKeeper alone."
            )
        return self.zookeeper

    @property
    def zookeeper_connect(self) -> str:
        return self._zookeeper().connect_string

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    def client_config(self, **overrides: str | int | bool) -> dict[str, str | int | bool]:
        """confluent-kafka settings that reach this cluster's broker: the 0.9 protocol settings for
        the 0.9 broker, nothing but ``bootstrap.servers`` for the others. Secured, the cluster's
        own super user (``User:admin``, mTLS): for test data and set-up, not for the code under test
        (use :attr:`secured` for that)."""
        return {**self.broker.client_config(), **overrides}

    @property
    def is_secure(self) -> bool:
        return self.security is not None

    @property
    def secured(self) -> SecuredClientSettings:
        """How clients log in to this secured cluster, per mechanism."""
        if self.security is None:
            raise ValueError("this local cluster is not secured: start it with secure=True")
        protocol = {k: v for k, v in self.broker.client_config().items() if k in KAFKA_09_CLIENT_CONFIG}
        return self.security.client_settings(
            kafka=self.kafka,
            sasl_ssl_servers=self.broker.sasl_ssl_servers,
            ssl_servers=self.bootstrap_servers,
            zookeeper_connect=self.zookeeper.connect_string if self.zookeeper else None,
            protocol_settings=protocol,
        )

    def start(self) -> Self:
        _UNSTOPPED.add(self)  # again, for a start after a stop
        try:
            if self.zookeeper is not None:
                self.zookeeper.start()
            self.broker.start()
            if self.security is not None and self.broker.sasl_ssl_servers is not None:
                grant_and_create_users(
                    self.client_config(), self.broker.sasl_ssl_servers, self.security, timeout_s=60.0
                )
        except BaseException:
            self.stop()
            raise
        logger.info(
            "local cluster up: Kafka %s at %s%s, zookeeper %s",
            self.distribution.version,
            self.bootstrap_servers,
            f" (SSL; SASL_SSL at {self.broker.sasl_ssl_servers})" if self.security else "",
            self.zookeeper.connect_string if self.zookeeper else "none (KRaft)",
        )
        return self

    def stop(self) -> None:
        """Stop the servers (broker first, so it can deregister) and remove the work dir.
        Idempotent; also done at interpreter exit for a cluster never stopped."""
        _UNSTOPPED.discard(self)
        self.broker.kill()
        if self.zookeeper is not None:
            self.zookeeper.kill()
        if self._owns_work_dir and not self._keep_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- faults ---------------------------------------------------------------------------

    def kill_broker(self) -> None:
        self.broker.kill()

    def start_broker(self) -> None:
        self.broker.start()

    def restart_broker(self) -> None:
        """SIGKILL the broker and start it again on the same port and data."""
        self.broker.restart()

    def kill_zookeeper(self) -> None:
        self._zookeeper().kill()

    def start_zookeeper(self) -> None:
        self._zookeeper().start()

    def restart_zookeeper(self) -> None:
        self._zookeeper().restart()

    # -- topics ---------------------------------------------------------------------------

    def zookeeper_client(self) -> KazooClient:
        """A started kazoo client for this cluster's ZooKeeper; the caller stops it. Secured, it
        is logged in as the broker (``kafka``), which owns what the broker wrote."""
        sasl = self.security.zookeeper_sasl_options() if self.security else None
        client = kazoo_client(self.zookeeper_connect, timeout=10.0, sasl_options=sasl)
        client.start(timeout=15.0)
        return client

    def create_topic(self, name: str, partitions: int = 1, timeout_s: float = 60.0) -> None:
        """Create ``name`` with ``partitions`` partitions and wait until each has a leader."""
        if not _TOPIC_NAME.match(name):
            raise ValueError(f"invalid topic name {name!r}: use 1-249 of [a-zA-Z0-9._-]")
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        if self.distribution.legacy_protocol:
            self._create_topic_in_zookeeper(name, partitions)
        else:
            self._create_topic_with_admin(name, partitions, timeout_s)
        self.wait_for_leaders(name, partitions, timeout_s)

    def _create_topic_with_admin(self, name: str, partitions: int, timeout_s: float) -> None:
        """CreateTopics, retried: a ZooKeeper-mode broker whose session just expired (after a
        ZooKeeper restart) fails requests until it has a new one."""
        admin = AdminClient(with_logger(self.client_config()))
        deadline = time.monotonic() + timeout_s
        attempt = 0
        while True:
            futures = admin.create_topics(
                [NewTopic(name, num_partitions=partitions, replication_factor=1)],
                operation_timeout=timeout_s,
                request_timeout=timeout_s,
            )
            try:
                futures[name].result(timeout=timeout_s)
                return
            except Exception as exc:
                error = kafka_error_of(exc)
                if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    if attempt == 0:
                        raise ValueError(f"topic {name!r} already exists") from exc
                    return  # an earlier attempt that looked failed did create it
                if time.monotonic() > deadline:
                    raise ClusterStartError(
                        f"Creating topic {name!r} failed: {exc}", self.broker.log_tail()
                    ) from exc
                logger.info("creating topic %s failed (%s); retrying", name, exc)
            attempt += 1
            time.sleep(0.5)

    def _create_topic_in_zookeeper(self, name: str, partitions: int) -> None:
        zk = self.zookeeper_client()
        try:
            create_topic_in_zookeeper(zk, name, partitions, self.broker.broker_id)
        finally:
            stop_kazoo(zk)

    def _wait_for_leaders_in_zookeeper(self, topic: str, partitions: int, deadline: float) -> str:
        zk = self.zookeeper_client()
        try:
            while time.monotonic() < deadline:
                elected = 0
                for partition in range(partitions):
                    try:
                        data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
                    except NoNodeError:
                        continue
                    if json.loads(data.decode("utf-8")).get("leader", -1) >= 0:
                        elected += 1
                if elected == partitions:
                    return "leaders elected"
                time.sleep(0.1)
            return f"{elected}/{partitions} leaders in ZooKeeper"
        finally:
            stop_kazoo(zk)

    def wait_for_leaders(self, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
        """Block until the broker's metadata shows ``partitions`` partitions of ``topic`` with leaders.

        On 0.9 the controller's decision in ZooKeeper comes first: asking the broker before it makes
        one trips a librdkafka Metadata v0 parse error on leaderless partitions.
        """
        deadline = time.monotonic() + timeout_s
        seen = "no answer yet"
        if self.distribution.legacy_protocol:
            seen = self._wait_for_leaders_in_zookeeper(topic, partitions, deadline)
        admin = AdminClient(with_logger(self.client_config()))
        while time.monotonic() < deadline:
            try:
                metadata = admin.list_topics(topic=topic, timeout=5)
            except Exception as exc:
                seen = repr(exc)
            else:
                info = metadata.topics.get(topic)
                if info is not None and info.error is None:
                    ready = [p for p in info.partitions.values() if p.leader >= 0 and p.error is None]
                    if len(ready) == partitions:
                        return
                    seen = f"{len(ready)}/{partitions} partitions with a leader"
                elif info is not None:
                    seen = str(info.error)
            time.sleep(0.2)
        raise ClusterStartError(
            f"Topic {topic!r} did not get leaders for {partitions} partitions within {timeout_s:.0f} s "
            f"(last seen: {seen}).",
            self.broker.log_tail(),
        )
