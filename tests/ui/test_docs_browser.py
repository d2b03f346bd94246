"""The docs site, built strict and read by the headless Chromium of the status page's test: two
pages render with their images, fetch nothing from the network, and are saved as screenshots
(``test-artifacts/docs-*.png``, or ``$RELIABLE_KAFKA_TEST_ARTIFACTS``)."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.docs_blocks import REPO
from tests.support.docs_site import build, mkdocs_or_skip
from tests.ui.browser import ARTIFACTS, Driver, browser_or_skip

# Page, a heading it must show, its screenshot.
PAGES = [
    ("getting-started/", "A first application", "docs-getting-started.png"),
    ("throughput/", "Plots", "docs-throughput.png"),
]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served_site(tmp_path: Path) -> Iterator[str]:
    """The site built strict into ``tmp_path``, served on loopback; its base URL."""
    mkdocs_or_skip()
    site = tmp_path / "site"
    result = build(REPO, site)
    assert result.returncode == 0, result.stderr[-6000:]
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_two_docs_pages_in_chromium(served_site: str, tmp_path: Path) -> None:
    chromium, node = browser_or_skip()
    driver = Driver(node, chromium, tmp_path / "chromium-profile")
    try:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for path, heading, screenshot in PAGES:
            page = driver.ask(op="visit", url=served_site + path)
            assert page["status"] == 200, page
            assert page["title"].endswith("reliable-kafka"), page
            assert any(h.startswith(heading) for h in page["headings"]), page["headings"]
            assert page["brokenImages"] == [], page["brokenImages"]
            # Nothing fetched from the network: no web fonts, no CDN.
            for url in page["requests"]:
                assert url.startswith(served_site), url
            driver.ask(op="screenshot", path=str(ARTIFACTS / screenshot))
            assert (ARTIFACTS / screenshot).stat().st_size > 0
    finally:
        driver.close()
