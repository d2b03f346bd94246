"""kazoo's log for clients this package closes itself.

kazoo logs ``Connection dropped: socket connection broken`` at WARNING when the server closes the
socket while the client is closing it (a race inside ``stop()``, about one close in seven). After
our own ``stop()`` that line means nothing; any other time it is news and stays a WARNING.
"""

from __future__ import annotations

import logging
from typing import Any

from kazoo.client import KazooClient

from reliable_kafka.util.bounded_stop import stop_within

_DROPPED = "Connection dropped"
# kazoo waits as long for its own connection thread on stop (the session timeout, at least 10 s).
CLOSE_TIMEOUT_S = 10.0


class KazooLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """One client's logger; :func:`stop_kazoo` marks it closing."""

    def __init__(self, logger: logging.Logger | logging.LoggerAdapter) -> None:  # type: ignore[type-arg]
        super().__init__(logger, {})  # type: ignore[arg-type]
        self.closing = False

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if self.closing and level >= logging.WARNING and isinstance(msg, str) and msg.startswith(_DROPPED):
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


def kazoo_client(hosts: str, **kwargs: Any) -> KazooClient:
    """A KazooClient whose deliberate close (by :func:`stop_kazoo`) logs no warning."""
    kwargs.setdefault("logger", KazooLog(logging.getLogger("kazoo.client")))
    return KazooClient(hosts=hosts, **kwargs)


def stop_kazoo(client: KazooClient, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Stop and close ``client`` within ``timeout_s``; a connection drop while doing so is not
    warned about. kazoo's stop first joins its watch callback thread, which does not end while a
    watch retries against a ZooKeeper that is gone: past the bound the client is abandoned (its
    threads are daemons) and the log says where it was stuck."""
    if isinstance(client.logger, KazooLog):
        client.logger.closing = True

    def stop_and_close() -> None:
        try:
            client.stop()
        finally:
            client.close()

    stop_within("the ZooKeeper client", stop_and_close, timeout_s)
