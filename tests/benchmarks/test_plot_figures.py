"""benchmarks/plot_figures.py: the throughput page's plots, drawn only from the figures that page
publishes (its tables after ``<!-- figures: NAME -->``), and the page shows each plot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

plots = load_benchmark("plot_figures")


def test_the_page_publishes_a_table_for_every_plot() -> None:
    found = plots.tables(plots.PAGE.read_text(encoding="utf-8"))
    assert set(plots.PLOTS) <= set(found)
    peers = found["peers"]
    assert len(peers.rows) == 8 and plots.number(peers.column("warm records/s")[3]) == 954_000
    assert plots.span(peers.column("warm min-max")[0]) == (620_000, 638_000)
    latency = found["latency"]
    assert [plots.number(v) for v in latency.column("p99 ms")][:2] == [1951, 1376]
    assert plots.number(latency.column("p50 ms")[4]) is None  # not printed by that run: not drawn
    assert [plots.number(v) for v in found["partitions"].column("receiver peak RSS")] == [287, 228, 219]


def test_the_page_shows_every_plot() -> None:
    page = plots.PAGE.read_text(encoding="utf-8")
    for filename in plots.PLOTS.values():
        assert f"](images/{filename})" in page
        assert (plots.OUT / filename).is_file(), filename


def test_a_figure_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="not a figure"):
        plots.number("about 300k")


def test_the_plots_are_drawn(tmp_path: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (pip install -e '.[bench]')")
    drawn = plots.draw_all(plots.PAGE, tmp_path)
    assert sorted(p.name for p in drawn) == sorted(plots.PLOTS.values())
    for path in drawn:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_missing_table_is_an_error(tmp_path: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (pip install -e '.[bench]')")
    page = tmp_path / "throughput.md"
    page.write_text("# Throughput\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no table marked"):
        plots.draw_all(page, tmp_path / "out")
