"""Running a Kafka receiver under a real ReceiverSupervisor with an in-process tracker stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from reliable_kafka.kafka.client.offset_range import ranges_in_metadata
from reliable_kafka.receiver import ReceivedBlockInfo, Receiver, ReceiverControl, ReceiverSupervisor
from reliable_kafka.receiver.received_block_handler import ReceivedBlockHandler
from reliable_kafka.receiver.wal_block_handler import receiver_log_directory
from reliable_kafka.settings import ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from reliable_kafka.storage import BlockManager, decode_block
from tests.support.producing import produce_acked
from wal import FileBasedWriteAheadLog

KafkaRecord = tuple[Any, ...]  # key, value, topic, partition, offset
REPO = Path(__file__).resolve().parents[2]
# A ZooKeeper group that notices a dead member in 2 s and rebalances until it settles.
FAST_GROUP_PARAMS = {
    "auto.offset.reset": "smallest",
    "zookeeper.session.timeout.ms": "2000",
    "rebalance.backoff.ms": "300",
    "rebalance.max.retries": "30",
}


def start_receiver_child(
    zookeeper_connect: str,
    group: str,
    topic: str,
    checkpoint: Path,
    max_rate: int,
    report_delay_ms: int,
    params: Mapping[str, Any],
) -> subprocess.Popen[str]:
    """``tests.kafka.receiver_child`` (no zkQuorum when ``zookeeper_connect`` is empty), once it
    says it started."""
    child = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.kafka.receiver_child", zookeeper_connect, group, topic),
            *(str(checkpoint), str(max_rate), str(report_delay_ms), json.dumps(dict(params))),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip() == "started", f"child did not start (exit code {child.poll()})"
    return child


class RecordingTracker:
    """A ReceiverTrackerEndpoint that keeps every reported block; ``on_add_block`` runs first."""

    def __init__(self, on_add_block: Callable[[ReceivedBlockInfo], None] | None = None) -> None:
        self.lock = threading.Lock()
        self.blocks: list[ReceivedBlockInfo] = []
        self.errors: list[tuple[str, str]] = []
        self.deregistered: list[tuple[str, str]] = []
        self.fatal: list[tuple[str, str]] = []  # the deregistrations that ended the stream
        self.registrations = 0
        self.on_add_block = on_add_block

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        with self.lock:
            self.registrations += 1
        return True

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        if self.on_add_block is not None:
            self.on_add_block(info)
        with self.lock:
            self.blocks.append(info)
        return True

    def report_error(self, stream_id: int, message: str, error: str) -> None:
        with self.lock:
            self.errors.append((message, error))

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        with self.lock:
            self.deregistered.append((message, error))
            if fatal:
                self.fatal.append((message, error))
        return True

    def record_count(self) -> int:
        with self.lock:
            return sum(info.num_records or 0 for info in self.blocks)


def streaming_settings(*, wal: bool, block_interval_ms: int = 100, max_rate: int = 0) -> StreamingSettings:
    return StreamingSettings(
        receiver=ReceiverSettings(block_interval_ms=block_interval_ms, max_rate=max_rate),
        wal=WriteAheadLogSettings(enable=wal),
    )


class RunningReceiver:
    """A receiver with its supervisor, block manager and tracker, started."""

    def __init__(
        self,
        receiver: Receiver,
        checkpoint_dir: Path | None,
        *,
        stream_id: int = 0,
        settings: StreamingSettings | None = None,
        handler: ReceivedBlockHandler | None = None,
        tracker: RecordingTracker | None = None,
    ) -> None:
        self.receiver = receiver
        self.tracker = tracker or RecordingTracker()
        self.block_manager = BlockManager()
        self.checkpoint_dir = checkpoint_dir
        self.stream_id = stream_id
        receiver.set_receiver_id(stream_id)
        self.supervisor = ReceiverSupervisor(
            receiver,
            self.tracker,
            self.block_manager,
            settings=settings or streaming_settings(wal=checkpoint_dir is not None),
            checkpoint_dir=str(checkpoint_dir) if checkpoint_dir is not None else None,
            received_block_handler=handler,
        )
        self.supervisor.start()

    def stop(self) -> None:
        self.supervisor.stop("test done")

    def records(self) -> list[KafkaRecord]:
        """Every record of every reported block, from the block manager, in report order."""
        with self.tracker.lock:
            infos = list(self.tracker.blocks)
        records: list[KafkaRecord] = []
        for info in infos:
            data = self.block_manager.get(info.block_id)
            assert data is not None, f"reported block {info.block_id} is not in the block manager"
            records.extend(decode_block(data))
        return records


def wal_blocks(checkpoint_dir: Path, stream_id: int = 0) -> list[list[KafkaRecord]]:
    """Every block the receiver's write-ahead log holds, oldest first."""
    log = FileBasedWriteAheadLog(receiver_log_directory(str(checkpoint_dir), stream_id))
    try:
        return [decode_block(data) for data in log.read_all()]
    finally:
        log.close()


def produce(
    bootstrap_config: dict[str, Any], topic: str, partitions: int, per_partition: int, *, start: int = 0
) -> dict[int, list[bytes]]:
    """``per_partition`` messages to each partition; values name topic, partition and sequence."""
    sent: dict[int, list[bytes]] = {
        p: [f"{topic}/{p}/{i}".encode() for i in range(start, start + per_partition)]
        for p in range(partitions)
    }
    messages = (
        (str(i).encode(), sent[p][i - start], p)
        for i in range(start, start + per_partition)
        for p in range(partitions)
    )
    config = {**bootstrap_config, "linger.ms": 20, "queue.buffering.max.messages": 200000}
    produce_acked(config, topic, messages)
    return sent


