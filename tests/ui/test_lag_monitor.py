"""The lag monitor's failure path: errors reported (secrets masked), lookups reused within the refresh."""

from __future__ import annotations

from typing import Any

from reliable_kafka.ui.lag import LagMonitor, LagSource


def source() -> LagSource:
    return LagSource(
        group="g",
        topics=("t",),
        offsets_storage="dual",
        client_config={"bootstrap.servers": "b:9092", "sasl.password": "hunter2"},
        zookeeper_connect="zk:2181",
        zookeeper_auth="user:zk-secret",
    )


def test_errors_are_reported_masked_and_lookups_reused() -> None:
    calls: list[str] = []

    def refuse(s: LagSource) -> Any:
        calls.append(s.group)
        raise ConnectionError("no ZooKeeper; config hunter2 auth user:zk-secret")

    cached = LagMonitor([source()], refresh_ms=3_600_000, connect_zookeeper=refuse)
    first = cached.report()
    assert first.rows == ()
    assert first.errors == ("group g: ConnectionError: no ZooKeeper; config *** auth ***",)
    assert cached.report() is first and calls == ["g"]

    fresh = LagMonitor([source()], refresh_ms=0, connect_zookeeper=refuse)
    fresh.report()
    fresh.report()
    assert calls == ["g", "g", "g"]
    fresh.close()
    cached.close()


def test_repr_keeps_secrets_out() -> None:
    text = repr(source())
    assert "hunter2" not in text and "zk-secret" not in text
