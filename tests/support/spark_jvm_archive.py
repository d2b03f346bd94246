"""Class-data sharing archives for the suite's Spark JVMs, made once per machine and Spark build.

A Spark JVM spends most of its start loading, parsing and verifying the same thousands of classes
from pyspark's jars, and the suite starts hundreds of them: every child driver, every local-cluster
executor, every restart of a kill test. HotSpot maps classes already parsed and verified from a
class-data sharing archive instead. Measured on a local-cluster[2,1,1024] application running one
job, on a loaded machine: 20-30 s of wall time without archives, 12-18 s with them.

How an archive is made: one application runs with ``-XX:DumpLoadedClassList`` on its driver and its
executor, and each JVM writes the classes it loads as it goes (a JVM killed at the end, as a worker
kills its executors, has written them already); then ``java -Xshare:dump`` turns each list into an
archive for that JVM's classpath. Drivers and executors get one each: their classes differ
(``CoarseGrainedExecutorBackend`` and its block manager), and so do their classpaths.

HotSpot refuses an archive, and runs as it would without one, when a JVM's classpath does not
begin as the archive's did or when a directory on it is not empty; the options below keep it from
warning about it on stdout. Spark puts ``SPARK_CONF_DIR`` on every driver's and executor's
classpath, so the suite's Spark properties cannot live in ``spark-defaults.conf``: the conf dir is
an empty one at a fixed path beside the archives, and the properties reach drivers through
``spark-submit --properties-file`` (``PYSPARK_SUBMIT_ARGS``), executors through
``spark.executor.defaultJavaOptions`` in that file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.processes import all_pids, cmdline

# A job that touches what the suite's applications use in both JVMs: Python RDDs, a shuffle, a
# broadcast, an accumulator and a cached RDD. Classes it leaves out still load, from the jars. At
# its end it writes each JVM's classpath, read from the JVM's own command line.
_LISTING_APP = textwrap.dedent(
    """
    import os, sys
    from pyspark import SparkConf, SparkContext

    scratch = sys.argv[1]
    conf = SparkConf().setMaster("local-cluster[1,1,1024]").setAppName("class-data-sharing-listing")
    sc = SparkContext(conf=conf.set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false"))
    factor = sc.broadcast(3)
    seen = sc.accumulator(0)

    def count(x):
        seen.add(1)
        return (x % 7, x * factor.value)

    pairs = sc.parallelize(range(10_000), 4).map(count).cache()
    assert sorted(pairs.reduceByKey(lambda a, b: a + b).collect())[0][0] == 0
    assert pairs.count() == 10_000 and seen.value >= 10_000

    def classpath(argv):
        return argv[argv.index("-cp") + 1]

    def argv_of(pid):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode().split("\\0")

    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = argv_of(pid)
        except OSError:
            continue
        for role in ("driver", "executor"):
            if f"-XX:DumpLoadedClassList={scratch}/{role}.classlist" in argv:
                with open(f"{scratch}/{role}.classpath", "w") as f:
                    f.write(classpath(argv))
    sc.stop()
    """
)
_TIMEOUT_S = 300.0
# Archives of other JVMs, pyspark installs or checkouts (a clean clone's venv has jars of its own)
# go once unused this long: each pair takes about 180 MB.
_UNUSED_FOR_S = 3 * 24 * 3600
# HotSpot warns on stdout when it cannot use an archive (a classpath that differs, a conf dir that
# is not empty): the JVM runs as it would without one, so the warning is only noise in tests' logs.
_QUIET = "-Xlog:cds*=error"
ROLES = ("driver", "executor")


@dataclass(frozen=True)
class SparkJvmArchives:
    directory: Path

    def archive(self, role: str) -> Path:
        return self.directory / f"{role}.jsa"

    @property
    def conf_dir(self) -> Path:
        """The ``SPARK_CONF_DIR`` the archives were made for: empty, at the same path in every
        session, since the classpath an archive records holds it."""
        return self.directory / "spark-conf"

    def java_options(self, base: str) -> dict[str, str]:
        """Each role's options: ``base`` and the archive it maps."""
        return {role: f"{base} {_QUIET} -XX:SharedArchiveFile={self.archive(role)}" for role in ROLES}


def archive_key(java_options: str) -> str:
    """What the archives depend on: the JVM, the jars Spark puts on the classpath (name, size and
    time, so a reinstalled pyspark makes new ones) and the options they were made with."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr
    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in jars.glob("*.jar"))
    digest = hashlib.sha256("\n".join([java, pyspark.__version__, java_options, *listing]).encode())
    return digest.hexdigest()[:16]


def spark_jvm_archives(cache_root: Path, java_options: str) -> SparkJvmArchives:
    """The archives for ``java_options``: made on the first call on this machine (under a minute,
    under a lock, so that parallel workers wait for one making), found in the cache after. The JVMs
    that map them must have ``conf_dir`` as their ``SPARK_CONF_DIR``, and nothing may write into it.
    Raises ``RuntimeError`` when they cannot be made."""
    archives = SparkJvmArchives(cache_root / "class-data-sharing" / archive_key(java_options))
    archives.conf_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if any(archives.conf_dir.iterdir()):
        raise RuntimeError(f"{archives.conf_dir} must stay empty (it is on the archived classpath)")
    with open(archives.directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.utime(lock.fileno())  # its time says when the archives were last used
        if not all(archives.archive(role).exists() for role in ROLES):
            _make(archives, java_options)
    _remove_unused_beside(archives.directory)
    return archives


def _remove_unused_beside(directory: Path) -> None:
    now = time.time()
    for other in directory.parent.iterdir():
        lock = other / ".lock"
        with contextlib.suppress(OSError):  # another session's, being made or removed meanwhile
            if other != directory and now - lock.stat().st_mtime > _UNUSED_FOR_S:
                shutil.rmtree(other)


def _make(archives: SparkJvmArchives, java_options: str) -> None:
    # Beside the archives, so that the finished ones are renamed into place on the same filesystem.
    with tempfile.TemporaryDirectory(prefix="making-", dir=archives.directory) as scratch:
        _list_loaded_classes(Path(scratch), archives.conf_dir, java_options)
        for role in ROLES:
            made = Path(scratch, f"{role}.jsa")
            classes = f"-XX:SharedClassListFile={scratch}/{role}.classlist"
            classpath = Path(scratch, f"{role}.classpath").read_text()
            dump = _run(
                [
                    "java",
                    *java_options.split(),
                    "-Xshare:dump",
                    f"-XX:SharedArchiveFile={made}",
                    classes,
                    "-cp",
                    classpath,
                ],
                env=os.environ,
                what=f"the {role}'s archive",
            )
            if not made.exists():
                raise RuntimeError(f"java -Xshare:dump made no {role} archive:\n{_tail(dump)}")
        # Renamed into place only whole, so that a making killed halfway leaves nothing to map.
        for role in ROLES:
            os.replace(Path(scratch, f"{role}.jsa"), archives.archive(role))


def _list_loaded_classes(scratch: Path, conf_dir: Path, java_options: str) -> None:
    properties = scratch / "listing.conf"
    properties.write_text(
        "".join(
            f"spark.{role}.defaultJavaOptions {java_options}"
            f" -XX:DumpLoadedClassList={scratch}/{role}.classlist\n"
            for role in ROLES
        )
    )
    env = {
        **os.environ,
        "SPARK_CONF_DIR": str(conf_dir),
        "PYSPARK_SUBMIT_ARGS": f"--properties-file {properties} pyspark-shell",
    }
    listing = _run(
        [sys.executable, "-c", _LISTING_APP, str(scratch)], env=env, what="the listing application"
    )
    # The executor outlives the application by a moment: its worker stops it as the driver stops.
    _wait_for_exit_of_processes_naming(str(scratch))
    missing = [
        name
        for role in ROLES
        for name in (f"{role}.classlist", f"{role}.classpath")
        if not (scratch / name).exists()
    ]
    if listing.returncode != 0 or missing:
        raise RuntimeError(
            f"the listing application exited {listing.returncode}, without {missing}:\n{_tail(listing)}"
        )


def _run(
    command: list[str], env: dict[str, str] | os._Environ[str], what: str
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{what} did not finish in {_TIMEOUT_S:.0f} s") from exc


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-15:])


def _wait_for_exit_of_processes_naming(text: str) -> None:
    deadline = time.monotonic() + _TIMEOUT_S
    while time.monotonic() < deadline:
        if not any(text in part for pid in all_pids() for part in cmdline(pid)):
            return
        time.sleep(0.2)  # polling /proc: another process's children cannot be waited on
    raise RuntimeError(f"a JVM of the class listing still runs after {_TIMEOUT_S:.0f} s")


def suite_properties_file() -> Path | None:
    """The properties file this session gives its Spark drivers through ``PYSPARK_SUBMIT_ARGS``, for
    a test that runs ``spark-submit`` itself (``--properties-file``)."""
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    if "--properties-file" not in args:
        return None
    return Path(args[args.index("--properties-file") + 1])


def suite_spark_properties() -> str:
    """The lines of :func:`suite_properties_file`, for a test that hands a child application a
    properties file of its own: that file replaces the session's, so it starts with these lines."""
    path = suite_properties_file()
    return path.read_text() if path else ""
