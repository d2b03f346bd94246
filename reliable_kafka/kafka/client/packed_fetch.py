"""A partition's records read and packed in C, without a Python object per record.

confluent-kafka's ``consume()`` builds a ``Message`` (and a bytes object per key, value and
topic) for every record while holding the GIL, and a receiver thread then reads the columns
back out of those objects and packs them: two thirds of a receiver's GIL time, which with
several partition threads per receiver is what bounds its throughput
(``benchmarks/receiver_bench.py``). :class:`PackedFetch` reads the partition through the C
extension ``_packed_fetch`` instead, which takes a batch from librdkafka and writes it as a block
chunk (exactly the bytes :func:`~reliable_kafka.storage.block_format.pack_chunk` writes) with the
GIL released.

How it reaches librdkafka, and what keeps that safe:

- The ``rd_kafka_t`` is the one of the partition's confluent-kafka ``Consumer``, which keeps
  doing everything else (assign, metadata, watermarks, close). confluent-kafka's C ``Handle``
  holds it right after the object header: confluent-kafka's own layout, not an API, and a wrong
  guess dereferences a bad pointer (a crash, not a fallback). So nothing is dereferenced before
  the layout is checked: once per process, a probe ``Consumer`` made with known callbacks must
  hold them (and its type) in the slots after ``rk`` where that layout puts them, read inside
  the object's own memory; then a consumer is read only on CPython (where ``id()`` is the
  object's address), when its type is exactly confluent-kafka's C ``Consumer`` (a subclass may
  add fields) and its own type slot says consumer, with a confluent-kafka and a librdkafka whose
  versions are in :data:`VERIFIED_VERSIONS` (others fall back to the Python path with a
  WARNING; ``RELIABLE_KAFKA_PACKED_FETCH=1`` uses them anyway, with a WARNING, and still after
  the layout check). Only then does librdkafka confirm it: ``rd_kafka_opaque()`` of the handle
  must be the ``Consumer`` object itself, as confluent-kafka sets it, and ``rd_kafka_type()``
  must say consumer.
- librdkafka is the copy confluent-kafka loaded (found in ``/proc/self/maps``), called through
  ctypes for the queue calls and through function addresses by the extension.
- The partition's queue is detached from the consumer queue before ``assign()``
  (``rd_kafka_queue_forward(queue, NULL)``; librdkafka never forwards it again afterwards), so
  records reach only this reader, in order. The consumer queue keeps carrying the client's
  events, logs and errors, and :meth:`PackedFetch.serve_events` serves them through
  confluent-kafka, whose callbacks need its own GIL handling: the extension never runs one.

Without the extension (no C compiler at install), off Linux or CPython, with an unverified
confluent-kafka or librdkafka, or with ``RELIABLE_KAFKA_PACKED_FETCH=0`` in the environment,
:meth:`PackedFetch.attach` returns None and the receivers pack in Python, as before; the reason
is logged once (at WARNING for a confluent-kafka or librdkafka never verified, INFO otherwise).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
from dataclasses import dataclass
from typing import NamedTuple

import confluent_kafka
from confluent_kafka import Consumer, KafkaError

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.storage.block_format import PackedChunk

try:
    from reliable_kafka.kafka.client._packed_fetch import bind_events as _c_bind_events
    from reliable_kafka.kafka.client._packed_fetch import fetch as _c_fetch
    from reliable_kafka.kafka.client._packed_fetch import fetch_columns as _c_fetch_columns
except ImportError as _exc:  # built optionally (setup.py): no compiler, no extension
    _c_bind_events = _c_fetch = _c_fetch_columns = None
    _NOT_BUILT = f"the C extension was not built: {_exc}"

try:
    from reliable_kafka.kafka.client._packed_fetch import fetch_with_metadata as _c_fetch_with_metadata
except ImportError:
    # An extension built before it (a checkout updated without a rebuild) still reads the
    # receivers' partitions and plain ranges; a messageHandler's ranges are then read from messages.
    _c_fetch_with_metadata = None

logger = logging.getLogger(__name__)

SWITCH_ENV = "RELIABLE_KAFKA_PACKED_FETCH"
_OFF = ("0", "false", "off", "no")
_FORCED = ("1", "true", "on", "yes")
# (major, minor) of confluent-kafka, and of the librdkafka it loads, with which
# tests/kafka/test_packed_fetch.py passed here: every minor release from the oldest the package
# accepts (2.6) to the newest tested (2.16). CI runs that test on the two ends.
VERIFIED_VERSIONS = frozenset((2, minor) for minor in range(6, 17))
_RD_KAFKA_CONSUMER = 1  # rd_kafka_type_t
# Events (logs, errors) taken off the consumer queue per serve; more wait for the next serve.
_EVENTS_PER_SERVE = 100


class FetchedBatch(NamedTuple):
    """What one fetch took off the partition's queue: its records packed (None when it held
    none), their first and last offsets, and the errors among them, in order."""

    chunk: PackedChunk | None
    first_offset: int
    last_offset: int
    errors: list[KafkaError]


class FetchedColumns(NamedTuple):
    """What one columnar fetch took off the partition's queue: its records as Arrow-ready
    buffers (None when it held none; see :data:`COLUMN_BUFFERS`), how many, their first and
    last offsets, and the errors among them, in order."""

    columns: tuple[bytes | None, ...] | None
    records: int
    first_offset: int
    last_offset: int
    errors: list[KafkaError]


class RecordMetadata(NamedTuple):
    """What a ``messageHandler`` sees of a fetch's records beyond the chunk's columns, one entry
    per record in order: timestamps (ms since the epoch; None without a type), timestamp types as
    Kafka's (-1 none, 0 CreateTime, 1 LogAppendTime), headers (``[(name, value bytes or None)]``,
    empty for none)."""

    timestamps: list[int | None]
    timestamp_types: list[int]
    headers: list[list[tuple[str, bytes | None]]]


# The buffers of FetchedColumns.columns, in order: validity bitmaps (None when no record is
# null) and int64 offsets are Arrow's large_binary layout; offsets and timestamps (ms) are
# int64, timestamp types int32 (Kafka's -1, 0, 1), all in the machine's byte order.
COLUMN_BUFFERS = (
    "key_validity",
    "key_offsets",
    "key_data",
    "value_validity",
    "value_offsets",
    "value_data",
    "offset",
    "timestamp",
    "timestamp_type",
)


@dataclass(frozen=True)
class _Librdkafka:
    path: str
    lib: ctypes.CDLL
    # The extension's consume and destroy functions over librdkafka's event API (bind_events).
    consume: int
    destroy: int
    message_timestamp: int
    message_headers: int
    header_get_all: int


class _HandlePrefix(ctypes.Structure):
    """The start of confluent-kafka's C ``Handle`` (``confluent_kafka.h``, the same through 2.x):
    the object header, ``rk``, three callbacks, ``initiated``, the TLS key (``Py_tss_t``), the
    client type, the logger. Read only from inside an object at least this large."""

    _fields_ = (
        ("ob_refcnt", ctypes.c_ssize_t),
        ("ob_type", ctypes.c_void_p),
        ("rk", ctypes.c_void_p),
        ("error_cb", ctypes.c_void_p),
        ("throttle_cb", ctypes.c_void_p),
        ("stats_cb", ctypes.c_void_p),
        ("initiated", ctypes.c_int),
        ("tls_is_initialized", ctypes.c_int),
        ("tls_key", ctypes.c_uint),
        ("type", ctypes.c_int),
        ("logger", ctypes.c_void_p),
    )


def _handle_prefix(consumer: Consumer) -> _HandlePrefix | None:
    """The Handle prefix of ``consumer``, read inside its own memory; None if it is smaller."""
    if type(consumer).__basicsize__ < ctypes.sizeof(_HandlePrefix):
        return None
    return _HandlePrefix.from_buffer_copy(ctypes.string_at(id(consumer), ctypes.sizeof(_HandlePrefix)))


def _callback(*_args: object) -> None:
    pass


def _layout_mismatch() -> str | None:
    """Why confluent-kafka's Handle is not laid out as :class:`_HandlePrefix` says, if it is not:
    a probe consumer made with known callbacks must hold them where the layout puts them. Reads
    only the probe's own memory."""
    if object.__basicsize__ != _HandlePrefix.rk.offset:
        return "this Python's object header is not the one confluent-kafka's layout was read for"
    error_cb, throttle_cb, stats_cb = (functools.partial(_callback, i) for i in range(3))
    probe_logger = logging.getLogger(f"{__name__}.layout_probe")
    probe = Consumer(
        {
            "group.id": "reliable-kafka-layout-probe",
            "error_cb": error_cb,
            "throttle_cb": throttle_cb,
            "stats_cb": stats_cb,
            "logger": probe_logger,
        }
    )
    try:
        prefix = _handle_prefix(probe)
        expected = (id(error_cb), id(throttle_cb), id(stats_cb), id(probe_logger), _RD_KAFKA_CONSUMER, 1)
        if (
            prefix is None
            or not prefix.rk
            or expected
            != (
                prefix.error_cb,
                prefix.throttle_cb,
                prefix.stats_cb,
                prefix.logger,
                prefix.type,
                prefix.initiated,
            )
        ):
            return "confluent-kafka's consumer is not laid out as packed fetch reads it"
        return None
    finally:
        probe.close()


