"""A real YARN on 127.0.0.1: Hadoop's MiniYARNCluster (one ResourceManager, two NodeManagers, one JVM).

The jars are Hadoop's shaded minicluster (the Hadoop client version pyspark 4 ships), resolved once
with Maven into the user cache dir like the HDFS ones, plus what its YARN half needs and its pom
leaves out: a logging binding, JUnit, and Bouncy Castle (the ResourceManager's init). The cluster is
started by a small Java main of ours (``jvm/MiniYarnMain.java``, compiled once with ``javac`` into
the same cache), which writes ``yarn-site.xml`` and ``core-site.xml`` for ``HADOOP_CONF_DIR`` once
every NodeManager has registered. ``fs.defaultFS`` is the suite's HDFS when one is given, so that
Spark's staging directory and ``spark.yarn.archive`` live there, as on a real cluster.

Containers are their own sessions (the NodeManagers start them with ``setsid``): a stop that only
ended the JVM would leave them running. :meth:`LocalYarn.stop` lets the NodeManagers kill their
containers (SIGTERM to the JVM, whose shutdown hook stops the cluster), then kills whatever still
runs in the cluster's directories, each by its pid.

``LocalYarn(nodemanager_processes=True)`` starts the ResourceManager alone and runs each
NodeManager as a process of its own on its own loopback address
(:mod:`reliable_kafka.local.yarn_nodemanager`): MiniYARNCluster binds all of its NodeManagers to
``localhost`` inside its JVM, where none can be lost alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reliable_kafka.local.distribution import MavenJars, cache_root, cached_maven_jars
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.hdfs import HADOOP_VERSION
from reliable_kafka.local.java import JavaServer, ManagedServer, find_java
from reliable_kafka.local.yarn_nodemanager import YarnNodeManager, processes_under

YARN_JARS = MavenJars(
    label=f"Hadoop {HADOOP_VERSION} MiniYARNCluster",
    artifact_id=f"hadoop-yarn-minicluster-{HADOOP_VERSION}",
    coordinates=(
        f"org.apache.hadoop:hadoop-client-minicluster:{HADOOP_VERSION}",
        # The ResourceManager and NodeManagers log through slf4j to log4j 1.x (reload4j).
        "org.slf4j:slf4j-reload4j:1.7.36",
        "ch.qos.reload4j:reload4j:1.2.25",
        # The minicluster's test harness links JUnit 4 and 5 classes it does not bring along.
        "junit:junit:4.13.2",
        "org.junit.jupiter:junit-jupiter-api:5.10.2",
        # The ResourceManager's init loads Bouncy Castle (its proxy CA), which the pom leaves out.
        "org.bouncycastle:bcprov-jdk18on:1.82",
        "org.bouncycastle:bcpkix-jdk18on:1.82",
        "org.bouncycastle:bcutil-jdk18on:1.82",
    ),
    download_mb=115,
    marker_jar="bcpkix-jdk18on-1.82.jar",
)
MAIN_SOURCE = Path(__file__).with_name("jvm") / "MiniYarnMain.java"
_MAIN_CLASS = "MiniYarnMain"
# A NodeManager's share: an application master (driver) and one 2-core executor of Spark's smallest
# useful sizes (512 MB heaps, 384 MB overhead each) fit on one, with room for a relaunch.
NODEMANAGER_MEMORY_MB = 3072
NODEMANAGER_VCORES = 4
# Log lines of the RM kept at INFO: applications and their attempts changing state.
_LOG4J = """\
log4j.rootLogger=WARN, console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n
log4j.logger.org.apache.hadoop.yarn.server.resourcemanager.rmapp=INFO
log4j.logger.org.apache.hadoop.yarn.server.resourcemanager.RMAuditLogger=INFO
log4j.logger.org.apache.hadoop.yarn.server.nodemanager.containermanager.container=INFO
log4j.logger.org.apache.hadoop.yarn.server.resourcemanager.rmnode=INFO
"""
# `yarn <command>` (Hadoop's bin/yarn, not shipped with the jars): the class it runs for each.
YARN_COMMANDS = {
    "application": "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
    "logs": "org.apache.hadoop.yarn.client.cli.LogsCLI",
}
# The CLI's own log lines on stderr, its answer alone on stdout.
_CLI_LOG4J = """\
log4j.rootLogger=WARN, console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n
"""


def _unavailable(why: str) -> str:
    return (
        f"YARN (Hadoop {HADOOP_VERSION}'s MiniYARNCluster) is fetched once from Maven Central with "
        f"'mvn', and {why}. Install Maven (e.g. 'apt-get install maven') where Maven Central or a "
        "mirror in ~/.m2/settings.xml is reachable."
    )


def yarn_minicluster_libs() -> Path:
    """The minicluster's jars with what its YARN half needs, installing them on first use."""
    target = cache_root() / f"hadoop-yarn-minicluster-{HADOOP_VERSION}"
    return cached_maven_jars(YARN_JARS, target, _unavailable)


