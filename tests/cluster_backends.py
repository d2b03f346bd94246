"""The two places the integration tests find ZooKeeper + Kafka.

``local``: the servers this project installs and starts itself (reliable_kafka.local).
``docker``: docker/docker-compose.yml (a current Kafka 3.x in ZooKeeper mode), through
pytest-docker, used only where a Docker engine answers.
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

COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker" / "docker-compose.yml"
DOCKER_ZOOKEEPER_PORT = 22181
DOCKER_KAFKA_PORT = 29092


class ClusterUnderTest(Protocol):
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
    """docker/docker-compose.yml driven through pytest-docker's ``docker_services``."""

    zookeeper_connect = f"127.0.0.1:{DOCKER_ZOOKEEPER_PORT}"
    bootstrap_servers = f"127.0.0.1:{DOCKER_KAFKA_PORT}"

    def __init__(self, docker_services: Any) -> None:
        self._services = docker_services

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        self._services.wait_until_responsive(check=self._broker_registered, timeout=timeout_s, pause=1.0)

    def _broker_registered(self) -> bool:
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

    def _compose(self, command: str) -> None:
        self._services._docker_compose.execute(command)

    def kill_broker(self) -> None:
        self._compose("kill -s SIGKILL kafka")

    def start_broker(self) -> None:
        self._compose("start kafka")
        self.wait_ready()

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
