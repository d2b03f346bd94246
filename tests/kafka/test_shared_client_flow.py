"""The Python path's flow control on its own (SharedFetchClient's dispatcher and PartitionHandoff):
a partition whose handoff is full is paused and resumed once its thread catches up, every record
reaches its thread once and in order, and only the dispatcher ever calls pause/resume (called
from partition threads while the dispatcher polled, librdkafka's resume hung for ever). The
consumer is a stand-in that serves fetched records like librdkafka's shared queue: nothing of a
paused partition, the next record not yet handed over after a resume."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from confluent_kafka import Message, TopicPartition

from reliable_kafka.kafka.client.fetch_admission import FetchAdmission
from reliable_kafka.kafka.client.shared_client import SharedFetchClient, fetch_plan, prefetch_config
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from tests.support import wait_until

PARTITIONS = 16
RECORDS = 400
VALUE = b"v" * 100


class SharedQueueConsumer:
    """Serves each assigned partition's records in order, a few per poll, skipping paused ones."""

    def __init__(self, partitions: int, records: int) -> None:
        self.next_offset = dict.fromkeys(range(partitions), 0)
        # As librdkafka: nothing is fetched before assign (the dispatcher starts at the first attach).
        self.assigned: set[int] = set()
        self.records = records
        self.paused: set[int] = set()
        self.lock = threading.Lock()
        self.pause_threads: set[str] = set()
        self.pauses = 0
        self.resumes = 0
        self.most_fetching = 0  # the most partitions a consume served from at once
        self.list_offsets = 0

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        with self.lock:
            self.most_fetching = max(self.most_fetching, len(self.assigned - self.paused))
            batch = []
            for partition, offset in self.next_offset.items():
                if partition not in self.assigned or partition in self.paused or offset >= self.records:
                    continue
                taken = range(offset, min(self.records, offset + 50))
                batch += [Message(topic="t", partition=partition, value=VALUE, offset=o) for o in taken]
                self.next_offset[partition] = taken[-1] + 1
        if not batch:
            threading.Event().wait(timeout / 10)  # as librdkafka's consume waits for records
        return batch

    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        with self.lock:
            self.assigned |= {tp.partition for tp in partitions}

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, self.records

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        with self.lock:
            self.list_offsets += 1
            return [TopicPartition(tp.topic, tp.partition, self.records) for tp in partitions]

    def incremental_unassign(self, partitions: Iterable[TopicPartition]) -> None:
        with self.lock:
            self.assigned -= {tp.partition for tp in partitions}

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        with self.lock:
            self.pause_threads.add(threading.current_thread().name)
            self.pauses += 1
            self.paused |= {tp.partition for tp in partitions}

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self.lock:
            self.pause_threads.add(threading.current_thread().name)
            self.resumes += 1
            self.paused -= {tp.partition for tp in partitions}

    def close(self) -> None:
        pass


