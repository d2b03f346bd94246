"""Options every RPC socket gets, on both sides, before its handshake."""

from __future__ import annotations

import socket

# A peer whose host died without a FIN or RST (power loss, a partitioned network) leaves the
# reader blocked in recv for ever, and its receivers never deregistered. TCP keepalive turns that
# into a connection error after about KEEPALIVE_IDLE_S + KEEPALIVE_COUNT * KEEPALIVE_INTERVAL_S.
KEEPALIVE_IDLE_S = 30
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_COUNT = 3


def configure(sock: socket.socket) -> None:
    # Requests and replies are small and latency-bound: never hold one back for coalescing.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
    ):
        option = getattr(socket, name, None)  # not on every platform; the OS defaults then apply
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
