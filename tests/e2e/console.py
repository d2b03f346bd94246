"""What a healthy run must not print: warning and error lines, and the known noise of its parts."""

from __future__ import annotations

import re

# Lines of WARN/WARNING/ERROR level however they are formatted: Python logging's
# "... WARNING name: ...", log4j's "26/11/24 00:12:14 WARN Utils: ...", librdkafka's "%4|...|".
_LEVEL = re.compile(r"\b(WARN|WARNING|ERROR|FATAL|CRITICAL)\b|^%[0-4]\|")
_NOISE = (
    "CONFWARN",  # librdkafka: a deprecated or ignored setting
    "tmpabuf",  # librdkafka: a Metadata answer it could not parse
    "Connection dropped",  # kazoo: a socket closed under it
    "Disconnected",  # librdkafka: a client left open while its broker stops
    "Connection refused",
    "replication",  # the storage level
    "Traceback",
)
# The JVM prints this for every Spark 4 application (Spark's launcher adds the module) before any
# code of the application runs; nothing an application does changes it.
_JVM_LAUNCHER_LINES = ("WARNING: Using incubator modules: jdk.incubator.vector",)


def noise(output: str) -> list[str]:
    """The lines of ``output`` a user should not see in a healthy run."""
    return [
        line
        for line in output.splitlines()
        if line.strip() not in _JVM_LAUNCHER_LINES
        and (_LEVEL.search(line) or any(marker in line for marker in _NOISE))
    ]
