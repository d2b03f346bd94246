"""MkDocs hook: ``<!-- argparse: module:function -->`` becomes the ``--help`` of the parser that
``function()`` builds, and of each of its subcommands, rendered at build time (so the reference is
the parser's own text). The commands are argparse, so mkdocs-click does not apply.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- argparse: ([\w.]+):(\w+) -->$", re.MULTILINE)
WIDTH = "100"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def render(spec: re.Match[str]) -> str:
    module_name, function = spec.group(1), spec.group(2)
    try:
        parser = getattr(importlib.import_module(module_name), function)()
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"argparse hook: cannot build {module_name}:{function}: {exc}") from exc
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH  # argparse wraps at $COLUMNS: the same text on every machine
    try:
        parts = [f"```text\n$ {parser.prog} --help\n{parser.format_help()}```"]
        for name, sub in _subparsers(parser).items():
            command = f"{parser.prog} {name}"
            parts.append(f"### `{command}`\n\n```text\n$ {command} --help\n{sub.format_help()}```")
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "\n\n".join(parts)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return MARKER.sub(render, markdown)
