"""Packed fetch (the C extension reading a partition's queue) against real brokers: the very bytes
the Python path packs, errors surfaced, the client's own logs still served, and the order of
records guarded."""

from __future__ import annotations

import itertools
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from reliable_kafka.kafka.client import packed_fetch
from reliable_kafka.kafka.client.packed_fetch import SWITCH_ENV, FetchedBatch, PackedFetch
from reliable_kafka.kafka.client.shared_client import SharedFetchClient
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.receiver.partition_consumer import PartitionConsumer
from reliable_kafka.local import LocalCluster
from reliable_kafka.storage.block_format import PackedChunk, decode_block, encode_chunks, pack_chunk
from tests.cluster_backends import unique_name
from tests.support import wait_until
from tests.support.producing import produce_acked

pytestmark = pytest.mark.integration

ALL_BROKERS = pytest.mark.brokers("3.9", "4", "0.9")

# Every msgpack length class of bin (8/16/32) and str (fix/8), around each boundary, with
# null and empty keys and values: what the C packer must write exactly as msgpack-python does.
SIZES = (0, 1, 31, 32, 255, 256, 65535, 65536, 70000)


def _records() -> list[tuple[bytes | None, bytes | None]]:
    records: list[tuple[bytes | None, bytes | None]] = [(None, None), (None, b""), (b"", None)]
    records += [(b"k" * size, b"v" * size) for size in SIZES]
    records += [(None, b"x" * size) for size in SIZES]
    # Enough records for offsets in every uint class a test topic reaches (fixint, 8, 16 bits)
    # and for arrays of more than 15 (array 16) in one fetch.
    records += [(str(i).encode(), f"value-{i}".encode()) for i in range(300)]
    return records


