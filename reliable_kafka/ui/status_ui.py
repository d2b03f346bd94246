"""The status page of one streaming context: its store on the listener bus, its lag monitor, its server.

Started by the job scheduler before the listener bus (so that no event is missed) when
``spark.streaming.ui.enabled``; stopped after the bus has delivered its last event. A page that
cannot start (no free port) is logged and skipped: a stream must not fail for its dashboard.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import TYPE_CHECKING

from reliable_kafka.kafka.kafka_input_dstream import KafkaInputDStream
from reliable_kafka.settings import UISettings
from reliable_kafka.ui import metrics, pages
from reliable_kafka.ui.lag import LagMonitor, LagSource
from reliable_kafka.ui.server import Response, StatusServer
from reliable_kafka.ui.status_store import StreamingStatusStore

if TYPE_CHECKING:
    from reliable_kafka.context import StreamingContext
    from reliable_kafka.scheduler.listener import StreamingListenerBus

logger = logging.getLogger(__name__)

_HTML = "text/html; charset=utf-8"


def lag_sources_of(ssc: StreamingContext) -> list[LagSource]:
    """One source per Kafka input stream of the context's graph whose offsets are in ZooKeeper."""
    return [
        LagSource(
            zookeeper_connect=stream.params.zookeeper.connect,
            group=stream.params.group.group_id,
            topics=tuple(sorted(stream.topics)),
            client_config=dict(stream.params.client_config),
            receiver_stream_id=stream.id,
            zookeeper_auth=stream.params.zookeeper.auth,
        )
        for stream in ssc.graph.get_input_streams()
        if isinstance(stream, KafkaInputDStream) and stream.params.zookeeper is not None
    ]


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
    def for_context(cls, ssc: StreamingContext) -> StatusUI:
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
        logger.info("Streaming status page at %s (metrics at %smetrics)", self.url, self.url)

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
        if path == "/metrics":
            return Response(HTTPStatus.OK, metrics.CONTENT_TYPE, metrics.render(self.registry))
        return Response(HTTPStatus.NOT_FOUND, _HTML, pages.not_found_page(f"no page at {path}").encode())

    def _streaming_page(self) -> Response:
        snapshot = self.store.snapshot()
        report = self.lag.report() if self.lag is not None else None
        names = {status.info.stream_id: status.info.name for status in snapshot.receivers}
        receiver_of_group: dict[str, str] = {}
        for source in self.lag.sources if self.lag is not None else ():
            if source.receiver_stream_id is not None:
                name = names.get(source.receiver_stream_id, f"stream {source.receiver_stream_id}")
                receiver_of_group.setdefault(source.group, name)
        page = pages.streaming_page(snapshot, report, receiver_of_group)
        return Response(HTTPStatus.OK, _HTML, page.encode())

    def _batch_page(self, query: dict[str, list[str]]) -> Response:
        raw = (query.get("id") or [""])[0]
        batch = self.store.batch(int(raw)) if raw.isdigit() else None
        if batch is None:
            retained = self.settings.retained_batches
            message = f"batch {raw or '(no id)'} is not retained (the last {retained} are)"
            return Response(HTTPStatus.NOT_FOUND, _HTML, pages.not_found_page(message).encode())
        return Response(HTTPStatus.OK, _HTML, pages.batch_page(batch, self.store.batch_duration_ms).encode())


def start_status_ui(ssc: StreamingContext, bus: StreamingListenerBus) -> StatusUI | None:
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