@functools.cache
def _librdkafka() -> _Librdkafka | str:
    """librdkafka as confluent-kafka loaded it, or why packed fetch is off (logged once)."""
    found = _find_librdkafka()
    if isinstance(found, str):
        # A confluent-kafka release nobody verified yet is news for an operator; the others are choices.
        level = logging.WARNING if found == _unverified() else logging.INFO
        logger.log(level, "packed fetch is off (%s): receivers pack records in Python", found)
    else:
        library = _version_of(confluent_kafka.libversion())
        logger.info("packed fetch is on: librdkafka %s at %s", library, found.path)
    return found


def available() -> bool:
    """Whether partitions can be read through their own queues (the reason why not is logged)."""
    return not isinstance(_librdkafka(), str)


def _version_of(answer: tuple[str, int] | str) -> str:
    # (string, int) until confluent-kafka 2.16, which returns the string alone from version().
    return answer if isinstance(answer, str) else answer[0]


def _major_minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _unverified() -> str | None:
    """Why this confluent-kafka or librdkafka is not one whose layout was verified, if it is not."""
    client, library = _version_of(confluent_kafka.version()), _version_of(confluent_kafka.libversion())
    if _major_minor(client) in VERIFIED_VERSIONS and _major_minor(library) in VERIFIED_VERSIONS:
        return None
    return (
        f"confluent-kafka {client} with librdkafka {library} is not among the versions it was "
        f"verified with (2.6 to 2.16); {SWITCH_ENV}=1 uses it anyway"
    )


