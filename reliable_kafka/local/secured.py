"""What makes a local cluster a secured one: certificates, users, listeners, the authorizer and ACLs.

A secured broker has no PLAINTEXT listener. Kafka 3.9 and 4 listen on 127.0.0.1 with

- ``SASL_SSL``: ``SCRAM-SHA-512``, ``PLAIN`` and ``OAUTHBEARER`` (Kafka's unsecured JWT validator:
  a test token names its own principal, so anyone who reaches this port may claim any name; fine
  on loopback, never in production);
- ``SSL`` with client certificates (mTLS), the principal being the certificate's CN;

and an authorizer that refuses what no ACL allows. The broker talks to itself (and, in KRaft mode,
to its controller) over mTLS as ``User:broker``; the cluster's own tooling (topic creation, these
grants) is ``User:admin``, over mTLS too. Both are super users. Of the client principals, ``alice``
may read and write every topic, read every group and describe the cluster; ``mallory`` authenticates
but may do nothing. Kafka 0.9 has ``SSL`` only (its SASL is GSSAPI alone) and no authorizer here.

ZooKeeper (3.9, 0.9) takes SASL DIGEST-MD5 logins from ``kafka`` (the broker, which then writes
its nodes with ``zookeeper.set.acl=true``), ``alice`` and ``mallory``.

Every password is made at random per cluster. None is logged or shown in a repr; the files holding
them (keys, stores, ``server.properties``, the JAAS files) are 0600 in a 0700 directory.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from reliable_kafka.local.certificates import BrokerStores, CertificateAuthority, CertificateFiles
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.ports import LOOPBACK
from reliable_kafka.util.librdkafka_log import with_logger

Mechanism = Literal["SCRAM-SHA-512", "PLAIN", "OAUTHBEARER", "SSL"]
# "SSL": no SASL, the client's certificate authenticates it (mTLS).
MECHANISMS: tuple[Mechanism, ...] = ("SCRAM-SHA-512", "PLAIN", "OAUTHBEARER", "SSL")
LEGACY_MECHANISMS: tuple[Mechanism, ...] = ("SSL",)
SASL_MECHANISMS = ("SCRAM-SHA-512", "PLAIN", "OAUTHBEARER")

GRANTED_USER = "alice"
REFUSED_USER = "mallory"
CLIENT_USERS = (GRANTED_USER, REFUSED_USER)
ADMIN_USER = "admin"
BROKER_USER = "broker"
# The broker's ZooKeeper login (3.9 and 0.9).
ZOOKEEPER_BROKER_USER = "kafka"

# Kafka's minimum for SCRAM-SHA-512.
SCRAM_ITERATIONS = 4096


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, owner-only from the first byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT


def _password() -> str:
    return secrets.token_urlsafe(18)


def _jaas_quote(value: str) -> str:
    # token_urlsafe never makes a quote or a backslash; a caller-given password might.
    if '"' in value or "\\" in value:
        raise ValueError("a JAAS value here may not hold a quote or a backslash")
    return f'"{value}"'


@dataclass(frozen=True)
class Principal:
    """A client user of the secured cluster: one password for SCRAM and PLAIN, one for ZooKeeper,
    and a certificate (CN = the name) for mTLS."""

    name: str
    password: str = field(repr=False)
    zookeeper_password: str = field(repr=False)
    tls: CertificateFiles


@dataclass(frozen=True)
class SecuredClientSettings:
    """How a client reaches a secured local cluster, per mechanism: what tests, the CLI's ``up
    --secure`` snippet and the main job's ``--secure`` ask for kafkaParams. Secrets never in repr."""

    kafka: str
    sasl_ssl_servers: str | None  # None: Kafka 0.9 has no SASL_SSL here
    ssl_servers: str
    ca_location: Path
    principals: Mapping[str, Principal] = field(repr=False)
    zookeeper_connect: str | None = None
    protocol_settings: Mapping[str, str] = field(default_factory=dict)

    @property
    def mechanisms(self) -> tuple[Mechanism, ...]:
        return MECHANISMS if self.sasl_ssl_servers is not None else LEGACY_MECHANISMS

    def _principal(self, user: str) -> Principal:
        try:
            return self.principals[user]
        except KeyError:
            raise ValueError(
                f"no user {user!r} on this cluster; there are {sorted(self.principals)}"
            ) from None

    def kafka_params(self, mechanism: Mechanism, user: str = GRANTED_USER) -> dict[str, str]:
        """librdkafka settings that log ``user`` in with ``mechanism`` (``SSL``: its certificate)."""
        if mechanism not in self.mechanisms:
            raise ValueError(
                f"Kafka {self.kafka} here offers {', '.join(self.mechanisms)}, not {mechanism!r}"
            )
        principal = self._principal(user)
        params = {**self.protocol_settings, "ssl.ca.location": str(self.ca_location)}
        if mechanism == "SSL":
            return {
                "bootstrap.servers": self.ssl_servers,
                "security.protocol": "SSL",
                **params,
                "ssl.certificate.location": str(principal.tls.certificate),
                "ssl.key.location": str(principal.tls.key),
            }
        assert self.sasl_ssl_servers is not None
        params = {"bootstrap.servers": self.sasl_ssl_servers, "security.protocol": "SASL_SSL", **params}
        if mechanism == "OAUTHBEARER":
            # librdkafka's unsecured JWT: no identity provider, the token names its subject.
            return {
                **params,
                "sasl.mechanism": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": f"principal={principal.name}",
            }
        return {
            **params,
            "sasl.mechanism": mechanism,
            "sasl.username": principal.name,
            "sasl.password": principal.password,
        }

    def zookeeper_params(self, user: str = GRANTED_USER) -> dict[str, str]:
        """The kafkaParams that log ``user`` in to ZooKeeper (SASL DIGEST-MD5) and make the group's
        nodes writable by that user only."""
        if self.zookeeper_connect is None:
            raise ValueError(f"Kafka {self.kafka} here runs without ZooKeeper")
        principal = self._principal(user)
        return {
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.sasl.mechanism": "DIGEST-MD5",
            "zookeeper.sasl.username": principal.name,
            "zookeeper.sasl.password": principal.zookeeper_password,
            "zookeeper.set.acl": "true",
        }


