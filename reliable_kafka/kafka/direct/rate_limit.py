"""How many records a direct stream's batch takes per partition: Spark's
``DirectKafkaInputDStream.maxMessagesPerPartition`` and its rate controller.

Without backpressure the limit is ``spark.streaming.kafka.maxRatePerPartition`` for every
partition. With it, the rate controller's latest estimate (records/s for the whole stream; before
the first estimate, ``spark.streaming.backpressure.initialRate``) is shared out in proportion to
each partition's lag, so that a partition far behind catches up first, each share still capped by
``maxRatePerPartition``. A partition's limit for one batch is its rate x the batch's seconds, but
never below ``spark.streaming.kafka.minRatePerPartition`` x those seconds (at least one record):
a lagging partition always moves.
"""

from __future__ import annotations

from collections.abc import Mapping

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.scheduler.rate_controller import RateController


class DirectKafkaRateController(RateController):
    """Spark's ``DirectKafkaRateController``: nothing to send anywhere; the stream reads
    :meth:`get_latest_rate` when it computes its next batch."""

    def publish(self, rate: int) -> None:
        pass


def max_messages_per_partition(
    lags: Mapping[TopicAndPartition, int],
    *,
    batch_ms: int,
    estimated_rate: float | None,
    max_rate_per_partition: int,
    min_rate_per_partition: int,
) -> dict[TopicAndPartition, int] | None:
    """The most records each partition may add to the next batch, or None for no limit.

    ``lags``: records between where the stream is and each partition's latest offset.
    ``estimated_rate``: backpressure's records/s for the stream (None or <= 0: backpressure has no
    figure, only ``max_rate_per_partition`` limits; 0 there means unlimited)."""
    if estimated_rate is not None and estimated_rate > 0:
        total_lag = sum(max(lag, 0) for lag in lags.values())
        if total_lag == 0:
            return None  # nothing to read anywhere: no range to bound
        rates = {}
        for tp, lag in lags.items():
            share = max(lag, 0) / total_lag * estimated_rate
            rates[tp] = min(share, max_rate_per_partition) if max_rate_per_partition > 0 else share
    elif max_rate_per_partition > 0:
        rates = dict.fromkeys(lags, float(max_rate_per_partition))
    else:
        return None
    seconds = batch_ms / 1000
    floor = max(1, int(min_rate_per_partition * seconds))
    return {tp: max(int(rate * seconds), floor) for tp, rate in rates.items()}
