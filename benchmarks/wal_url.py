"""What the benchmarks' ``--wal-url`` and ``--spark-conf`` share: the properties file, the options
it gives, a run directory under the URL and its removal.

``--spark-conf`` is a spark-defaults style properties file (what ``spark-submit --properties-file``
reads and ``reliable-kafka-local up --hdfs --s3`` writes): one ``key value`` per line, the key ended
by whitespace, ``=`` or ``:``; ``#`` and ``!`` start a comment line. Only its ``spark.hadoop.*`` and
``spark.reliable_kafka.fs.*`` keys matter here (``reliable_kafka/util/filesystems.py``). Line
continuations and escapes of Java's Properties format are not read: no key we need uses them.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from reliable_kafka.util.filesystems import FilesystemOptions, is_local, locate, options_from_spark_conf

# The key runs to the first whitespace, "=" or ":"; one such separator (with the whitespace
# around it) follows, as java.util.Properties reads a line.
_PROPERTY = re.compile(r"(?P<key>[^\s=:]+)(?:\s*[=:]\s*|\s+)(?P<value>.*)")


def read_spark_conf(path: str | os.PathLike[str] | None) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs of a properties file, in file order; none without a file."""
    if not path:
        return []
    pairs: list[tuple[str, str]] = []
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = _PROPERTY.fullmatch(line)
        pairs.append((match["key"], match["value"].strip()) if match else (line, ""))
    return pairs


def filesystem_options(spark_conf: str | os.PathLike[str] | None) -> FilesystemOptions:
    """How to reach ``--wal-url``, from the ``--spark-conf`` file (none: fsspec's defaults)."""
    return options_from_spark_conf(read_spark_conf(spark_conf))


def run_directory(url: str, name: str) -> str:
    """A directory under ``url`` no other run (of this or another process) uses."""
    return f"{url.rstrip('/')}/{name}-{os.getpid()}-{time.monotonic_ns()}"


def remove(url: str, options: FilesystemOptions) -> None:
    """Remove a run's directory, local or remote; what is already gone is fine."""
    location = locate(url, options)
    if location.fs is None or is_local(url):
        shutil.rmtree(location.path, ignore_errors=True)
    elif location.fs.exists(location.path):
        location.fs.rm(location.path, recursive=True)


def where(url: str) -> str:
    """A short label for a figure: the URL's scheme, ``local`` for a path."""
    return "local" if is_local(url) else url.split("://", 1)[0]
