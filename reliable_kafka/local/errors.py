"""Errors raised while installing or running the local test cluster."""

from __future__ import annotations


class ClusterStartError(RuntimeError):
    """A local server could not be installed or started.

    The message always says what to do next and, where a server got far enough to log
    anything, ends with the tail of that server's log.
    """

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        if log_tail:
            message = f"{message}\n--- last lines of the server log ---\n{log_tail}"
        super().__init__(message)
