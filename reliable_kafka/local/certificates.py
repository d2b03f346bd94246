"""A throw-away CA and the certificates a secured local cluster needs, made with openssl and keytool.

Everything goes into one directory of the cluster's own (0700), each file 0600. Keys are EC P-256:
quick to make on two shared cores, and spoken by the JDK and by librdkafka's OpenSSL alike. The store
password goes to openssl and keytool through the environment, never on a command line (``ps`` shows
those to every user of the machine).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.java import find_java
from reliable_kafka.local.ports import LOOPBACK

_DAYS = "30"
_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
_PASSWORD_VARIABLE = "RELIABLE_KAFKA_STORE_PASSWORD"  # noqa: S105 - the name of a variable


@dataclass(frozen=True)
class CertificateFiles:
    """A PEM certificate signed by the cluster's CA and its unencrypted PEM (PKCS#8) key."""

    certificate: Path
    key: Path


@dataclass(frozen=True)
class BrokerStores:
    """The broker's PKCS#12 key store (its key and certificate) and trust store (the CA)."""

    keystore: Path
    truststore: Path
    password: str = field(repr=False)


def _run(command: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
    # A umask of 077 for the child: whatever it writes is owner-only from its first byte.
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        preexec_fn=lambda: os.umask(0o077),
    )
    if result.returncode != 0:
        raise ClusterStartError(
            f"{Path(command[0]).name} failed (exit {result.returncode}) making the local cluster's "
            "certificates.",
            (result.stdout + result.stderr)[-2000:],
        )


def _openssl() -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ClusterStartError(
            "No 'openssl' on PATH: a secured local cluster makes its certificates with it "
            "(apt-get install openssl)."
        )
    return openssl


class CertificateAuthority:
    """A CA made in ``directory`` at construction, signing certificates for named subjects."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.directory = directory
        self.certificate = directory / "ca.pem"
        self._key = directory / "ca.key"
        _run(
            [
                _openssl(),
                "req",
                "-x509",
                *_EC_KEY,
                "-keyout",
                str(self._key),
                "-out",
                str(self.certificate),
                "-days",
                _DAYS,
                "-subj",
                "/CN=reliable-kafka local CA",
            ]
        )

    def issue(self, common_name: str, *, server: bool = False) -> CertificateFiles:
        """A key and a certificate for ``CN=common_name``; a ``server`` one names 127.0.0.1 and
        localhost, which librdkafka checks the broker's certificate against by default."""
        files = CertificateFiles(self.directory / f"{common_name}.pem", self.directory / f"{common_name}.key")
        extensions = ["-addext", f"subjectAltName=DNS:localhost,IP:{LOOPBACK}"] if server else []
        _run(
            [
                _openssl(),
                "req",
                "-x509",
                *_EC_KEY,
                "-CA",
                str(self.certificate),
                "-CAkey",
                str(self._key),
                "-keyout",
                str(files.key),
                "-out",
                str(files.certificate),
                "-days",
                _DAYS,
                "-subj",
                f"/CN={common_name}",
                *extensions,
            ]
        )
        return files

    def issue_expired(self, common_name: str) -> CertificateFiles:
        """A client certificate for ``CN=common_name`` that expired in 2020: what a refusal test
        hands a broker. ``req -x509`` only takes a positive ``-days`` from now, so ``ca`` signs
        it, with dates of its own and a throw-away database."""
        files = CertificateFiles(
            self.directory / f"{common_name}-expired.pem", self.directory / f"{common_name}-expired.key"
        )
        request = self.directory / f"{common_name}-expired.csr"
        database = self.directory / f"{common_name}-expired-db"
        database.mkdir(mode=0o700, exist_ok=True)
        (database / "index.txt").write_text("")
        (database / "serial").write_text("01\n")
        config = database / "ca.cnf"
        config.write_text(
            "[ca]\ndefault_ca = expired\n[expired]\n"
            f"database = {database / 'index.txt'}\nnew_certs_dir = {database}\n"
            f"serial = {database / 'serial'}\ndefault_md = sha256\npolicy = any\n"
            "[any]\ncommonName = supplied\n"
        )
        _run(
            [
                *(_openssl(), "req", "-new", *_EC_KEY, "-subj", f"/CN={common_name}"),
                *("-keyout", str(files.key), "-out", str(request)),
            ]
        )
        _run(
            [
                *(_openssl(), "ca", "-batch", "-notext", "-config", str(config)),
                *("-cert", str(self.certificate), "-keyfile", str(self._key)),
                *("-in", str(request), "-out", str(files.certificate)),
                *("-startdate", "20200101000000Z", "-enddate", "20200102000000Z"),
            ]
        )
        return files

    def broker_stores(self, broker: CertificateFiles, password: str) -> BrokerStores:
        """PKCS#12 stores for the JVM: every Kafka here (0.9 too) reads them."""
        stores = BrokerStores(self.directory / "broker.p12", self.directory / "truststore.p12", password)
        env = {_PASSWORD_VARIABLE: password}
        _run(
            [
                _openssl(),
                "pkcs12",
                "-export",
                "-in",
                str(broker.certificate),
                "-inkey",
                str(broker.key),
                "-certfile",
                str(self.certificate),
                "-name",
                "broker",
                "-out",
                str(stores.keystore),
                "-passout",
                f"env:{_PASSWORD_VARIABLE}",
            ],
            env=env,
        )
        # openssl 3.0 cannot mark a certificate trusted for Java; keytool can (one short JVM).
        keytool = Path(find_java()).with_name("keytool")
        _run(
            [
                str(keytool) if keytool.is_file() else "keytool",
                "-J-XX:TieredStopAtLevel=1",
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-file",
                str(self.certificate),
                "-keystore",
                str(stores.truststore),
                "-storetype",
                "PKCS12",
                "-storepass:env",
                _PASSWORD_VARIABLE,
            ],
            env=env,
        )
        return stores
