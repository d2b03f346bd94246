"""Kafka params as Spark's receiver-based input takes them: 0.8 consumer names plus librdkafka's.

Spark passed one ``kafkaParams`` map to the Kafka 0.8 high-level consumer. Here the keys that
belong to the ZooKeeper group protocol (``zookeeper.*``, ``group.id``, ``auto.commit.*``,
``rebalance.*``...) are consumed by this package; every other key goes to confluent-kafka,
so security and tuning settings (``security.protocol``, ``fetch.message.max.bytes``...) work
as librdkafka documents them. A bad value raises ``ValueError`` naming the key.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reliable_kafka.kafka.client.fetch_stall import DEFAULT_FETCH_STALL_TIMEOUT_MS, FETCH_STALL_TIMEOUT_PARAM
from reliable_kafka.kafka.client.topic_lookup import (
    DEFAULT_MISSING_TOPIC_TIMEOUT_MS,
    MISSING_TOPIC_TIMEOUT_PARAM,
    WAIT_FOR_EVER,
)
from reliable_kafka.kafka.client.zk.broker_discovery import LISTENER_NAME_PARAM

# kafkaParams key (ours, not librdkafka's): what a receiver's client may prefetch, whatever its
# partition count (see kafka/client/shared_client.py).
PREFETCH_PARAM = "receiver.prefetch.bytes"
DEFAULT_PREFETCH_BYTES = 64 << 20
# kafkaParams key (ours): how long Kafka may go on refusing the clients (credentials, certificate,
# ACL) before the stream ends with an error naming what to grant or set; -1: retry for ever, as
# librdkafka does (see kafka/client/access_refusal.py).
ACCESS_REFUSAL_TIMEOUT_PARAM = "access.refusal.timeout.ms"
DEFAULT_ACCESS_REFUSAL_TIMEOUT_MS = 10_000
RETRY_FOR_EVER = -1

# No settings here (pydantic, ~1 s): the ZooKeeper wing reads ZooKeeperParams and
# ConsumerGroupParams and must load light. Secrets are masked by settings.redacted where logged.

logger = logging.getLogger(__name__)

OffsetReset = Literal["smallest", "largest"]
OffsetsStorage = Literal["zookeeper", "kafka"]
# What the group coordinator's members may agree on; ZooKeeper groups only know range.
ASSIGNMENT_STRATEGIES = ("range", "roundrobin", "cooperative-sticky")

# 0.8 names and the newer ones users bring along from the new consumer.
_OFFSET_RESET: dict[str, OffsetReset] = {
    "smallest": "smallest",
    "earliest": "smallest",
    "largest": "largest",
    "latest": "largest",
}
_AUTO_COMMIT_KEYS = ("auto.commit.enable", "enable.auto.commit")

# 0.8 consumer settings with no meaning here (the fetcher is librdkafka's now); accepted so
# that Spark-era configurations keep working, and dropped because librdkafka rejects them.
_IGNORED_08_KEYS = frozenset(
    {
        "zookeeper.sync.time.ms",
        "consumer.timeout.ms",
        "queued.max.message.chunks",
        "refresh.leader.backoff.ms",
        "num.consumer.fetchers",
        "exclude.internal.topics",
        "offsets.channel.backoff.ms",
        "offsets.channel.socket.timeout.ms",
        "offsets.commit.max.retries",
        "auto.commit.interval.ms.jitter",
    }
)

# ZooKeeper's SASL login, as kafkaParams: the user and password of a JAAS ``Client`` section
# (``zookeeper.sasl.username``/``.password``), or that section's line itself, as Kafka's
# ``sasl.jaas.config`` takes one (``zookeeper.sasl.jaas.config``).
ZOOKEEPER_SASL_KEYS = (
    "zookeeper.sasl.mechanism",
    "zookeeper.sasl.username",
    "zookeeper.sasl.password",
    "zookeeper.sasl.jaas.config",
)
# What kazoo (through pure-sasl) logs in with and a ZooKeeper server's SASLAuthenticationProvider
# takes without Kerberos.
ZOOKEEPER_SASL_MECHANISMS = ("DIGEST-MD5",)
_DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


_OWN_KEYS = frozenset(
    {
        "zookeeper.connect",
        "zookeeper.session.timeout.ms",
        "zookeeper.connection.timeout.ms",
        "zookeeper.auth",
        "zookeeper.set.acl",
        *ZOOKEEPER_SASL_KEYS,
        "group.id",
        "consumer.id",
        "auto.offset.reset",
        "auto.commit.interval.ms",
        "rebalance.max.retries",
        "rebalance.backoff.ms",
        "offsets.storage",
        "dual.commit.enabled",
        "partition.assignment.strategy",
        "metadata.broker.list",
        LISTENER_NAME_PARAM,
        FETCH_STALL_TIMEOUT_PARAM,
        MISSING_TOPIC_TIMEOUT_PARAM,
        ACCESS_REFUSAL_TIMEOUT_PARAM,
        PREFETCH_PARAM,
        *_AUTO_COMMIT_KEYS,
    }
)

# The receivers own these librdkafka settings: offsets are committed through the receiver's offset
# store (ZooKeeper, Kafka or both) for stored blocks only, never by librdkafka on its own.
_FORCED_CLIENT_CONFIG: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
}

# Defaults for one consumer per partition, each a thread that may wait for the GIL or for its
# block generator. librdkafka stops prefetching a partition whose local queue holds
# ``queued.min.messages`` and only looks again after ``fetch.queue.backoff.ms`` (default 1000):
# a thread that fell behind for a moment would leave its partition idle for up to a second
# (receiver_bench: 385k -> 600k records/s with 20 ms). A value in kafkaParams wins.
_DEFAULT_CLIENT_CONFIG: dict[str, Any] = {
    "fetch.queue.backoff.ms": 20,
}


@dataclass(frozen=True)
class ZooKeeperSasl:
    """A SASL login to ZooKeeper; the password never appears in repr."""

    username: str
    password: str = field(repr=False)
    mechanism: str = "DIGEST-MD5"

    def kazoo_options(self) -> dict[str, str]:
        """kazoo's ``sasl_options``."""
        return {"mechanism": self.mechanism, "username": self.username, "password": self.password}


