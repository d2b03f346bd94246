"""Session fixtures: a real ZooKeeper + Kafka, started by this project or by docker compose."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.parallel_layout import (
    SEVERAL_HOSTS,
    YARN,
    auto_workers,
    broker_in_node_id,
    group_of,
    make_scheduler,
)

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.local import LocalCluster
    from reliable_kafka.local.hdfs import LocalHdfs
    from reliable_kafka.local.s3 import LocalS3
    from tests.cluster_backends import ClusterUnderTest
    from tests.spark_backends import SparkBackend

# Helpers the test modules share that were defined in one of them: pytest rewrites the asserts of
# test modules only, so these are registered (before any test imports them) for their failed
# asserts to show the values compared, as they did in their test module.
pytest.register_assert_rewrite(
    "tests.e2e.damaged_wal",
    "tests.e2e.driver_kills",
    "tests.e2e.readme_app",
    "tests.e2e.wordcount_example",
    "tests.ui.browser",
    "tests.ui.lag_table",
)

logging.getLogger("kazoo.client").setLevel(logging.WARNING)

# The brokers the tests can run on, as reliable_kafka.local.distribution names them (kept here so
# that tests/wal collects without Spark or Kafka installed; a test checks the two agree).
KAFKA_KINDS = ("3.9", "4", "0.9")
DEFAULT_TEST_KAFKA = ("3.9",)
_SECONDS_PER_BROKER: dict[str, float] = {}
_SECONDS_PER_TEST: dict[str, float] = {}
# Where the project and Spark leave files: the temporary directory (local clusters, the example's
# work dir, Spark's scratch space) and shared memory (executor block stores). The machine is shared,
# so only names this project or Spark would create are watched.
_TEMP_ROOTS = (Path(tempfile.gettempdir()), Path("/dev/shm"))
_WATCHED_PREFIXES = ("reliable-kafka-", "kafka-wordcount-", "spark-", "blockmgr-")
_TEMP_BEFORE: set[Path] = set()
# The session's own temporary directory (see _own_the_temporary_directory); removed at its end.
_SESSION_TEMP: list[Path] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kafka",
        default=None,
        help=(
            "comma-separated Kafka brokers to run the broker tests on: 3.9 (default), 4, 0.9, or all. "
            "Each broker test runs on the selected brokers it supports (marker 'brokers'); tests that "
            "need no broker run whatever is selected. Also RELIABLE_KAFKA_TEST_KAFKA."
        ),
    )

    parser.addoption(
        "--docker",
        action="store_true",
        default=None,
        help=(
            "also run the docker half: the tests with one against each selected broker's compose "
            "cluster (docker/kafka-<broker>.yml, started and removed by the run; needs a Docker "
            "engine and docker-compose, else skipped with the reason). Also RELIABLE_KAFKA_TEST_DOCKER=1."
        ),
    )
    parser.addoption(
        "--spark",
        default=None,
        help=(
            "comma-separated Spark clusters to run the executor-placement tests on: local-cluster "
            "(Spark's local-cluster[2,2,1024], one host), hosts (LocalSparkHosts: two workers, each a "
            "host of its own; needs root for private mounts), auto (the default: hosts where it can "
            "run, else local-cluster), or all (both, hosts only as root). Also RELIABLE_KAFKA_TEST_SPARK."
        ),
    )
    parser.addoption(
        "--yarn",
        action="store_true",
        default=False,
        help=(
            "also run the Spark applications on the YARN test cluster (tests/yarn/, about ten "
            "minutes): left out of the default run until the suite's time allows them "
            "(issue 40). Also RELIABLE_KAFKA_TEST_YARN=1."
        ),
    )
    parser.addoption(
        "--record-durations",
        default=None,
        metavar="FILE",
        help=(
            "write each test's seconds (setup + call + teardown) to FILE as JSON, for "
            "tests/durations.json, the measured figures the flake loop's watch list and the docs "
            "quote (python -m tests.support.durations merges a run's file into it)."
        ),
    )


def selected_spark(config: pytest.Config) -> tuple[str, ...]:
    from tests.spark_backends import SPARK_KINDS

    raw = config.getoption("--spark") or os.environ.get("RELIABLE_KAFKA_TEST_SPARK") or "auto"
    kinds: list[str] = []
    for part in raw.split(","):
        name = part.strip().lower()
        if name in ("all", "auto"):
            from reliable_kafka.local.spark_hosts import private_mounts_unavailable

            # Hosts whose files other hosts can see would prove nothing a local-cluster does not.
            hosts_run = private_mounts_unavailable() is None
            if name == "auto":
                # The several hosts prove what local-cluster does and more (a host's files are
                # its own); local-cluster stays in the pyspark 3.5 smoke set and the located-RDD
                # tests, and in `all`.
                kinds.append("hosts" if hosts_run else "local-cluster")
            else:
                kinds += [k for k in SPARK_KINDS if k != "hosts" or hosts_run]
        elif name in SPARK_KINDS:
            kinds.append(name)
        elif name:
            raise pytest.UsageError(f"--spark {part!r}: choose from {', '.join(SPARK_KINDS)}, auto or all")
    return tuple(dict.fromkeys(kinds))


def _watched_temp_entries() -> set[Path]:
    entries: set[Path] = set()
    for root in _TEMP_ROOTS:
        with contextlib.suppress(OSError):
            entries.update(p for p in root.iterdir() if p.name.startswith(_WATCHED_PREFIXES))
    return entries


def _size_bytes(path: Path) -> int:
    if not path.is_dir():
        return path.stat().st_size if path.exists() else 0
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(directory) / name).stat().st_size
    return total


def pytest_sessionstart(session: pytest.Session) -> None:
    _TEMP_BEFORE.update(_watched_temp_entries())


def _own_the_temporary_directory() -> None:
    """Give the session a temporary directory of its own (0o700) and make it everyone's: this
    process's ``tempfile``, and through ``TMPDIR`` and ``SPARK_LOCAL_DIRS`` every child process, the
    Spark JVM (started later, with a copy of this environment) and its executors, whose
    ``spark-*``/``blockmgr-*`` scratch directories land there. Removed at the session's end, so a
    run leaves nothing behind in the system's temporary directory, killed children's files included.

    pytest's own ``tmp_path`` root stays where it was: its retention keeps failed tests' files."""
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    # Beside the system's temporary directory's other entries, not inside the xdist controller's
    # session directory (its workers inherit TMPDIR): nested, Chromium's socket path under it
    # passed the 107 bytes a Unix socket's path may have, and Chromium aborted.
    temp_root = os.environ["PYTEST_DEBUG_TEMPROOT"]
    session_dir = Path(tempfile.mkdtemp(prefix="reliable-kafka-tests-", dir=temp_root))
    _SESSION_TEMP.append(session_dir)
    os.environ["TMPDIR"] = os.environ["SPARK_LOCAL_DIRS"] = str(session_dir)
    tempfile.tempdir = str(session_dir)
    # A Spark driver's JVM (this process's, or a child's spark-submit) takes its java.io.tmpdir
    # from here: spark-submit's own spark-* directory and lz4's native library land there too.
    submit_opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    os.environ["SPARK_SUBMIT_OPTS"] = f"{submit_opts} -Djava.io.tmpdir={session_dir}".strip()
    _spark_jvms_for_tests(session_dir)


# C1 only and the serial collector for every Spark JVM the suite starts (drivers of this process
# and of child applications, executors of local-cluster and of the several-hosts cluster): a test's
# application lives seconds to minutes, so C2's compile threads and G1's workers only take the two
# cores from the tests running beside them. Measured on the word count example's three tests: 97 s
# and 37.5 CPU-s before, 81 s and 35.5 CPU-s with these options (75 s and 30.8 CPU-s when every
# JVM of the test, the brokers' too, had them). Spark's default options, not the extra ones, so
# that an application's own extraJavaOptions still apply.
_TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Why the session's Spark JVMs run without class-data sharing archives, when they do (for the summary).
_NO_ARCHIVES: list[str] = []


def _spark_jvms_for_tests(session_dir: Path) -> None:
    """Give every Spark JVM of the session :data:`_TEST_JVM_OPTIONS` and the class-data sharing
    archives of :mod:`tests.support.spark_jvm_archive`: a properties file that drivers get through
    ``PYSPARK_SUBMIT_ARGS`` (executors through the executor options in it), and an empty
    ``SPARK_CONF_DIR``. Left alone where the environment already names either."""
    if os.environ.get("SPARK_CONF_DIR") or os.environ.get("PYSPARK_SUBMIT_ARGS"):
        return
    from reliable_kafka.local.distribution import cache_root
    from tests.support.spark_jvm_archive import spark_jvm_archives

    driver_options = executor_options = _TEST_JVM_OPTIONS
    conf_dir = session_dir / "spark-conf"
    try:
        archives = spark_jvm_archives(cache_root(), _TEST_JVM_OPTIONS)
    except (RuntimeError, OSError, subprocess.SubprocessError, ImportError) as exc:
        _NO_ARCHIVES.append(f"{type(exc).__name__}: {exc}")
        conf_dir.mkdir(mode=0o700)
    else:
        options = archives.java_options(_TEST_JVM_OPTIONS)
        driver_options, executor_options = options["driver"], options["executor"]
        conf_dir = archives.conf_dir
    properties = session_dir / "spark-test.conf"
    properties.write_text(
        f"spark.driver.defaultJavaOptions {driver_options}\n"
        f"spark.executor.defaultJavaOptions {executor_options}\n"
        # Any free port: two drivers at once (parallel workers) made the second warn that 4040
        # was taken, and the tests that allow a healthy app no warning failed on it.
        "spark.ui.port 0\n"
    )
    os.environ["SPARK_CONF_DIR"] = str(conf_dir)
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {properties} pyspark-shell"


def pytest_unconfigure(config: pytest.Config) -> None:
    for session_dir in _SESSION_TEMP:
        shutil.rmtree(session_dir, ignore_errors=True)
    _SESSION_TEMP.clear()


def pytest_configure(config: pytest.Config) -> None:
    _own_the_temporary_directory()
    config.addinivalue_line(
        "markers",
        "brokers(*kinds): the Kafka brokers (3.9, 4, 0.9) a broker test supports; unmarked broker "
        "tests run on 3.9 only. Tests that need ZooKeeper must not list 4 (KRaft, no ZooKeeper).",
    )


def selected_kafka(config: pytest.Config) -> tuple[str, ...]:
    raw = (
        config.getoption("--kafka")
        or os.environ.get("RELIABLE_KAFKA_TEST_KAFKA")
        or ",".join(DEFAULT_TEST_KAFKA)
    )
    kinds: list[str] = []
    for part in raw.split(","):
        name = part.strip().lower().removeprefix("kafka-").removesuffix(".x")
        if not name:
            continue
        if name == "all":
            kinds += KAFKA_KINDS
        elif name in KAFKA_KINDS:
            kinds.append(name)
        else:
            raise pytest.UsageError(f"--kafka {part!r}: choose from {', '.join(KAFKA_KINDS)} or all")
    return tuple(dict.fromkeys(kinds))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that reaches a broker (through ``kafka_version``) runs once per broker it
    supports, and every test of a Spark cluster (``spark_backend``) once per selected cluster.

    Session scope: pytest groups the tests by broker, so one broker's cluster is stopped before
    the next one starts. The ids name the broker (``test_x[kafka-3.9-local]``).
    """
    if "spark_backend" in metafunc.fixturenames:
        spark = selected_spark(metafunc.config)
        metafunc.parametrize(
            "spark_backend", spark, indirect=True, scope="session", ids=[f"spark-{k}" for k in spark]
        )
    if "kafka_version" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("brokers")
    supported = tuple(marker.args) if marker else DEFAULT_TEST_KAFKA
    unknown = set(supported) - set(KAFKA_KINDS)
    if unknown:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: unknown brokers {sorted(unknown)}")
    metafunc.parametrize(
        "kafka_version", supported, indirect=True, scope="session", ids=[f"kafka-{k}" for k in supported]
    )


