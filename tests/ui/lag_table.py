"""The partition table of the status page, read back: each row's cells by group, topic and
partition."""

from __future__ import annotations

import re

_ROW = re.compile(r"<tr data-topic='([^']*)' data-partition='(\d+)'>(.*?)</tr>", re.S)
_FIELD = re.compile(r"<td class='num' data-field=([a-z-]+)>([^<]*)</td>")
_GROUP = re.compile(r"^<td>([^<]*)</td>")
_OWNER = re.compile(r"<td class='owner'>([^<]*)</td>")


def page_rows(page: str) -> dict[tuple[str, str, int], dict[str, str]]:
    """``(group, topic, partition)`` -> the committed, log-end, lag and owner cells of the table."""
    rows = {}
    for topic, partition, cells in _ROW.findall(page):
        group = _GROUP.search(cells)
        owner = _OWNER.search(cells)
        assert group is not None and owner is not None, cells
        rows[(group.group(1), topic, int(partition))] = {
            **dict(_FIELD.findall(cells)),
            "owner": owner.group(1),
        }
    return rows