@dataclass(frozen=True)
class ZooKeeperParams:
    """How to reach ZooKeeper; ``auth`` (``user:password`` for digest) and the SASL password never
    appear in repr. ``set_acl``: the group's nodes are created writable by the logged-in user only
    (readable by all, as Kafka's ``zookeeper.set.acl`` makes its own)."""

    connect: str
    session_timeout_ms: int = 6000
    connection_timeout_ms: int = 6000
    auth: str | None = field(default=None, repr=False)
    set_acl: bool = False
    sasl: ZooKeeperSasl | None = None


@dataclass(frozen=True)
class ConsumerGroupParams:
    group_id: str
    consumer_id: str | None = None
    auto_offset_reset: OffsetReset = "largest"
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60000
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    auto_commit_set_by_user: bool = False
    assignment_strategy: str = "range"
    # Kafka 0.8.2's names: where offsets live, and whether ZooKeeper gets them too while a group
    # moves to Kafka (read from both at start, the larger wins).
    offsets_storage: OffsetsStorage = "zookeeper"
    # Which store these name is decided in one place: kafka.offsets.registry.storage_of.
    dual_commit_enabled: bool = False


@dataclass(frozen=True)
class KafkaParams:
    # None: no ZooKeeper; the group coordinator of ``bootstrap.servers`` keeps the group.
    zookeeper: ZooKeeperParams | None
    group: ConsumerGroupParams
    # Everything for confluent-kafka; may hold secrets, so log it only through redacted().
    client_config: dict[str, Any] = field(default_factory=dict, repr=False)
    # The broker listener (from /brokers/ids) to connect through; None: any of our security protocol.
    listener_name: str | None = None
    # How long a partition may go without fetching before the receiver reports an error.
    fetch_stall_timeout_ms: int = DEFAULT_FETCH_STALL_TIMEOUT_MS
    # What the receiver's Kafka client may prefetch, all partitions together.
    prefetch_bytes: int = DEFAULT_PREFETCH_BYTES
    # How long a topic may be missing before the stream ends with an error naming it (-1: no end).
    missing_topic_timeout_ms: int = DEFAULT_MISSING_TOPIC_TIMEOUT_MS
    # How long Kafka may refuse the clients (credentials, certificate, ACL) before the stream ends
    # with an error naming what to grant or set (-1: retry for ever).
    access_refusal_timeout_ms: int = DEFAULT_ACCESS_REFUSAL_TIMEOUT_MS

    @property
    def bootstrap_servers(self) -> str | None:
        servers = self.client_config.get("bootstrap.servers")
        return str(servers) if servers else None

    def consumer_config(self, bootstrap_servers: str) -> dict[str, Any]:
        """A confluent-kafka Consumer config that reads by assign() and never commits to Kafka."""
        config = {**_DEFAULT_CLIENT_CONFIG, **self.client_config, "bootstrap.servers": bootstrap_servers}
        config.setdefault("group.id", self.group.group_id)
        config["auto.offset.reset"] = "earliest" if self.group.auto_offset_reset == "smallest" else "latest"
        config.update(_FORCED_CLIENT_CONFIG)
        return config


