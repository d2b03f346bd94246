"""fsspec's IO loop, told which of its orphaned task failures are already reported elsewhere.

Through an outage of an S3 store, aiohttp's task that writes a request's body can fail with a
connection reset after the request itself has failed; the request's failure reaches its caller
(s3fs retries, then our stores report it once, see ``wal/failure_log.py``), but nothing awaits
the writer task, so asyncio logs "Task exception was never retrieved" at ERROR with a traceback
when the task is collected: a second, louder report of the same reset, from a library.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

logger = logging.getLogger(__name__)

_UNRETRIEVED = "Task exception was never retrieved"


def quiet_unretrieved_connection_resets(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An event loop exception handler: an unretrieved connection reset at DEBUG, the rest as
    asyncio would log it."""
    exception = context.get("exception")
    if context.get("message") == _UNRETRIEVED and isinstance(exception, ConnectionResetError):
        logger.debug("A store request's orphaned task ended with a connection reset: %s", exception)
        return
    loop.default_exception_handler(context)


def install_on(loop: asyncio.AbstractEventLoop) -> None:
    """Install the handler on ``loop`` (fsspec's IO loop), unless another one is there."""
    if loop.get_exception_handler() is None:
        loop.set_exception_handler(quiet_unretrieved_connection_resets)
