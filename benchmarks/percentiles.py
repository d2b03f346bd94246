"""One percentile for every benchmark, so that a p99 in one report means what it means in another."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (1-99), interpolated between the two nearest ranks (the stdlib's
    inclusive method: the minimum and maximum are the 0th and 100th)."""
    if len(values) == 1:
        return float(values[0])  # quantiles() needs two points
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