def closest_param(key: str) -> str | None:
    """The kafkaParams key this package knows (its own, the 0.8 keys it drops, the librdkafka
    settings it sets) that ``key`` most likely misspells, by difflib's ratio as the check of
    ``spark.streaming.*`` settings does; None when none is close. For a key librdkafka refused:
    ``auto.offset.rest`` is no librdkafka key, and meant ``auto.offset.reset``, which is ours."""
    known = sorted({*_OWN_KEYS, *_IGNORED_08_KEYS, *_FORCED_CLIENT_CONFIG, *_DEFAULT_CLIENT_CONFIG})
    matches = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return matches[0] if matches else None


def _text(key: str, value: Any) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"kafka param {key} must not be empty")
    return str(value).strip()


def _integer(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"kafka param {key}={value!r}: expected an integer >= {minimum}")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"kafka param {key}={value!r}: expected an integer >= {minimum}") from None
    if number < minimum:
        raise ValueError(f"kafka param {key}={value!r}: expected an integer >= {minimum}")
    return number


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered not in {"true", "false"}:
        raise ValueError(f"kafka param {key}={value!r}: expected true or false")
    return lowered == "true"


def _zookeeper_connect(key: str, value: Any) -> str:
    connect = _text(key, value)
    hosts, _, chroot = connect.partition("/")
    for host in hosts.split(","):
        name, _, port = host.strip().rpartition(":")
        if not name or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"kafka param {key}={connect!r}: expected host:port[,host:port...][/chroot]")
    if chroot.endswith("/"):
        raise ValueError(f"kafka param {key}={connect!r}: the chroot must not end with '/'")
    return connect


def _same(key: str, given: str | None, in_params: Any) -> str | None:
    if given is not None and in_params is not None and str(in_params).strip() != given:
        raise ValueError(f"kafka param {key}={in_params!r} contradicts the argument {given!r}")
    return given if given is not None else in_params


def _jaas_login(value: Any) -> tuple[str, str]:
    """The username and password of a DigestLoginModule line. Never echoes the value: it holds a
    secret."""
    text = str(value).strip()
    if not text.startswith(_DIGEST_LOGIN_MODULE) or not text.endswith(";"):
        raise ValueError(
            f"kafka param zookeeper.sasl.jaas.config: expected '{_DIGEST_LOGIN_MODULE} required "
            'username="..." password="...";\''
        )
    options = {name: re.sub(r"\\(.)", r"\1", quoted) for name, quoted in _JAAS_OPTION.findall(text)}
    if not options.get("username") or not options.get("password"):
        raise ValueError('kafka param zookeeper.sasl.jaas.config: needs username="..." and password="..."')
    return options["username"], options["password"]


def _zookeeper_sasl(params: Mapping[str, Any]) -> ZooKeeperSasl | None:
    if not any(key in params for key in ZOOKEEPER_SASL_KEYS):
        return None
    mechanism = _text(
        "zookeeper.sasl.mechanism", params.get("zookeeper.sasl.mechanism", "DIGEST-MD5")
    ).upper()
    if mechanism not in ZOOKEEPER_SASL_MECHANISMS:
        raise ValueError(
            f"kafka param zookeeper.sasl.mechanism={mechanism!r}: supported are "
            f"{', '.join(ZOOKEEPER_SASL_MECHANISMS)} (kazoo with pure-sasl)"
        )
    if "zookeeper.sasl.jaas.config" in params:
        if "zookeeper.sasl.username" in params or "zookeeper.sasl.password" in params:
            raise ValueError(
                "kafka params: give zookeeper.sasl.jaas.config or zookeeper.sasl.username and "
                "zookeeper.sasl.password, not both"
            )
        username, password = _jaas_login(params["zookeeper.sasl.jaas.config"])
    else:
        username = _text("zookeeper.sasl.username", params.get("zookeeper.sasl.username"))
        password = params.get("zookeeper.sasl.password")
        if password is None or not str(password):
            raise ValueError("kafka param zookeeper.sasl.password is required with zookeeper.sasl.username")
        password = str(password)
    # kazoo imports pure-sasl only once connected, on its connection thread: without it every
    # attempt fails there and the start times out saying nothing of why.
    if importlib.util.find_spec("puresasl") is None:
        raise ValueError(
            "kafka params zookeeper.sasl.*: a SASL login to ZooKeeper needs the pure-sasl package on the "
            "driver and every executor: pip install 'reliable-kafka[zookeeper-sasl]'"
        )
    return ZooKeeperSasl(username=username, password=password, mechanism=mechanism)


