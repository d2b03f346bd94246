"""The driver side: receiver tracking, block-to-batch allocation, rate control, job scheduling.

Names load on first use (PEP 562): importing one scheduler module must not pull in the receivers,
the block manager and the WAL, which a context without receiver streams never needs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PIDRateEstimator": "rate_estimator",
    "RateController": "rate_controller",
    "RateEstimator": "rate_estimator",
    "ReceivedBlockTracker": "received_block_tracker",
    "ReceiverRateController": "rate_controller",
    "ReceiverSchedulingPolicy": "receiver_scheduling_policy",
    "ReceiverTracker": "receiver_tracker",
}

__all__ = [
    "PIDRateEstimator",
    "RateController",
    "RateEstimator",
    "ReceivedBlockTracker",
    "ReceiverRateController",
    "ReceiverSchedulingPolicy",
    "ReceiverTracker",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
