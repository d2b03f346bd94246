"""The benchmarks' --spark-conf file and --wal-url run directories (benchmarks/wal_url.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

wal_url = load_benchmark("wal_url")


def test_properties_lines_split_as_spark_defaults(tmp_path: Path) -> None:
    conf = tmp_path / "spark.conf"
    conf.write_text(
        "# written by reliable-kafka-local up\n"
        "! also a comment\n"
        "\n"
        "spark.hadoop.fs.s3a.endpoint http://127.0.0.1:9000\n"
        "spark.hadoop.fs.s3a.access.key\tAKID\n"
        "  spark.hadoop.fs.s3a.secret.key = s=cr:t  \n"
        "spark.hadoop.hadoop.user.name:bench\n"
        "spark.hadoop.fs.s3a.path.style.access\n"
    )
    assert wal_url.read_spark_conf(conf) == [
        ("spark.hadoop.fs.s3a.endpoint", "http://127.0.0.1:9000"),
        ("spark.hadoop.fs.s3a.access.key", "AKID"),
        ("spark.hadoop.fs.s3a.secret.key", "s=cr:t"),
        ("spark.hadoop.hadoop.user.name", "bench"),
        ("spark.hadoop.fs.s3a.path.style.access", ""),
    ]


def test_no_file_no_keys() -> None:
    assert wal_url.read_spark_conf(None) == []
    assert wal_url.filesystem_options(None).by_scheme.get("s3") is None


def test_the_file_reaches_s3_and_hdfs(tmp_path: Path) -> None:
    conf = tmp_path / "spark.conf"
    conf.write_text(
        "spark.hadoop.fs.s3a.endpoint http://127.0.0.1:9000\n"
        "spark.hadoop.fs.s3a.path.style.access true\n"
        "spark.hadoop.dfs.namenode.http-address 127.0.0.1:9870\n"
    )
    options = wal_url.filesystem_options(conf)
    assert options.for_scheme("s3a")["endpoint_url"] == "http://127.0.0.1:9000"
    assert options.for_scheme("hdfs")["http_address"] == "127.0.0.1:9870"


def test_run_directories_are_unique_and_removed(tmp_path: Path) -> None:
    first, second = (wal_url.run_directory(f"{tmp_path}/", "bench") for _ in range(2))
    assert first != second
    assert first.startswith(f"{tmp_path}/bench-")
    Path(first, "receivedData", "0").mkdir(parents=True)
    wal_url.remove(first, wal_url.filesystem_options(None))
    wal_url.remove(second, wal_url.filesystem_options(None))  # never made: nothing to do
    assert not Path(first).exists()


@pytest.mark.parametrize(
    ("url", "label"), [("/tmp/x", "local"), ("hdfs://nn:8020/x", "hdfs"), ("s3a://bucket/x", "s3a")]
)
def test_where(url: str, label: str) -> None:
    assert wal_url.where(url) == label
