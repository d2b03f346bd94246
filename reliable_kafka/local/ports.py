"""Loopback port helpers: the local cluster binds to 127.0.0.1 only."""

from __future__ import annotations

import socket
import time

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((LOOPBACK, port)) == 0


def wait_port_free(port: int, timeout_s: float) -> bool:
    """True once nothing listens on ``port``; a killed server's socket can linger briefly."""
    deadline = time.monotonic() + timeout_s
    while port_in_use(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
