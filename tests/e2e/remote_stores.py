"""The remote checkpoint stores of the acceptance tests: the session's real HDFS and S3 servers,
each with the checkpoint URL a test uses and the ``spark.hadoop.*`` keys an app sets to reach it."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.util.filesystems import locate, options_from_spark_conf
from tests.support.spark_jvm_archive import suite_spark_properties

STORES = ("hdfs", "s3")


@dataclasses.dataclass
class RemoteStore:
    name: str
    checkpoint: str
    spark_conf: dict[str, str]
    server: Any

    def fs(self) -> Any:
        return locate(self.checkpoint, options_from_spark_conf(self.spark_conf.items(), environ={})).fs

    def path(self) -> str:
        return locate(self.checkpoint, options_from_spark_conf(self.spark_conf.items(), environ={})).path

    def all_bytes(self) -> bytes:
        """Every object under the checkpoint, concatenated (to look for what must not be there)."""
        fs = self.fs()
        fs.invalidate_cache()
        return b"".join(fs.cat_file(p) for p in fs.find(self.path()))

    def properties_file(self, directory: Path) -> Path:
        """``spark-submit --properties-file`` lines (0600: they may hold the S3 secret), after the
        session's own (the file replaces them)."""
        path = directory / f"{self.name}-spark.conf"
        path.touch(mode=0o600)
        own = "".join(f"{k} {v}\n" for k, v in self.spark_conf.items())
        path.write_text(suite_spark_properties() + own)
        return path

    def conf_json(self) -> str:
        return json.dumps(self.spark_conf)


def remote_store(request: pytest.FixtureRequest, name: str) -> RemoteStore:
    run = f"app-{uuid.uuid4().hex[:10]}"
    if name == "hdfs":
        hdfs = request.getfixturevalue("local_hdfs")
        return RemoteStore(name, f"{hdfs.url}/checkpoints/{run}", hdfs.spark_conf(), hdfs)
    s3 = request.getfixturevalue("local_s3")
    return RemoteStore(name, f"s3a://{s3.bucket}/checkpoints/{run}", s3.spark_conf(), s3)