class ClusterSecurity:
    """The secrets and files of one secured cluster, made in ``directory`` at construction."""

    def __init__(self, directory: Path, *, zookeeper: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)
        self.directory = directory
        self.ca = CertificateAuthority(directory)
        broker = self.ca.issue(BROKER_USER, server=True)
        self.stores: BrokerStores = self.ca.broker_stores(broker, _password())
        self.admin_tls = self.ca.issue(ADMIN_USER)
        self.principals: dict[str, Principal] = {
            name: Principal(name, _password(), _password(), self.ca.issue(name)) for name in CLIENT_USERS
        }
        self._zookeeper_broker_password = _password()
        self.zookeeper_jaas: Path | None = None
        self.broker_jaas: Path | None = None
        if zookeeper:
            self.zookeeper_jaas = directory / "zookeeper-jaas.conf"
            users = {ZOOKEEPER_BROKER_USER: self._zookeeper_broker_password} | {
                p.name: p.zookeeper_password for p in self.principals.values()
            }
            write_private(
                self.zookeeper_jaas,
                "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                + "".join(f"  user_{name}={_jaas_quote(password)}\n" for name, password in users.items())
                + "  ;\n};\n",
            )
            self.broker_jaas = directory / "broker-jaas.conf"
            write_private(
                self.broker_jaas,
                "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                f"  username={_jaas_quote(ZOOKEEPER_BROKER_USER)}\n"
                f"  password={_jaas_quote(self._zookeeper_broker_password)};\n}};\n",
            )

    def __repr__(self) -> str:
        return f"ClusterSecurity({self.directory!s})"

    # -- the broker -----------------------------------------------------------------------

    def _store_properties(self, prefix: str = "") -> dict[str, Any]:
        return {
            f"{prefix}ssl.keystore.type": "PKCS12",
            f"{prefix}ssl.keystore.location": self.stores.keystore,
            f"{prefix}ssl.keystore.password": self.stores.password,
            f"{prefix}ssl.truststore.type": "PKCS12",
            f"{prefix}ssl.truststore.location": self.stores.truststore,
            f"{prefix}ssl.truststore.password": self.stores.password,
        }

    def legacy_broker_properties(self, ssl_port: int) -> dict[str, Any]:
        """Kafka 0.9: one SSL listener, client certificates required, the broker to itself over it."""
        return {
            "listeners": f"SSL://{LOOPBACK}:{ssl_port}",
            "advertised.listeners": f"SSL://{LOOPBACK}:{ssl_port}",
            "security.inter.broker.protocol": "SSL",
            "ssl.client.auth": "required",
            "zookeeper.set.acl": "true",
            **self._store_properties(),
        }

    def broker_properties(self, sasl_ssl_port: int, ssl_port: int, *, kraft: bool) -> dict[str, Any]:
        """Listeners, mechanisms and the authorizer of a 3.9 or 4 broker.

        The listener names are the protocols' own, so a client's ``security.protocol`` names the
        listener it wants (broker discovery matches on it).
        """
        users = self.principals.values()
        plain_users = " ".join(f"user_{p.name}={_jaas_quote(p.password)}" for p in users)
        listeners = {"SASL_SSL": sasl_ssl_port, "SSL": ssl_port}
        properties: dict[str, Any] = {
            "listeners": ",".join(f"{name}://{LOOPBACK}:{port}" for name, port in listeners.items()),
            "advertised.listeners": ",".join(
                f"{name}://{LOOPBACK}:{port}" for name, port in listeners.items()
            ),
            "inter.broker.listener.name": "SSL",
            "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
            # The server's side of each mechanism: SCRAM credentials live in the cluster's metadata
            # (made at start by the admin), PLAIN's in this line, OAUTHBEARER's unsecured tokens
            # need none.
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            ),
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{BROKER_USER}";'
            ),
            "listener.name.ssl.ssl.client.auth": "required",
            # CN=alice is User:alice, the name SASL gives the same user.
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]*)$/$1/,DEFAULT",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
            "allow.everyone.if.no.acl.found": "false",
            **self._store_properties(),
        }
        if kraft:
            properties["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            properties["listener.name.controller.ssl.client.auth"] = "required"
        else:
            properties["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
            properties["zookeeper.set.acl"] = "true"
        return properties

    def broker_jvm_options(self) -> list[str]:
        if self.broker_jaas is None:
            return []
        return [f"-Djava.security.auth.login.config={self.broker_jaas}"]

    def admin_config(self, ssl_servers: str) -> dict[str, str]:
        """The cluster's own tooling: ``User:admin`` (a super user) over mTLS."""
        return {
            "bootstrap.servers": ssl_servers,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca.certificate),
            "ssl.certificate.location": str(self.admin_tls.certificate),
            "ssl.key.location": str(self.admin_tls.key),
        }

    def zookeeper_sasl_options(self) -> dict[str, str]:
        """kazoo's ``sasl_options`` for the cluster's own ZooKeeper calls, logged in as the broker."""
        return {
            "mechanism": "DIGEST-MD5",
            "username": ZOOKEEPER_BROKER_USER,
            "password": self._zookeeper_broker_password,
        }

    def client_settings(
        self,
        *,
        kafka: str,
        sasl_ssl_servers: str | None,
        ssl_servers: str,
        zookeeper_connect: str | None,
        protocol_settings: Mapping[str, str],
    ) -> SecuredClientSettings:
        return SecuredClientSettings(
            kafka=kafka,
            sasl_ssl_servers=sasl_ssl_servers,
            ssl_servers=ssl_servers,
            ca_location=self.ca.certificate,
            principals=dict(self.principals),
            zookeeper_connect=zookeeper_connect,
            protocol_settings=dict(protocol_settings),
        )


def grant_and_create_users(
    admin_config: Mapping[str, Any], sasl_ssl_servers: str, security: ClusterSecurity, timeout_s: float
) -> None:
    """SCRAM credentials for every client user and ``alice``'s ACLs, in one AdminClient session
    (a JVM tool costs 4-9 s a call), then wait until the broker applies them: its authorizer and
    credential cache follow ZooKeeper or the metadata log a moment later."""
    admin = AdminClient(with_logger(dict(admin_config)))
    upserts = [
        UserScramCredentialUpsertion(
            p.name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS), p.password.encode()
        )
        for p in security.principals.values()
    ]
    principal = f"User:{GRANTED_USER}"
    grants = [
        (ResourceType.TOPIC, "*", AclOperation.READ),
        (ResourceType.TOPIC, "*", AclOperation.WRITE),
        (ResourceType.TOPIC, "*", AclOperation.DESCRIBE),
        (ResourceType.GROUP, "*", AclOperation.READ),
        (ResourceType.GROUP, "*", AclOperation.DESCRIBE),
        (ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
    ]
    bindings = [
        AclBinding(
            kind, name, ResourcePatternType.LITERAL, principal, "*", operation, AclPermissionType.ALLOW
        )
        for kind, name, operation in grants
    ]
    deadline = time.monotonic() + timeout_s
    try:
        for future in admin.alter_user_scram_credentials(upserts, request_timeout=timeout_s).values():
            future.result(timeout=timeout_s)
        for future in admin.create_acls(bindings, request_timeout=timeout_s).values():
            future.result(timeout=timeout_s)
    except Exception as exc:
        raise ClusterStartError(f"Creating the secured cluster's users and ACLs failed: {exc}") from exc
    # Ready when alice logs in with SCRAM and may describe the cluster's ACLs (the cluster Describe
    # grant, made last): both her credential and her ACLs have reached the broker's caches.
    alice = security.principals[GRANTED_USER]
    probe = AdminClient(
        with_logger(
            {
                "bootstrap.servers": sasl_ssl_servers,
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(security.ca.certificate),
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": alice.name,
                "sasl.password": alice.password,
                "reconnect.backoff.max.ms": 200,
            }
        )
    )
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            probe.describe_acls(everything, request_timeout=2).result(timeout=3)
            return
        except Exception as exc:
            last = exc
        time.sleep(0.2)
    raise ClusterStartError(
        f"The secured cluster's users and ACLs were not in place within {timeout_s:.0f} s (last: {last})."
    )
