"""A YARN NodeManager as a process of its own, on a loopback address of its own (127.0.0.x).

Hadoop's ``MiniYARNCluster`` runs its NodeManagers inside its own JVM and binds every one of them
to ``localhost`` (its ``NodeManagerWrapper`` sets ``yarn.nodemanager.address``, the localizer's and
the web app's to ``MiniYARNCluster.getHostname()``, which is ``localhost``): their containers share
one host name, and no NodeManager can be lost without the ResourceManager and the others. Here a
NodeManager is Hadoop's own ``org.apache.hadoop.yarn.server.nodemanager.NodeManager`` main, run
from the minicluster's jars against the ResourceManager that ``MiniYarnMain`` started, with its
configuration (``yarn-site.xml`` and ``core-site.xml``, first on its classpath) plus its own
addresses and directories. Losing it is what losing a machine does to YARN: :meth:`lose` SIGKILLs
the NodeManager and every process of its containers (the executors and their Python workers,
which run in sessions of their own under its directory), and the ResourceManager notices only when
its heartbeats stop (``yarn.nm.liveness-monitor.expiry-interval-ms``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path

from reliable_kafka.local.java import JavaServer, ManagedServer

NODEMANAGER_CLASS = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"


def read_hadoop_conf(path: Path) -> dict[str, str]:
    """The properties of a Hadoop configuration file (``<configuration><property>...``)."""
    properties = {}
    # The file the ResourceManager of this cluster wrote (MiniYarnMain), not outside input.
    for prop in ET.parse(path).getroot().iter("property"):  # noqa: S314
        name, value = prop.findtext("name"), prop.findtext("value")
        if name is not None:
            properties[name] = value or ""
    return properties


def write_hadoop_conf(properties: Mapping[str, str], path: Path) -> None:
    """``properties`` as a Hadoop configuration file, written beside and renamed into place."""
    root = ET.Element("configuration")
    for name, value in properties.items():
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    staged = path.with_name(f".{path.name}.tmp")
    ET.ElementTree(root).write(staged, encoding="utf-8", xml_declaration=True)
    staged.replace(path)


def processes_under(directory: Path) -> list[int]:
    """Pids of this user's processes whose working directory is inside ``directory``: the containers
    a NodeManager started there (each in a session of its own)."""
    root = directory.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(entry / "cwd")).is_relative_to(root):
                found.append(int(entry.name))
    return found


def free_port_on(address: str) -> int:
    """A port that was free on ``address`` a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class YarnNodeManager(ManagedServer):
    """One NodeManager on ``address`` (e.g. ``127.0.0.3``), its state under ``work_dir``.

    ``cluster_conf_dir`` holds the ResourceManager's ``yarn-site.xml`` and ``core-site.xml``
    (``LocalYarn.conf_dir``); ``classpath`` the minicluster's jars; ``env`` is inherited by its
    containers (``JAVA_HOME``). ``registered`` is asked, with this NodeManager's RPC port, whether
    the ResourceManager lists it as running.
    """

    def __init__(
        self,
        work_dir: Path,
        address: str,
        *,
        cluster_conf_dir: Path,
        classpath: str,
        memory_mb: int,
        vcores: int,
        env: Mapping[str, str],
        registered: Callable[[int], bool],
    ) -> None:
        super().__init__()
        self.work_dir = work_dir
        self.address = address
        self.port = 0
        self._cluster_conf_dir = cluster_conf_dir
        self._classpath = classpath
        self._memory_mb = memory_mb
        self._vcores = vcores
        self._env = dict(env)
        self._registered = registered

    @property
    def log_dir(self) -> Path:
        """``yarn.nodemanager.log-dirs``: ``<application>/<container>/stdout|stderr``."""
        return self.work_dir / "logs"

    def _write_conf(self) -> Path:
        conf_dir = self.work_dir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port_on(self.address)
        yarn_site = read_hadoop_conf(self._cluster_conf_dir / "yarn-site.xml")
        yarn_site.update(
            {
                # Its own address, for its RPC (the port known up front: the NodeId's), its
                # localizer and its web app: what MiniYARNCluster pins to localhost.
                "yarn.nodemanager.hostname": self.address,
                "yarn.nodemanager.address": f"{self.address}:{self.port}",
                "yarn.nodemanager.localizer.address": f"{self.address}:0",
                "yarn.nodemanager.webapp.address": f"{self.address}:0",
                "yarn.nodemanager.webapp.https.address": f"{self.address}:0",
                "yarn.nodemanager.collector-service.address": f"{self.address}:0",
                "yarn.nodemanager.local-dirs": str(self.work_dir / "local"),
                "yarn.nodemanager.log-dirs": str(self.log_dir),
                "yarn.nodemanager.resource.memory-mb": str(self._memory_mb),
                "yarn.nodemanager.resource.cpu-vcores": str(self._vcores),
                # As MiniYARNCluster's own NodeManagers: a container is its JVM plus Python workers,
                # which a memory check on this shared machine would count against a test's sizes.
                "yarn.nodemanager.pmem-check-enabled": "false",
                "yarn.nodemanager.vmem-check-enabled": "false",
                # A lost node's containers are gone: nothing to recover on a restart.
                "yarn.nodemanager.recovery.enabled": "false",
            }
        )
        write_hadoop_conf(yarn_site, conf_dir / "yarn-site.xml")
        core_site = read_hadoop_conf(self._cluster_conf_dir / "core-site.xml")
        write_hadoop_conf(core_site, conf_dir / "core-site.xml")
        log4j = self._cluster_conf_dir.parent / "log4j.properties"
        if log4j.is_file():
            (conf_dir / "log4j.properties").write_text(log4j.read_text())
        return conf_dir

    def start(self, timeout_s: float = ManagedServer.DEFAULT_START_TIMEOUT_S) -> None:
        self.launch()
        self.await_registered(timeout_s)

    def launch(self) -> None:
        """Start the JVM without waiting (several NodeManagers start side by side)."""
        if self._server is not None and self._server.is_running():
            return
        conf_dir = self._write_conf()
        self._server = JavaServer(
            f"yarn-nodemanager-{self.address}",
            NODEMANAGER_CLASS,
            f"{conf_dir}{os.pathsep}{self._classpath}",
            [],
            self.work_dir / "nodemanager.log",
            heap="256m",
            jvm_options=[
                f"-Dlog4j.configuration={(conf_dir / 'log4j.properties').as_uri()}",
                f"-Dhadoop.tmp.dir={self.work_dir / 'tmp'}",
                "-XX:TieredStopAtLevel=1",
            ],
            env=self._env,
        )
        self._server.start()

    def await_registered(self, timeout_s: float) -> None:
        assert self._server is not None, "launch() first"
        self._server.await_ready(
            lambda: self._registered(self.port),
            f"YARN NodeManager {self.address}",
            "register with the ResourceManager",
            timeout_s,
            poll_s=0.5,
        )

    def container_processes(self) -> list[int]:
        """Pids of the processes of its containers (and of itself): those working under its directory."""
        return processes_under(self.work_dir)

    def lose(self) -> list[int]:
        """The machine gone: SIGKILL to the NodeManager and to every process of its containers,
        at once (no NodeManager left to stop them, no word to the ResourceManager). The pids."""
        doomed = [pid for pid in [self.pid] if pid is not None and self.is_running()]
        doomed += [pid for pid in self.container_processes() if pid not in doomed]
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self._server is not None:
            self._server.kill()  # reaps it
        return doomed

    def __repr__(self) -> str:
        return f"YarnNodeManager({self.address}:{self.port}, {self._memory_mb} MB)"