def _produce(cluster: LocalCluster, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    config = cluster.client_config(**{"linger.ms": 20, "message.max.bytes": 1_000_000})
    produce_acked(config, topic, ((key, value, 0) for key, value in records))


def _consumer(cluster: LocalCluster, **extra: Any) -> Consumer:
    return Consumer(
        cluster.client_config(
            **{"group.id": unique_name("g"), "enable.auto.commit": False, "enable.partition.eof": False},
            **extra,
        )
    )


def _fetch_all(fetch: PackedFetch, expected: int) -> list[FetchedBatch]:
    batches: list[FetchedBatch] = []
    count = 0
    for _ in range(300):
        batch = fetch.fetch(64, 0.2)
        assert fetch.serve_events() == []
        if batch.chunk is not None:
            batches.append(batch)
            count += batch.chunk.num_records
        if count >= expected:
            return batches
    pytest.fail(f"only {count} of {expected} records fetched")


@ALL_BROKERS
def test_packed_fetch_writes_exactly_the_bytes_pack_chunk_writes(local_cluster: LocalCluster) -> None:
    # 40 characters: the topic goes in as a str 8, not a fixstr.
    topic = unique_name("packed-fetch-bytes").ljust(40, "x")[:40]
    local_cluster.create_topic(topic, 1)
    records = _records()
    _produce(local_cluster, topic, records)

    consumer = _consumer(local_cluster)
    consumer.list_topics(topic, timeout=10)
    fetch = PackedFetch.attach(consumer, TopicAndPartition(topic, 0))
    assert fetch is not None, "packed fetch is off here; the C extension should be built"
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        batches = _fetch_all(fetch, len(records))
    finally:
        fetch.close()
        consumer.close()

    fetched: list[tuple[Any, ...]] = []
    for batch in batches:
        assert batch.chunk is not None and batch.errors == []
        chunk_topic, partition, keys, values, offsets = msgpack.unpackb(batch.chunk.data, raw=False)
        # What the Python path would pack from the same columns, byte for byte.
        assert pack_chunk(chunk_topic, partition, keys, values, offsets).data == batch.chunk.data
        assert (batch.first_offset, batch.last_offset) == (offsets[0], offsets[-1])
        assert batch.chunk.num_records == len(offsets)
        fetched += decode_block(encode_chunks([batch.chunk]))
    assert any(batch.chunk is not None and batch.chunk.num_records > 15 for batch in batches)
    assert fetched == [(key, value, topic, 0, offset) for offset, (key, value) in enumerate(records)]


@pytest.mark.parametrize("packed", [True, False], ids=["packed-fetch", "python-fetch"])
def test_a_partition_consumer_hands_the_sink_the_same_chunks_either_way(
    local_cluster: LocalCluster, packed: bool
) -> None:
    topic = unique_name("packed-fetch-consumer")
    local_cluster.create_topic(topic, 1)
    records = _records()
    _produce(local_cluster, topic, records)
    handed: list[tuple[PackedChunk, int, int]] = []
    lock = threading.Lock()

    def sink(_tp: TopicAndPartition, chunk: PackedChunk, first: int, last: int) -> None:
        with lock:
            handed.append((chunk, first, last))

    def received() -> int:
        with lock:
            return sum(chunk.num_records for chunk, _, _ in handed)

    client = SharedFetchClient.create(
        local_cluster.client_config(**{"group.id": unique_name("g")}), "test", packed_fetch=packed
    )
    consumer = PartitionConsumer(
        TopicAndPartition(topic, 0),
        "thread-0",
        client,
        start_offset=None,
        offset_reset="smallest",
        sink=sink,
        on_failure=lambda message, error: pytest.fail(f"{message}: {error!r}"),
    )
    consumer.start()
    try:
        wait_until(lambda: received() >= len(records), timeout_s=60, what="every record")
        assert consumer.packed_fetch is packed
    finally:
        consumer.stop()
        assert consumer.join(30)
        client.close()
    with lock:
        chunks = [chunk for chunk, _, _ in handed]
        ranges = [(first, last) for _, first, last in handed]
    rows = decode_block(encode_chunks(chunks))
    assert rows == [(key, value, topic, 0, offset) for offset, (key, value) in enumerate(records)]
    assert ranges[0][0] == 0 and ranges[-1][1] == len(records) - 1
    assert all(last + 1 == next_first for (_, last), (next_first, _) in itertools.pairwise(ranges))
    assert consumer.next_offset == len(records)


def test_errors_on_the_partition_queue_come_back_with_the_batch(local_cluster: LocalCluster) -> None:
    topic = unique_name("packed-fetch-error")
    local_cluster.create_topic(topic, 1)
    _produce(local_cluster, topic, [(None, b"only")])
    # No reset allowed: an offset past the log end is an error the consumer must be told of.
    consumer = _consumer(local_cluster, **{"auto.offset.reset": "error"})
    consumer.list_topics(topic, timeout=10)
    fetch = PackedFetch.attach(consumer, TopicAndPartition(topic, 0))
    assert fetch is not None
    try:
        consumer.assign([TopicPartition(topic, 0, 1000)])
        errors: list[KafkaError] = []
        for _ in range(100):
            batch = fetch.fetch(10, 0.2)
            assert batch.chunk is None
            errors += batch.errors
            if errors:
                break
    finally:
        fetch.close()
        consumer.close()
    assert errors, "the out-of-range error never came"
    assert errors[0].code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET)
    assert "1000" in errors[0].str() or "out of range" in errors[0].str().lower()
    assert not errors[0].fatal()


