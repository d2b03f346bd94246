"""A ReliableKafkaReceiver in a process of its own, for the kill -9 test.

    python -m tests.kafka.receiver_child ZK GROUP TOPIC CHECKPOINT MAX_RATE REPORT_DELAY_MS PARAMS_JSON

Prints ``started`` once the first rebalance is done; SIGTERM stops it gracefully. ``ZK`` empty:
no ZooKeeper, the group coordinator of the params' ``bootstrap.servers`` keeps the group.
``REPORT_DELAY_MS`` holds each block between storing and committing, widening the window in
which a kill leaves a stored but uncommitted block behind.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time

from reliable_kafka.kafka import ReliableKafkaReceiver
from reliable_kafka.receiver import ReceiverSupervisor
from reliable_kafka.storage import BlockManager, StorageLevel
from tests.kafka.harness import RecordingTracker, streaming_settings


def main(argv: list[str]) -> int:
    zk, group, topic, checkpoint, max_rate, report_delay_ms, params = argv
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # Small batches, so that a rate limit paces the stream instead of one big batch.
    receiver = ReliableKafkaReceiver(
        zk or None,
        group,
        {topic: 1},
        json.loads(params),
        StorageLevel.MEMORY_AND_DISK_SER,
        consume_batch_size=500,
    )
    receiver.set_receiver_id(0)
    supervisor = ReceiverSupervisor(
        receiver,
        RecordingTracker(lambda _info: time.sleep(int(report_delay_ms) / 1000)),
        BlockManager(),
        settings=streaming_settings(wal=True, max_rate=int(max_rate)),
        checkpoint_dir=checkpoint,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    supervisor.start()
    print("started", flush=True)
    stop.wait()
    supervisor.stop("SIGTERM")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
