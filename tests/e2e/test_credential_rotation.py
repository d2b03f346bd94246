"""Credentials rotate across a driver restart (issue 41, "rotation"): a driver restarted from its
checkpoint with new credentials in its kafkaParams uses the new ones, because nothing the run
leaves on disk (driver checkpoint, metadata WAL, receiver WAL) holds the old ones to pin them.

In-process: one run of a direct stream and a ``createStream`` receiver (WAL on) on the local
cluster with canary credentials, then ``getOrCreate`` with rotated ones; the batch pending in the
checkpoint is computed again and its tasks get the new credentials. The cluster is plaintext (the
canaries are carried, not checked): what is proven is where credentials come from after a
restart, the setup function's kafkaParams, never the checkpoint."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext

from reliable_kafka import KafkaUtils, StreamingContext
from reliable_kafka.kafka.direct.direct_kafka_input_dstream import DirectKafkaInputDStream
from reliable_kafka.kafka.direct.kafka_rdd import KafkaRDD, decode_range_partition
from tests.cluster_backends import ClusterUnderTest, unique_name
from tests.e2e.conftest import BATCH_S, e2e_settings
from tests.e2e.helpers import produce
from tests.support import wait_until

pytestmark = pytest.mark.integration

OLD = {"sasl.username": "canary-user-7d3f", "sasl.password": "canary-OLD-pw-5b19e2"}
NEW = {"sasl.username": "canary-user-7d3f", "sasl.password": "canary-NEW-pw-c04a77"}


def test_a_restarted_driver_uses_the_credentials_of_its_setup_not_of_its_checkpoint(
    local_cluster: ClusterUnderTest, spark_context: SparkContext, tmp_path: Path
) -> None:
    topic, group = unique_name("rotation"), unique_name("rotation-group")
    local_cluster.create_topic(topic)
    produce(local_cluster, topic, [(None, f"{i}".encode(), 0) for i in range(20)])
    checkpoint_dir = tmp_path / "checkpoint"
    counts = {"direct": 0, "receiver": 0}
    lock = threading.Lock()
    direct_streams: list[DirectKafkaInputDStream] = []

    def counted(name: str) -> Any:
        def add(rdd: Any) -> None:
            n = rdd.count()
            with lock:
                counts[name] += n

        return add

    def setup(credentials: dict[str, str]) -> StreamingContext:
        settings = e2e_settings(wal=True)
        # In the driver: the same WAL and metadata log, without launching a receiver job.
        settings = settings.model_copy(
            update={"receiver": settings.receiver.model_copy(update={"placement": "driver"})}
        )
        ssc = StreamingContext(spark_context, BATCH_S, settings)
        ssc.checkpoint(str(checkpoint_dir))
        params = {**local_cluster.client_config(), "auto.offset.reset": "smallest", **credentials}
        direct = KafkaUtils.createDirectStream(ssc, [topic], params)
        direct.foreachRDD(counted("direct"))
        KafkaUtils.createStream(ssc, local_cluster.zookeeper_connect, group, {topic: 1}, params).foreachRDD(
            counted("receiver")
        )
        direct_streams.append(direct)
        return ssc

    first = StreamingContext.getOrCreate(str(checkpoint_dir), lambda: setup(OLD))
    first.start()
    try:
        wait_until(
            lambda: counts["direct"] >= 20 and counts["receiver"] >= 20, timeout_s=120, what="both streams"
        )
    finally:
        first.stop(stopSparkContext=False, stopGraceFully=False)

    # 1. Nothing the run left (checkpoint, metadata WAL, receiver WAL) holds a credential.
    files = [path for path in checkpoint_dir.rglob("*") if path.is_file()]
    assert any(path.name == "metadata" for path in files)
    assert any("receivedData" in path.parts for path in files)
    for path in files:
        data = path.read_bytes()
        for secret in (*OLD.values(), *NEW.values()):
            assert secret.encode() not in data, f"{path} holds {secret}"

    # 2. The driver "died" while its last batch ran: that batch is pending in the checkpoint.
    metadata = checkpoint_dir / "metadata"
    document = json.loads(metadata.read_text())
    (direct_record,) = [s for s in document["input_streams"] if s["kind"] == "DirectKafkaInputDStream"]
    pending = max(int(t) for t in direct_record["data"]["batches"])
    document["pending_times_ms"] = [pending]
    metadata.write_text(json.dumps(document))

    # 3. Restarted with rotated credentials: the pending batch's tasks get the new ones.
    second = StreamingContext.getOrCreate(str(checkpoint_dir), lambda: setup(NEW))
    try:
        restored = direct_streams[-1]
        assert len(direct_streams) == 2
        rerun = restored.compute(pending)
        assert isinstance(rerun, KafkaRDD)
        descriptors = rerun.prev.collect()
        assert descriptors
        for raw in descriptors:
            kafka_params, _range = decode_range_partition(raw)
            assert kafka_params["sasl.password"] == NEW["sasl.password"]
    finally:
        second.stop(stopSparkContext=False, stopGraceFully=False)