def _why_off() -> str | None:
    """Why packed fetch must not be used in this process, before looking at librdkafka."""
    switch = os.environ.get(SWITCH_ENV, "").strip().lower()
    if switch in _OFF:
        return f"{SWITCH_ENV} turns it off"
    if _c_fetch is None:
        return _NOT_BUILT
    implementation = platform.python_implementation()
    if implementation != "CPython":
        return f"it reads confluent-kafka's objects by address, which {implementation} does not give"
    unverified = _unverified()
    if unverified is not None and switch in _FORCED:
        # A layout never verified may still pass the layout check and be read wrong elsewhere:
        # say so where an operator looks, every process.
        logger.warning("packed fetch forced on by %s=1 although %s", SWITCH_ENV, unverified.split(";")[0])
        return None
    return unverified


def _find_librdkafka() -> _Librdkafka | str:
    why_off = _why_off()
    if why_off is not None:
        return why_off
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split(maxsplit=5)[-1].strip() for line in maps if "/librdkafka" in line}
    except OSError as exc:
        return f"cannot see which librdkafka confluent-kafka loaded: {exc}"
    if len(paths) != 1:
        return f"expected one librdkafka in this process, found {sorted(paths) or 'none'}"
    (path,) = paths
    mismatch = _layout_mismatch()
    if mismatch is not None:
        return mismatch
    lib = ctypes.CDLL(path)
    for name, restype, argtypes in (
        ("rd_kafka_opaque", ctypes.c_void_p, [ctypes.c_void_p]),
        ("rd_kafka_type", ctypes.c_int, [ctypes.c_void_p]),
        ("rd_kafka_queue_get_partition", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32]),
        ("rd_kafka_queue_forward", None, [ctypes.c_void_p, ctypes.c_void_p]),
        ("rd_kafka_queue_destroy", None, [ctypes.c_void_p]),
    ):
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    assert _c_bind_events is not None
    # Not rd_kafka_consume_batch_queue: it runs the client's error_cb on the reading thread for
    # an error in the partition queue, and confluent-kafka's aborts the process outside its own
    # calls (see consume_events in _packed_fetch.c).
    consume, destroy = _c_bind_events(
        *(
            _address_of(lib, name)
            for name in (
                "rd_kafka_queue_poll",
                "rd_kafka_event_type",
                "rd_kafka_event_message_next",
                "rd_kafka_event_error",
                "rd_kafka_event_error_string",
                "rd_kafka_event_destroy",
                "rd_kafka_message_destroy",
            )
        )
    )
    return _Librdkafka(
        path,
        lib,
        consume,
        destroy,
        _address_of(lib, "rd_kafka_message_timestamp"),
        _address_of(lib, "rd_kafka_message_headers"),
        _address_of(lib, "rd_kafka_header_get_all"),
    )


