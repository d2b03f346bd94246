"""A real HDFS on 127.0.0.1: Hadoop's own MiniDFSCluster (one NameNode, one DataNode, one JVM).

The jars are Hadoop's shaded minicluster (the Hadoop client version pyspark 4 ships) plus the JUnit
classes its test harness links against, resolved once with Maven into the user cache dir like the
Kafka brokers. The cluster keeps its data under ``work_dir`` across :meth:`kill` and
:meth:`restart` (a restart does not format), on the same NameNode ports, so clients keep working.
"""

from __future__ import annotations

import getpass
import json
import urllib.error
import urllib.request
from pathlib import Path

from reliable_kafka.local.distribution import MavenJars, cache_root, cached_maven_jars
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.java import JavaServer, ManagedServer
from reliable_kafka.local.ports import LOOPBACK, free_port, port_in_use, wait_port_free

HADOOP_VERSION = "3.5.0"
MINICLUSTER_JARS = MavenJars(
    label=f"Hadoop {HADOOP_VERSION} MiniDFSCluster",
    artifact_id=f"hadoop-minicluster-{HADOOP_VERSION}",
    coordinates=(
        f"org.apache.hadoop:hadoop-client-minicluster:{HADOOP_VERSION}",
        # The minicluster's test harness links JUnit 4 and 5 classes it does not bring along.
        "junit:junit:4.13.2",
        "org.junit.jupiter:junit-jupiter-api:5.10.2",
    ),
    download_mb=104,
    marker_jar=f"hadoop-client-minicluster-{HADOOP_VERSION}.jar",
)
_MAIN_CLASS = "org.apache.hadoop.test.MiniDFSClusterManager"


def _unavailable(why: str) -> str:
    return (
        f"HDFS (Hadoop {HADOOP_VERSION}'s MiniDFSCluster) is fetched once from Maven Central with 'mvn', "
        f"and {why}. Install Maven (e.g. 'apt-get install maven') where Maven Central or a mirror in "
        "~/.m2/settings.xml is reachable."
    )


def hadoop_minicluster_libs() -> Path:
    """The minicluster's jars, installing them into the cache on first use."""
    target = cache_root() / f"hadoop-minicluster-{HADOOP_VERSION}"
    return cached_maven_jars(MINICLUSTER_JARS, target, _unavailable)


class LocalHdfs(ManagedServer):
    """One NameNode and one DataNode on 127.0.0.1, data under ``work_dir``."""

    DEFAULT_START_TIMEOUT_S = 120.0

    def __init__(
        self, work_dir: Path, *, namenode_port: int | None = None, webhdfs_port: int | None = None
    ) -> None:
        super().__init__()
        self.work_dir = work_dir
        self.namenode_port = namenode_port or free_port()
        self.webhdfs_port = webhdfs_port or free_port()
        self.user = getpass.getuser()
        self._formatted = False

    @property
    def url(self) -> str:
        return f"hdfs://{LOOPBACK}:{self.namenode_port}"

    @property
    def webhdfs_address(self) -> str:
        """``host:port`` of WebHDFS: what ``dfs.namenode.http-address`` says on a real cluster."""
        return f"{LOOPBACK}:{self.webhdfs_port}"

    def spark_conf(self) -> dict[str, str]:
        """The ``spark.hadoop.*`` keys a Spark application sets to reach this HDFS."""
        return {
            "spark.hadoop.fs.defaultFS": self.url,
            "spark.hadoop.dfs.namenode.http-address": self.webhdfs_address,
            "spark.hadoop.hadoop.user.name": self.user,
        }

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        if self._server is not None and self._server.is_running():
            return
        for port in (self.namenode_port, self.webhdfs_port):
            if port_in_use(port) and not wait_port_free(port, 10.0):
                raise ClusterStartError(
                    f"Cannot start HDFS: port {port} on {LOOPBACK} is already in use by another process."
                )
        self.work_dir.mkdir(parents=True, exist_ok=True)
        details = self.work_dir / "details.json"
        details.unlink(missing_ok=True)
        args = [
            "-nnport",
            str(self.namenode_port),
            "-httpport",
            str(self.webhdfs_port),
            "-datanodes",
            "1",
            "-writeDetails",
            str(details),
            "-writeConfig",
            str(self.work_dir / "hdfs-site.xml"),
        ]
        # Formatting wipes the name directory: only on the first start, never on a restart.
        if not self._formatted:
            args.append("-format")
        self._server = JavaServer(
            "hdfs",
            _MAIN_CLASS,
            f"{hadoop_minicluster_libs()}/*",
            args,
            self.work_dir / "hdfs.log",
            heap="512m",
            jvm_options=[
                f"-Dtest.build.data={self.work_dir / 'data'}",
                # C1 only: less JIT work while the JVM starts on two shared cores.
                "-XX:TieredStopAtLevel=1",
            ],
        )
        self._server.start()
        self._wait_ready(details, timeout_s)
        self._formatted = True

    def _wait_ready(self, details: Path, timeout_s: float) -> None:
        """Ready once the manager wrote its details (the cluster is up, safe mode left) and
        WebHDFS answers with a live DataNode: a client can write at once."""
        assert self._server is not None
        self._server.await_ready(
            lambda: details.is_file() and self._webhdfs_answers() and self._live_datanodes() >= 1,
            "HDFS",
            f"serve WebHDFS on port {self.webhdfs_port}",
            timeout_s,
        )

    def _get_json(self, path: str) -> dict[str, object] | None:
        try:
            with urllib.request.urlopen(f"http://{self.webhdfs_address}{path}", timeout=2) as response:
                body = json.loads(response.read())
        except (OSError, ValueError, urllib.error.URLError):
            return None
        return body if isinstance(body, dict) else None

    def _webhdfs_answers(self) -> bool:
        return self._get_json(f"/webhdfs/v1/?op=GETFILESTATUS&user.name={self.user}") is not None

    def _live_datanodes(self) -> int:
        body = self._get_json("/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")
        beans = body.get("beans") if body else None
        if not isinstance(beans, list) or not beans or not isinstance(beans[0], dict):
            return 0
        live = beans[0].get("NumLiveDataNodes", 0)
        return live if isinstance(live, int) else 0

    def __repr__(self) -> str:
        return f"LocalHdfs({self.url}, webhdfs={self.webhdfs_address})"