def _zookeeper_params(params: Mapping[str, Any], connect: Any) -> ZooKeeperParams:
    auth = params.get("zookeeper.auth")
    if auth is not None:
        user, sep, password = str(auth).partition(":")
        if not sep or not user or not password:
            # The value is a secret: name the key, never echo it.
            raise ValueError("kafka param zookeeper.auth: expected user:password (digest)")
        auth = str(auth)
    sasl = _zookeeper_sasl(params)
    logged_in = auth is not None or sasl is not None
    set_acl = _boolean("zookeeper.set.acl", params.get("zookeeper.set.acl", logged_in))
    if set_acl and not logged_in:
        raise ValueError(
            "kafka param zookeeper.set.acl=true needs a login: zookeeper.auth (digest) or "
            "zookeeper.sasl.username and zookeeper.sasl.password (SASL)"
        )
    return ZooKeeperParams(
        connect=_zookeeper_connect("zookeeper.connect", connect),
        session_timeout_ms=_integer(
            "zookeeper.session.timeout.ms", params.get("zookeeper.session.timeout.ms", 6000), 1
        ),
        connection_timeout_ms=_integer(
            "zookeeper.connection.timeout.ms", params.get("zookeeper.connection.timeout.ms", 6000), 1
        ),
        auth=auth,
        set_acl=set_acl,
        sasl=sasl,
    )


def _offsets_storage(params: Mapping[str, Any], has_zookeeper: bool) -> tuple[OffsetsStorage, bool]:
    """``offsets.storage`` and ``dual.commit.enabled`` with Kafka 0.8.2's defaults.

    0.8.2 defaulted dual commit to true and used it only with offsets.storage=kafka, so a group
    that switches storage keeps ZooKeeper current until every member has moved.
    """
    storage = str(params.get("offsets.storage", "zookeeper" if has_zookeeper else "kafka")).strip().lower()
    if storage not in ("zookeeper", "kafka"):
        raise ValueError(f"kafka param offsets.storage={storage!r}: expected zookeeper or kafka")
    if storage == "zookeeper":
        if not has_zookeeper:
            raise ValueError(
                "kafka param offsets.storage=zookeeper needs ZooKeeper: no zkQuorum (zookeeper.connect)"
            )
        if _boolean("dual.commit.enabled", params.get("dual.commit.enabled", False)):
            logger.info("kafka param dual.commit.enabled applies to offsets.storage=kafka only; ignored")
        return "zookeeper", False
    dual = _boolean("dual.commit.enabled", params.get("dual.commit.enabled", has_zookeeper))
    if dual and not has_zookeeper:
        raise ValueError(
            "kafka param dual.commit.enabled=true needs ZooKeeper: no zkQuorum (zookeeper.connect)"
        )
    return "kafka", dual


def _group_params(params: Mapping[str, Any], group: Any, *, has_zookeeper: bool) -> ConsumerGroupParams:
    group = _text("group.id", group)
    if "/" in group:
        raise ValueError(f"kafka param group.id={group!r}: must not contain '/'")
    strategy = str(params.get("partition.assignment.strategy", "range")).strip().lower()
    if strategy not in ASSIGNMENT_STRATEGIES:
        raise ValueError(
            f"kafka param partition.assignment.strategy={strategy!r}: "
            f"expected one of {', '.join(ASSIGNMENT_STRATEGIES)}"
        )
    reset = str(params.get("auto.offset.reset", "largest")).strip().lower()
    if reset not in _OFFSET_RESET:
        raise ValueError(
            f"kafka param auto.offset.reset={reset!r}: expected smallest or largest (earliest/latest)"
        )
    auto_commit = True
    for key in _AUTO_COMMIT_KEYS:
        if key in params:
            auto_commit = _boolean(key, params[key])
    consumer_id = params.get("consumer.id")
    storage, dual = _offsets_storage(params, has_zookeeper)
    return ConsumerGroupParams(
        group_id=group,
        consumer_id=_text("consumer.id", consumer_id) if consumer_id is not None else None,
        auto_offset_reset=_OFFSET_RESET[reset],
        auto_commit_enable=auto_commit,
        auto_commit_interval_ms=_integer(
            "auto.commit.interval.ms", params.get("auto.commit.interval.ms", 60000), 1
        ),
        rebalance_max_retries=_integer("rebalance.max.retries", params.get("rebalance.max.retries", 4), 1),
        rebalance_backoff_ms=_integer("rebalance.backoff.ms", params.get("rebalance.backoff.ms", 2000), 0),
        auto_commit_set_by_user=any(key in params for key in _AUTO_COMMIT_KEYS),
        assignment_strategy=strategy,
        offsets_storage=storage,
        dual_commit_enabled=dual,
    )