def test_the_clients_logs_are_still_served(
    local_cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("packed-fetch-logs")
    local_cluster.create_topic(topic, 1)
    _produce(local_cluster, topic, [(None, b"one")])
    log = logging.getLogger("tests.packed_fetch.librdkafka")
    caplog.set_level(logging.DEBUG, logger=log.name)
    # librdkafka's fetch debug lines name the topic; they reach Python only through the consumer
    # queue, which the packed fetch no longer reads: serve_events must run the logger.
    consumer = _consumer(local_cluster, **{"debug": "fetch", "logger": log})
    consumer.list_topics(topic, timeout=10)
    fetch = PackedFetch.attach(consumer, TopicAndPartition(topic, 0))
    assert fetch is not None
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        batch = fetch.fetch(10, 0.1)
        for _ in range(100):
            if batch.chunk is not None:
                break
            batch = fetch.fetch(10, 0.1)
        assert batch.chunk is not None and batch.chunk.num_records == 1
        wait_until(
            lambda: bool(fetch.serve_events() == [] and any(topic in r.getMessage() for r in caplog.records)),
            timeout_s=30,
            what="a librdkafka log line about the topic",
        )
    finally:
        fetch.close()
        consumer.close()


def test_a_record_on_the_consumer_queue_is_refused_not_reordered(local_cluster: LocalCluster) -> None:
    topic = unique_name("packed-fetch-order")
    local_cluster.create_topic(topic, 2)
    producer = Producer(local_cluster.client_config())
    for partition in (0, 1):
        producer.produce(topic, value=b"v", partition=partition)
    assert producer.flush(30) == 0
    consumer = _consumer(local_cluster)
    consumer.list_topics(topic, timeout=10)
    fetch = PackedFetch.attach(consumer, TopicAndPartition(topic, 0))
    assert fetch is not None
    try:
        # Partition 1 was never detached, so its records arrive on the consumer queue.
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
        with pytest.raises(RuntimeError, match=r"consumer queue"):
            for _ in range(100):
                fetch.fetch(10, 0.1)
                fetch.serve_events()
    finally:
        fetch.close()
        consumer.close()


def test_the_switch_turns_packed_fetch_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWITCH_ENV, "0")
    packed_fetch._librdkafka.cache_clear()
    consumer = Consumer({"group.id": "g"})
    try:
        assert PackedFetch.attach(consumer, TopicAndPartition("t", 0)) is None
    finally:
        consumer.close()
        monkeypatch.delenv(SWITCH_ENV)
        packed_fetch._librdkafka.cache_clear()


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """packed fetch's once-per-process probe, run again under the test's patches."""
    packed_fetch._librdkafka.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    packed_fetch._librdkafka.cache_clear()


