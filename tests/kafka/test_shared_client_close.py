"""A stop whose join a packed partition reader outlived (its sink slow on a loaded machine) must
not close the consumer under it: librdkafka aborts the whole process when a partition queue is
read or destroyed after its consumer closed (seen as "Fatal Python error: Aborted" in a worker
of a loaded suite run). The consumer closes after the last packed reader's queue."""

from __future__ import annotations

from reliable_kafka.kafka.client.shared_client import PackedReader, SharedFetchClient
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition


class RecordingConsumer:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def close(self) -> None:
        self.calls.append("consumer closed")


class RecordingQueue:
    """The PackedFetch side: what releasing a partition's queue did, in order with the consumer."""

    def __init__(self, calls: list[str], name: str) -> None:
        self.calls = calls
        self.name = name

    def close(self) -> None:
        self.calls.append(f"{self.name} queue released")


def _client_with_readers(calls: list[str], count: int) -> tuple[SharedFetchClient, list[PackedReader]]:
    client = SharedFetchClient(RecordingConsumer(calls), {}, packed_fetch=True, handoff_bytes=1)  # type: ignore[arg-type]
    readers = []
    for partition in range(count):
        client._open_packed_readers += 1  # what attach() counts for a packed reader
        queue = RecordingQueue(calls, f"p{partition}")
        readers.append(PackedReader(client, queue, TopicAndPartition("t", partition)))  # type: ignore[arg-type]
    return client, readers


def test_a_client_whose_readers_are_closed_closes_its_consumer_at_once() -> None:
    calls: list[str] = []
    client, readers = _client_with_readers(calls, 2)
    for reader in readers:
        reader.close()
    client.close()
    assert calls == ["p0 queue released", "p1 queue released", "consumer closed"]


def test_a_reader_still_open_at_close_closes_the_consumer_after_its_queue() -> None:
    calls: list[str] = []
    client, (early, straggler) = _client_with_readers(calls, 2)
    early.close()
    client.close()
    assert calls == ["p0 queue released"]  # the straggler may still be inside a fetch
    straggler.close()
    straggler.close()  # a second close is harmless and closes nothing twice
    assert calls == ["p0 queue released", "p1 queue released", "consumer closed"]


def test_readers_closed_while_the_client_runs_leave_the_consumer_open() -> None:
    calls: list[str] = []
    _, readers = _client_with_readers(calls, 1)
    readers[0].close()  # a partition revoked: the client goes on with the others
    assert calls == ["p0 queue released"]
