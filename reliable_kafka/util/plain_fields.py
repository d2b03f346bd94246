"""Typed reads of the fields of a decoded JSON record (a checkpoint, a lease record): a field of
the wrong type is corruption or another program's file, and fails naming the field rather than
later, as a confusing error far from the read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_int(value: Any) -> bool:
    # bool is an int subclass; a True where a time belongs is corruption, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def int_field(d: Mapping[str, Any], name: str) -> int:
    value = d.get(name)
    if not is_int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def optional_int_field(d: Mapping[str, Any], name: str) -> int | None:
    return None if d.get(name) is None else int_field(d, name)


def str_field(d: Mapping[str, Any], name: str) -> str:
    value = d.get(name)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value


def optional_str_field(d: Mapping[str, Any], name: str) -> str | None:
    return None if d.get(name) is None else str_field(d, name)


def bool_field(d: Mapping[str, Any], name: str) -> bool:
    value = d.get(name)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a boolean, got {value!r}")
    return value
