"""The docs site built as CI builds it (``mkdocs build --strict``), and the skip where mkdocs is
not installed (a failure on CI, which must have it)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest


def mkdocs_or_skip() -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        reason = "mkdocs is not installed (pip install -e '.[docs]'; the test extra has it)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``root``'s mkdocs.yml, run in ``root`` as CI runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