def yarn_main_jar() -> Path:
    """``MiniYarnMain.java`` compiled against the minicluster's jars, once per version of the source
    (the jar's name holds the source's digest)."""
    libs = yarn_minicluster_libs()
    digest = hashlib.sha256(MAIN_SOURCE.read_bytes() + HADOOP_VERSION.encode()).hexdigest()[:16]
    jar = libs.parent / f"mini-yarn-main-{digest}.jar"
    if jar.is_file():
        return jar
    javac = shutil.which("javac", path=f"{Path(find_java()).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if javac is None:
        raise ClusterStartError(
            f"{MAIN_SOURCE.name} (the YARN cluster's main) is compiled once with 'javac', which was "
            "not found beside java nor on PATH: install a JDK 17 (e.g. 'apt-get install "
            "openjdk-17-jdk-headless')."
        )
    with tempfile.TemporaryDirectory(dir=jar.parent, prefix=".compile-") as scratch:
        classes = Path(scratch) / "classes"
        command = [javac, "--release", "17", "-cp", f"{libs}/*", "-d", str(classes), str(MAIN_SOURCE)]
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=300, stdin=subprocess.DEVNULL
        )
        if result.returncode != 0:
            raise ClusterStartError(
                f"javac could not compile {MAIN_SOURCE.name} (exit {result.returncode}).",
                log_tail=(result.stderr or result.stdout)[-4000:],
            )
        staged = Path(scratch) / jar.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        staged.replace(jar)  # last: an interrupted compile never looks done
    return jar


def java_home() -> Path:
    """``$JAVA_HOME``, else the home of the ``java`` the servers run with."""
    configured = os.environ.get("JAVA_HOME")
    if configured:
        return Path(configured)
    return Path(find_java()).resolve().parents[1]


