"""benchmarks/batch_path_bench.py: its arguments, and a small in-process run (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

bench = load_benchmark("batch_path_bench")


def test_defaults() -> None:
    args = bench.parse_args([])
    assert (args.records, args.block_records, args.size, args.repeat) == (2_000_000, 100_000, 100, 3)
    assert args.master == "local[2]"


@pytest.mark.parametrize("argv", [["--size", "10"], ["--repeat", "0"], ["--block-records", "0"]])
def test_bad_arguments(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(argv)


def test_blocks_hold_the_records_in_order(tmp_path: Path) -> None:
    [descriptor] = bench.write_blocks(tmp_path, 1200, 5000, 30, "localhost")
    rows = bench.decode_block(bench.BlockPartition.decode(descriptor).read())
    assert [row[4] for row in rows] == list(range(1200))
    assert {row[3] for row in rows} == {0, 1, 2}
    assert all(row[0] is None and len(row[1]) == 30 for row in rows)


def test_a_small_run_prints_every_step_and_its_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--records", "3000", "--block-records", "1000", "--repeat", "1", "--no-spark"]) == 0
    out = capsys.readouterr().out
    for step in ("read ", "decode_block", "decoder (default)", "decoder (messageHandler)"):
        assert step in out
    chains = [line for line in out.splitlines() if "read chain + count" in line]
    assert len(chains) == 3
    assert all("baseline" in line and "ratio" in line for line in chains)
