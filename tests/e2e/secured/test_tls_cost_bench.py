"""benchmarks/receiver_bench.py --secure, tiny: the plain consumer and the receiver over PLAINTEXT
and over SASL_SSL in one run, on the session's plain and secured clusters, print the ratio lines."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from reliable_kafka.local import LocalCluster
from tests.benchmarks import load_benchmark
from tests.cluster_backends import unique_name

pytestmark = pytest.mark.integration

bench = load_benchmark("receiver_bench")

MESSAGES = 400
PARTITIONS = 2


def _backlog(cluster: LocalCluster) -> str:
    topic = unique_name("tls-cost")
    cluster.create_topic(topic, PARTITIONS)
    bench.produce(cluster, topic, PARTITIONS, MESSAGES, 100)
    return topic


@pytest.mark.brokers("3.9", "4")
def test_a_tiny_secured_run_prints_the_ratio_to_plaintext(
    local_cluster: LocalCluster,
    secured_cluster: LocalCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plaintext = bench.Transport.plaintext(local_cluster, _backlog(local_cluster))
    secured = bench.Transport.secured(secured_cluster, _backlog(secured_cluster), "SCRAM-SHA-512")
    # The benchmark logs in as the granted user, never as the cluster's admin.
    assert secured.client_config()["sasl.username"] == "alice"
    args = argparse.Namespace(messages=MESSAGES, partitions=PARTITIONS, repeat=1, batch=None)

    best = bench.transport_cost(args, plaintext, secured, tmp_path)

    out = capsys.readouterr().out
    assert set(best) == {"(a)", "(b)"}
    for reader, figures in best.items():
        assert set(figures) == {"PLAINTEXT", "SASL_SSL SCRAM-SHA-512"}, reader
        assert all(rate > 0 and cpu > 0 for rate, cpu, _ in figures.values()), figures
    ratios = [line for line in out.splitlines() if line.startswith("ratio SASL_SSL SCRAM-SHA-512/PLAINTEXT")]
    assert [line.split()[3] for line in ratios] == ["(a)", "(b)"], out
    assert all("records/s" in line and "CPU per million" in line for line in ratios), out
    alice = secured_cluster.secured.principals["alice"]
    assert alice.password not in out
