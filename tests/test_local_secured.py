"""SecuredClientSettings alone (no broker): each mechanism's kafkaParams, what 0.9 offers, no
secret in a repr, and the JAAS and broker files a secured cluster writes owner-only."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from reliable_kafka.local.certificates import CertificateFiles
from reliable_kafka.local.secured import ClusterSecurity, Principal, SecuredClientSettings


def _settings(kafka: str = "3.9") -> SecuredClientSettings:
    tls = CertificateFiles(Path("/c/alice.pem"), Path("/c/alice.key"))
    return SecuredClientSettings(
        kafka=kafka,
        sasl_ssl_servers=None if kafka == "0.9" else "127.0.0.1:1",
        ssl_servers="127.0.0.1:2",
        ca_location=Path("/c/ca.pem"),
        principals={"alice": Principal("alice", "pw-secret", "zk-secret", tls)},
        zookeeper_connect=None if kafka == "4" else "127.0.0.1:3",
    )


def test_each_mechanism_has_its_kafka_params() -> None:
    settings = _settings()
    assert settings.kafka_params("SCRAM-SHA-512") == {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": "/c/ca.pem",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "pw-secret",
    }
    assert settings.kafka_params("PLAIN")["sasl.mechanism"] == "PLAIN"
    oauth = settings.kafka_params("OAUTHBEARER")
    assert (oauth["sasl.oauthbearer.config"], oauth["enable.sasl.oauthbearer.unsecure.jwt"]) == (
        "principal=alice",
        "true",
    )
    assert settings.kafka_params("SSL") == {
        "bootstrap.servers": "127.0.0.1:2",
        "security.protocol": "SSL",
        "ssl.ca.location": "/c/ca.pem",
        "ssl.certificate.location": "/c/alice.pem",
        "ssl.key.location": "/c/alice.key",
    }
    assert settings.zookeeper_params() == {
        "zookeeper.connect": "127.0.0.1:3",
        "zookeeper.sasl.mechanism": "DIGEST-MD5",
        "zookeeper.sasl.username": "alice",
        "zookeeper.sasl.password": "zk-secret",
        "zookeeper.set.acl": "true",
    }
    assert "secret" not in repr(settings) and "secret" not in repr(settings.principals["alice"])


def test_what_is_not_there_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="offers SSL, not 'SCRAM-SHA-512'"):
        _settings("0.9").kafka_params("SCRAM-SHA-512")
    with pytest.raises(ValueError, match="no user 'bob'"):
        _settings().kafka_params("PLAIN", "bob")
    with pytest.raises(ValueError, match="without ZooKeeper"):
        _settings("4").zookeeper_params()


def test_a_secured_clusters_files_are_owner_only(tmp_path: Path) -> None:
    security = ClusterSecurity(tmp_path / "security", zookeeper=True)
    assert stat.S_IMODE((tmp_path / "security").stat().st_mode) == 0o700
    made = sorted(path.name for path in (tmp_path / "security").iterdir())
    assert {
        "ca.pem",
        "broker.p12",
        "truststore.p12",
        "alice.key",
        "mallory.pem",
        "zookeeper-jaas.conf",
    } <= set(made)
    for path in (tmp_path / "security").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    alice = security.principals["alice"]
    assert alice.zookeeper_password in (tmp_path / "security" / "zookeeper-jaas.conf").read_text()
    properties = security.broker_properties(1, 2, kraft=False)
    assert properties["listeners"] == "SASL_SSL://127.0.0.1:1,SSL://127.0.0.1:2"
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert alice.password not in repr(security) and security.stores.password not in repr(security.stores)
