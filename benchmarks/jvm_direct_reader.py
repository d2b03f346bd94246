"""Spark's JVM direct stream (``spark-streaming-kafka-0-10``) reading backlogs, for direct_bench.py.

    python benchmarks/jvm_direct_reader.py --brokers B --master M --messages N TOPIC [TOPIC ...]

A process of its own: the connector's jars must be on ``spark.jars`` when the SparkContext starts.
pyspark's ``StreamingContext`` builds Spark's ``KafkaUtils.createDirectStream`` through py4j (no JVM
code of ours: the stream and the ``rdd.count()`` of each batch run in the JVM), and a ``StreamingListener``
sums each batch's ``numRecords``. Each topic in turn, in one SparkContext (the first cold, the
others warm), from ``ssc.start()`` until ``--messages`` records were counted. One JSON line per
topic on stdout: seconds, records, CPU seconds of this Python process and of the driver JVM, and
of the JVM's descendants (executors), as pipeline_bench measures them.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.streaming import StreamingContext
from pyspark.streaming.listener import StreamingListener

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proc_cpu import CpuMeter, driver_jvm_pid
from spark_kafka_jars import kafka010_jars


class CountEach:
    """A Java ``VoidFunction<JavaRDD>`` implemented here (py4j callback): ``rdd.count()``."""

    def __init__(self) -> None:
        self.counted = 0

    def call(self, rdd: Any) -> None:
        self.counted += rdd.count()

    class Java:
        implements = ["org.apache.spark.api.java.function.VoidFunction"]  # noqa: RUF012 - py4j's form


class RecordCount(StreamingListener):
    def __init__(self, target: int) -> None:
        self.total = 0
        self.target = target
        self.done = threading.Event()

    def onBatchCompleted(self, batchCompleted: Any) -> None:
        self.total += batchCompleted.batchInfo().numRecords()
        if self.total >= self.target:
            self.done.set()


def read_topic(sc: SparkContext, brokers: str, topic: str, messages: int) -> dict[str, Any]:
    ssc = StreamingContext(sc, 1)
    jvm = sc._jvm
    k10 = jvm.org.apache.spark.streaming.kafka010
    params = jvm.java.util.HashMap()
    deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
    for key, value in {
        "bootstrap.servers": brokers,
        "group.id": f"jvm-direct-{topic}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
        "key.deserializer": deserializer,
        "value.deserializer": deserializer,
    }.items():
        params.put(key, value)
    topics = jvm.java.util.ArrayList()
    topics.add(topic)
    stream = k10.KafkaUtils.createDirectStream(
        ssc._jssc, k10.LocationStrategies.PreferConsistent(), k10.ConsumerStrategies.Subscribe(topics, params)
    )
    # foreachRDD(rdd.count()), as ours: the records are read and counted in the JVM's tasks; only
    # the call that starts each batch's job comes here.
    stream.foreachRDD(CountEach())
    listener = RecordCount(messages)
    ssc.addStreamingListener(listener)
    meter = CpuMeter(driver_jvm_pid())
    meter.start()
    ssc.start()
    finished = listener.done.wait(1800)
    cpu = meter.stop()
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    return {
        "topic": topic,
        "finished": finished,
        "records": listener.total,
        "seconds": cpu.wall_s,
        "driver_python_s": cpu.driver_python_s,
        "driver_jvm_s": cpu.driver_jvm_s,
        "spark_others_s": cpu.spark_others_s,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--master", default="local-cluster[2,2,1024]")
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("topics", nargs="+")
    args = parser.parse_args(argv)
    jars = ",".join(str(jar) for jar in kafka010_jars())
    conf = (
        SparkConf()
        .setMaster(args.master)
        .setAppName("jvm-direct-reader")
        .set("spark.jars", jars)
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    try:
        for topic in args.topics:
            print(json.dumps(read_topic(sc, args.brokers, topic, args.messages)), flush=True)
    finally:
        sc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
