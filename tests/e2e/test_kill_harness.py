"""The kill test's audit of what its child runs wrote (tests/e2e/kill_harness.py), on hand-made
outputs: which duplicates a receiver's one-block re-read after a kill explains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.kill_harness import Output, blocks_to_cover


def block(block_id: str, partition: int, start: int, until: int) -> dict[str, Any]:
    return {"id": block_id, "ranges": [[partition, start, until]]}


def batch(
    run: int, time_ms: int, blocks: list[dict[str, Any]], *, ended: bool = True
) -> list[dict[str, Any]]:
    """A batch's lines as the child writes them: begin, one line per record, maybe end."""
    lines: list[dict[str, Any]] = [{"kind": "begin", "run": run, "batch": time_ms, "blocks": blocks}]
    for b in blocks:
        for p, start, until in b["ranges"]:
            lines += [
                {"kind": "rec", "run": run, "batch": time_ms, "p": p, "o": o, "v": f"m-{p}-{o}"}
                for o in range(start, until)
            ]
    if ended:
        lines.append({"kind": "end", "run": run, "batch": time_ms})
    return lines


def recovered(run: int, pending: list[int], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "recovered", "run": run, "pending": pending, "blocks": blocks}


def write_output(path: Path, lines: list[dict[str, Any]]) -> Output:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return Output.read(path)


def test_a_block_read_again_but_left_for_the_next_run_explains_its_duplicates(tmp_path: Path) -> None:
    # Run 0 stores partition 0's offsets 0-647 in two blocks and is killed before committing the
    # second (a) or putting it in a batch. Run 1 recovers a and runs it in batch 5000; its
    # receiver starts at the committed offset 560, so its first block (c, 560-699) reads a's
    # offsets again. Run 1 is killed inside batch 5000 (which holds its own block of
    # partition 1) with c stored and committed but not yet in a batch begun: c stays in the
    # metadata log and run 2 delivers it from there. Offsets 560-647 are in batches 5000 and
    # 9000: one block re-read after one kill, within the bound, though no batch of run 1 holds
    # the block that read them again (the shape of the seed-34751985 failure, issue 21).
    a, b0 = block("a", 0, 560, 648), block("b0", 0, 0, 560)
    c, p1 = block("c", 0, 560, 700), block("p1", 1, 0, 40)
    output = write_output(
        tmp_path / "output.jsonl",
        [
            recovered(0, [], []),
            *batch(0, 1000, [b0]),
            recovered(1, [], [a]),
            *batch(1, 5000, [a, p1], ended=False),
            recovered(2, [5000], [a, p1, c]),
            *batch(2, 5000, [a, p1]),
            *batch(2, 9000, [c]),
        ],
    )

    assert output.duplicate_levels() == {0: [set(range(560, 648))]}
    assert output.read_again_by(1) == {0: set(range(560, 648))}
    assert output.read_again_by(2) == {}
    assert blocks_to_cover(output.read_again_by(1)[0], output.killed_run_ranges(0, 0)) == 1
    assert output.unexplained_duplicates(2) == {}


def test_both_copies_delivered_by_a_later_run_from_the_log_are_one_block_read_again(tmp_path: Path) -> None:
    # Seen in a kill test run on a loaded machine: run 4 fell 30 batches behind, so neither the
    # block run 3 left uncommitted (r3, recovered by run 4 into a pending batch) nor the block
    # run 4's receiver read again from the committed offset (r4, 7216-7815 of both partitions)
    # was in a batch run 4 began. Run 5 delivered both from the metadata log: 7216-7219 twice.
    r3 = {"id": "r3", "ranges": [[0, 7208, 7220], [1, 7208, 7220]]}
    r4 = {"id": "r4", "ranges": [[0, 7216, 7816], [1, 7216, 7816]]}
    early = {"id": "early", "ranges": [[0, 0, 7208], [1, 0, 7208]]}
    output = write_output(
        tmp_path / "output.jsonl",
        [
            recovered(0, [], []),
            *batch(0, 1000, [early]),
            recovered(1, [], []),
            recovered(2, [], []),
            recovered(3, [], []),
            recovered(4, [], [r3]),
            *batch(4, 2000, []),
            recovered(5, [3000, 4000], [r3, r4]),
            *batch(5, 3000, [r3]),
            *batch(5, 4000, [r4]),
        ],
    )

    offsets = set(range(7216, 7220))
    assert output.duplicate_levels() == {0: [offsets], 1: [offsets]}
    assert output.read_again_by(4) == {0: offsets, 1: offsets}
    assert blocks_to_cover(offsets, output.killed_run_ranges(3, 0)) == 1
    assert output.unexplained_duplicates(5) == {}


def test_a_recovered_block_in_two_batches_stays_unexplained(tmp_path: Path) -> None:
    # What the audit is for: a block that two batch times both deliver (say, allocated to a
    # batch that ran and handed back to the queue too) was read once, so nothing explains it.
    a, b0 = block("a", 0, 560, 648), block("b0", 0, 0, 560)
    output = write_output(
        tmp_path / "output.jsonl",
        [
            recovered(0, [], []),
            *batch(0, 1000, [b0]),
            *batch(0, 2000, [a], ended=False),
            recovered(1, [2000], [a]),
            *batch(1, 6000, [a]),
        ],
    )

    assert output.read_again_by(1) == {}
    assert output.unexplained_duplicates(1) == {0: set(range(560, 648))}
    assert output.holders(0, set(range(560, 648))) == [
        "run 0 batch 2000 block a (read, ended=False): offsets 560-647 (88)",
        "run 1 batch 6000 block a (recovered, ended=True): offsets 560-647 (88)",
    ]


def test_a_completed_batch_run_again_is_not_a_read(tmp_path: Path) -> None:
    # A batch pending in the checkpoint but completed in the metadata log runs again under its
    # own time with blocks an earlier run stored: not the restarted run's reads.
    b0, b1 = block("b0", 0, 0, 8), block("b1", 0, 8, 16)
    output = write_output(
        tmp_path / "output.jsonl",
        [
            recovered(0, [], []),
            *batch(0, 1000, [b0, b1]),
            recovered(1, [], []),
            *batch(1, 1000, [b0, b1]),
        ],
    )

    assert output.blocks_stored_by(1) == set()
    assert output.read_again_by(1) == {}
    assert output.unexplained_duplicates(1) == {}
