"""The blocks of docs/direct-streams.md (the README's before the docs site), run as written:
Spark 2.4's direct_kafka_wordcount.py with the import changed, and the 2.4 guide's offset ranges
pattern inserted before its ``ssc.start()``.

The app gets only ``metadata.broker.list``, as a 2.4 app would: on Kafka 0.9 that means the stream
itself must find out that the broker predates ``ApiVersionRequest``.

The guide's pattern keeps the ranges in one global, set by a batch's transform when the batch is
generated and printed by its foreachRDD when the batch runs (Spark's order). While batches wait
behind a slow one (Spark's first jobs on a busy machine), batches generated meanwhile have set it
again: a batch prints a later batch's ranges, one batch's twice and another's never (seen on 0.9 as
``[(0, 0), (0, 8), (0, 8)]``). So what the batches read is checked from each batch's own RDD, by
batch time, and the guide's prints only against that.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reliable_kafka.local import LocalCluster
from reliable_kafka.util.librdkafka_log import with_logger
from tests.cluster_backends import unique_name
from tests.e2e.app_process import start_app
from tests.support.docs_blocks import blocks_run_by

pytestmark = pytest.mark.integration

START = "ssc.start()\n"
SENT = ["a b a", "b c", "a"] * 5  # a: 15, b: 10, c: 5
# The test's own output operation, after the page's: each batch's ranges from its own RDD.
PROBE = """

def printBatchOffsetRanges(time, rdd):
    for o in rdd.offsetRanges():
        print("batch %s: %s %s %s %s" % (time, o.topic, o.partition, o.fromOffset, o.untilOffset))


kvs.foreachRDD(printBatchOffsetRanges)
"""

Range = tuple[int, int, int]  # partition, fromOffset, untilOffset


def readme_blocks() -> list[str]:
    """The blocks of docs/direct-streams.md marked ``<!-- runnable: tests/e2e/test_direct_readme.py -->``."""
    return blocks_run_by("tests/e2e/test_direct_readme.py", "direct-streams.md")


def direct_app() -> str:
    wordcount, offsets = readme_blocks()
    assert wordcount.count(START) == 1
    before, after = wordcount.split(START)
    return f"{before}directKafkaStream = kvs\n{offsets}{PROBE}\n{START}{after}"


def counted(console: str) -> Counter[str]:
    """The words pprint printed, summed over batches."""
    total: Counter[str] = Counter()
    for word, n in re.findall(r"^\('(\w+)', (\d+)\)$", console, re.MULTILINE):
        total[word] += int(n)
    return total


def ranges_by_batch(console: str, topic: str) -> tuple[dict[str, list[Range]], dict[str, list[Range]]]:
    """By batch time: the ranges each batch read (the probe's lines), and those the README's
    ``printOffsetRanges`` printed in it (after the batch's pprint banner: a batch's output
    operations run one after the other, in the order they were registered)."""
    own: dict[str, list[Range]] = defaultdict(list)
    printed: dict[str, list[Range]] = defaultdict(list)
    banner = re.compile(r"^Time: (.+)$")
    probe = re.compile(rf"^batch (.+): {re.escape(topic)} (\d) (\d+) (\d+)$")
    readme = re.compile(rf"^{re.escape(topic)} (\d) (\d+) (\d+)$")
    batch = None
    for line in console.splitlines():
        if match := banner.match(line):
            batch = match[1]
        elif match := probe.match(line):
            own[match[1]].append((int(match[2]), int(match[3]), int(match[4])))
        elif (match := readme.match(line)) and batch is not None:
            printed[batch].append((int(match[1]), int(match[2]), int(match[3])))
    return own, printed


def sent_to(partition: int) -> int:
    """How many of SENT went to ``partition`` (sent alternately to 0 and 1)."""
    return len(SENT) // 2 + len(SENT) % 2 * (1 - partition)


def probe_read_all(console: str, topic: str) -> bool:
    """Whether the probe has printed ranges reaching the end of what was sent, in both partitions."""
    own, _ = ranges_by_batch(console, topic)
    reached = {0: 0, 1: 0}
    for ranges in own.values():
        for partition, _, until in ranges:
            reached[partition] = max(reached[partition], until)
    return reached == {0: sent_to(0), 1: sent_to(1)}


@pytest.mark.brokers("3.9", "4", "0.9")
def test_the_readme_direct_stream_blocks_run_as_written(local_cluster: LocalCluster, tmp_path: Path) -> None:
    topic = unique_name("direct-readme")
    local_cluster.create_topic(topic, partitions=2)
    app = tmp_path / "direct_kafka_wordcount.py"
    app.write_text(direct_app(), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",  # this machine's host name resolves to loopback
    }
    process, output = start_app(
        [sys.executable, str(app), local_cluster.bootstrap_servers, topic], tmp_path, env
    )
    range_line = re.compile(rf"^{re.escape(topic)} (\d) (\d+) (\d+)$", re.MULTILINE)
    try:
        # largest: what is sent before the first batch is not read, so wait for one.
        deadline = time.monotonic() + 240
        while not range_line.search(output.text()) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert range_line.search(output.text()), output.text()[-4000:]
        producer = Producer(with_logger({**local_cluster.client_config(), "linger.ms": 5}))
        for i, line in enumerate(SENT):
            producer.produce(topic, line.encode(), partition=i % 2)
        assert producer.flush(30) == 0
        # Until the probe, the batch's last output operation, has shown every record read: the
        # words are counted by its first, and SIGTERM stops at once, dropping the batch's rest.
        while not probe_read_all(output.text(), topic) and time.monotonic() < deadline:
            assert process.poll() is None, output.text()[-4000:]
            time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    console = output.text()
    assert counted(console) == Counter({"a": 15, "b": 10, "c": 5}), console[-4000:]
    own, printed = ranges_by_batch(console, topic)
    times = sorted(own)  # "YYYY-MM-DD HH:MM:SS": in time order
    assert sorted(printed) == times, console[-4000:]
    # By batch time, one range per partition per batch, following on: every offset read once.
    for partition in (0, 1):
        spans = [(a, b) for batch in times for p, a, b in own[batch] if p == partition]
        assert len(spans) == len(times), spans
        assert spans[0][0] == 0, spans
        assert all(x[1] == y[0] for x, y in itertools.pairwise(spans)), spans
        assert spans[-1][1] == sent_to(partition), spans
    # The guide's prints: each batch's own ranges or a later batch's, never going back. The later
    # batch may be one generated after the last batch run, dropped by the stop (SIGTERM stops at
    # once, as Spark's shutdown hook does by default): it read on from where that one ended.
    dropped = sorted((p, b, b) for p, _, b in own[times[-1]])
    sources = [sorted(own[batch]) for batch in times] + [dropped]
    source = 0
    for i, batch in enumerate(times):
        shown = sorted(printed[batch])
        later = [j for j in range(max(i, source), len(sources)) if sources[j] == shown]
        assert later, (batch, shown, dict(zip(times[i:], sources[i:], strict=False)), dropped)
        source = later[0]
