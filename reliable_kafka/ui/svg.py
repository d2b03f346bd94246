"""Server-side SVG charts: a timeline and a histogram, like the Streaming tab's, with no script.

Rendered on each request from the retained batches, so the page needs no network fetch and no
JavaScript: a point's or bar's ``<title>`` is its tooltip. Every timeline point is a
``<circle class="point">`` carrying its batch time in ``data-batch-time``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 520, 160
HIST_WIDTH = 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 10, 26
HISTOGRAM_BINS = 10


def format_number(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def clock_time(time_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_ms / 1000))


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value`` (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 5, 10) if step * magnitude >= value)


def timeline(chart_id: str, points: Sequence[tuple[int, float]], unit: str) -> str:
    """``points``: (batch time ms, value), oldest first; one circle each."""
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    y_max = _nice_max(max((v for _, v in points), default=0.0))
    parts = [
        f'<svg id="{escape(chart_id)}" class="timeline" xmlns="http://www.w3.org/2000/svg" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
        _axes(plot_w, plot_h, y_max, unit),
    ]
    if points:
        t_min, t_max = points[0][0], points[-1][0]
        span = max(1, t_max - t_min)

        def xy(t: int, v: float) -> tuple[float, float]:
            x = _LEFT + (plot_w * (t - t_min) / span if t_max > t_min else plot_w / 2)
            return x, _TOP + plot_h - plot_h * min(v, y_max) / y_max

        coords = [xy(t, v) for t, v in points]
        parts.append(
            '<polyline class="line" fill="none" stroke="#4a7ab5" stroke-width="1" points="'
            + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            + '"/>'
        )
        for (t, v), (x, y) in zip(points, coords, strict=True):
            parts.append(
                f'<circle class="point" data-batch-time="{t}" cx="{x:.1f}" cy="{y:.1f}" r="2.5" '
                f'fill="#2c5aa0"><title>{clock_time(t)}: {format_number(v)} {escape(unit)}</title></circle>'
            )
        parts.append(
            f'<text x="{_LEFT}" y="{HEIGHT - 6}" font-size="10">{clock_time(t_min)}</text>'
            f'<text x="{WIDTH - _RIGHT}" y="{HEIGHT - 6}" font-size="10" text-anchor="end">'
            f"{clock_time(t_max)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def histogram(chart_id: str, values: Sequence[float], unit: str) -> str:
    """How many batches fall in each of ``HISTOGRAM_BINS`` equal bins from 0 to the largest value."""
    plot_w, plot_h = HIST_WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    x_max = _nice_max(max(values, default=0.0))
    counts = [0] * HISTOGRAM_BINS
    for value in values:
        counts[min(HISTOGRAM_BINS - 1, int(value / x_max * HISTOGRAM_BINS))] += 1
    y_max = _nice_max(max(counts, default=0))
    parts = [
        f'<svg id="{escape(chart_id)}" class="histogram" xmlns="http://www.w3.org/2000/svg" '
        f'width="{HIST_WIDTH}" height="{HEIGHT}" viewBox="0 0 {HIST_WIDTH} {HEIGHT}" role="img">',
        _axes(plot_w, plot_h, y_max, "batches"),
    ]
    bar_w = plot_w / HISTOGRAM_BINS
    for index, count in enumerate(counts):
        if not count:
            continue
        h = plot_h * count / y_max
        low, high = x_max * index / HISTOGRAM_BINS, x_max * (index + 1) / HISTOGRAM_BINS
        parts.append(
            f'<rect class="bar" x="{_LEFT + index * bar_w + 1:.1f}" y="{_TOP + plot_h - h:.1f}" '
            f'width="{bar_w - 2:.1f}" height="{h:.1f}" fill="#6d9bd1"><title>'
            f"{format_number(low)}-{format_number(high)} {escape(unit)}: {count} batches</title></rect>"
        )
    parts.append(
        f'<text x="{_LEFT}" y="{HEIGHT - 6}" font-size="10">0</text>'
        f'<text x="{HIST_WIDTH - _RIGHT}" y="{HEIGHT - 6}" font-size="10" text-anchor="end">'
        f"{format_number(x_max)} {escape(unit)}</text></svg>"
    )
    return "".join(parts)


def _axes(plot_w: float, plot_h: float, y_max: float, unit: str) -> str:
    bottom, middle = _TOP + plot_h, _TOP + plot_h / 2
    return (
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" stroke="#999"/>'
        f'<line x1="{_LEFT}" y1="{bottom}" x2="{_LEFT + plot_w}" y2="{bottom}" stroke="#999"/>'
        f'<text x="{_LEFT - 4}" y="{_TOP + 8}" font-size="10" text-anchor="end">{format_number(y_max)}</text>'
        f'<text x="{_LEFT - 4}" y="{bottom}" font-size="10" text-anchor="end">0</text>'
        f'<text x="{_LEFT - 4}" y="{middle}" font-size="10" text-anchor="end">{escape(unit)}</text>'
    )
