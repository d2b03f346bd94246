"""MkDocs hook: ``{{ tested_versions }}`` in a page becomes the table of what the project is
tested with, from ``reliable_kafka/versions.py`` (which the tests read too)."""

from __future__ import annotations

from typing import Any

from reliable_kafka import versions

MARKER = "{{ tested_versions }}"


def table() -> str:
    rows = ["| component | tested | how |", "| --- | --- | --- |"]
    rows += [f"| {t.name} | {', '.join(t.versions)} | {t.how} |" for t in versions.TESTED]
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return markdown.replace(MARKER, table()) if MARKER in markdown else markdown
