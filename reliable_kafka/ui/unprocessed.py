"""What a running application has received and not yet processed, read from its status page's
``/metrics``: the figures ``reliable-kafka lag --status-url`` prints beside Kafka's lag, and the
bound ``--max-delay`` puts on them.

Kafka's lag cannot show them: a receiver commits a block's offsets once the block is stored (block
store and write-ahead log), not once a batch has processed it, so the lag of an application minutes
behind reads 0 while its batches queue. The status store counts those batches; ``/metrics`` is the
one surface the page already serves for machines (Prometheus), so the CLI reads the same gauges an
alert rule would.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

from reliable_kafka.ui.metrics import UNPROCESSED_BATCHES, UNPROCESSED_RECORDS, UNPROCESSED_SCHEDULING_DELAY

READ_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Unprocessed:
    batches: int  # waiting plus running (Spark's unprocessedBatches)
    records: int  # in those batches
    scheduling_delay_s: float  # how long the oldest waiting batch has waited so far; 0: none waits

    def to_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "records": self.records,
            "scheduling_delay_s": self.scheduling_delay_s,
        }


def metrics_url(status_url: str) -> str:
    """The ``/metrics`` of the status page at ``status_url`` (the address ``start()`` prints, e.g.
    ``http://driver:4050/``, or its ``/metrics`` itself)."""
    parts = urlsplit(status_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected the http:// or https:// address of a status page")
    if parts.username is not None or parts.password is not None:
        # They would be echoed in every message that names the page.
        raise ValueError("credentials in the address are not supported")
    path = parts.path.rstrip("/")
    if not path.endswith("/metrics"):
        path = f"{path}/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def parse_unprocessed(text: str, source: str) -> Unprocessed:
    """The unprocessed figures in a Prometheus text exposition; ``ValueError`` naming ``source``
    when one is missing (not a reliable-kafka status page, or one from before they existed)."""
    wanted = (UNPROCESSED_BATCHES, UNPROCESSED_RECORDS, UNPROCESSED_SCHEDULING_DELAY)
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in wanted and family.samples:
            values[family.name] = family.samples[0].value
    missing = [name for name in wanted if name not in values]
    if missing:
        raise ValueError(
            f"{source} has no {', '.join(missing)}: not the status page of a reliable-kafka application"
        )
    return Unprocessed(
        batches=int(values[UNPROCESSED_BATCHES]),
        records=int(values[UNPROCESSED_RECORDS]),
        scheduling_delay_s=values[UNPROCESSED_SCHEDULING_DELAY],
    )


def read_unprocessed(status_url: str, timeout_s: float = READ_TIMEOUT_S) -> Unprocessed:
    """One read of the application's ``/metrics``; raises ``OSError`` (``URLError``) when it
    cannot be reached, ``ValueError`` when it is not a status page."""
    url = metrics_url(status_url)
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (http(s) checked above)
        text = response.read().decode("utf-8")
    return parse_unprocessed(text, url)


@dataclass(frozen=True, slots=True)
class StatusRead:
    """One read of the application's status page: its figures, or why there are none."""

    url: str
    unprocessed: Unprocessed | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        figures = self.unprocessed.to_dict() if self.unprocessed is not None else {"error": self.error}
        return {"status_url": self.url, **figures}

    def describe(self) -> str:
        if self.unprocessed is None:
            return f"Received, not yet processed: unknown (status page {self.url}: {self.error})"
        u = self.unprocessed
        waited = f"the oldest waiting batch has waited {u.scheduling_delay_s:.1f} s"
        return (
            f"Received, not yet processed (status page {self.url}): {u.batches} batches (waiting and "
            f"running), {u.records} records; {waited if u.scheduling_delay_s else 'no batch waits'}"
        )


def read_status(url: str) -> StatusRead:
    """One read; a page that cannot be read is a value (an unknown delay), not an exception."""
    try:
        return StatusRead(url, read_unprocessed(url))
    except (OSError, ValueError) as exc:
        return StatusRead(url, None, f"{type(exc).__name__}: {exc}")


def delay_culprits(status: StatusRead | None, max_delay: float | None) -> list[str]:
    """Why ``status`` breaks ``max_delay`` (seconds the oldest waiting batch may have waited): an
    unknown delay breaks it too, as an unknown lag breaks ``--max-lag``."""
    if status is None or max_delay is None:
        return []
    bound = f"--max-delay {max_delay:g} s"
    if status.unprocessed is None:
        return [f"{bound}: the status page at {status.url} could not be read ({status.error})"]
    u = status.unprocessed
    if u.scheduling_delay_s <= max_delay:
        return []
    return [
        f"{bound}: the oldest waiting batch has waited {u.scheduling_delay_s:.1f} s "
        f"({u.batches} batches, {u.records} records received and not yet processed)"
    ]
