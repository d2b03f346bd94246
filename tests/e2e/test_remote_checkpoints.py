"""Acceptance on real servers: the README's app with the checkpoint (and so every write-ahead log)
on HDFS and on S3, reached only through ``spark.hadoop.*`` keys; the S3 secret appears nowhere it
should not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.ports import free_port
from reliable_kafka.util.librdkafka_log import with_logger
from tests.cluster_backends import unique_name
from tests.e2e.app_process import start_app
from tests.e2e.helpers import committed_offsets, log_end_offsets
from tests.e2e.readme_app import README_CHECKPOINT, README_QUORUM, readme_example
from tests.e2e.remote_stores import STORES, RemoteStore, remote_store
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> RemoteStore:
    return remote_store(request, request.param)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode("utf-8", "replace")


@pytest.mark.brokers("3.9")
def test_the_readme_app_with_its_checkpoint_on_a_remote_store(
    local_cluster: LocalCluster, tmp_path: Path, store: RemoteStore
) -> None:
    """Records flow, the WAL and checkpoint land on the store, a graceful stop leaves committed ==
    log end; the store's secret (S3) is in no output, checkpoint object, status page or /metrics."""
    topic, group = unique_name("words"), unique_name("wordcount")
    local_cluster.create_topic(topic, partitions=2)
    readme_stream = '"wordcount", {"words": 1}'
    code = readme_example()
    assert readme_stream in code
    code = code.replace(README_QUORUM, local_cluster.zookeeper_connect)
    code = code.replace(readme_stream, f'"{group}", {{"{topic}": 1}}')
    app = tmp_path / "app.py"
    app.write_text(code.replace(README_CHECKPOINT, store.checkpoint), encoding="utf-8")
    ui_port = free_port()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYSPARK_PYTHON": sys.executable,
        "RELIABLE_KAFKA_JOBS__STOP_GRACEFULLY_ON_SHUTDOWN": "true",
        "RELIABLE_KAFKA_UI__PORT": str(ui_port),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # What spark-submit --properties-file does: the store's keys reach the app's SparkConf.
        "PYSPARK_SUBMIT_ARGS": f"--properties-file {store.properties_file(tmp_path)} pyspark-shell",
    }
    process, output = start_app([sys.executable, str(app)], tmp_path, env)
    pages = ""
    try:
        producer = Producer(with_logger({**local_cluster.client_config(), "linger.ms": 5}))
        deadline = time.monotonic() + 240
        while "('reliable', " not in output.text():
            assert process.poll() is None and time.monotonic() < deadline, output.text()[-4000:]
            if "Time: " in output.text():
                producer.produce(topic, b"reliable kafka reliable")
                producer.flush(10)
            time.sleep(1)
        for i in range(200):
            producer.produce(topic, f"more words {i}".encode(), partition=i % 2)
        producer.flush(10)
        pages = _get(f"http://127.0.0.1:{ui_port}/") + _get(f"http://127.0.0.1:{ui_port}/metrics")
        wait_until(
            lambda: (
                committed_offsets(local_cluster, group, topic, 2) == log_end_offsets(local_cluster, topic, 2)
            ),
            timeout_s=120,
            what="every produced record to be stored and committed",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    console = output.text()
    assert process.returncode in (0, -signal.SIGTERM), console[-4000:]
    assert committed_offsets(local_cluster, group, topic, 2) == log_end_offsets(local_cluster, topic, 2)
    fs = store.fs()
    fs.invalidate_cache()
    names = {p.rsplit("/", 1)[-1] for p in fs.ls(store.path(), detail=False)}
    assert {"metadata", "receivedBlockMetadata", "receivedData"} <= names, names
    assert fs.find(f"{store.path()}/receivedData"), "no receiver write-ahead log on the store"
    secret = store.spark_conf.get("spark.hadoop.fs.s3a.secret.key")
    if secret is not None:
        assert secret not in console
        assert secret not in pages and "secret" not in pages.lower()
        assert secret.encode() not in store.all_bytes()
