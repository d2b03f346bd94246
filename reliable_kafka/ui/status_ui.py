"""The status page of one streaming context: its store on the listener bus, its lag monitor, its server.

Started by the job scheduler before the listener bus (so that no event is missed) when
``spark.streaming.ui.enabled``; stopped after the bus has delivered its last event. A page that
cannot start (no free port) is logged and skipped: a stream must not fail for its dashboard.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol

from reliable_kafka.kafka.client.params import ACCESS_REFUSAL_TIMEOUT_PARAM
from reliable_kafka.kafka.client.zk.broker_discovery import LISTENER_NAME_PARAM
from reliable_kafka.kafka.offsets.watched_group import WatchedGroup, WatchesGroup
from reliable_kafka.settings import StreamingSettings, UISettings
from reliable_kafka.ui import metrics, pages
from reliable_kafka.ui.lag import LagMonitor, LagSource
from reliable_kafka.ui.partition_receivers import receivers_of_partitions
from reliable_kafka.ui.server import Response, StatusServer
from reliable_kafka.ui.status_store import StreamingStatusStore

if TYPE_CHECKING:
    from reliable_kafka.dstream.input_dstream import InputDStream
    from reliable_kafka.scheduler.listener_bus import StreamingListenerBus

logger = logging.getLogger(__name__)

_HTML = "text/html; charset=utf-8"


class InputStreams(Protocol):
    def get_input_streams(self) -> list[InputDStream]: ...


class StatusContext(Protocol):
    """What the status page needs of its streaming context: the settings, the batch interval and
    the input streams (for the groups whose lag it shows)."""

    @property
    def settings(self) -> StreamingSettings: ...

    @property
    def batch_duration_ms(self) -> int: ...

    @property
    def graph(self) -> InputStreams: ...


def lag_sources_of(ssc: StatusContext) -> list[LagSource]:
    """One source per group and store of the context's input streams that read for a consumer
    group (:class:`WatchesGroup`), read where the group keeps its offsets: several streams of one
    group (one createStream per receiver, as Spark's guide suggests) share the group's offsets,
    and a source each would show every partition once per stream (a duplicate series, which
    Prometheus refuses in a scrape).
    """
    merged: dict[tuple[Any, ...], LagSource] = {}
    for stream in ssc.graph.get_input_streams():
        watched = stream.watched_group() if isinstance(stream, WatchesGroup) else None
        if watched is None:
            continue
        source = lag_source_of(watched)
        key = (source.group, source.offsets_storage, source.zookeeper_connect, source.bootstrap_servers)
        known = merged.get(key)
        merged[key] = (
            source
            if known is None
            else replace(
                known,
                topics=tuple(sorted({*known.topics, *source.topics})),
                receiver_stream_ids=(*known.receiver_stream_ids, *source.receiver_stream_ids),
            )
        )
    return list(merged.values())


def lag_source_of(watched: WatchedGroup) -> LagSource:
    """The lag source of a watched group; the one place that knows the KafkaParams shape of "no
    ZooKeeper" (``params.zookeeper`` None: the group coordinator keeps the group and its offsets)."""
    zookeeper = watched.params.zookeeper
    return LagSource(
        group=watched.params.group.group_id,
        topics=watched.topics,
        offsets_storage=watched.storage,
        client_config=_lag_client_config(watched),
        zookeeper_connect=zookeeper.connect if zookeeper is not None else None,
        receiver_stream_ids=watched.receiver_stream_ids,
        zookeeper_auth=zookeeper.auth if zookeeper is not None else None,
        zookeeper_sasl=zookeeper.sasl if zookeeper is not None else None,
    )


def _lag_client_config(watched: WatchedGroup) -> dict[str, Any]:
    """The stream's client settings, with the listener its brokers are found on (our key, which
    the receivers' params keep apart from librdkafka's) and its refusal bound."""
    config = dict(watched.client_config)
    if watched.params.listener_name is not None:
        config[LISTENER_NAME_PARAM] = watched.params.listener_name
    config[ACCESS_REFUSAL_TIMEOUT_PARAM] = watched.params.access_refusal_timeout_ms
    return config


class StatusUI:
    def __init__(
        self,
        store: StreamingStatusStore,
        lag: LagMonitor | None,
        settings: UISettings,
    ) -> None:
        self.store = store
        self.lag = lag
        self.settings = settings
        self.registry = metrics.metrics_registry(store, lag)
        self._server: StatusServer | None = None

    @classmethod
    def for_context(cls, ssc: StatusContext) -> StatusUI:
        settings = ssc.settings.ui
        sources = lag_sources_of(ssc)
        lag = LagMonitor(sources, settings.lag_refresh_ms) if sources else None
        return cls(StreamingStatusStore(ssc.batch_duration_ms, settings.retained_batches), lag, settings)

    @property
    def url(self) -> str | None:
        return self._server.url if self._server is not None else None

    def start(self, bus: StreamingListenerBus) -> None:
        bus.add_listener(self.store)
        try:
            self._server = StatusServer(self.handle, self.settings.host, self.settings.port)
        except OSError as exc:
            logger.error("Streaming status page not started: %s", exc)
            return
        self._server.start()
        # Once, where a user sees it: INFO, where Spark puts its own UI's address, is not shown by
        # a default log setup.
        sys.stderr.write(f"Streaming status page at {self.url} (metrics at {self.url}metrics)\n")
        sys.stderr.flush()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self.lag is not None:
            self.lag.close()

    # ------------------------------------------------------------ requests (server threads)

    def handle(self, path: str, query: dict[str, list[str]]) -> Response:
        if path in ("/", "/streaming", "/streaming/"):
            return self._streaming_page()
        if path in ("/batch", "/streaming/batch", "/streaming/batch/"):
            return self._batch_page(query)
        # Also under /streaming/: `reliable-kafka lag --status-url` appends metrics to the page's address.
        if path in ("/metrics", "/streaming/metrics"):
            return Response(HTTPStatus.OK, metrics.CONTENT_TYPE, metrics.render(self.registry))
        return Response(HTTPStatus.NOT_FOUND, _HTML, pages.not_found_page(f"no page at {path}").encode())

    def _streaming_page(self) -> Response:
        snapshot = self.store.snapshot()
        report = self.lag.report() if self.lag is not None else None
        receivers = receivers_of_partitions(self.lag.sources if self.lag is not None else (), snapshot)
        page = pages.streaming_page(snapshot, report, receivers)
        return Response(HTTPStatus.OK, _HTML, page.encode())

    def _batch_page(self, query: dict[str, list[str]]) -> Response:
        raw = (query.get("id") or [""])[0]
        batch = self.store.batch(int(raw)) if raw.isdigit() else None
        if batch is None:
            retained = self.settings.retained_batches
            message = f"batch {raw or '(no id)'} is not retained (the last {retained} are)"
            return Response(HTTPStatus.NOT_FOUND, _HTML, pages.not_found_page(message).encode())
        return Response(HTTPStatus.OK, _HTML, pages.batch_page(batch, self.store.batch_duration_ms).encode())


def start_status_ui(ssc: StatusContext, bus: StreamingListenerBus) -> StatusUI | None:
    """The context's status page, started; None when ``spark.streaming.ui.enabled`` is off."""
    if not ssc.settings.ui.enabled:
        return None
    try:
        ui = StatusUI.for_context(ssc)
        ui.start(bus)
    except Exception:
        logger.exception("Streaming status page not started")
        return None
    return ui
