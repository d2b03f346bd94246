"""Stream block ids: Spark's names, parsing, unique ids from a shared counter."""

from __future__ import annotations

import threading

import pytest

from reliable_kafka.storage import StreamBlockId, StreamBlockIdGenerator


def test_name_is_input_stream_unique_and_parses_back() -> None:
    block_id = StreamBlockId(3, 1700000000123)
    assert block_id.name == "input-3-1700000000123" == str(block_id)
    assert StreamBlockId.parse(block_id.name) == block_id


@pytest.mark.parametrize("name", ["input-1", "rdd-1-2", "input--1-2", "input-1-2 ", "input-a-2"])
def test_parse_rejects_other_names(name: str) -> None:
    with pytest.raises(ValueError, match="not a stream block id"):
        StreamBlockId.parse(name)


def test_generator_hands_out_unique_ids_across_threads() -> None:
    generator = StreamBlockIdGenerator(7, first_unique_id=0)
    ids: list[StreamBlockId] = []

    def take() -> None:
        ids.extend(generator.next_id() for _ in range(1000))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 8000
    assert {block_id.stream_id for block_id in ids} == {7}
