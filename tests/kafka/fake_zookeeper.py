"""An in-memory stand-in for the few KazooClient calls the offset store makes."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError


@dataclass
class FakeStat:
    version: int
    ephemeralOwner: int


@dataclass
class _Node:
    data: bytes
    version: int = 0
    owner: int = 0


class FakeZooKeeper:
    def __init__(self, session_id: int = 1) -> None:
        self.nodes: dict[str, _Node] = {}
        self.session_id = session_id
        self.connected = True
        self.multi_ops = 0

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return (self.session_id, b"") if self.connected else None

    def ensure_path(self, path: str, acl: Any = None) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self.nodes.setdefault("/" + "/".join(parts[:i]), _Node(b""))

    def get(self, path: str) -> tuple[bytes, FakeStat]:
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node.data, FakeStat(node.version, node.owner)

    def put(self, path: str, data: bytes, *, owner: int = 0) -> None:
        """Test helper: create or replace a node as another client would."""
        parent = path.rsplit("/", 1)[0]
        if parent:
            self.ensure_path(parent)
        self.nodes[path] = _Node(data, 0, owner)

    def bump(self, path: str, data: bytes) -> None:
        """Test helper: another client's set_data."""
        node = self.nodes[path]
        node.data = data
        node.version += 1

    def transaction(self) -> FakeTransaction:
        return FakeTransaction(self)


class FakeTransaction:
    def __init__(self, zk: FakeZooKeeper) -> None:
        self.zk = zk
        self.ops: list[tuple[str, str, bytes, int]] = []

    def check(self, path: str, version: int) -> None:
        self.ops.append(("check", path, b"", version))

    def create(self, path: str, value: bytes, acl: Any = None) -> None:
        self.ops.append(("create", path, value, -1))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self.ops.append(("set", path, value, version))

    def _error(self, op: str, path: str, version: int) -> Exception | None:
        node = self.zk.nodes.get(path)
        if op == "create":
            if node is not None:
                return NodeExistsError()
            parent = path.rsplit("/", 1)[0]
            return None if parent in self.zk.nodes else NoNodeError()
        if node is None:
            return NoNodeError()
        if version not in (-1, node.version):
            return BadVersionError()
        return None

    def commit_async(self) -> _Sent:
        """kazoo's: the request queued; its answer (or error) from ``get()``."""
        return _Sent(self.commit)

    def commit(self) -> list[Any]:
        self.zk.multi_ops += 1
        if not self.zk.connected:
            from kazoo.exceptions import ConnectionLoss

            raise ConnectionLoss()
        errors = [self._error(op, path, version) for op, path, _, version in self.ops]
        if any(errors):
            first = next(i for i, e in enumerate(errors) if e)
            return [errors[i] if i == first else RolledBackError() for i in range(len(self.ops))]
        results: list[Any] = []
        for op, path, value, _ in self.ops:
            if op == "create":
                self.zk.nodes[path] = _Node(value)
                results.append(path)
            elif op == "set":
                self.zk.bump(path, value)
                results.append(FakeStat(self.zk.nodes[path].version, 0))
            else:
                results.append(True)
        return results


class _Sent:
    def __init__(self, answer: Any) -> None:
        self._answer = answer

    def get(self) -> Any:
        return self._answer()


class StaticOwnership:
    """An OwnershipView whose claims the test sets by hand."""

    def __init__(self) -> None:
        self.ownership_lock = threading.RLock()
        self.generation = 0
        self.claims: dict[Any, Any] = {}

    def claim_of(self, tp: Any) -> Any:
        return self.claims.get(tp)