def _nodemanager_env() -> dict[str, str]:
    """The cluster JVM's environment, which its containers inherit: ``JAVA_HOME`` (the NodeManagers
    start containers with ``$JAVA_HOME/bin/java``), and no ``PYTHONPATH`` (a container runs what
    its application ships, not a checkout on this process's path)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["JAVA_HOME"] = str(java_home())
    return env


class LocalYarn(ManagedServer):
    """A ResourceManager and ``nodemanagers`` NodeManagers on this host, state under ``work_dir``.

    ``default_fs`` (e.g. ``LocalHdfs.url``) becomes ``fs.defaultFS`` of the written configuration:
    Spark stages each application there. Without it, the local file system. ``conf`` sets more of
    the cluster's ``yarn-site.xml`` keys (e.g. ``yarn.nodemanager.sleep-delay-before-sigkill.ms``).

    With ``nodemanager_processes`` the NodeManagers are not MiniYARNCluster's (in its JVM, all on
    ``localhost``) but processes of their own, each on its own loopback address (127.0.0.11,
    127.0.0.12, ...; :mod:`reliable_kafka.local.yarn_nodemanager`): a test can lose one as a
    machine is lost (:meth:`YarnNodeManager.lose`), and containers on different NodeManagers are
    on different hosts, as Spark sees them.
    """

    DEFAULT_START_TIMEOUT_S = 180.0
    FIRST_NODEMANAGER_ADDRESS = 11

    def __init__(
        self,
        work_dir: Path,
        *,
        nodemanagers: int = 2,
        nodemanager_memory_mb: int = NODEMANAGER_MEMORY_MB,
        default_fs: str | None = None,
        conf: Mapping[str, str] | None = None,
        nodemanager_processes: bool = False,
    ) -> None:
        super().__init__()
        self.work_dir = work_dir
        self.nodemanagers = nodemanagers
        self.nodemanager_memory_mb = nodemanager_memory_mb
        self.default_fs = default_fs or "file:///"
        self.conf = dict(conf or {})
        self.nodemanager_processes = nodemanager_processes
        self._details: dict[str, str] = {}
        self._nodemanagers: list[YarnNodeManager] = []

    @property
    def conf_dir(self) -> Path:
        """``HADOOP_CONF_DIR`` for clients: ``yarn-site.xml`` and ``core-site.xml``."""
        return self.work_dir / "conf"

    @property
    def resource_manager(self) -> str:
        """``host:port`` of the ResourceManager's client protocol (``yarn.resourcemanager.address``)."""
        return self._details["resourcemanager"]

    @property
    def webapp(self) -> str:
        """``host:port`` of the ResourceManager's web UI and REST API."""
        return self._details["webapp"]

    @property
    def nodemanager_hosts(self) -> list[YarnNodeManager]:
        """The NodeManagers that are processes of their own (none without ``nodemanager_processes``)."""
        return list(self._nodemanagers)

    def client_env(self) -> dict[str, str]:
        """What ``spark-submit --master yarn`` needs in its environment to find this cluster."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        if self._server is not None and self._server.is_running():
            return
        deadline = time.monotonic() + timeout_s
        self.work_dir.mkdir(parents=True, exist_ok=True)
        details = self.work_dir / "details.txt"
        details.unlink(missing_ok=True)
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(_LOG4J)
        in_jvm = 0 if self.nodemanager_processes else self.nodemanagers
        args = [
            *("-confDir", str(self.conf_dir)),
            *("-details", str(details)),
            *("-nodemanagers", str(in_jvm)),
            *("-nodemanagerMemoryMb", str(self.nodemanager_memory_mb)),
            *("-nodemanagerVcores", str(NODEMANAGER_VCORES)),
            *("-defaultFs", self.default_fs),
            *(part for key, value in self.conf.items() for part in ("-conf", f"{key}={value}")),
        ]
        self._server = JavaServer(
            "yarn",
            _MAIN_CLASS,
            f"{yarn_main_jar()}{os.pathsep}{yarn_minicluster_libs()}/*",
            args,
            self.work_dir / "yarn.log",
            heap="768m",
            jvm_options=[
                f"-Dlog4j.configuration={log4j.as_uri()}",
                # MiniYARNCluster keeps its state under target/ of the working directory (work_dir);
                # hadoop.tmp.dir defaults to /tmp/hadoop-<user>, shared with every other cluster.
                f"-Dhadoop.tmp.dir={self.work_dir / 'tmp'}",
                # C1 only: less JIT work while the JVM starts on two shared cores.
                "-XX:TieredStopAtLevel=1",
            ],
            env=_nodemanager_env(),
        )
        self._server.start()
        doing = (
            "start its ResourceManager"
            if self.nodemanager_processes
            else f"register {self.nodemanagers} NodeManagers with its ResourceManager"
        )
        self._server.await_ready(details.is_file, "YARN", doing, timeout_s)
        self._details = dict(part.split("=", 1) for part in details.read_text().split())
        if self.nodemanager_processes:
            self._start_nodemanager_processes(deadline)

    def _start_nodemanager_processes(self, deadline: float) -> None:
        """Every NodeManager's JVM at once, then each one's registration, within the start's bound."""
        classpath = f"{yarn_minicluster_libs()}/*"
        self._nodemanagers = [
            YarnNodeManager(
                self.work_dir / f"nm-{index}",
                f"127.0.0.{self.FIRST_NODEMANAGER_ADDRESS + index}",
                cluster_conf_dir=self.conf_dir,
                classpath=classpath,
                memory_mb=self.nodemanager_memory_mb,
                vcores=NODEMANAGER_VCORES,
                env=_nodemanager_env(),
                registered=self._node_running,
            )
            for index in range(self.nodemanagers)
        ]
        for nodemanager in self._nodemanagers:
            nodemanager.launch()
        for nodemanager in self._nodemanagers:
            nodemanager.await_registered(max(1.0, deadline - time.monotonic()))

    def _node_running(self, port: int) -> bool:
        """Whether the ResourceManager lists the NodeManager of RPC ``port`` as RUNNING."""
        running = [node.get("id", "") for node in self.nodes() if node.get("state") == "RUNNING"]
        return any(node_id.endswith(f":{port}") for node_id in running)

    def nodes(self) -> list[dict[str, Any]]:
        """The NodeManagers the ResourceManager knows, in every state (``RUNNING``, ``LOST``, ...)."""
        states = "NEW,RUNNING,UNHEALTHY,LOST,SHUTDOWN,DECOMMISSIONED"
        answer = self.rest(f"/ws/v1/cluster/nodes?states={states}") or {}
        return list((answer.get("nodes") or {}).get("node") or [])

    def stop(self) -> None:
        """SIGTERM (the NodeManagers kill their containers on the way out), then whatever is left."""
        try:
            for nodemanager in self._nodemanagers:
                nodemanager.stop()
            super().stop()
        finally:
            self._kill_leftovers()

    def kill(self) -> None:
        try:
            for nodemanager in self._nodemanagers:
                nodemanager.kill()
            super().kill()
        finally:
            self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        for pid in processes_under(self.work_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def yarn(self, *args: str, timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
        """``yarn <args>`` against this cluster, e.g. ``yarn("application", "-kill", app_id)`` or
        ``yarn("logs", "-applicationId", app_id)``: the class Hadoop's ``bin/yarn`` runs for the
        command (:data:`YARN_COMMANDS`), from the minicluster's jars, with ``HADOOP_CONF_DIR``
        first on its classpath as ``bin/yarn`` puts it. Its output, whatever its exit status."""
        command, *rest = args
        cli_log4j = self.work_dir / "cli-log4j.properties"
        cli_log4j.write_text(_CLI_LOG4J)
        java = [
            find_java(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j.configuration={cli_log4j.as_uri()}",
            *("-cp", f"{self.conf_dir}{os.pathsep}{yarn_minicluster_libs()}/*"),
            YARN_COMMANDS[command],
            # bin/yarn hands ApplicationCLI its subcommand (application, applicationattempt, ...).
            *([command] if command == "application" else []),
            *rest,
        ]
        return subprocess.run(
            java,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            env=_nodemanager_env(),
        )

    def container_log_dirs(self) -> list[Path]:
        """Each NodeManager's ``yarn.nodemanager.log-dirs``: ``<application>/<container>/stdout|stderr``."""
        in_jvm = sorted(self.work_dir.glob("target/**/*-logDir-nm-*"))
        return in_jvm + [nodemanager.log_dir for nodemanager in self._nodemanagers]

    def container_logs(self, application_id: str) -> dict[str, Path]:
        """Container id -> its log directory, on every NodeManager."""
        return {
            container.name: container
            for log_dir in self.container_log_dirs()
            for container in sorted((log_dir / application_id).glob("container_*"))
        }

    def rest(self, path: str, *, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
        """The ResourceManager's REST API (``/ws/v1/cluster/...``), parsed; None when not found."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://{self.webapp}{path}",
            data=data,
            method=method,
            headers={"Accept": "application/json", "Content-Type": "application/json"},
        )
        try:
            # An http:// URL of our own making, on the ResourceManager's address.
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def applications(self) -> list[dict[str, Any]]:
        apps = (self.rest("/ws/v1/cluster/apps") or {}).get("apps") or {}
        return list(apps.get("app") or [])

    def application(self, application_id: str) -> dict[str, Any] | None:
        answer = self.rest(f"/ws/v1/cluster/apps/{application_id}")
        return None if answer is None else answer.get("app")

    def attempts(self, application_id: str) -> list[dict[str, Any]]:
        answer = self.rest(f"/ws/v1/cluster/apps/{application_id}/appattempts") or {}
        return list((answer.get("appAttempts") or {}).get("appAttempt") or [])

    def __repr__(self) -> str:
        where = self._details.get("resourcemanager", "not started")
        nodemanagers = self._nodemanagers or self.nodemanagers
        return f"LocalYarn({where}, nodemanagers={nodemanagers}, fs.defaultFS={self.default_fs})"
