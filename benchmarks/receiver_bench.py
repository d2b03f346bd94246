"""Receiver throughput against a plain consumer, on a local ZooKeeper + Kafka 3.9, LocalCluster's default.

    python benchmarks/receiver_bench.py [--messages 2000000] [--partitions 4] [--size 100]

(a) a plain confluent-kafka consumer that assigns every partition and only counts messages
    (consume batches of 100 and of 10,000 are both tried; the faster counts; it fetches the
    topic's metadata before assign(), as the receiver does, so neither waits out librdkafka's
    500 ms offset-query timer);
(b) ReliableKafkaReceiver under a ReceiverSupervisor with the write-ahead log on (fsync per
block) and ZooKeeper offset commits after every stored block.
Both read the same topic from offset 0; each clock runs from start until the last message is
counted (a) or stored and reported (b), start-up included. The runs alternate (a), (b), ...
``--repeat`` times and the best of each counts, since other work on the machine only ever slows
a run down. Goal: (b) >= 0.7 x (a).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.local import LocalCluster
from reliable_kafka.receiver import ReceivedBlockInfo, ReceiverControl, ReceiverSupervisor
from reliable_kafka.settings import ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from reliable_kafka.storage import BlockManager, StorageLevel


def produce(cluster: LocalCluster, topic: str, partitions: int, messages: int, size: int) -> None:
    producer = Producer(
        cluster.client_config(
            **{"linger.ms": 50, "batch.num.messages": 10000, "queue.buffering.max.messages": 500000}
        )
    )
    value = b"x" * size
    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("not every message was acknowledged")
    print(f"produced {messages:,} x {size} B in {time.monotonic() - started:.1f} s")


def plain_consumer(cluster: LocalCluster, topic: str, partitions: int, messages: int, batch: int) -> float:
    consumer = Consumer(cluster.client_config(**{"group.id": "bench-plain", "enable.auto.commit": False}))
    started = time.monotonic()
    # As the receiver's consumers do: with the leader known before assign(), librdkafka
    # resolves OFFSET_BEGINNING at once instead of after its 500 ms retry timer.
    consumer.list_topics(topic, timeout=5)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = 0
    while count < messages:
        count += len(consumer.consume(num_messages=batch, timeout=1.0))
    elapsed = time.monotonic() - started
    consumer.close()
    return elapsed


class CountingTracker:
    """Counts stored records; drops each block once reported, as a completed batch would."""

    def __init__(self, block_manager: BlockManager, expected: int) -> None:
        self.block_manager = block_manager
        self.expected = expected
        self.records = 0
        self.blocks = 0
        self.done = threading.Event()
        self.lock = threading.Lock()

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        return True

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        self.block_manager.remove(info.block_id)
        with self.lock:
            self.records += info.num_records or 0
            self.blocks += 1
            if self.records >= self.expected:
                self.done.set()
        return True

    def report_error(self, stream_id: int, message: str, error: str) -> None:
        print(f"receiver error: {message}\n{error}", file=sys.stderr)

    def deregister_receiver(self, stream_id: int, message: str, error: str) -> bool:
        return True


def reliable_receiver(
    cluster: LocalCluster,
    topic: str,
    messages: int,
    checkpoint: Path,
    group: str = "bench-reliable",
    batch_size: int | None = None,
) -> tuple[float, int]:
    receiver = ReliableKafkaReceiver(
        cluster.zookeeper_connect,
        group,
        {topic: 1},
        {**cluster.client_config(), "auto.offset.reset": "smallest"},
        StorageLevel.MEMORY_AND_DISK_SER,
        **({"consume_batch_size": batch_size} if batch_size else {}),
    )
    receiver.set_receiver_id(0)
    block_manager = BlockManager()
    tracker = CountingTracker(block_manager, messages)
    settings = StreamingSettings(
        receiver=ReceiverSettings(), wal=WriteAheadLogSettings(enable=True, fsync=True)
    )
    supervisor = ReceiverSupervisor(
        receiver, tracker, block_manager, settings=settings, checkpoint_dir=str(checkpoint)
    )
    started = time.monotonic()
    supervisor.start()
    if not tracker.done.wait(600):
        raise RuntimeError(f"only {tracker.records:,} of {messages:,} records stored")
    elapsed = time.monotonic() - started
    supervisor.stop("benchmark done")
    return elapsed, tracker.blocks


# The baseline gets its best batch size: small batches keep fewer GC-tracked Message objects
# alive (less collection work), large ones make fewer calls.
PLAIN_BATCHES = (100, 10_000)


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100, help="message value size in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, interleaved; the best counts")
    parser.add_argument("--batch", type=int, default=None, help="the receiver's consume batch size")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)

    plain: list[tuple[float, float, int]] = []
    reliable: list[tuple[float, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="receiver-bench-") as work,
        LocalCluster(Path(work) / "cluster") as cluster,
    ):
        topic = "bench"
        cluster.create_topic(topic, args.partitions)
        produce(cluster, topic, args.partitions, args.messages, args.size)
        for run in range(args.repeat):
            for batch in PLAIN_BATCHES:
                cpu = cpu_seconds()
                plain_s = plain_consumer(cluster, topic, args.partitions, args.messages, batch)
                plain.append((args.messages / plain_s, cpu_seconds() - cpu, batch))
            cpu = cpu_seconds()
            reliable_s, blocks = reliable_receiver(
                cluster,
                topic,
                args.messages,
                Path(work) / f"checkpoint-{run}",
                f"bench-reliable-{run}",
                args.batch,
            )
            reliable.append((args.messages / reliable_s, cpu_seconds() - cpu))
            print(
                f"run {run + 1}: (a) {max(plain[-len(PLAIN_BATCHES) :])[0]:10,.0f} records/s, "
                f"{max(plain[-len(PLAIN_BATCHES) :])[1]:5.2f} s CPU | "
                f"(b) {reliable[-1][0]:10,.0f} records/s, {reliable[-1][1]:5.2f} s CPU, {blocks} blocks"
            )

    best_plain, best_reliable = max(plain), max(reliable)
    best = f"best of {args.repeat}"
    print(
        f"(a) plain confluent-kafka consumer loop : {best_plain[0]:12,.0f} records/s ({best}, "
        f"consume batch {best_plain[2]})"
    )
    print(f"(b) ReliableKafkaReceiver, WAL + ZK      : {best_reliable[0]:12,.0f} records/s ({best})")
    print(
        f"ratio (b)/(a)                           : {best_reliable[0] / best_plain[0]:12.2f}  (goal >= 0.70)"
    )
    print(
        f"process CPU per million records         : (a) {best_plain[1] / args.messages * 1e6:.2f} s, "
        f"(b) {best_reliable[1] / args.messages * 1e6:.2f} s"
    )


if __name__ == "__main__":
    main()