def _broker_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("kafka_version") if callspec is not None else None


def docker_selected(config: pytest.Config) -> bool:
    return bool(config.getoption("--docker")) or os.environ.get("RELIABLE_KAFKA_TEST_DOCKER") == "1"


def yarn_selected(config: pytest.Config) -> bool:
    return bool(config.getoption("--yarn")) or os.environ.get("RELIABLE_KAFKA_TEST_YARN") == "1"


def _yarn_application(item: pytest.Item) -> bool:
    """A test that submits applications to the YARN test cluster (not a unit test of it)."""
    return item.get_closest_marker("yarn") is not None and item.get_closest_marker("integration") is not None


def _on_docker(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("kafka_cluster") == "docker"


def pytest_itemcollected(item: pytest.Item) -> None:
    # Here, before `-m` selects: a broker test is an integration test whether or not it says so.
    if _broker_of(item) is not None:
        item.add_marker(pytest.mark.integration)
    if _on_docker(item):
        item.add_marker(pytest.mark.docker)  # so that `-m docker` selects the docker half


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return auto_workers()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    return make_scheduler(config, log)


def _distributed(config: pytest.Config) -> bool:
    return (
        bool(getattr(config.option, "numprocesses", None))
        or os.environ.get("PYTEST_XDIST_WORKER") is not None
    )


_LONG_GROUPS_FIRST = {SEVERAL_HOSTS: 0, YARN: 1}


def _long_groups_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order in which xdist hands out the work: the several-hosts group, then the YARN group,
    the run's longest units, so that their workers start on them at once; within them and after
    them, the serial order (broker by broker), so that each worker starts each broker's cluster
    about once. Stable."""
    return sorted(items, key=lambda item: _LONG_GROUPS_FIRST.get(group_of(item.nodeid) or "", 2))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect broker tests for brokers not selected (and the YARN applications without
    ``--yarn``); run the tests that need no broker first,
    then each broker's tests together, so that each broker starts once."""
    selected = selected_kafka(config)
    docker = docker_selected(config)
    yarn = yarn_selected(config)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        kind = _broker_of(item)
        # The docker half is what is marked `docker_half`: the rest adds CI time and nothing the
        # local half does not show (tests/integration/test_docker_clusters.py says what it covers).
        on_docker_wanted = docker and item.get_closest_marker("docker_half") is not None
        wanted = (
            (kind is None or kind in selected)
            and (on_docker_wanted or not _on_docker(item))
            and (yarn or not _yarn_application(item))
        )
        (keep if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    order = {kind: rank for rank, kind in enumerate(KAFKA_KINDS, start=1)}

    # Stable: pytest's own grouping (by module) stays as it was within a broker; a broker's docker
    # tests come last, so that its compose cluster is up only while they run.
    items[:] = sorted(keep, key=lambda item: (order.get(_broker_of(item) or "", 0), _on_docker(item)))
    if _distributed(config):
        items[:] = _long_groups_first(items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Setup and teardown included: a broker's start and stop are part of what it costs the suite.
    # Summed over the workers of a parallel run: the brokers' shares of the work, not of the wall.
    broker = broker_in_node_id(report.nodeid) or "none"
    _SECONDS_PER_BROKER[broker] = _SECONDS_PER_BROKER.get(broker, 0.0) + report.duration
    _SECONDS_PER_TEST[report.nodeid] = _SECONDS_PER_TEST.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = session.config.getoption("--record-durations")
    if target and os.environ.get("PYTEST_XDIST_WORKER") is None:  # the controller saw every report
        Path(target).write_text(
            json.dumps({k: round(v, 2) for k, v in sorted(_SECONDS_PER_TEST.items())}, indent=0)
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SECONDS_PER_BROKER:
        parts = [
            f"{'no broker' if kind == 'none' else 'kafka-' + kind}: {seconds:.0f} s"
            for kind, seconds in sorted(_SECONDS_PER_BROKER.items())
        ]
        terminalreporter.write_line(f"time per broker (setup + call + teardown): {', '.join(parts)}")
    for why in _NO_ARCHIVES:
        terminalreporter.write_line(f"Spark JVMs ran without class-data sharing archives: {why}")
    left = sorted(_watched_temp_entries() - _TEMP_BEFORE)
    if left:
        # Other users of the machine may have created some of them meanwhile: a report, not a failure.
        megabytes = sum(_size_bytes(path) for path in left) / 1e6
        shown = ", ".join(str(path) for path in left[:5]) + (", ..." if len(left) > 5 else "")
        terminalreporter.write_line(
            f"temporary files left by this session (or by others meanwhile): {len(left)}, "
            f"{megabytes:.1f} MB: {shown}"
        )


def pytest_report_header(config: pytest.Config) -> str:
    docker = "on" if docker_selected(config) else "off"
    return f"kafka brokers: {', '.join(selected_kafka(config))} (--kafka); docker half: {docker} (--docker)"


def _working_directories() -> list[Path]:
    """Every live process's current directory (those this user may read)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                found.append(Path(os.readlink(entry / "cwd")))
    return found


@pytest.fixture(scope="session", autouse=True)
def spark_worker_dirs_removed() -> Iterator[None]:
    """local-cluster's standalone workers write each application's logs under
    ``SPARK_HOME/work`` (Spark 4 passes them no other directory): remove what this session added."""
    try:
        import pyspark
    except ImportError:  # tests/wal runs without Spark
        yield
        return
    work = Path(pyspark.__file__).resolve().parent / "work"
    before = set(work.iterdir()) if work.is_dir() else None
    yield
    if not work.is_dir():
        return
    in_use = _working_directories()
    for path in set(work.iterdir()) - (before or set()):
        # Another run on this machine (same venv, same SPARK_HOME) may have started it meanwhile:
        # its executors work in there, and a Python worker whose directory vanished cannot import.
        if not any(cwd == path or path in cwd.parents for cwd in in_use):
            shutil.rmtree(path, ignore_errors=True)
    if before is None:
        with contextlib.suppress(OSError):
            work.rmdir()


@pytest.fixture(scope="session")
def kafka_version(request: pytest.FixtureRequest) -> str:
    """The broker of this test run: ``3.9``, ``4`` or ``0.9`` (parametrised in pytest_generate_tests)."""
    return str(request.param)


class _BrokerClusters:
    """Each broker's cluster, started on first use; one at a time, because the tests come broker
    by broker, in one process and on each parallel worker alike."""

    def __init__(self, factory: pytest.TempPathFactory, config: pytest.Config) -> None:
        self._factory = factory
        self._config = config
        self._started: dict[str, LocalCluster] = {}

    def of(self, kafka_version: str) -> LocalCluster:
        if kafka_version not in self._started:
            # Imported here, not at module level: tests/wal must run without Spark or Kafka installed.
            from reliable_kafka.local import LocalCluster
            from reliable_kafka.local.distribution import kafka_home

            self.stop_all()
            # A first run fetches the broker (a minute or more): its progress goes to the terminal,
            # not into the output pytest keeps of the first test. Cached, this returns at once.
            capture = self._config.pluginmanager.getplugin("capturemanager")
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                kafka_home(kafka_version)
            work_dir = self._factory.mktemp(f"local-cluster-{kafka_version}")
            self._started[kafka_version] = LocalCluster(work_dir, kafka=kafka_version).start()
        return self._started[kafka_version]

    def stop_all(self) -> None:
        while self._started:
            _, cluster = self._started.popitem()
            cluster.stop()


@pytest.fixture(scope="session")
def broker_clusters(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[_BrokerClusters]:
    clusters = _BrokerClusters(tmp_path_factory, pytestconfig)
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture(scope="session")
def local_cluster(kafka_version: str, broker_clusters: _BrokerClusters) -> LocalCluster:
    """The cluster the project starts itself, one per broker; the fault-injection tests need this one."""
    return broker_clusters.of(kafka_version)


@pytest.fixture(scope="session")
def spark_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkBackend]:
    """The Spark cluster of this test run (parametrised in pytest_generate_tests): local-cluster,
    which each application starts, or two hosts of LocalSparkHosts, started once per session."""
    from reliable_kafka.local.spark_hosts import LocalSparkHosts
    from tests.spark_backends import HOST_CORES, hosts_backend, local_cluster_backend

    if request.param == "local-cluster":
        yield local_cluster_backend()
        return
    base = tmp_path_factory.mktemp("spark-hosts")
    with LocalSparkHosts(base, hosts=2, cores=HOST_CORES, memory_mb=1024) as hosts:
        yield hosts_backend(hosts)


@pytest.fixture(scope="session")
def local_hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalHdfs]:
    """A real HDFS (Hadoop's MiniDFSCluster) for the session; tests that kill it restart it."""
    from reliable_kafka.local.hdfs import LocalHdfs

    with LocalHdfs(tmp_path_factory.mktemp("local-hdfs")) as hdfs:
        yield hdfs


@pytest.fixture(scope="session")
def local_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    """A real S3-compatible store (SeaweedFS) for the session; tests that kill it restart it."""
    from reliable_kafka.local.s3 import LocalS3

    with LocalS3(tmp_path_factory.mktemp("local-s3")) as s3:
        yield s3


@pytest.fixture(scope="session")
def docker_compose_file(kafka_version: str) -> Path:
    from tests.cluster_backends import compose_file_for

    return compose_file_for(kafka_version)


@pytest.fixture(scope="session")
def docker_compose_project_name(kafka_version: str) -> str:
    return f"reliable-kafka-tests-{kafka_version.replace('.', '')}"


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    from tests.cluster_backends import compose_command

    return compose_command()


@pytest.fixture(scope="session")
def docker_setup() -> list[str]:
    # Builds the images where they are missing. Compose v1 (Debian's) has no --wait: the cluster's
    # wait_ready polls the broker itself.
    return ["up -d"]


@pytest.fixture(scope="session", params=["local", "docker"])
def kafka_cluster(request: pytest.FixtureRequest, kafka_version: str) -> ClusterUnderTest:
    """The local cluster, and with --docker the broker's compose cluster for the tests marked
    ``docker_half``; that half is skipped where no engine answers, with the reason."""
    from tests.cluster_backends import DockerComposeCluster, docker_engine_answers

    if request.param == "local":
        return request.getfixturevalue("local_cluster")
    reason = docker_engine_answers()
    if reason is not None:
        pytest.skip(f"docker path skipped: {reason}")
    cluster = DockerComposeCluster(kafka_version, request.getfixturevalue("docker_services"))
    cluster.wait_ready()
    cluster.assert_host_network_only()
    return cluster


@pytest.fixture(scope="session")
def spark_context() -> Iterator[SparkContext]:
    """The one real Spark of the session (a process can hold only one SparkContext).

    local[4]: four task slots, for the receivers (each a long-running task in its executor
    placement, the default) and the batch jobs beside them.
    """
    from pyspark import SparkConf, SparkContext

    # Python workers must run this interpreter (the venv with msgpack and the project).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (
        SparkConf()
        .setMaster("local[4]")
        .setAppName("reliable-kafka-tests")
        .set("spark.ui.enabled", "false")
        .set("spark.python.worker.reuse", "true")
        .set("spark.default.parallelism", "4")
        .set("spark.sql.shuffle.partitions", "4")
        .set("spark.driver.memory", "1g")
    )
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    yield sc
    sc.stop()
