"""The one place that turns ``offsets.storage`` / ``dual.commit.enabled`` into an offset store.

Kafka 0.8.2's two settings name three stores: ZooKeeper, Kafka's group coordinator, or both while
a group migrates ("dual": commit to both, read both and take the larger). Everyone who needs a
group's offsets asks here which store that is and gets it composed here: the receiver's consumer
connector, a direct stream's commit of its completed batches, the status page and the lag CLI.

What differs between them is how each builds one backend (a receiver's ZooKeeper store checks its
owner nodes, a direct stream's owns nothing, the lag tools only read), so each hands in its
:class:`StoreBackends`; a new store is one more entry in ``_COMPOSE`` and one more backend method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from reliable_kafka.kafka.client.params import ConsumerGroupParams
from reliable_kafka.kafka.offsets.dual import DualOffsetStore
from reliable_kafka.kafka.offsets.store import OffsetStore

OffsetsStorage = Literal["zookeeper", "kafka", "dual"]
OFFSETS_STORAGES: tuple[OffsetsStorage, ...] = ("zookeeper", "kafka", "dual")

_WHERE: dict[OffsetsStorage, str] = {
    "zookeeper": "ZooKeeper",
    "kafka": "Kafka",
    "dual": "ZooKeeper and Kafka",
}


def storage_of(group: ConsumerGroupParams) -> OffsetsStorage:
    """Where the group's offsets live, from its parsed ``offsets.storage`` and ``dual.commit.enabled``."""
    if group.offsets_storage == "kafka":
        return "dual" if group.dual_commit_enabled else "kafka"
    return "zookeeper"


def default_storage(has_zookeeper: bool) -> OffsetsStorage:
    """0.8.2's default: ZooKeeper when the group has one (a zkQuorum), else the group coordinator."""
    return "zookeeper" if has_zookeeper else "kafka"


def checked_storage(storage: str) -> OffsetsStorage:
    """``storage`` if it names a store, else ``ValueError`` listing those that exist."""
    for known in OFFSETS_STORAGES:
        if storage == known:
            return known
    raise ValueError(f"offsets storage {storage!r}: expected one of {', '.join(OFFSETS_STORAGES)}")


def in_zookeeper(storage: OffsetsStorage) -> bool:
    """Whether the store reads or writes ZooKeeper (so the group needs its zookeeper.connect)."""
    return storage in ("zookeeper", "dual")


def in_kafka(storage: OffsetsStorage) -> bool:
    """Whether the store reads or writes Kafka's group coordinator."""
    return storage in ("kafka", "dual")


def where(storage: OffsetsStorage) -> str:
    """The store's name for a log line or a message: "ZooKeeper", "Kafka", "ZooKeeper and Kafka"."""
    return _WHERE[storage]


class StoreBackends(Protocol):
    """How one user of the registry builds each backend for its own role."""

    def zookeeper(self) -> OffsetStore: ...

    def kafka(self) -> OffsetStore: ...


def _dual(backends: StoreBackends) -> OffsetStore:
    zookeeper = backends.zookeeper()
    try:
        return DualOffsetStore(zookeeper, backends.kafka())
    except BaseException:
        zookeeper.close()
        raise


_COMPOSE: dict[OffsetsStorage, Callable[[StoreBackends], OffsetStore]] = {
    "zookeeper": lambda backends: backends.zookeeper(),
    "kafka": lambda backends: backends.kafka(),
    "dual": _dual,
}


def open_store(storage: OffsetsStorage, backends: StoreBackends) -> OffsetStore:
    """The store ``storage`` names, made of ``backends``; the caller closes it."""
    return _COMPOSE[storage](backends)
