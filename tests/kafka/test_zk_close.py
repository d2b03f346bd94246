"""Closing a ZooKeeper client is bounded: kazoo's stop joins its watch callback thread, which does
not end while a callback is stuck (retrying against a ZooKeeper that is gone, in issue 14). Neither
close_zookeeper nor the interpreter's exit may wait for it."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from reliable_kafka.kafka.client.params import ZooKeeperParams
from reliable_kafka.kafka.client.zk.client import close_zookeeper, connect_zookeeper
from reliable_kafka.local import LocalCluster
from tests.cluster_backends import unique_name

REPO = Path(__file__).resolve().parents[2]


def block_the_watch_callback(zk: KazooClient, path: str, release: threading.Event) -> None:
    """Returns once kazoo's callback thread is inside a callback that waits for ``release``."""
    entered = threading.Event()

    def on_change(data: bytes | None, _stat: ZnodeStat | None) -> None:
        if data == b"changed":
            entered.set()
            release.wait()

    zk.ensure_path(path)
    DataWatch(zk, path, on_change)
    zk.set(path, b"changed")
    assert entered.wait(60), "the watch never fired"


def test_close_returns_while_a_watch_callback_never_does(
    local_cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    zk = connect_zookeeper(ZooKeeperParams(connect=local_cluster.zookeeper_connect))
    release = threading.Event()
    try:
        block_the_watch_callback(zk, f"/bounded-close/{unique_name('node')}", release)
        with caplog.at_level(logging.WARNING, logger="reliable_kafka.util.bounded_stop"):
            close_zookeeper(zk, timeout_s=1.0)
        assert "Abandoned waiting for thread stop the ZooKeeper client" in caplog.text
        assert "kazoo/handlers/threading.py" in caplog.text  # where it was stuck: joining the callback
    finally:
        release.set()


CHILD = """
import sys, threading
from reliable_kafka.kafka.client.params import ZooKeeperParams
from reliable_kafka.kafka.client.zk.client import connect_zookeeper
from tests.kafka.test_zk_close import block_the_watch_callback
zk = connect_zookeeper(ZooKeeperParams(connect=sys.argv[1]))
block_the_watch_callback(zk, sys.argv[2], threading.Event())
print("blocked", flush=True)
"""


def test_the_interpreter_exits_while_a_watch_callback_never_returns(local_cluster: LocalCluster) -> None:
    """kazoo registers an exit hook joining that thread without a bound: the process hung at exit."""
    path = f"/bounded-close/{unique_name('node')}"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, local_cluster.zookeeper_connect, path],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "blocked", done.stderr
    assert done.returncode == 0, done.stderr
