"""Draws the plots of docs/throughput.md from the figures that page publishes.

The benchmarks print their tables; their latest runs' figures are copied into
``docs/throughput.md``, each table after a ``<!-- figures: NAME -->`` line. This script reads those
tables, nothing else, so a plot can only show a measured, published figure:

- ``peers``: warm records/s per reader (``benchmarks/peers.py``, ``local[2]``), with min-max;
- ``latency``: p50 and p99 latency per reader and master (``benchmarks/peers.py``);
- ``partitions``: records/s and peak RSS against partitions (``benchmarks/receiver_bench.py``).

    .venv/bin/python benchmarks/plot_figures.py [--page docs/throughput.md] [--out docs/images]

Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "throughput.md"
OUT = REPO / "docs" / "images"
PLOTS = {
    "peers": "throughput-readers.png",
    "latency": "latency-percentiles.png",
    "partitions": "partitions.png",
}


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]

    def column(self, name: str) -> list[str]:
        index = self.header.index(name)
        return [row[index] for row in self.rows]


def tables(markdown: str) -> dict[str, Table]:
    """Every table that follows a ``<!-- figures: NAME -->`` line, by name."""
    found: dict[str, Table] = {}
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        match = re.fullmatch(r"<!-- figures: ([\w-]+) -->", line.strip())
        if not match:
            continue
        body = []
        for row in lines[i + 1 :]:
            if not row.startswith("|"):
                break
            body.append([cell.strip() for cell in row.strip().strip("|").split("|")])
        if len(body) < 3:
            raise ValueError(f"figures {match[1]!r}: no table after the marker")
        found[match[1]] = Table(body[0], body[2:])
    return found


def number(text: str) -> float | None:
    """``1,298k`` -> 1298000; ``287 MiB`` -> 287; ``1,880`` -> 1880; empty -> None."""
    text = text.strip().strip("`")
    if not text:
        return None
    match = re.fullmatch(r"([\d,]+(?:\.\d+)?)\s*([kM]?)(?:\s*MiB)?", text)
    if match is None:
        raise ValueError(f"not a figure: {text!r}")
    scale = {"": 1, "k": 1e3, "M": 1e6}[match[2]]
    return float(match[1].replace(",", "")) * scale


def span(text: str) -> tuple[float, float]:
    """``620k-638k`` -> (620000, 638000)."""
    low, high = text.split("-")
    return number(low) or 0.0, number(high) or 0.0


def _plain(text: str) -> str:
    return text.replace("`", "")


def plot_peers(table: Table, path: Path) -> None:
    import matplotlib.pyplot as plt  # noqa: PLC0415 - only where plots are drawn

    readers = [_plain(r) for r in table.column("reader")]
    warm = [number(v) or 0.0 for v in table.column("warm records/s")]
    spans = [span(v) for v in table.column("warm min-max")]
    low = [w - lo for w, (lo, _) in zip(warm, spans, strict=True)]
    high = [hi - w for w, (_, hi) in zip(warm, spans, strict=True)]
    ours = ["createStream" in r or "createDirectStream" in r for r in readers]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    y = range(len(readers))
    ax.barh(y, [w / 1e3 for w in warm], color=["#2a7ab9" if o else "#9aa5b1" for o in ours])
    ax.errorbar(
        [w / 1e3 for w in warm],
        y,
        xerr=[[v / 1e3 for v in low], [v / 1e3 for v in high]],
        fmt="none",
        color="black",
    )
    ax.set_yticks(list(y), readers)
    ax.invert_yaxis()
    ax.set_xlabel("warm records/s (thousands), min-max of the warm repeats")
    title = "Warm records/s per reader: one topic, 6M x 100 B, 4 partitions,\nlocal[2], 2-core VM"
    ax.set_title(f"{title} (benchmarks/peers.py)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(table: Table, path: Path) -> None:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    labels = [
        f"{_plain(m).replace('[', chr(10) + '[')}\n{_plain(r).split(',')[0]}"
        for m, r in zip(table.column("master"), table.column("reader"), strict=True)
    ]
    p50 = [number(v) for v in table.column("p50 ms")]
    p99 = [number(v) for v in table.column("p99 ms")]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    x = range(len(labels))
    width = 0.38
    ax.bar([i - width / 2 for i in x], [v or 0 for v in p50], width, label="p50", color="#2a7ab9")
    ax.bar([i + width / 2 for i in x], [v or 0 for v in p99], width, label="p99", color="#e07b39")
    for i, value in enumerate(p50):
        if value is None:
            ax.annotate("not printed", (i - width / 2, 20), ha="center", rotation=90, fontsize=7)
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("ms from produce() to its batch's collect()")
    ax.set_title("Latency at 5,000 records/s for 30 s (benchmarks/peers.py)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_partitions(table: Table, path: Path) -> None:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    partitions = [int(number(v) or 0) for v in table.column("partitions")]
    plain = [(number(v) or 0) / 1e3 for v in table.column("plain consumer")]
    receiver = [(number(v) or 0) / 1e3 for v in table.column("receiver (WAL, ZooKeeper offsets)")]
    rss = [number(v) or 0 for v in table.column("receiver peak RSS")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.6))
    labels = [str(p) for p in partitions]
    x = range(len(labels))
    width = 0.38
    left.bar([i - width / 2 for i in x], plain, width, label="plain consumer", color="#9aa5b1")
    left.bar([i + width / 2 for i in x], receiver, width, label="receiver (WAL)", color="#2a7ab9")
    left.set_xticks(list(x), labels)
    left.set_xlabel("partitions")
    left.set_ylabel("records/s (thousands)")
    left.legend(fontsize=8)
    right.plot(labels, rss, marker="o", color="#2a7ab9")
    right.set_ylim(0, max(rss) * 1.2)
    right.set_xlabel("partitions")
    right.set_ylabel("receiver peak RSS (MiB)")
    fig.suptitle("2M x 100 B, best of 3, 2-core VM (benchmarks/receiver_bench.py --partitions)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


DRAW = {"peers": plot_peers, "latency": plot_latency, "partitions": plot_partitions}


def draw_all(page: Path, out: Path) -> list[Path]:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    found = tables(page.read_text(encoding="utf-8"))
    missing = sorted(set(PLOTS) - set(found))
    if missing:
        raise ValueError(f"{page}: no table marked <!-- figures: NAME --> for {missing}")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, filename in PLOTS.items():
        DRAW[name](found[name], out / filename)
        paths.append(out / filename)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    for path in draw_all(args.page, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
