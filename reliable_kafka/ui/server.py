"""A small read-only HTTP server (stdlib ``ThreadingHTTPServer``) for the status page.

One thread per request, so a slow lag lookup or a large page never holds up another request, and
none of them runs on the data path. Only GET and HEAD are served. The port is the configured one,
or the next free one above it (Spark's ``spark.port.maxRetries`` default, 16 tries).
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

logger = logging.getLogger(__name__)

PORT_RETRIES = 16
# The pages fetch nothing: no script, no stylesheet or image from anywhere, inline style only.
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class Response:
    status: HTTPStatus
    content_type: str
    body: bytes


# path, query parameters -> response
App = Callable[[str, dict[str, list[str]]], Response]


class _Handler(BaseHTTPRequestHandler):
    app: ClassVar[App]
    server_version = "reliable-kafka-ui"

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, *, send_body: bool) -> None:
        url = urlsplit(self.path)
        try:
            response = self.app(url.path, parse_qs(url.query))
        except Exception:
            logger.exception("status page failed to render %s", url.path)
            response = Response(HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", b"error\n")
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in _SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)


class StatusServer:
    def __init__(self, app: App, host: str, port: int) -> None:
        handler = type("StatusPageHandler", (_Handler,), {"app": staticmethod(app)})
        self._httpd = _bind(handler, host, port)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.5}, name="status-page", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._httpd.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True


def _bind(handler: type[BaseHTTPRequestHandler], host: str, port: int) -> ThreadingHTTPServer:
    tries = 1 if port == 0 else PORT_RETRIES + 1
    for attempt in range(tries):
        candidate = port + attempt if port else 0
        if candidate > 65535:
            break
        try:
            return _Server((host, candidate), handler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            logger.info("status page port %d is taken, trying the next one", candidate)
    raise OSError(errno.EADDRINUSE, f"no free port for the status page in {port}-{port + tries - 1}")
