"""``reliable-kafka lag --command-config FILE``: librdkafka settings (a secured cluster's) from a
properties file as Kafka's tools take it, so that passwords stay off the command line; ``-X`` wins."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from reliable_kafka.cli import build_parser, main, read_properties, source_of

SECURED = """\
# the lag tool's client, as Kafka's --command-config
security.protocol=SASL_SSL
sasl.mechanism = SCRAM-SHA-512
sasl.username: alice
sasl.password=alice=secret
! a comment the Java way
ssl.ca.location=/etc/kafka/ca.pem

zookeeper.auth=lagger:zk-secret
"""


def test_a_properties_file_gives_the_settings_and_x_wins(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(SECURED)
    args = build_parser().parse_args(
        [
            "lag",
            "--group",
            "g",
            "--zookeeper",
            "zk:2181",
            "--command-config",
            str(config),
            "-X",
            "sasl.username=bob",
        ]
    )

    source = source_of(args)

    assert dict(source.client_config) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob",
        "sasl.password": "alice=secret",  # split at the first separator only
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }
    assert source.zookeeper_auth == "lagger:zk-secret"  # ZooKeeper's, not librdkafka's


def test_a_bad_line_or_a_missing_file_is_exit_2_naming_the_line_never_its_value(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nhunter2-is-my-password\n")
    with pytest.raises(ValueError, match=r"client.properties line 2: expected key=value$"):
        read_properties(str(config))

    err = io.StringIO()
    status = main(
        ["lag", "--group", "g", "--bootstrap-servers", "b:9092", "--command-config", str(config)],
        out=io.StringIO(),
        err=err,
    )
    assert status == 2
    assert "line 2: expected key=value" in err.getvalue()
    assert "hunter2" not in err.getvalue()

    err = io.StringIO()
    missing = str(tmp_path / "absent.properties")
    status = main(
        ["lag", "--group", "g", "--bootstrap-servers", "b:9092", "--command-config", missing],
        out=io.StringIO(),
        err=err,
    )
    assert status == 2
    assert "absent.properties" in err.getvalue()