def _address_of(lib: ctypes.CDLL, name: str) -> int:
    address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    if not address:
        raise OSError(f"{name} has no address")
    return address


def _client_handle(consumer: Consumer, librdkafka: _Librdkafka) -> int | str:
    """The ``rd_kafka_t *`` of ``consumer``, or why it cannot be trusted."""
    # Exactly the C type: a subclass (with __slots__ or a __dict__) lays out fields of its own.
    if type(consumer) is not Consumer:
        return f"{type(consumer).__qualname__} is not confluent-kafka's C Consumer itself"
    # The layout was checked (_layout_mismatch) before librdkafka was looked up; this consumer's
    # own slots must agree before its rk is handed to librdkafka.
    prefix = _handle_prefix(consumer)
    if prefix is None or prefix.type != _RD_KAFKA_CONSUMER or prefix.initiated != 1:
        return "confluent-kafka's consumer does not hold its librdkafka handle where expected"
    handle = prefix.rk
    if not handle or librdkafka.lib.rd_kafka_opaque(handle) != id(consumer):
        return "confluent-kafka's consumer does not hold its librdkafka handle where expected"
    if librdkafka.lib.rd_kafka_type(handle) != _RD_KAFKA_CONSUMER:
        return "the librdkafka handle is not a consumer's"
    return handle


