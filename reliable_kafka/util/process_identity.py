"""Which process this is, in a form another process on the same machine can check later: what lets
a driver restarted on the host of a dead one take over its checkpoint lease at once, instead of
waiting for the lease to expire.

A pid alone cannot tell: pids are reused, and containers that share the host's network (and so
its host name) each have a pid namespace of their own. So the identity is the kernel's boot id,
the pid namespace, the pid and the process's start time, from Linux's ``/proc``. A process judges
a recorded one gone only when it runs under the same boot and in the same pid namespace, and the
pid is free, or names a later process, or a zombie. Anywhere else (no ``/proc``, another machine,
another namespace) nothing is ever judged gone: the caller waits for the lease to expire.
"""

from __future__ import annotations

import os
from pathlib import Path

_PREFIX = "linux"
_PROC = Path("/proc")


def current_identity() -> str | None:
    """This process: ``linux/<boot id>/<pid namespace>/<pid>/<start time>``; None without ``/proc``."""
    namespace = _namespace()
    if namespace is None:
        return None
    pid = os.getpid()
    started = _start_time(pid)
    if started is None:
        return None
    return "/".join((_PREFIX, namespace, str(pid), started))


def is_gone(identity: str | None) -> bool:
    """True only when ``identity`` names a process of this machine's boot and this pid namespace
    that no longer runs (its pid free, reused by a later process, or a zombie's)."""
    if not identity:
        return False
    parts = identity.split("/")
    if len(parts) != 5 or parts[0] != _PREFIX or not parts[3].isdigit():
        return False
    namespace = _namespace()
    if namespace is None or "/".join(parts[1:3]) != namespace:
        return False
    fields = _stat_fields(int(parts[3]))
    if fields is None:
        return True
    state, started = fields[0], fields[19]
    return started != parts[4] or state in ("Z", "X", "x")


def _namespace() -> str | None:
    """``<boot id>/<pid namespace>``: the scope in which a pid and start time name one process."""
    try:
        boot_id = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
        pid_namespace = os.readlink(_PROC / "self/ns/pid")
    except OSError:
        return None
    # "pid:[4026531836]": the inode is what tells namespaces apart.
    inode = pid_namespace.partition("[")[2].rstrip("]")
    if not boot_id or not inode.isdigit():
        return None
    return f"{boot_id}/{inode}"


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` from field 3 (the state) on; None if there is no such process."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    fields = text[text.rindex(")") + 2 :].split()
    # Field 22, the start time in clock ticks since boot, is index 19 from field 3.
    return fields if len(fields) > 19 else None