def expire_session(connect: str, zk: KazooClient) -> None:
    """Expire ``zk``'s session the way ZooKeeper's own tests do: close it from another client."""
    session_id, password = zk.client_id
    intruder = KazooClient(hosts=connect, client_id=(session_id, password), timeout=6.0)
    intruder.start(timeout=15)
    intruder.stop()
    intruder.close()


def committed_offset(zk: KazooClient, group: str, topic: str, partition: int) -> int | None:
    try:
        return int(zk.get(f"/consumers/{group}/offsets/{topic}/{partition}")[0])
    except NoNodeError:
        return None


def offsets_reach(zk: KazooClient, group: str, ends: dict[tuple[str, int], int]) -> Callable[[], bool]:
    return lambda: all(committed_offset(zk, group, t, p) == end for (t, p), end in ends.items())


# The kafkaParams of each offset store under test; ZooKeeper membership in all three.
OFFSET_STORES = ("zookeeper", "kafka", "dual")
STORE_PARAMS: dict[str, dict[str, str]] = {
    "zookeeper": {},
    "kafka": {"offsets.storage": "kafka", "dual.commit.enabled": "false"},
    "dual": {"offsets.storage": "kafka"},  # dual commit is Kafka 0.8.2's default there
}


class CommittedOffsets:
    """A group's committed offsets where the store under test keeps them (both, for dual)."""

    def __init__(self, store: str, zk: KazooClient, client_config: dict[str, Any], group: str) -> None:
        self.store = store
        self._zk = zk
        self._group = group
        self._kafka: Consumer | None = None
        if store != "zookeeper":
            self._kafka = Consumer({**client_config, "group.id": group, "enable.auto.commit": False})

    def in_kafka(self, topic: str, partition: int) -> int | None:
        assert self._kafka is not None, "this store keeps nothing in Kafka"
        (answer,) = self._kafka.committed([TopicPartition(topic, partition)], timeout=10)
        assert answer.error is None, answer.error
        return answer.offset if answer.offset >= 0 else None

    def values(self, topic: str, partition: int) -> list[int | None]:
        """One value per store in use: ZooKeeper's first."""
        found: list[int | None] = []
        if self.store != "kafka":
            found.append(committed_offset(self._zk, self._group, topic, partition))
        if self.store != "zookeeper":
            found.append(self.in_kafka(topic, partition))
        return found

    def highest(self, topic: str, partition: int) -> int | None:
        """Where a new member starts (dual: the larger of the two)."""
        known = [value for value in self.values(topic, partition) if value is not None]
        return max(known) if known else None

    def reach(self, ends: dict[tuple[str, int], int]) -> Callable[[], bool]:
        """Every store in use holds exactly these offsets."""
        return lambda: all(set(self.values(t, p)) == {end} for (t, p), end in ends.items())

    def assert_nothing_outside_the_store(self, topic: str, partitions: Iterable[int]) -> None:
        if self.store == "kafka":
            assert all(committed_offset(self._zk, self._group, topic, p) is None for p in partitions), (
                "offsets.storage=kafka without dual commit wrote to ZooKeeper"
            )

    def close(self) -> None:
        if self._kafka is not None:
            self._kafka.close()


def assert_exactly_once(records: Iterable[KafkaRecord], expected: dict[tuple[str, int], list[bytes]]) -> None:
    by_partition: dict[tuple[str, int], list[KafkaRecord]] = {}
    for record in records:
        by_partition.setdefault((record[2], record[3]), []).append(record)
    assert sorted(by_partition) == sorted(k for k, v in expected.items() if v)
    for key, values in expected.items():
        got = by_partition.get(key, [])
        assert [r[4] for r in got] == list(range(len(values))), f"{key}: offsets not dense, once, in order"
        assert [r[1] for r in got] == values, f"{key}: values differ"


def offset_ranges_cover(infos: Iterable[ReceivedBlockInfo]) -> Counter[tuple[str, int]]:
    """Records per partition as the blocks' offset-range metadata counts them."""
    counts: Counter[tuple[str, int]] = Counter()
    for info in infos:
        for r in ranges_in_metadata(info.metadata):
            counts[(r.topic, r.partition)] += r.count()
    return counts


def assert_resumed_within_one_block(
    run1: list[list[KafkaRecord]],
    run2: list[list[KafkaRecord]],
    topic: str,
    sent: Mapping[int, list[bytes]],
    started_at: Mapping[int, int],
) -> None:
    """Two runs of a receiver on ``topic``, the first killed (their write-ahead-log blocks): every
    record sent is stored, the second run re-read only what the first stored but had not
    committed (part of one block per partition), no run stored a record twice, and the second
    run started each partition exactly at ``started_at[partition]``."""
    for p, values in sent.items():
        offsets = [r[4] for block in run1 + run2 for r in block if (r[2], r[3]) == (topic, p)]
        assert set(offsets) == set(range(len(values))), f"partition {p} lost messages"
        first_run = [{r[4] for r in block if (r[2], r[3]) == (topic, p)} for block in run1]
        second_run = {r[4] for block in run2 for r in block if (r[2], r[3]) == (topic, p)}
        duplicates = {o for block in first_run for o in block} & second_run
        assert not duplicates or any(duplicates <= block for block in first_run), (
            f"partition {p}: duplicates {min(duplicates)}..{max(duplicates)} span more than one block"
        )
        assert len(offsets) - len(values) == len(duplicates), "a run stored a record twice"
        assert min(second_run) == started_at[p]
