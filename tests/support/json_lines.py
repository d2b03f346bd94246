"""Reading the JSON lines a child application appends to a file while the test polls it."""

import json
from pathlib import Path
from typing import Any


def read_json_lines(path: Path) -> list[Any]:
    """The complete lines so far: the writer may be halfway through one, and a line is only whole
    once its newline is written."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]
