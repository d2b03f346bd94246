"""The Python blocks of ``docs/`` marked runnable (docs/architecture.md, "Runnable blocks in the docs").

An HTML comment on the line before a block's fence marks it:

- ``<!-- runnable -->``: a whole program, run as written by ``tests/e2e/test_docs_examples.py``;
- ``<!-- runnable: tests/e2e/test_x.py -->``: run by that test, which reads its blocks from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
_MARKER = re.compile(r"^<!-- runnable(?::\s*(?P<runner>\S+))?\s*-->$")
_FENCE = re.compile(r"^```python\s*$")


@dataclass(frozen=True)
class DocBlock:
    page: str  # relative to docs/, e.g. "getting-started.md"
    line: int  # the fence's line, 1-based
    runner: str | None  # the test that runs it; None: run as written by the generic test
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def runnable_blocks(docs: Path = DOCS) -> list[DocBlock]:
    """Every marked block, in page and line order. A marker not followed by a ``python`` fence, or a
    block that never closes, is an error: a marker must not silently mark nothing."""
    blocks = []
    for path in sorted(docs.rglob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        page = path.relative_to(docs).as_posix()
        for i, line in enumerate(lines):
            marker = _MARKER.match(line.strip())
            if marker is None:
                continue
            if i + 1 >= len(lines) or not _FENCE.match(lines[i + 1]):
                raise ValueError(f"{page}:{i + 1}: a runnable marker must precede a ```python fence")
            try:
                end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            except StopIteration:
                raise ValueError(f"{page}:{i + 2}: the runnable block never closes") from None
            code = "\n".join(lines[i + 2 : end]) + "\n"
            blocks.append(DocBlock(page, i + 2, marker["runner"], code))
    return blocks


def blocks_run_by(test_file: str, page: str) -> list[str]:
    """The code of the blocks of ``page`` that name ``test_file`` (e.g. tests/e2e/test_x.py)."""
    return [b.code for b in runnable_blocks() if b.page == page and b.runner == test_file]