def test_an_unverified_confluent_kafka_falls_back_unless_forced(
    fresh_probe: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Reading a layout not verified could crash the receiver's process instead of falling back."""
    fresh_probe.delenv(SWITCH_ENV, raising=False)
    fresh_probe.setattr(packed_fetch.confluent_kafka, "version", lambda: ("2.99.0", 0x2630000))
    consumer = Consumer({"group.id": "g"})
    try:
        with caplog.at_level(logging.INFO, logger=packed_fetch.logger.name):
            assert PackedFetch.attach(consumer, TopicAndPartition("t", 0)) is None
        # A WARNING, not an INFO line: a new confluent-kafka minor silently halved receive speed.
        assert any(
            r.levelno == logging.WARNING
            and "confluent-kafka 2.99.0" in r.getMessage()
            and f"{SWITCH_ENV}=1 uses it anyway" in r.getMessage()
            for r in caplog.records
        ), caplog.text
        caplog.clear()
        packed_fetch._librdkafka.cache_clear()
        fresh_probe.setenv(SWITCH_ENV, "1")
        with caplog.at_level(logging.INFO, logger=packed_fetch.logger.name):
            forced = PackedFetch.attach(consumer, TopicAndPartition("t", 0))
        assert forced is not None
        forced.close()
        # The override never skips the allowlist quietly.
        assert any(
            r.levelno == logging.WARNING and "forced on" in r.getMessage() and "2.99.0" in r.getMessage()
            for r in caplog.records
        ), caplog.text
    finally:
        consumer.close()


def test_a_consumer_subclass_is_not_read_by_address() -> None:
    class Wrapped(Consumer):
        __slots__ = ("extra",)

    consumer = Wrapped({"group.id": "g"})
    try:
        assert PackedFetch.attach(consumer, TopicAndPartition("t", 0)) is None
    finally:
        consumer.close()


def test_this_confluent_kafka_is_a_verified_one() -> None:
    """CI installs the newest confluent-kafka the package accepts (and the oldest in the pyspark
    3.5 venv): a release outside VERIFIED_VERSIONS must be verified, then added."""
    import confluent_kafka

    assert packed_fetch._unverified() is None, confluent_kafka.version()


def test_a_layout_other_than_the_one_read_is_never_dereferenced(fresh_probe: pytest.MonkeyPatch) -> None:
    """The probe consumer's callbacks must sit where the layout puts them before any rk is handed to
    librdkafka: a confluent-kafka that moved them turns packed fetch off, even when forced."""
    fresh_probe.setenv(SWITCH_ENV, "1")
    opaque_calls: list[int] = []
    real_handle_prefix = packed_fetch._handle_prefix

    def shifted(consumer: Consumer) -> Any:
        prefix = real_handle_prefix(consumer)
        if prefix is not None:
            prefix.error_cb, prefix.throttle_cb = prefix.throttle_cb, prefix.error_cb
        return prefix

    fresh_probe.setattr(packed_fetch, "_handle_prefix", shifted)
    fresh_probe.setattr(packed_fetch.ctypes, "CDLL", lambda *a, **k: opaque_calls.append(1))
    consumer = Consumer({"group.id": "g"})
    try:
        assert PackedFetch.attach(consumer, TopicAndPartition("t", 0)) is None
        assert (
            packed_fetch._librdkafka()
            == "confluent-kafka's consumer is not laid out as packed fetch reads it"
        )
        assert opaque_calls == []  # librdkafka was not even loaded, let alone given a pointer
    finally:
        consumer.close()


def newest_confluent_kafka_in_the_registry() -> tuple[int, ...] | None:
    """The newest confluent-kafka release below 3 (setup.cfg's bound) on the package index; None
    when the index cannot be reached."""
    try:
        answer = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "index",
                "versions",
                "confluent-kafka",
                "--disable-pip-version-check",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    listed = re.search(r"Available versions: (.+)", answer.stdout)
    if answer.returncode != 0 or listed is None:
        return None
    releases = [
        tuple(int(part) for part in version.split("."))
        for version in listed.group(1).split(", ")
        if re.fullmatch(r"\d+(\.\d+)+", version.strip())
    ]
    return max((release for release in releases if release[0] < 3), default=None)


def test_the_newest_confluent_kafka_the_registry_serves_is_a_verified_one() -> None:
    """A new confluent-kafka minor must fail here, before users install it and packed fetch turns
    itself off on them: verify its layout (this file on that release), then add it."""
    newest = newest_confluent_kafka_in_the_registry()
    if newest is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("the package index is unreachable: CI must check the newest confluent-kafka")
        pytest.skip("the package index is unreachable (pip index versions confluent-kafka)")
    assert newest[:2] in packed_fetch.VERIFIED_VERSIONS, (
        f"confluent-kafka {'.'.join(map(str, newest))} is not in VERIFIED_VERSIONS"
    )


# Reads a partition the topic does not have through a client with an error callback, in a
# process of its own: librdkafka puts its "Unknown partition" error on the partition's queue (as
# after a broker restart whose first metadata lacks the partition).
_UNKNOWN_PARTITION_READER = """
import sys, time
from confluent_kafka import OFFSET_BEGINNING
from reliable_kafka.kafka.client.shared_client import PackedReader, SharedFetchClient
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition

bootstrap, topic = sys.argv[1:]
client = SharedFetchClient.create({"bootstrap.servers": bootstrap, "group.id": "unknown-partition"}, "test")
tp = TopicAndPartition(topic, 7)
reader = client.attach(tp)
assert isinstance(reader, PackedReader), reader
client.assign({tp: OFFSET_BEGINNING})
errors = []
deadline = time.monotonic() + 60
while not errors and time.monotonic() < deadline:
    errors = [e for e in reader.fetch(10, 0.2).errors if e.code() != -191]
reader.close()
client.close()
print(errors)
"""


def test_an_error_on_the_partition_queue_runs_no_error_callback_on_the_reading_thread(
    local_cluster: LocalCluster,
) -> None:
    """librdkafka's batch consume ran the client's error_cb for it on the reader's thread, where
    confluent-kafka's callback asserts it is inside one of its own calls: the process aborted
    (seen when a broker restart's metadata briefly lacked the receiver's partitions)."""
    topic = unique_name("packed-fetch-unknown")
    local_cluster.create_topic(topic, 1)
    env = {**os.environ, SWITCH_ENV: ""}
    result = subprocess.run(
        [sys.executable, "-c", _UNKNOWN_PARTITION_READER, local_cluster.bootstrap_servers, topic],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Unknown partition" in result.stdout, result.stdout
