"""``reliable-kafka``: command-line tools. ``lag`` prints a consumer group's lag per partition.

    reliable-kafka lag --group G (--zookeeper ZK | --bootstrap-servers B | both)
        [--offsets-storage zookeeper|kafka|dual] [--topic T ...] [--watch S] [--max-lag N] [--json]
        [--status-url URL [--max-delay S]] [--command-config FILE] [-X key=value ...]

Like Kafka's old ``ConsumerOffsetChecker``: committed offset, log end (the broker's high
watermark), lag and owner per partition. Committed offsets are read where the group keeps them
(``--offsets-storage``): ZooKeeper (the default with ``--zookeeper``), Kafka's group coordinator
(the default without), or both for a group committing to both (dual: the larger). Partitions and
owners come from ZooKeeper when it is given, else from the brokers' metadata and the
coordinator's member list. Brokers come from ZooKeeper unless ``--bootstrap-servers`` is given;
``-X`` passes librdkafka settings (security...; brokers older than 0.10 registered in ZooKeeper get
``api.version.request=false`` from their registrations unless set); ``--command-config`` reads them
from a properties file (``key=value`` lines, as Kafka's tools take), so that passwords stay off the
command line; ``-X`` wins over the file. Besides librdkafka's keys, the application's own
``broker.listener.name``, ``access.refusal.timeout.ms``, ``zookeeper.auth`` (digest
``user:password``) and ``zookeeper.sasl.*`` (a SASL login to ZooKeeper) are understood. Brokers
found in ZooKeeper are reached on the listener that speaks ``security.protocol``.

Kafka's lag counts what the application has not stored yet: a committed offset means stored (block
store and write-ahead log), not processed. ``--status-url`` (the application's status page) adds
what it received and has not processed: batches waiting and running, their records, and how long
the oldest waiting batch has waited (``--max-delay`` bounds that).

Exit code 1 when a partition's lag exceeds ``--max-lag`` (or its lag is unknown), or the oldest
waiting batch has waited longer than ``--max-delay`` (or the status page cannot say); each culprit
is named on stderr. 2 on a usage or connection error, when Kafka refuses the tool (credentials,
certificate, ACL: the message names the principal and what to grant or set), or when the group has
no committed offset on the topics asked in the store read (a misspelt group, or a ZooKeeper group
read from Kafka, must not pass a lag check as "no lag").
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from reliable_kafka.kafka.client.access_refusal import AccessRefusedError
from reliable_kafka.kafka.client.params import ZOOKEEPER_SASL_KEYS, parse_kafka_params
from reliable_kafka.kafka.offsets.registry import OFFSETS_STORAGES, default_storage, in_kafka, in_zookeeper
from reliable_kafka.ui.group_view import GroupView
from reliable_kafka.ui.lag import (
    LagSource,
    PartitionLag,
    WatermarkReader,
    close_clients,
    open_group_view,
    read_group_lag,
)
from reliable_kafka.ui.unprocessed import StatusRead, delay_culprits, metrics_url, read_status

EXIT_OK, EXIT_LAG, EXIT_ERROR = 0, 1, 2
# A config key of ours the lag source takes apart from librdkafka's (ZooKeeper's digest credentials).
_ZOOKEEPER_AUTH = "zookeeper.auth"


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key, value


def read_properties(path: str) -> dict[str, str]:
    """``key=value`` (or ``key: value``) lines of a Java properties file, as Kafka's tools'
    ``--command-config`` takes them; ``#`` and ``!`` start comments. No line continuations or
    escapes (nothing Kafka's client settings need). ``ValueError`` naming the line (never its value)."""
    properties: dict[str, str] = {}
    with open(path, encoding="utf-8") as lines:
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            split = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
            if split < 0:
                raise ValueError(f"{path} line {number}: expected key=value")
            properties[line[:split].strip()] = line[split + 1 :].strip()
    return properties


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reliable-kafka", description="reliable-kafka tools")
    commands = parser.add_subparsers(dest="command", required=True)
    lag = commands.add_parser(
        "lag",
        help="consumer lag per partition (committed, log end, lag, owner)",
        description="Consumer lag per partition. Give --zookeeper, --bootstrap-servers or both.",
        epilog="exit codes: 0 ok; 1 a partition lags by more than --max-lag (or its lag is unknown), or "
        "the oldest waiting batch has waited longer than --max-delay (or the status page cannot say); "
        "2 usage or connection error",
    )
    lag.add_argument("--group", required=True)
    lag.add_argument("--zookeeper", help="zookeeper.connect of a ZooKeeper group (owners, partitions)")
    lag.add_argument(
        "--bootstrap-servers", help="brokers (log ends; the group coordinator); default: from ZooKeeper"
    )
    lag.add_argument(
        "--offsets-storage",
        choices=OFFSETS_STORAGES,
        help="where the group commits: zookeeper (default with --zookeeper), kafka (default without), "
        "dual (both; the larger is shown)",
    )
    lag.add_argument("--topic", action="append", help="only this topic (repeatable); default: all committed")
    lag.add_argument(
        "-X",
        dest="config",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting (security.protocol, sasl.*, ssl.*...); wins over --command-config",
    )
    lag.add_argument(
        "--command-config",
        metavar="FILE",
        help="librdkafka settings from a properties file (key=value lines): no password on the command line",
    )
    lag.add_argument("--watch", type=float, metavar="S", help="print again every S seconds until Ctrl-C")
    lag.add_argument("--max-lag", type=int, metavar="N", help="exit 1 if a partition is more than N behind")
    lag.add_argument(
        "--status-url",
        metavar="URL",
        help="the application's status page (http://driver:4050/): also show what it received and has "
        "not processed (Kafka's lag counts only what it has not stored)",
    )
    lag.add_argument(
        "--max-delay",
        type=float,
        metavar="S",
        help="with --status-url: exit 1 if the oldest waiting batch has waited more than S seconds",
    )
    lag.add_argument("--json", action="store_true", help="one JSON document per round")
    return parser


def _usage_error(args: argparse.Namespace) -> str | None:
    if not args.zookeeper and not args.bootstrap_servers:
        return "give --zookeeper (a ZooKeeper group), --bootstrap-servers (offsets in Kafka), or both"
    if args.offsets_storage is not None and in_zookeeper(args.offsets_storage) and not args.zookeeper:
        return f"--offsets-storage {args.offsets_storage} needs --zookeeper"
    if args.max_delay is not None and not args.status_url:
        return "--max-delay needs --status-url (the application's status page, which knows its batches)"
    if args.status_url:
        try:
            metrics_url(args.status_url)
        except ValueError as exc:
            return f"--status-url: {exc}"
    return None


def source_of(args: argparse.Namespace) -> LagSource:
    """``ValueError`` (or ``OSError`` for the config file) naming what is wrong."""
    config: dict[str, Any] = read_properties(args.command_config) if args.command_config else {}
    config.update(args.config)
    if args.bootstrap_servers:
        config["bootstrap.servers"] = args.bootstrap_servers
    zookeeper_auth = config.pop(_ZOOKEEPER_AUTH, None) or None
    # ZooKeeper's SASL login, read as the application's kafkaParams read it (same checks).
    sasl_keys = {key: config.pop(key) for key in ZOOKEEPER_SASL_KEYS if key in config}
    zookeeper_sasl = None
    if sasl_keys and args.zookeeper:
        zookeeper = parse_kafka_params(
            {**sasl_keys, "zookeeper.connect": args.zookeeper, "group.id": args.group}
        ).zookeeper
        zookeeper_sasl = zookeeper.sasl if zookeeper is not None else None
    return LagSource(
        group=args.group,
        topics=tuple(args.topic or ()),
        offsets_storage=args.offsets_storage or default_storage(has_zookeeper=bool(args.zookeeper)),
        client_config=config,
        zookeeper_connect=args.zookeeper or None,
        zookeeper_auth=zookeeper_auth,
        zookeeper_sasl=zookeeper_sasl,
    )


def lag_culprits(rows: Sequence[PartitionLag], max_lag: int | None) -> list[str]:
    """Each partition over ``max_lag``, or whose lag is unknown (a bound cannot accept that)."""
    if max_lag is None:
        return []
    culprits = []
    for row in rows:
        partition = f"--max-lag {max_lag}: {row.topic} partition {row.partition} of group {row.group}"
        if row.committed is None:
            culprits.append(f"{partition} has no committed offset (lag unknown)")
        elif row.log_end is None:
            culprits.append(f"{partition}: its log end could not be read (lag unknown)")
        elif row.lag is not None and row.lag > max_lag:
            culprits.append(f"{partition} is {row.lag} behind")
    return culprits


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


def _print_round(rows: Sequence[PartitionLag], status: StatusRead | None, as_json: bool, out: TextIO) -> None:
    if as_json:
        document: dict[str, Any] = {"partitions": [row.to_dict() for row in rows]}
        if status is not None:
            document["unprocessed"] = status.to_dict()
        out.write(json.dumps(document) + "\n")
    else:
        out.write(format_table(rows) + "\n")
        if status is not None:
            out.write(status.describe() + "\n")
    out.flush()


def _store_read(source: LagSource) -> str:
    kafka = f"Kafka's group coordinator (via {source.client_config.get('bootstrap.servers', 'the brokers')})"
    zookeeper = f"ZooKeeper at {source.zookeeper_connect}"
    read = [
        where
        for where, used in ((zookeeper, in_zookeeper), (kafka, in_kafka))
        if used(source.offsets_storage)
    ]
    return " and ".join(read)


def _nothing_committed(source: LagSource, view: GroupView) -> str:
    """What is wrong (the group asked, the store read, what that store holds) and what to do."""
    asked = "topic " + ", ".join(source.topics) if source.topics else "any topic"
    head = f"group {source.group} has no committed offset on {asked} in {_store_read(source)}"
    held = view.topics()
    if held:
        return (
            f"{head}; it holds offsets of the group for: {', '.join(held)}\n"
            "  ask for those topics with --topic, or leave --topic out for all of them"
        )
    try:
        found = _groups_found(source.group, view.groups())
    except Exception as exc:
        found = f"could not list the groups it holds: {source.masked(f'{type(exc).__name__}: {exc}')}"
    return f"{head}: it holds no offsets of that group\n  {found}\n  {_where_to_look(source)}"


def _groups_found(group: str, groups: Sequence[str]) -> str:
    if not groups:
        return "it holds no consumer group at all: is it the one the application uses (brokers, chroot)?"
    if group in groups:
        return (
            "the group is there, with no offset committed yet: a receiver commits once it has stored "
            "its first block"
        )
    # As the SparkConf check suggests a setting: the closest names, by difflib's ratio.
    closest = difflib.get_close_matches(group, groups, n=3, cutoff=0.6)
    if closest:
        nearest = ", ".join(closest)
        return f"groups it holds: {len(groups)}, the closest: {nearest} (did you mean --group {closest[0]}?)"
    shown = ", ".join(groups[:5]) + (", ..." if len(groups) > 5 else "")
    return f"groups it holds: {len(groups)}, none named like {group}: {shown}"


def _where_to_look(source: LagSource) -> str:
    """Where the application commits, by the createStream arguments that decide it."""
    check = "check --group against the application's group.id"
    if in_zookeeper(source.offsets_storage) and in_kafka(source.offsets_storage):
        return check
    if in_zookeeper(source.offsets_storage):
        return (
            f"{check}; an application with offsets.storage=kafka, or without a zkQuorum, commits to "
            "Kafka: give --bootstrap-servers and --offsets-storage kafka"
        )
    if source.zookeeper_connect is None:
        return (
            f"{check}; a createStream group with a zkQuorum keeps its offsets in ZooKeeper: give --zookeeper"
        )
    return (
        f"{check}; with a zkQuorum and the default offsets.storage the application commits to "
        "ZooKeeper: leave --offsets-storage out (or give zookeeper)"
    )


def _lag(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    problem = _usage_error(args)
    if problem is None:
        try:
            source = source_of(args)
            refusals = source.refusals()
        except (OSError, ValueError) as exc:
            problem = str(exc)
    if problem is not None:
        err.write(f"reliable-kafka lag: error: {problem}\n")
        return EXIT_ERROR
    try:
        clients = open_group_view(source, refusals=refusals)
    except Exception as exc:
        where = f"ZooKeeper at {source.zookeeper_connect}" if source.zookeeper_connect else "the brokers"
        return _failed(source, source.explained(exc, refusals), f"cannot connect to {where}", err)
    try:
        return _rounds(args, source, clients, out, err)
    except Exception as exc:
        clients[1].serve_callbacks()  # the refusals a request did not hear
        return _failed(source, source.explained(exc, refusals), "lag lookup failed", err)
    finally:
        close_clients(clients)


def _rounds(
    args: argparse.Namespace,
    source: LagSource,
    clients: tuple[GroupView, WatermarkReader],
    out: TextIO,
    err: TextIO,
) -> int:
    """Print one round, or one every ``--watch`` seconds until Ctrl-C; the exit code."""
    view, watermarks = clients
    status = EXIT_OK
    try:
        while True:
            rows = read_group_lag(view, watermarks, source.topics)
            if not any(row.committed is not None for row in rows):
                err.write(_nothing_committed(source, view) + "\n")
                return EXIT_ERROR
            app = read_status(args.status_url) if args.status_url else None
            _print_round(rows, app, args.json, out)
            culprits = [*lag_culprits(rows, args.max_lag), *delay_culprits(app, args.max_delay)]
            for culprit in culprits:
                err.write(culprit + "\n")
            err.flush()
            status = EXIT_LAG if culprits else EXIT_OK
            if args.watch is None:
                return status
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return status  # of the last round printed


def _failed(source: LagSource, error: BaseException, what: str, err: TextIO) -> int:
    """Exit 2 with the error; a refusal says what was refused and what to grant or set."""
    if isinstance(error, AccessRefusedError):
        shown = source.masked(str(error), naming_the_principal=True)
        err.write(f"reliable-kafka lag: access refused: {shown}\n")
    else:
        err.write(f"{what}: {source.masked(f'{type(error).__name__}: {error}')}\n")
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "lag":
        return _lag(args, out or sys.stdout, err or sys.stderr)
    return EXIT_ERROR  # argparse rejects other commands first


if __name__ == "__main__":
    sys.exit(main())
