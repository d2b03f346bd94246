"""The two places the integration tests find Kafka (and ZooKeeper, where the broker has one).

``local``: the servers this project installs and starts itself (reliable_kafka.local).
``docker``: one compose file per broker kind (docker/kafka-3.9.yml, kafka-4.yml, kafka-0.9.yml),
through pytest-docker, with ``--docker`` where a Docker engine answers. Its images hold the jars
the local cluster runs (reliable_kafka.local.docker_context stages them), and every container
uses the host's network: the machines CI runs on allow no bridge network.
Both expose the same small surface, so one test body runs against either.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from reliable_kafka.local.cluster import create_topic_in_zookeeper

DOCKER_DIR = Path(__file__).resolve().parent.parent / "docker"
# Loopback ports each compose file's servers listen on (fixed: a broker advertises the address
# clients use): ZooKeeper's, the broker's HOST listener's.
DOCKER_PORTS: dict[str, tuple[int | None, int]] = {
    "3.9": (22181, 29092),
    "4": (None, 29192),
    "0.9": (22281, 29292),
}
# The broker's SECURED listener (SASL_SSL, SCRAM-SHA-512), where the compose file has one.
DOCKER_SASL_SSL_PORTS: dict[str, int] = {"3.9": 29093, "4": 29194}
DOCKER_SECURITY = DOCKER_DIR / "artifacts" / "security"
# Older than this, the SECURED listener's certificates are made again (they are valid for 30 days).
_SECURITY_MAX_AGE_S = 7 * 86400


def compose_command() -> str:
    """``docker-compose`` (v1, what Debian ships) where installed, else the ``docker compose`` plugin."""
    return "docker-compose" if shutil.which("docker-compose") else "docker compose"


def compose_file_for(kafka_version: str) -> Path:
    """The broker's compose file, its images' jars and the SECURED listener's files staged beside
    it (compose builds missing images)."""
    from reliable_kafka.local.docker_context import stage, stage_security

    if not (DOCKER_DIR / "artifacts" / f"kafka-{kafka_version}" / "libs").is_dir():
        stage(DOCKER_DIR / "artifacts", (kafka_version,))
    ca = DOCKER_SECURITY / "ca.pem"
    if not ca.is_file() or time.time() - ca.stat().st_mtime > _SECURITY_MAX_AGE_S:
        stage_security(DOCKER_SECURITY)
    return DOCKER_DIR / f"kafka-{kafka_version}.yml"


def bridge_networks() -> list[str]:
    """What would break the machine's network rule: Docker networks not of the host or none
    drivers, and a docker0 interface."""
    listed = subprocess.run(
        ["docker", "network", "ls", "--format", "{{.Name}} {{.Driver}}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split("\n")
    found = [line for line in listed if line.strip() and line.split()[-1] not in ("host", "null")]
    if Path("/sys/class/net/docker0").exists():
        found.append("interface docker0")
    return found


class ClusterUnderTest(Protocol):
    kafka: str
    has_zookeeper: bool
    zookeeper_connect: str
    bootstrap_servers: str

    def client_config(self, **overrides: Any) -> dict[str, Any]: ...
    def create_topic(self, name: str, partitions: int = 1, timeout_s: float = 60.0) -> None: ...
    def zookeeper_client(self) -> KazooClient: ...
    def kill_broker(self) -> None: ...
    def start_broker(self) -> None: ...
    def restart_broker(self) -> None: ...
    def kill_zookeeper(self) -> None: ...
    def start_zookeeper(self) -> None: ...
    def restart_zookeeper(self) -> None: ...


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def docker_engine_answers() -> str | None:
    """None when a Docker engine answers, else the reason the docker path is skipped."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    try:
        result = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if result.returncode != 0:
        return (
            "no Docker engine answers (docker info: "
            + result.stderr.decode(errors="replace").strip()[:200]
            + ")"
        )
    return None


def _zookeeper_client(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=10.0)
    client.start(timeout=15.0)
    return client


