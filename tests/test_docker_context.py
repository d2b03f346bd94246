"""The SASL_SSL listener's files that ``reliable-kafka-local docker-context`` stages for the compose
brokers (no Docker needed): owner-only secrets, a broker certificate clients verify for 127.0.0.1,
and the names the images' start scripts and properties read."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from reliable_kafka.local.docker_context import SCRAM_USER, stage_security

DOCKER_DIR = Path(__file__).resolve().parent.parent / "docker"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl on PATH")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_secrets_are_owner_only_and_the_ca_is_what_clients_trust(tmp_path: Path) -> None:
    security = stage_security(tmp_path / "security")
    assert _mode(security) == 0o700
    assert _mode(security / "ca.pem") == 0o644
    secrets = [path for path in security.iterdir() if path.name != "ca.pem"]
    assert {path.name for path in secrets} >= {
        "broker.p12",
        "broker-store.password",
        f"{SCRAM_USER}.password",
    }
    assert {path.name: _mode(path) for path in secrets} == {path.name: 0o600 for path in secrets}
    password = (security / f"{SCRAM_USER}.password").read_text().strip()
    assert len(password) >= 20

    # librdkafka checks the broker's certificate against the CA and the address it dialled.
    verified = subprocess.run(
        ["openssl", "verify", "-CAfile", str(security / "ca.pem"), "-verify_ip", "127.0.0.1",
         str(security / "broker.pem")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # The key store opens with the staged password (given through the environment, as start.sh's
    # properties file gives it to the broker: never on a command line).
    opened = subprocess.run(
        [
            "openssl",
            "pkcs12",
            "-in",
            str(security / "broker.p12"),
            "-passin",
            "env:STORE_PASSWORD",
            "-nokeys",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "STORE_PASSWORD": (security / "broker-store.password").read_text()},
    )
    assert opened.returncode == 0 and "friendlyName: broker" in opened.stdout, opened.stderr


def test_staging_again_makes_new_secrets(tmp_path: Path) -> None:
    first = stage_security(tmp_path / "security")
    before = (first / f"{SCRAM_USER}.password").read_text()
    again = stage_security(tmp_path / "security")
    assert (again / f"{SCRAM_USER}.password").read_text() != before


@pytest.mark.parametrize("kafka", ["3.9", "4"])
def test_the_images_read_the_staged_names(kafka: str) -> None:
    """The compose file mounts the staged directory where start.sh and server.properties look."""
    compose = (DOCKER_DIR / f"kafka-{kafka}.yml").read_text()
    assert "./artifacts/security:/opt/kafka/security:ro" in compose
    start = (DOCKER_DIR / "images" / f"kafka-{kafka}" / "start.sh").read_text()
    assert "SECURITY=/opt/kafka/security" in start and f"SCRAM_USER={SCRAM_USER}" in start
    assert '"$SECURITY/broker-store.password"' in start and '"$SECURITY/$SCRAM_USER.password"' in start
    properties = (DOCKER_DIR / "images" / f"kafka-{kafka}" / "server.properties").read_text()
    assert "listener.name.secured.ssl.keystore.location=/opt/kafka/security/broker.p12" in properties
    assert "SECURED:SASL_SSL" in properties
