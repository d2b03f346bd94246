"""The headless Chromium the browser tests drive (Debian's ``chromium``, through playwright-core and
tests/ui/drive_page.mjs), and where they save their screenshots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ARTIFACTS = Path(os.environ.get("RELIABLE_KAFKA_TEST_ARTIFACTS", HERE.parents[1] / "test-artifacts"))


def browser_or_skip() -> tuple[str, str]:
    """(chromium, node); the test skips where they are missing, except on CI, which must have them."""
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    node = shutil.which("node")
    missing = []
    if chromium is None:
        missing.append("chromium (apt-get install chromium)")
    if node is None:
        missing.append("node")
    if not (HERE / "node_modules" / "playwright-core").is_dir():
        missing.append("playwright-core (npm ci --prefix tests/ui)")
    if missing:
        reason = f"no browser to drive: missing {', '.join(missing)}; .ci/run installs them"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    assert chromium is not None and node is not None
    return chromium, node


class Driver:
    """The node process holding the browser; one JSON command and answer per line."""

    def __init__(self, node: str, chromium: str, user_data_dir: Path) -> None:
        self._process = subprocess.Popen(
            [node, str(HERE / "drive_page.mjs"), chromium, str(user_data_dir)],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._read() == {"ready": True}

    def _read(self) -> Any:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        assert line, f"the browser driver exited with {self._process.wait()}"
        return json.loads(line)

    def ask(self, **command: Any) -> Any:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(command) + "\n")
        self._process.stdin.flush()
        answer = self._read()
        assert "error" not in answer, answer["error"]
        return answer

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self._process.stdin.close()
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