def _client_config(params: Mapping[str, Any]) -> dict[str, Any]:
    client_config: dict[str, Any] = {}
    for key, value in params.items():
        if key in _OWN_KEYS:
            continue
        if key in _IGNORED_08_KEYS:
            logger.info("kafka param %s has no meaning with librdkafka; ignored", key)
            continue
        if value is None:
            raise ValueError(f"kafka param {key} must not be None")
        if key in _FORCED_CLIENT_CONFIG:
            logger.warning("kafka param %s is managed by the receiver; the given value is ignored", key)
        client_config[key] = value
    if "metadata.broker.list" in params and "bootstrap.servers" not in params:
        client_config["bootstrap.servers"] = _text("metadata.broker.list", params["metadata.broker.list"])
    return client_config


def parse_kafka_params(
    params: Mapping[str, Any],
    *,
    zookeeper_connect: str | None = None,
    group_id: str | None = None,
) -> KafkaParams:
    """Split and validate ``params``; ``zookeeper_connect``/``group_id`` as createStream takes them."""
    for key in params:
        if not isinstance(key, str):
            raise ValueError(f"kafka param names must be strings, got {key!r}")
    connect = _same("zookeeper.connect", zookeeper_connect or None, params.get("zookeeper.connect") or None)
    client_config = _client_config(params)
    if connect is None and not client_config.get("bootstrap.servers"):
        raise ValueError(
            "kafka params: neither zookeeper.connect (zkQuorum) nor bootstrap.servers is given; "
            "give zookeeper.connect for a ZooKeeper consumer group, or bootstrap.servers for one "
            "kept by Kafka's group coordinator"
        )
    group = _same("group.id", group_id, params.get("group.id"))
    if group is None:
        raise ValueError("kafka param group.id is required")
    group_params = _group_params(params, group, has_zookeeper=connect is not None)
    if connect is not None and group_params.assignment_strategy != "range":
        raise ValueError(
            f"kafka param partition.assignment.strategy={group_params.assignment_strategy!r}: a ZooKeeper "
            "consumer group (zookeeper.connect) assigns by range only"
        )
    return KafkaParams(
        zookeeper=_zookeeper_params(params, connect) if connect is not None else None,
        group=group_params,
        client_config=client_config,
        listener_name=(
            _text(LISTENER_NAME_PARAM, params[LISTENER_NAME_PARAM]) if LISTENER_NAME_PARAM in params else None
        ),
        fetch_stall_timeout_ms=_integer(
            FETCH_STALL_TIMEOUT_PARAM,
            params.get(FETCH_STALL_TIMEOUT_PARAM, DEFAULT_FETCH_STALL_TIMEOUT_MS),
            1,
        ),
        prefetch_bytes=_integer(PREFETCH_PARAM, params.get(PREFETCH_PARAM, DEFAULT_PREFETCH_BYTES), 1 << 20),
        missing_topic_timeout_ms=_integer(
            MISSING_TOPIC_TIMEOUT_PARAM,
            params.get(MISSING_TOPIC_TIMEOUT_PARAM, DEFAULT_MISSING_TOPIC_TIMEOUT_MS),
            WAIT_FOR_EVER,
        ),
        access_refusal_timeout_ms=_integer(
            ACCESS_REFUSAL_TIMEOUT_PARAM,
            params.get(ACCESS_REFUSAL_TIMEOUT_PARAM, DEFAULT_ACCESS_REFUSAL_TIMEOUT_MS),
            RETRY_FOR_EVER,
        ),
    )
