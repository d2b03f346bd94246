"""What a healthy run must not print: warning and error lines, and the known noise of its parts."""

from __future__ import annotations

import re

# Lines of WARN/WARNING/ERROR level however they are formatted: Python logging's
# "... WARNING name: ...", log4j's "26/11/24 00:12:14 WARN Utils: ...", librdkafka's "%4|...|".
# (Not a quoted level: Spark's 'Setting default log level to "WARN".' is information.)
_LEVEL = re.compile(r"(?:^|[\s\]])(WARN|WARNING|ERROR|FATAL|CRITICAL)[\s:]|^%[0-4]\|")
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
# Spark's own start-up notice with its default log configuration, printed by every PySpark app
# before any of its code runs: an app that keeps Spark's defaults (the README's) sees it; the main
# job starts its driver with a log configuration of its own and must not.
_SPARK_STARTUP = re.compile(r" WARN NativeCodeLoader: Unable to load native-hadoop library")


def noise(output: str, *, spark_startup: bool = False) -> list[str]:
    """The lines of ``output`` a user should not see in a healthy run; ``spark_startup`` allows
    Spark's start-up notice."""
    return [
        line
        for line in output.splitlines()
        if line.strip() not in _JVM_LAUNCHER_LINES
        and not (spark_startup and _SPARK_STARTUP.search(line))
        and (_LEVEL.search(line) or any(marker in line for marker in _NOISE))
    ]
