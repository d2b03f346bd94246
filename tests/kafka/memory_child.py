"""A ReliableKafkaReceiver (WAL on) in a process of its own, for the memory-bound test.

    python -m tests.kafka.memory_child ZK GROUP TOPIC CHECKPOINT MAX_RATE MAX_BUFFERED_BYTES PARAMS_JSON OUT

Every stored block's offset ranges go to ``OUT`` as JSON lines (``[topic, partition, from, until]``
lists), once the block is in the block manager and the write-ahead log. Each second it prints
``rss <bytes> threads <n>`` (its own /proc/self status). SIGUSR1 stalls the write-ahead log's
writes for 10 s, as a write-ahead log on a stalled disk would (a fault injected here, in the
child, around the real log's ``write``); SIGTERM stops the receiver gracefully.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import wal
from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.kafka.client.offset_range import ranges_in_metadata
from reliable_kafka.receiver import ReceiverSupervisor
from reliable_kafka.settings import ReceiverSettings, StreamingSettings, WriteAheadLogSettings
from reliable_kafka.storage import BlockManager, StorageLevel
from tests.kafka.harness import RecordingTracker

STALL_S = 10.0


def process_status() -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"])


def stall_wal_writes(flowing: threading.Event) -> None:
    """While ``flowing`` is clear, every write of the write-ahead log waits for it."""
    original = wal.FileBasedWriteAheadLog.write

    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        flowing.wait()
        return original(self, *args, **kwargs)

    wal.FileBasedWriteAheadLog.write = write  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    zk, group, topic, checkpoint, max_rate, max_buffered, params, out = argv
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    flowing = threading.Event()
    flowing.set()
    stall_wal_writes(flowing)
    output = Path(out)
    lock = threading.Lock()
    blocks = BlockManager()

    def record(info: Any) -> None:
        ranges = [
            [r.topic, r.partition, r.fromOffset, r.untilOffset] for r in ranges_in_metadata(info.metadata)
        ]
        with lock, output.open("a", encoding="utf-8") as file:
            file.write(json.dumps(ranges) + "\n")
        # What the batch that reads the block does once it completed: the block leaves the store.
        blocks.remove(info.block_id)

    receiver = ReliableKafkaReceiver(
        zk, group, {topic: 1}, json.loads(params), StorageLevel.MEMORY_AND_DISK_SER, consume_batch_size=200
    )
    receiver.set_receiver_id(0)
    settings = StreamingSettings(
        receiver=ReceiverSettings(
            block_interval_ms=200, max_rate=int(max_rate), max_buffered_bytes=int(max_buffered)
        ),
        wal=WriteAheadLogSettings(enable=True),
    )
    supervisor = ReceiverSupervisor(
        receiver, RecordingTracker(record), blocks, settings=settings, checkpoint_dir=checkpoint
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def stall(*_: Any) -> None:
        flowing.clear()
        threading.Timer(STALL_S, flowing.set).start()

    signal.signal(signal.SIGUSR1, stall)
    rss, threads = process_status()
    print(f"before rss {rss} threads {threads}", flush=True)
    supervisor.start()
    print("started", flush=True)
    while not stop.wait(0.5):
        rss, threads = process_status()
        print(f"rss {rss} threads {threads} stalled {int(not flowing.is_set())}", flush=True)
    supervisor.stop("SIGTERM")
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
