"""librdkafka's mock cluster, reached through ctypes, for faults a real broker will not make on cue.

The mock cluster lives in the librdkafka that the confluent-kafka wheel bundles; its
``rd_kafka_mock_*`` functions are not wrapped by confluent-kafka, so this module binds the few the
tests need. A mock cluster is owned by an ``rd_kafka_t`` handle of its own, created here; the
clients under test connect to :attr:`MockCluster.bootstrap_servers` like to any broker.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka

_RD_KAFKA_PRODUCER = 0
API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10


def _bundled_librdkafka() -> ctypes.CDLL:
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    candidates = sorted(libs.glob("librdkafka*.so*"))
    if not candidates:
        raise RuntimeError(f"no bundled librdkafka under {libs}")
    lib = ctypes.CDLL(str(candidates[0]))
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int16,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_int),
    ]
    lib.rd_kafka_mock_broker_set_down.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_down.restype = ctypes.c_int
    lib.rd_kafka_mock_broker_set_up.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_up.restype = ctypes.c_int
    lib.rd_kafka_mock_coordinator_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_int32,
    ]
    lib.rd_kafka_mock_coordinator_set.restype = ctypes.c_int
    lib.rd_kafka_mock_start_request_tracking.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_clear_requests.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_get_requests.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.rd_kafka_mock_get_requests.restype = ctypes.POINTER(ctypes.c_void_p)
    lib.rd_kafka_mock_request_id.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_request_id.restype = ctypes.c_int32
    lib.rd_kafka_mock_request_api_key.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_request_api_key.restype = ctypes.c_int16
    lib.rd_kafka_mock_request_destroy_array.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    return lib


class MockCluster:
    """A running mock cluster of ``brokers`` brokers (ids 1..brokers)."""

    def __init__(self, brokers: int = 3) -> None:
        self._lib = _bundled_librdkafka()
        errstr = ctypes.create_string_buffer(512)
        self._rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, self._lib.rd_kafka_conf_new(), errstr, 512)
        if not self._rk:
            raise RuntimeError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._cluster = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._cluster:
            self._lib.rd_kafka_destroy(self._rk)
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> None:
        self._check(
            self._lib.rd_kafka_mock_topic_create(
                self._cluster, topic.encode(), partitions, replication_factor
            ),
            f"creating topic {topic}",
        )

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """The next ``len(errors)`` requests of ``api_key`` fail with these codes, in order."""
        codes = (ctypes.c_int * len(errors))(*errors)
        self._lib.rd_kafka_mock_push_request_errors_array(self._cluster, api_key, len(errors), codes)

    def broker_down(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._cluster, broker_id), "broker down")

    def broker_up(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._cluster, broker_id), "broker up")

    def set_group_coordinator(self, group_id: str, broker_id: int) -> None:
        self._check(
            self._lib.rd_kafka_mock_coordinator_set(self._cluster, b"group", group_id.encode(), broker_id),
            "setting the coordinator",
        )

    def track_requests(self) -> None:
        """Record every request the brokers receive from now on (and forget those recorded so
        far): what a client did is then an observed fact, see :meth:`requests`."""
        self._lib.rd_kafka_mock_start_request_tracking(self._cluster)
        self._lib.rd_kafka_mock_clear_requests(self._cluster)

    def requests(self) -> list[tuple[int, int]]:
        """(broker id, API key) of each request recorded since :meth:`track_requests`, in order."""
        count = ctypes.c_size_t()
        recorded = self._lib.rd_kafka_mock_get_requests(self._cluster, ctypes.byref(count))
        if not count.value:
            return []
        try:
            return [
                (
                    self._lib.rd_kafka_mock_request_id(recorded[i]),
                    self._lib.rd_kafka_mock_request_api_key(recorded[i]),
                )
                for i in range(count.value)
            ]
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(recorded, count.value)

    def close(self) -> None:
        if self._cluster:
            self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
            self._cluster = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    @staticmethod
    def _check(err: int, what: str) -> None:
        if err:
            raise RuntimeError(f"mock cluster: {what} failed: {confluent_kafka.KafkaError(err).str()}")


@contextmanager
def mock_cluster(brokers: int = 3) -> Iterator[MockCluster]:
    cluster = MockCluster(brokers)
    try:
        yield cluster
    finally:
        cluster.close()
