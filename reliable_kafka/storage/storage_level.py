"""Spark's ``StorageLevel``: where a block may live (memory, local disk) and how many copies.

The constants carry Scala's flags (``MEMORY_AND_DISK`` is deserialized). A level given by name is
read as pyspark spells it, since the names come from PySpark apps: ``"MEMORY_AND_DISK"`` is
``pyspark.StorageLevel.MEMORY_AND_DISK`` (serialized, as all of pyspark's levels but ``_DESER``),
so a name and the pyspark constant of that name are the same level. Scala-only names
(``MEMORY_AND_DISK_SER_2``...) keep their meaning, which pyspark's names share.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, ClassVar

logger = logging.getLogger(__name__)

# Spark rejects 40 or more copies (BlockManager's replication limit).
_MAX_REPLICATION = 40
_PYSPARK_ATTRIBUTES = ("useDisk", "useMemory", "useOffHeap", "deserialized", "replication")


@dataclass(frozen=True, slots=True)
class StorageLevel:
    """Where a block may be kept. Our blocks are always serialized bytes, so ``deserialized``
    only records what the caller asked for (it is kept so that levels compare like Spark's)."""

    use_disk: bool
    use_memory: bool
    deserialized: bool = False
    replication: int = 1

    MEMORY_ONLY: ClassVar[StorageLevel]
    MEMORY_ONLY_2: ClassVar[StorageLevel]
    MEMORY_ONLY_SER: ClassVar[StorageLevel]
    MEMORY_ONLY_SER_2: ClassVar[StorageLevel]
    MEMORY_AND_DISK: ClassVar[StorageLevel]
    MEMORY_AND_DISK_2: ClassVar[StorageLevel]
    MEMORY_AND_DISK_SER: ClassVar[StorageLevel]
    MEMORY_AND_DISK_SER_2: ClassVar[StorageLevel]
    DISK_ONLY: ClassVar[StorageLevel]
    DISK_ONLY_2: ClassVar[StorageLevel]

    def __post_init__(self) -> None:
        for field in ("use_disk", "use_memory", "deserialized"):
            if not isinstance(getattr(self, field), bool):
                raise TypeError(f"StorageLevel.{field} must be a bool, got {getattr(self, field)!r}")
        if not isinstance(self.replication, int) or isinstance(self.replication, bool):
            raise TypeError(f"StorageLevel.replication must be an int, got {self.replication!r}")
        if not 1 <= self.replication < _MAX_REPLICATION:
            raise ValueError(
                f"StorageLevel.replication must be in [1, {_MAX_REPLICATION}), got {self.replication}"
            )
        if not (self.use_disk or self.use_memory):
            raise ValueError("a StorageLevel must use memory, disk or both")

    @property
    def name(self) -> str:
        """pyspark's name of this level (``MEMORY_AND_DISK_2``), as PySpark apps and settings
        spell it (Scala's ``MEMORY_AND_DISK_SER_2`` would read as another level to them), else
        Scala's constant's name, else a description of the flags."""
        return _PYSPARK_NAMES_BY_LEVEL.get(self) or _SCALA_NAMES_BY_LEVEL.get(self) or self.description

    @property
    def description(self) -> str:
        parts = [p for p, on in (("Disk", self.use_disk), ("Memory", self.use_memory)) if on]
        parts.append("Deserialized" if self.deserialized else "Serialized")
        return f"StorageLevel({' '.join(parts)} {self.replication}x Replicated)"

    def with_replication(self, replication: int) -> StorageLevel:
        return replace(self, replication=replication)

    def __str__(self) -> str:
        return self.name

    def to_dict(self) -> dict[str, bool | int]:
        return {
            "use_disk": self.use_disk,
            "use_memory": self.use_memory,
            "deserialized": self.deserialized,
            "replication": self.replication,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StorageLevel:
        return cls(
            use_disk=d["use_disk"],
            use_memory=d["use_memory"],
            deserialized=d["deserialized"],
            replication=d["replication"],
        )

    @classmethod
    def of(cls, level: StorageLevel | str | Any) -> StorageLevel:
        """Our level, a ``pyspark.StorageLevel`` (read through its attributes, so pyspark need not
        be imported here) or a constant's name such as ``"MEMORY_AND_DISK_SER_2"``."""
        if isinstance(level, StorageLevel):
            return level
        if isinstance(level, str):
            name = level.strip().upper()
            found = _PYSPARK_LEVELS_BY_NAME.get(name) or _LEVELS_BY_NAME.get(name)
            if found is None:
                known = sorted({*_LEVELS_BY_NAME, *_PYSPARK_LEVELS_BY_NAME})
                raise ValueError(f"unknown storage level {level!r}; expected one of {known}")
            return found
        if all(hasattr(level, attribute) for attribute in _PYSPARK_ATTRIBUTES):
            if level.useOffHeap:
                raise ValueError(f"off-heap storage levels are not supported: {level!r}")
            return cls(
                use_disk=bool(level.useDisk),
                use_memory=bool(level.useMemory),
                deserialized=bool(level.deserialized),
                replication=int(level.replication),
            )
        raise TypeError(
            "expected a StorageLevel, a pyspark.StorageLevel or a storage level name, "
            f"got {type(level).__name__}: {level!r}"
        )


_LEVELS_BY_NAME: dict[str, StorageLevel] = {
    "MEMORY_ONLY": StorageLevel(False, True, True, 1),
    "MEMORY_ONLY_2": StorageLevel(False, True, True, 2),
    "MEMORY_ONLY_SER": StorageLevel(False, True, False, 1),
    "MEMORY_ONLY_SER_2": StorageLevel(False, True, False, 2),
    "MEMORY_AND_DISK": StorageLevel(True, True, True, 1),
    "MEMORY_AND_DISK_2": StorageLevel(True, True, True, 2),
    "MEMORY_AND_DISK_SER": StorageLevel(True, True, False, 1),
    "MEMORY_AND_DISK_SER_2": StorageLevel(True, True, False, 2),
    "DISK_ONLY": StorageLevel(True, False, False, 1),
    "DISK_ONLY_2": StorageLevel(True, False, False, 2),
}
# pyspark.StorageLevel's constants: Python data is always serialized, so only _DESER is not.
_PYSPARK_LEVELS_BY_NAME: dict[str, StorageLevel] = {
    "MEMORY_ONLY": StorageLevel(False, True, False, 1),
    "MEMORY_ONLY_2": StorageLevel(False, True, False, 2),
    "MEMORY_AND_DISK": StorageLevel(True, True, False, 1),
    "MEMORY_AND_DISK_2": StorageLevel(True, True, False, 2),
    "MEMORY_AND_DISK_DESER": StorageLevel(True, True, True, 1),
    "DISK_ONLY": StorageLevel(True, False, False, 1),
    "DISK_ONLY_2": StorageLevel(True, False, False, 2),
    "DISK_ONLY_3": StorageLevel(True, False, False, 3),
}
_PYSPARK_NAMES_BY_LEVEL = {level: name for name, level in _PYSPARK_LEVELS_BY_NAME.items()}
_SCALA_NAMES_BY_LEVEL = {level: name for name, level in _LEVELS_BY_NAME.items()}
for _name, _level in _LEVELS_BY_NAME.items():
    setattr(StorageLevel, _name, _level)