class PackedFetch:
    """The queue of one partition of ``consumer``, read by the C extension. Not thread-safe:
    the partition's consumer thread makes every call, :meth:`close` included."""

    def __init__(
        self, consumer: Consumer, tp: TopicAndPartition, librdkafka: _Librdkafka, queue: int
    ) -> None:
        assert _c_fetch is not None and _c_fetch_columns is not None
        self._consumer = consumer
        self._librdkafka = librdkafka
        self._fetch = functools.partial(_c_fetch, queue, librdkafka.consume, librdkafka.destroy)
        self._fetch_columns = functools.partial(
            _c_fetch_columns,
            queue,
            librdkafka.consume,
            librdkafka.destroy,
            librdkafka.message_timestamp,
        )
        self._fetch_with_metadata = (
            None
            if _c_fetch_with_metadata is None
            else functools.partial(
                _c_fetch_with_metadata,
                queue,
                librdkafka.consume,
                librdkafka.destroy,
                librdkafka.message_timestamp,
                librdkafka.message_headers,
                librdkafka.header_get_all,
            )
        )
        self._topic, self._partition = tp.topic, tp.partition
        self._queue: int | None = queue

    @classmethod
    def attach(cls, consumer: Consumer, tp: TopicAndPartition) -> PackedFetch | None:
        """Detaches ``tp``'s queue from ``consumer``'s; call before ``consumer.assign()``.
        None when packed fetch is off (the reason is logged once per process)."""
        librdkafka = _librdkafka()
        if isinstance(librdkafka, str):
            return None
        handle = _client_handle(consumer, librdkafka)
        if isinstance(handle, str):
            logger.info("%s: packed fetch is off (%s): records are packed in Python", tp, handle)
            return None
        queue = librdkafka.lib.rd_kafka_queue_get_partition(handle, tp.topic.encode(), tp.partition)
        if not queue:
            logger.info("%s: packed fetch is off (librdkafka has no queue for it)", tp)
            return None
        librdkafka.lib.rd_kafka_queue_forward(queue, None)
        return cls(consumer, tp, librdkafka, queue)

    def fetch(self, max_messages: int, timeout_s: float) -> FetchedBatch:
        """Takes up to ``max_messages`` of what the queue holds now; when it holds nothing, waits
        up to ``timeout_s`` for the first record and takes that one (the rest, at once, on the
        next call). librdkafka's batch consume (read before) waits for a *whole* batch or the timeout: a
        partition with less than a batch left, as each one at the end of its fetch turn, sat out
        the whole poll timeout (0.2 s) every time."""
        batch = self._take(max_messages, 0)
        if batch.chunk is None and not batch.errors and timeout_s > 0:
            batch = self._take(1, timeout_s)
        return batch

    def _take(self, max_messages: int, timeout_s: float) -> FetchedBatch:
        if self._queue is None:
            raise RuntimeError(f"packed fetch of {self._topic} [{self._partition}] is closed")
        data, records, first, last, errors = self._fetch(
            max(0, int(timeout_s * 1000)), max_messages, self._topic, self._partition
        )
        return FetchedBatch(
            PackedChunk(data, records) if records else None,
            first,
            last,
            [_kafka_error(code, text) for code, text in errors],
        )

    @property
    def reads_metadata(self) -> bool:
        """Whether :meth:`fetch_with_metadata` is there (the extension was built with it)."""
        return self._fetch_with_metadata is not None

    def fetch_with_metadata(self, max_messages: int, timeout_s: float) -> tuple[FetchedBatch, RecordMetadata]:
        """As :meth:`fetch`, with each record's timestamp, timestamp type and headers (see
        :attr:`reads_metadata`)."""
        batch, metadata = self._take_with_metadata(max_messages, 0)
        if batch.chunk is None and not batch.errors and timeout_s > 0:
            batch, metadata = self._take_with_metadata(1, timeout_s)
        return batch, metadata

    def _take_with_metadata(self, max_messages: int, timeout_s: float) -> tuple[FetchedBatch, RecordMetadata]:
        if self._queue is None:
            raise RuntimeError(f"packed fetch of {self._topic} [{self._partition}] is closed")
        if self._fetch_with_metadata is None:
            raise RuntimeError("the packed fetch extension was built before fetch_with_metadata: rebuild it")
        data, records, first, last, errors, metadata = self._fetch_with_metadata(
            max(0, int(timeout_s * 1000)), max_messages, self._topic, self._partition
        )
        batch = FetchedBatch(
            PackedChunk(data, records) if records else None,
            first,
            last,
            [_kafka_error(code, text) for code, text in errors],
        )
        return batch, RecordMetadata(*metadata)

    def fetch_columns(self, max_messages: int, timeout_s: float) -> FetchedColumns:
        """As :meth:`fetch`, but the records come as Arrow-ready column buffers with their
        timestamps (:data:`COLUMN_BUFFERS`), not as a block chunk; and the first record waited
        for comes with the records queued behind it (its whole fetch response), in one call
        made without the GIL: a reader that keeps up with its partition would otherwise get
        every other batch as a single record."""
        return self._take_columns(max_messages, timeout_s)

    def _take_columns(self, max_messages: int, timeout_s: float) -> FetchedColumns:
        if self._queue is None:
            raise RuntimeError(f"packed fetch of {self._topic} [{self._partition}] is closed")
        records, first, last, columns, errors = self._fetch_columns(
            max(0, int(timeout_s * 1000)), max_messages, self._partition
        )
        return FetchedColumns(
            columns, records, first, last, [_kafka_error(code, text) for code, text in errors]
        )

    def serve_events(self) -> list[KafkaError]:
        """Runs the consumer's pending callbacks (error_cb, logger) and returns its pending errors.
        ``RuntimeError`` if a record reached the consumer queue: this reader would lose its order."""
        return serve_events(self._consumer)

    def close(self) -> None:
        """Releases the queue; before the consumer's ``close()``."""
        if self._queue is not None:
            self._librdkafka.lib.rd_kafka_queue_destroy(self._queue)
            self._queue = None


def serve_events(consumer: Consumer) -> list[KafkaError]:
    """Runs the pending callbacks (error_cb, logger) of a consumer whose partitions are all read
    by packed fetch, and returns its pending errors. ``RuntimeError`` if a record reached its
    consumer queue: a partition reader would lose its order."""
    errors = []
    for message in consumer.consume(_EVENTS_PER_SERVE, 0):
        error = message.error()
        if error is None:
            raise RuntimeError(
                f"a record of {message.topic()} [{message.partition()}] reached the consumer queue "
                "of a packed fetch: its partition reader would lose its order"
            )
        errors.append(error)
    return errors


def _kafka_error(code: int, text: bytes | None) -> KafkaError:
    reason = text.decode("utf-8", "replace") if text is not None else None
    return KafkaError(code, reason, fatal=code == KafkaError._FATAL)
