"""The jars the Docker images of docker/ are built from: the ones the local cluster runs.

``docker/images/*/Dockerfile`` install nothing from the Internet but a JRE (from the Debian base's
apt sources): they ``COPY`` the jars staged here under ``docker/artifacts/`` (git-ignored), which
are the checksum-verified distributions ``kafka_home`` fetched (Maven Central for 3.9 and 4, the
pinned npm package for 0.9) and ZooKeeper's jars from the pyspark wheel. So a container runs the
very broker the local cluster runs. Files are hard-linked where the cache is on the same disk.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyspark

from reliable_kafka.local.distribution import KAFKA_KINDS, kafka_distribution, kafka_home

# What ZooKeeper's server needs from pyspark's jars: itself, its wire format, logging.
_ZOOKEEPER_JARS = ("zookeeper-[0-9]*.jar", "zookeeper-jute-*.jar", "slf4j-api-*.jar", "log4j-*.jar")
# Classes its X509 and client code load; not the native or other platforms' netty jars.
_ZOOKEEPER_NEEDS = (
    "audience-annotations-*.jar",
    "commons-io-*.jar",
    "metrics-core-*.jar",
    "snappy-java-*.jar",
    "netty-common-*.jar",
    "netty-buffer-*.jar",
    "netty-codec-[0-9]*.jar",
    "netty-handler-[0-9]*.jar",
    "netty-resolver-[0-9]*.jar",
    "netty-transport-[0-9]*.jar",
    "netty-transport-native-unix-common-*.jar",
)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    """A hard link where the file system allows (the cache on the same disk), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _link_tree(source: Path, target: Path) -> None:
    """``target`` becomes a copy of ``source``."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, copy_function=_link_or_copy)


def _stage_zookeeper(target: Path) -> None:
    jars = Path(pyspark.__file__).parent / "jars"
    libs = target / "libs"
    if target.exists():
        shutil.rmtree(target)
    libs.mkdir(parents=True)
    for pattern in _ZOOKEEPER_JARS + _ZOOKEEPER_NEEDS:
        for jar in jars.glob(pattern):
            _link_or_copy(jar, libs / jar.name)


def stage(artifacts: Path, kinds: tuple[str, ...] = KAFKA_KINDS) -> dict[str, Path]:
    """Stage ZooKeeper and each broker of ``kinds`` under ``artifacts``; returns where each went."""
    artifacts.mkdir(parents=True, exist_ok=True)
    staged = {"zookeeper": artifacts / "zookeeper"}
    _stage_zookeeper(staged["zookeeper"])
    for kind in kinds:
        dist = kafka_distribution(kind)
        target = artifacts / f"kafka-{dist.kind}"
        # Only the jars: the images bring their own configuration and start the JVM themselves.
        _link_tree(kafka_home(dist.kind) / "libs", target / "libs")
        staged[f"kafka-{dist.kind}"] = target
    return staged