def read_all(client: SharedFetchClient) -> dict[int, list[int]]:
    """Every partition read by its own thread until it has all its records."""
    readers = {p: client.attach(TopicAndPartition("t", p)) for p in range(PARTITIONS)}
    client.assign({TopicAndPartition("t", p): 0 for p in range(PARTITIONS)})
    received: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}

    def read(partition: int) -> None:
        while len(received[partition]) < RECORDS:
            batch = readers[partition].fetch(7, 0.05)
            if batch.chunk is not None:
                received[partition] += list(range(batch.first_offset, batch.last_offset + 1))
        client.unassign([TopicAndPartition("t", partition)])  # as a partition thread ends

    threads = [threading.Thread(target=read, args=(p,), name=f"kafka-t-{p}") for p in range(PARTITIONS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60  # one bound for all: a hang fails in a minute, not sixteen
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    client.close()
    assert not any(thread.is_alive() for thread in threads), {p: len(r) for p, r in received.items()}
    return received


def test_full_partitions_pause_and_resume_from_the_dispatcher_only_and_nothing_is_lost() -> None:
    consumer = SharedQueueConsumer(PARTITIONS, RECORDS)
    # Room for 20 records per partition: every partition pauses many times over its 400.
    client = SharedFetchClient(consumer, {}, packed_fetch=False, handoff_bytes=20 * len(VALUE))  # type: ignore[arg-type]
    assert read_all(client) == {p: list(range(RECORDS)) for p in range(PARTITIONS)}
    assert consumer.pauses > 0 and consumer.resumes > 0
    assert consumer.pause_threads == {"kafka-fetch-dispatcher"}


def test_beyond_its_slots_partitions_wait_paused_and_take_turns_and_nothing_is_lost() -> None:
    consumer = SharedQueueConsumer(PARTITIONS, RECORDS)
    admission = FetchAdmission(3, quantum_bytes=60 * len(VALUE))
    client = SharedFetchClient(  # type: ignore[arg-type]
        consumer, {}, packed_fetch=False, handoff_bytes=20 * len(VALUE), admission=admission
    )
    assert read_all(client) == {p: list(range(RECORDS)) for p in range(PARTITIONS)}
    assert consumer.most_fetching <= 3
    assert consumer.pause_threads == {"kafka-fetch-dispatcher"}


def test_idle_partitions_wait_out_of_turn_until_their_logs_grow_and_then_nothing_is_lost() -> None:
    consumer = SharedQueueConsumer(PARTITIONS, 0)  # every log empty
    admission = FetchAdmission(3, quantum_bytes=60 * len(VALUE), idle_polls=1)
    client = SharedFetchClient(  # type: ignore[arg-type]
        consumer, {}, packed_fetch=False, handoff_bytes=20 * len(VALUE), admission=admission
    )
    readers = {p: client.attach(TopicAndPartition("t", p)) for p in range(PARTITIONS)}
    client.assign({TopicAndPartition("t", p): 0 for p in range(PARTITIONS)})
    received: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    done = threading.Event()

    def read(partition: int) -> None:
        while not done.is_set():
            batch = readers[partition].fetch(7, 0.02)
            if batch.chunk is not None:
                received[partition] += list(range(batch.first_offset, batch.last_offset + 1))

    threads = [threading.Thread(target=read, args=(p,), name=f"kafka-t-{p}") for p in range(PARTITIONS)]
    for thread in threads:
        thread.start()
    try:
        # All but the admitted ones go idle: nothing to fetch, they take no turns.
        wait_until(lambda: len(admission.idle_positions()) == PARTITIONS - 3, 30, "idle partitions")
        asked = consumer.list_offsets
        with consumer.lock:
            consumer.records = 40  # the logs grow: the watch readies the idle partitions
        wait_until(lambda: all(len(r) == 40 for r in received.values()), 30, "the new records")
        assert consumer.list_offsets > asked
    finally:
        done.set()
        for thread in threads:
            thread.join(10)
        client.close()
    assert received == {p: list(range(40)) for p in range(PARTITIONS)}
    assert consumer.most_fetching <= 3


def test_the_prefetch_budget_splits_per_partition_queue_or_for_the_shared_one() -> None:
    budget, partitions = 64 << 20, 256
    own_queues = prefetch_config(budget, partitions, {})
    shared = prefetch_config(budget, partitions, {}, shared_queue=True)
    # Each admitted partition's own queue: a quarter of the budget over the slots, less a fetch.
    plan = fetch_plan(budget, partitions)
    assert own_queues["queued.max.messages.kbytes"] == (budget // 4 // plan.slots - plan.fetch_bytes) // 1024
    # librdkafka compares the shared queue's size for every partition: the whole quarter.
    assert shared["queued.max.messages.kbytes"] == budget // 4 // 1024
    assert shared["max.partition.fetch.bytes"] == own_queues["max.partition.fetch.bytes"]
    assert shared["fetch.max.bytes"] == own_queues["fetch.max.bytes"] == budget // 4
    assert "fetch.max.bytes" not in prefetch_config(budget, partitions, {"fetch.max.bytes": 1 << 20})
