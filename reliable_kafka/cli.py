"""``reliable-kafka``: command-line tools. ``lag`` prints a consumer group's lag per partition.

    reliable-kafka lag --zookeeper ZK --group G [--topic T ...] [--watch S] [--max-lag N] [--json]
        [--bootstrap-servers B] [-X key=value ...]

Like Kafka's old ``ConsumerOffsetChecker``: committed offset (ZooKeeper), log end (the broker's
high watermark), lag and owner per partition. Brokers come from ZooKeeper unless
``--bootstrap-servers`` is given; ``-X`` passes librdkafka settings (security...; brokers older
than 0.10 get ``api.version.request=false`` from their registrations unless set). Exit code 1
when a partition's lag exceeds ``--max-lag`` (or its lag is unknown), 2 on a usage or connection
error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from reliable_kafka.kafka.zk.broker_discovery import discover_bootstrap_servers, legacy_protocol_config
from reliable_kafka.settings import is_secret_key
from reliable_kafka.ui.lag import PartitionLag, WatermarkReader, read_group_lag
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo

EXIT_OK, EXIT_LAG, EXIT_ERROR = 0, 1, 2


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reliable-kafka", description="reliable-kafka tools")
    commands = parser.add_subparsers(dest="command", required=True)
    lag = commands.add_parser("lag", help="consumer lag per partition (committed, log end, lag, owner)")
    lag.add_argument("--zookeeper", help="zookeeper.connect of the group (offsets in ZooKeeper)")
    lag.add_argument("--group", required=True)
    lag.add_argument("--topic", action="append", help="only this topic (repeatable); default: all committed")
    lag.add_argument("--bootstrap-servers", help="brokers to read log ends from; default: from ZooKeeper")
    lag.add_argument("-X", dest="config", action="append", type=_key_value, default=[], metavar="KEY=VALUE")
    lag.add_argument("--watch", type=float, metavar="S", help="print again every S seconds until Ctrl-C")
    lag.add_argument("--max-lag", type=int, metavar="N", help="exit 1 if a partition is more than N behind")
    lag.add_argument("--json", action="store_true", help="one JSON document per round")
    return parser


def exceeds(rows: Sequence[PartitionLag], max_lag: int | None) -> bool:
    if max_lag is None:
        return False
    return any(row.lag is None or row.lag > max_lag for row in rows)


def format_table(rows: Sequence[PartitionLag]) -> str:
    header = ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner")
    lines = [header] + [
        (
            row.group,
            row.topic,
            str(row.partition),
            "unknown" if row.committed is None else str(row.committed),
            "unknown" if row.log_end is None else str(row.log_end),
            "unknown" if row.lag is None else str(row.lag),
            row.owner or "none",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _print_round(rows: Sequence[PartitionLag], as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write(json.dumps({"partitions": [row.to_dict() for row in rows]}) + "\n")
    else:
        out.write(format_table(rows) + "\n")
    out.flush()


def _lag(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.zookeeper:
        err.write(
            "--zookeeper is required: offsets stored in Kafka (--bootstrap-servers alone) are not "
            "supported until the Kafka offset store exists\n"
        )
        return EXIT_ERROR
    zk = kazoo_client(args.zookeeper, timeout=10.0)
    try:
        zk.start(timeout=15.0)
    except Exception as exc:
        err.write(f"cannot connect to ZooKeeper at {args.zookeeper}: {exc}\n")
        return EXIT_ERROR
    watermarks: WatermarkReader | None = None
    status = EXIT_OK
    try:
        config: dict[str, Any] = dict(args.config)
        config["bootstrap.servers"] = args.bootstrap_servers or discover_bootstrap_servers(zk)
        config.update(legacy_protocol_config(zk, config))
        watermarks = WatermarkReader(config)
        while True:
            rows = read_group_lag(zk, watermarks, args.group, args.topic)
            _print_round(rows, args.json, out)
            status = EXIT_LAG if exceeds(rows, args.max_lag) else EXIT_OK
            if args.watch is None:
                return status
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return status  # of the last round printed
    except Exception as exc:
        secrets = [value for key, value in args.config if is_secret_key(key) and value]
        message = str(exc)
        for secret in secrets:
            message = message.replace(secret, "***")
        err.write(f"lag lookup failed: {type(exc).__name__}: {message}\n")
        return EXIT_ERROR
    finally:
        if watermarks is not None:
            watermarks.close()
        stop_kazoo(zk)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "lag":
        return _lag(args, out or sys.stdout, err or sys.stderr)
    return EXIT_ERROR  # argparse rejects other commands first


if __name__ == "__main__":
    sys.exit(main())
