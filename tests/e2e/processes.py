"""Finding a child application's processes through /proc: its executor JVMs (by executor id),
their Python workers, and whatever of its session is left after it exits."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    return text[text.rindex(")") + 2 :].split()


def all_pids() -> list[int]:
    """Every process of the machine (of this pid namespace) now."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def session_processes(session_id: int) -> list[int]:
    """Live (not zombie) processes of a session: a child started with ``start_new_session``
    and everything it started (driver JVM, executor JVMs, Python workers)."""
    found = []
    for pid in all_pids():
        fields = _stat_fields(pid)
        if fields is not None and fields[0] != "Z" and int(fields[3]) == session_id:
            found.append(pid)
    return found


def live_children(parent: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``parent``."""
    found = []
    for pid in all_pids():
        fields = _stat_fields(pid)
        if fields is not None and fields[0] != "Z" and int(fields[1]) == parent:
            found.append(pid)
    return found


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        fields = _stat_fields(pid)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def executor_jvm(session_id: int, executor_id: str) -> int | None:
    """The pid of the executor JVM with this ``--executor-id`` in the session."""
    return executor_jvm_among(session_processes(session_id), executor_id)


def executor_jvm_among(pids: Iterable[int], executor_id: str, app_id: str | None = None) -> int | None:
    """The pid among ``pids`` of the executor JVM with this ``--executor-id`` (of application
    ``app_id`` if given: executor ids repeat across applications)."""
    for pid in pids:
        args = cmdline(pid)
        if (
            "--executor-id" in args
            and args[args.index("--executor-id") + 1] == executor_id
            and (app_id is None or app_id in args)
        ):
            return pid
    return None


def executor_jvm_above(pid: int) -> int:
    """The executor JVM above a Python worker (its daemon's parent), walking up the parents."""
    current: int | None = pid
    for _ in range(10):
        if current is None:
            break
        if any("CoarseGrainedExecutorBackend" in part for part in cmdline(current)):
            return current
        fields = _stat_fields(current)
        current = int(fields[1]) if fields is not None else None
    raise AssertionError(f"no executor JVM above process {pid}: {cmdline(pid)}")


def zookeeper_processes(root: int) -> list[int]:
    """ZooKeeper servers among ``root``'s descendants (only ours: the machine is shared)."""
    mains = (
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        "org.apache.zookeeper.server.ZooKeeperServerMain",
    )
    return [pid for pid in descendants(root) if any(main in cmdline(pid) for main in mains)]


def describe(pids: list[int]) -> str:
    return "; ".join(f"{pid}: {' '.join(cmdline(pid))[:160]}" for pid in pids)


def kill_tree(pid: int) -> list[int]:
    """SIGKILL a process and all its descendants (an executor JVM and its Python workers)."""
    victims = [pid, *descendants(pid)]
    for victim in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    return victims
