"""Small helpers shared by the DStream classes: durations, batch times, user-function arity."""

from __future__ import annotations

import inspect
import logging
import math
import os
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any

logger = logging.getLogger(__name__)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def duration_ms(seconds: float, what: str) -> int:
    """pyspark takes durations in seconds; we keep milliseconds, as Spark's ``Duration`` does."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        raise TypeError(f"{what} must be a number of seconds, got {seconds!r}")
    millis = round(seconds * 1000)
    if millis <= 0:
        raise ValueError(f"{what} must be at least 1 ms, got {seconds!r} s")
    return millis


def batch_datetime(time_ms: int) -> datetime:
    """The batch time as pyspark hands it to user functions (local time, naive)."""
    return datetime.fromtimestamp(time_ms / 1000.0)


def time_ms_of(value: datetime | float) -> int:
    """A ``datetime`` (naive = local time) or a Unix timestamp in seconds, in milliseconds."""
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a datetime or a Unix timestamp in seconds, got {value!r}")
    return round(value * 1000)


def format_batch_time(time_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_ms / 1000))


def positional_arity(func: Callable[..., Any]) -> tuple[int, int | None] | None:
    """(required, maximum) positional arguments of ``func``; maximum ``None`` for ``*args``;
    ``None`` when the signature cannot be read."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    required, maximum = 0, 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return required, None
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            maximum += 1
            if parameter.default is inspect.Parameter.empty:
                required += 1
    return required, maximum


def with_time(func: Callable[..., Any], num_rdds: int, what: str) -> Callable[..., Any]:
    """``func`` as ``(time, *rdds)``: pyspark lets users leave the time out.

    pyspark decides with ``__code__.co_argcount``, which miscounts bound methods and fails on
    callables without code. Here the required arguments decide (``(rdd, extra=None)`` gets no
    time), then, as in pyspark, all positional ones; ``*args`` functions get the time.
    """
    arity = positional_arity(func)
    if arity is None:
        return func
    required, maximum = arity
    if required == num_rdds or (required < num_rdds and maximum == num_rdds):
        return lambda _time, *rdds: func(*rdds)
    if maximum is None or required <= num_rdds + 1 <= maximum:
        return func
    raise TypeError(
        f"{what} function should take {num_rdds} argument(s) (rdd...) or {num_rdds + 1} (time, rdd...), "
        f"got one taking {required if required == maximum else f'{required} to {maximum}'}"
    )


def creation_site(operation: str) -> str:
    """``"<operation> at file.py:42"`` for the first caller outside this package (Spark's call site)."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE_DIR):
            return f"{operation} at {os.path.basename(frame.filename)}:{frame.lineno}"
    return operation


def rdd_to_file_name(prefix: str, suffix: str | None, time_ms: int) -> str:
    """pyspark's ``prefix-<time ms>[.suffix]``."""
    name = f"{prefix}-{time_ms}"
    return name if suffix is None else f"{name}.{suffix}"


def function_name(func: Callable[..., Any]) -> str:
    """A user function's module-qualified name: how a state checkpoint says which function made it
    (``operator.add`` and a module's ``update`` differ; two lambdas of one module do not)."""
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    return f"{module}.{name}"