class DockerComposeCluster:
    """docker/kafka-<version>.yml driven through pytest-docker's ``docker_services``."""

    def __init__(self, kafka_version: str, docker_services: Any) -> None:
        self.kafka = kafka_version
        self._services = docker_services
        zookeeper_port, kafka_port = DOCKER_PORTS[kafka_version]
        self._zookeeper_port = zookeeper_port
        self.bootstrap_servers = f"127.0.0.1:{kafka_port}"

    @property
    def has_zookeeper(self) -> bool:
        return self._zookeeper_port is not None

    @property
    def zookeeper_connect(self) -> str:
        if self._zookeeper_port is None:
            raise RuntimeError(f"the Kafka {self.kafka} compose file runs KRaft: there is no ZooKeeper")
        return f"127.0.0.1:{self._zookeeper_port}"

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.kafka == "0.9":
            config.update({"api.version.request": "false", "broker.version.fallback": "0.9.0.1"})
        return {**config, **overrides}

    def sasl_ssl_config(self, **overrides: Any) -> dict[str, Any]:
        """What a client of the SECURED listener sets, but ``bootstrap.servers``: the listener is
        found by its security protocol (in ZooKeeper's registrations, or the metadata)."""
        from reliable_kafka.local.docker_context import SCRAM_USER

        if self.kafka not in DOCKER_SASL_SSL_PORTS:
            raise RuntimeError(f"the Kafka {self.kafka} compose file has no SASL_SSL listener")
        config = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": SCRAM_USER,
            "sasl.password": (DOCKER_SECURITY / f"{SCRAM_USER}.password").read_text().strip(),
            "ssl.ca.location": str(DOCKER_SECURITY / "ca.pem"),
        }
        return {**config, **overrides}

    @property
    def sasl_ssl_servers(self) -> str:
        return f"127.0.0.1:{DOCKER_SASL_SSL_PORTS[self.kafka]}"

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        try:
            self._services.wait_until_responsive(check=self._broker_ready, timeout=timeout_s, pause=1.0)
        except Exception as exc:
            if "Timeout reached" not in str(exc):
                raise
            # pytest-docker's message names no service and no cause: a broker that never listened
            # once failed a loaded flake-loop round so, and left nothing to read.
            raise TimeoutError(
                f"the Kafka {self.kafka} compose broker did not answer at {self.bootstrap_servers} within "
                f"{timeout_s:.0f} s\n{self._state_for_a_timeout()}"
            ) from exc

    def _state_for_a_timeout(self) -> str:
        """The containers' states and the broker's last log lines, or why they could not be read."""
        parts = []
        asked = (("containers", "ps"), ("the broker's last lines", "logs --no-color --tail 40 kafka"))
        for what, command in asked:
            try:
                parts.append(f"{what}:\n{self._compose(command)}")
            except Exception as exc:
                parts.append(f"{what}: not read ({exc})")
        return "\n".join(parts)

    def _broker_ready(self) -> bool:
        # The broker answers (a killed one's registration may outlive it by a session timeout).
        try:
            metadata = AdminClient(self.client_config()).list_topics(timeout=3)
        except Exception:
            return False
        if not metadata.brokers or not self.has_zookeeper:
            return bool(metadata.brokers)
        try:
            zk = _zookeeper_client(self.zookeeper_connect)
        except Exception:
            return False
        try:
            return bool(zk.exists("/brokers/ids/0"))
        finally:
            zk.stop()
            zk.close()

    def zookeeper_client(self) -> KazooClient:
        return _zookeeper_client(self.zookeeper_connect)

    def create_topic(self, name: str, partitions: int = 1, timeout_s: float = 60.0) -> None:
        admin = AdminClient(self.client_config())
        if self.kafka == "0.9":
            zk = self.zookeeper_client()
            try:
                create_topic_in_zookeeper(zk, name, partitions)
            finally:
                zk.stop()
                zk.close()
        else:
            futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
            futures[name].result(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            topic = admin.list_topics(topic=name, timeout=5).topics.get(name)
            if (
                topic
                and topic.error is None
                and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
            time.sleep(0.2)
        raise TimeoutError(f"topic {name} has no leaders after {timeout_s} s")

    def _compose(self, command: str) -> str:
        return self._services._docker_compose.execute(command).decode()

    def containers(self) -> dict[str, str]:
        """``{service: container id}`` of this compose project."""
        services = self._compose("config --services").split()
        return {service: self._compose(f"ps -q {service}").strip() for service in services}

    def assert_host_network_only(self) -> None:
        """Every container on the host's network, and no bridge network or docker0 anywhere."""
        for service, container in self.containers().items():
            mode = subprocess.run(
                ["docker", "inspect", "--format", "{{.HostConfig.NetworkMode}}", container],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.strip()
            assert mode == "host", f"{service} runs on network {mode!r}, not the host's"
        assert bridge_networks() == [], f"bridge networking appeared: {bridge_networks()}"

    def kill_broker(self) -> None:
        """``docker kill``: SIGKILL to the broker's JVM; the container and its data stay."""
        subprocess.run(
            ["docker", "kill", self.containers()["kafka"]], capture_output=True, timeout=60, check=True
        )

    def start_broker(self) -> None:
        if self.has_zookeeper:
            self._await_registration_gone()
        self._compose("start kafka")
        self.wait_ready()

    def _await_registration_gone(self, timeout_s: float = 60.0) -> None:
        """A killed broker's registration lives until its ZooKeeper session expires; a broker started
        before that finds it and exits (NodeExists), as the local cluster's would."""
        zk = self.zookeeper_client()
        try:
            deadline = time.monotonic() + timeout_s
            while zk.exists("/brokers/ids/0") and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            zk.stop()
            zk.close()

    def restart_broker(self) -> None:
        self.kill_broker()
        self.start_broker()

    def kill_zookeeper(self) -> None:
        self._compose("kill -s SIGKILL zookeeper")

    def start_zookeeper(self) -> None:
        self._compose("start zookeeper")

    def restart_zookeeper(self) -> None:
        self.kill_zookeeper()
        self.start_zookeeper()
