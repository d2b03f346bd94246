"""benchmarks/peers.py's arguments, summaries, table, ratios and ConsumerPerformance parsing: no Spark."""

from __future__ import annotations

import pytest

from tests.benchmarks import load_benchmark

peers = load_benchmark("peers")
Run = peers.Run


def test_defaults_are_the_issues_comparison() -> None:
    args = peers.parse_args([])
    assert (args.messages, args.partitions, args.size, args.repeat) == (6_000_000, 4, 100, 3)
    assert args.master == "local[2]"
    assert args.readers == tuple("abijcdefgh")


def test_readers_subset_in_run_order() -> None:
    assert peers.parse_args(["--readers", "g, D,a"]).readers == ("a", "d", "g")


@pytest.mark.parametrize("argv", [["--readers", "a,z"], ["--repeat", "0"], ["--size", "10"]])
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        peers.parse_args(argv)


def test_cold_is_the_first_repeat_warm_the_median_of_the_rest() -> None:
    runs = [
        Run("a", 0, 10.0, 1_000_000, 20.0),
        Run("a", 2, 2.0, 1_000_000, 4.0),
        Run("a", 1, 1.0, 1_000_000, 3.0),
        Run("a", 3, 4.0, 1_000_000, 5.0),
    ]
    (summary,) = peers.summarize(runs)
    assert summary.cold == 100_000
    assert summary.warm == 500_000  # of 1,000,000, 500,000 and 250,000
    assert (summary.warm_min, summary.warm_max) == (250_000, 1_000_000)
    assert summary.cpu_per_million == 4.0  # the warm runs' median; the cold run's 20 left out
    assert not summary.void


def test_one_repeat_has_no_warm_figure_and_ratios_use_cold() -> None:
    summaries = peers.summarize([Run("a", 0, 2.0, 1_000), Run("d", 0, 1.0, 1_000, 0.5)])
    assert [s.reader for s in summaries] == ["a", "d"]
    assert summaries[0].warm is None and summaries[0].cpu_per_million is None
    assert peers.ratio_lines(summaries) == ["(d) / (a) records/s 2.00 CPU/M -"]
    row = next(line for line in peers.table_lines(summaries) if line.startswith("(a)"))
    assert row.split()[-3:] == ["-", "-", "-"]


def test_a_run_that_failed_delivery_voids_its_reader_and_its_ratios() -> None:
    runs = [
        Run("c", 0, 1.0, 100, 1.0),
        Run("c", 1, 1.0, 100, 1.0, ("partition 0 read to 20, 25 produced",)),
        Run("f", 0, 1.0, 100, 1.0),
        Run("f", 1, 0.5, 100, 1.0),
    ]
    summaries = peers.summarize(runs)
    row = next(line for line in peers.table_lines(summaries) if line.startswith("(c)"))
    assert row.count("VOID") == 4 and "100" not in row
    assert peers.ratio_lines(summaries) == ["(f) / (c) VOID"]


def test_ratios_of_ours_to_each_peer() -> None:
    runs = [
        Run(reader, repeat, seconds, 1_000_000, cpu)
        for reader, seconds, cpu in (("a", 1.0, 10.0), ("b", 2.0, 20.0), ("c", 4.0, 5.0), ("e", 2.0, 10.0))
        for repeat in range(2)
    ]
    assert peers.ratio_lines(peers.summarize(runs)) == [
        "(e) / (a) records/s 0.50 CPU/M 1.00; / (b) records/s 1.00 CPU/M 0.50; "
        "/ (c) records/s 2.00 CPU/M 2.00"
    ]


def test_the_reliable_kafka_source_over_spark_s_in_the_same_query() -> None:
    runs = [
        Run(reader, 0, seconds, 1_000_000, cpu)
        for reader, seconds, cpu in (("a", 1.0, 2.0), ("i", 2.0, 3.0), ("b", 4.0, 8.0), ("j", 2.0, 4.0))
    ]
    assert peers.ratio_lines(peers.summarize(runs)) == [
        "(i) / (a) records/s 0.50 CPU/M 1.50",
        "(j) / (b) records/s 2.00 CPU/M 0.50",
    ]
    assert peers.parse_args(["--readers", "i,a"]).readers == ("a", "i")


def test_consumer_performance_output_by_column() -> None:
    output = (
        "SLF4J: a warning\n"
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "2026-11-27 15:00:00:000, 2026-11-27 15:00:02:000, 572.2046, 286.1023, 6000000, 3000000.0000, "
        "312, 1688, 338.9838, 3554502.3697\n"
    )
    figures = peers.parse_consumer_performance(output)
    assert figures["data.consumed.in.nMsg"] == "6000000"
    assert figures["nMsg.sec"] == "3000000.0000"
    assert figures["fetch.nMsg.sec"] == "3554502.3697"
    with pytest.raises(SystemExit):
        peers.parse_consumer_performance("no figures\n")


def test_secure_adds_the_tls_reader_and_its_baseline() -> None:
    assert "s" not in peers.parse_args([]).readers
    args = peers.parse_args(["--readers", "g", "--secure"])
    assert args.secure == "SCRAM-SHA-512"
    assert args.readers == ("d", "s", "g")
    assert peers.parse_args(["--readers", "d", "--secure", "SSL"]).secure == "SSL"
    with pytest.raises(SystemExit):
        peers.parse_args(["--secure", "GSSAPI"])
    with pytest.raises(SystemExit):
        peers.parse_args(["--readers", "s"])  # only through --secure, which brings (d)


def test_the_tls_ratio_is_secured_over_plain_createstream() -> None:
    runs = [
        Run(reader, repeat, seconds, 1_000_000, cpu)
        for reader, seconds, cpu in (("d", 1.0, 4.0), ("s", 4.0, 6.0))
        for repeat in range(2)
    ]
    assert peers.ratio_lines(peers.summarize(runs)) == ["(s) / (d) records/s 0.25 CPU/M 1.50"]
    row = next(line for line in peers.table_lines(peers.summarize(runs)) if line.startswith("(s)"))
    assert "createStream, WAL on, TLS" in row


def test_a_query_splits_into_its_start_and_its_batches() -> None:
    progress = [
        {"timestamp": "2026-11-29T22:00:02.500Z", "durationMs": {"triggerExecution": 2000}},
        {"timestamp": "2026-11-29T22:00:04.600Z", "durationMs": {"triggerExecution": 500}},
    ]
    started_at = peers.datetime.fromisoformat("2026-11-29T22:00:00+00:00").timestamp()
    assert peers.query_split(progress, started_at) == (2.5, 2.5)
    assert peers.query_split([], started_at) == (None, 0.0)


def test_in_batch_rates_and_starts_of_the_same_query_on_both_sources() -> None:
    runs = [
        Run(reader, repeat, seconds, 1_000_000, None, (), first, batches)
        for reader, repeat, seconds, first, batches in (
            ("a", 0, 9.0, 1.0, 8.0),
            ("a", 1, 5.0, 0.5, 4.0),
            ("i", 0, 9.0, 4.0, 5.0),
            ("i", 1, 5.0, 3.0, 2.0),
        )
    ]
    # Warm runs only (the cold one is left out when there are warm ones).
    assert peers.batch_rate_lines(runs) == [
        "(i) / (a) in batches: records/s 2.00 (500,000 / 250,000); first batch after 3.0 s / 0.5 s"
    ]
    # A pair without the split (or with a failed delivery) prints nothing.
    assert peers.batch_rate_lines([Run("i", 0, 1.0, 10), Run("a", 0, 1.0, 10)]) == []
