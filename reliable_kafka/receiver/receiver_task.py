"""The executor side of a receiver job (Spark's ``startReceiver`` task function).

The task gets a :class:`ReceiverTaskDescription` (msgpack: the receiver as a descriptor, the
streaming settings, where the driver's tracker listens and the context's secret) and:

1. exits at once if it is a retry (attempt > 0): the tracker, not Spark's task scheduler,
   decides where a receiver runs, and relaunches it when this job ends;
2. builds the receiver, an executor block store, and a block server for readers on other hosts,
   which also keeps other receivers' second copies (levels with replication 2; this receiver's
   own go to a peer's block server through a :class:`BlockReplicator`);
3. connects to the tracker (authenticated) and runs a supervisor until it terminates;
4. if the driver stopped it, keeps serving its blocks until the driver releases it (closes the
   connection): the last batches of a graceful stop still read them;
5. removes its blocks and ends. A lost connection stops the receiver (it could no longer report
   blocks), so the task ends and the driver, if alive, relaunches it.

Its log lines (and those of everything it runs: broker discovery, kazoo, the WAL) go through
Python logging with time, level, logger and the receiver's stream id; see
:func:`receiver_task_logging`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgpack

from reliable_kafka.receiver.block_replicator import BlockReplicator
from reliable_kafka.receiver.descriptor import ReceiverDescriptor
from reliable_kafka.receiver.received_block_handler import put_or_raise
from reliable_kafka.receiver.receiver_supervisor import ReceiverSupervisor, format_error
from reliable_kafka.receiver.remote_tracker import RemoteTrackerEndpoint
from reliable_kafka.receiver.tracker_endpoint import (
    BlockLocation,
    ReceivedBlockInfo,
    ReceiverControl,
)
from reliable_kafka.settings import StreamingSettings
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_server import BlockFetcher, BlockServer, KeepReplica
from reliable_kafka.storage.executor_block_store import ExecutorBlockStore
from reliable_kafka.storage.storage_level import StorageLevel
from reliable_kafka.util import instruments
from reliable_kafka.util.filesystems import FilesystemOptions
from reliable_kafka.util.located_rdd import (
    current_executor,
    current_executor_bind_address,
    task_attempt_number,
)

logger = logging.getLogger(__name__)

INSTRUMENTS_INTERVAL_S = 5.0

#: How a receiver task's lines look when the worker has no logging configuration of its own.
RECEIVER_TASK_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [receiver %(receiver_stream)s]: %(message)s"


@dataclass(frozen=True, slots=True)
class ReceiverTaskDescription:
    """Everything a receiver task needs, as plain data. ``secret`` authenticates the task to the
    tracker and to block readers; ``filesystem_options`` say how to reach a remote checkpoint
    directory (they may hold storage credentials). Both travel inside Spark's task and are never
    logged."""

    stream_id: int
    receiver: ReceiverDescriptor
    settings: dict[str, Any]
    checkpoint_dir: str | None
    tracker_host: str
    tracker_port: int
    secret: bytes
    app_id: str
    launch: int
    filesystem_options: FilesystemOptions = field(default_factory=FilesystemOptions)

    def encode(self) -> bytes:
        return msgpack.packb(
            {
                "stream_id": self.stream_id,
                "receiver": self.receiver.to_dict(),
                "settings": self.settings,
                "checkpoint_dir": self.checkpoint_dir,
                "tracker": [self.tracker_host, self.tracker_port],
                "secret": self.secret,
                "app_id": self.app_id,
                "launch": self.launch,
                "filesystems": self.filesystem_options.to_dict(),
            },
            use_bin_type=True,
        )

    @classmethod
    def decode(cls, raw: bytes) -> ReceiverTaskDescription:
        d = msgpack.unpackb(raw, raw=False)
        host, port = d["tracker"]
        return cls(
            stream_id=d["stream_id"],
            receiver=ReceiverDescriptor.from_dict(d["receiver"]),
            settings=d["settings"],
            checkpoint_dir=d["checkpoint_dir"],
            tracker_host=host,
            tracker_port=port,
            secret=d["secret"],
            app_id=d["app_id"],
            launch=d["launch"],
            filesystem_options=FilesystemOptions.from_dict(d.get("filesystems")),
        )

    def __repr__(self) -> str:
        return (
            f"ReceiverTaskDescription(stream_id={self.stream_id}, receiver={self.receiver.factory}, "
            f"tracker={self.tracker_host}:{self.tracker_port}, launch={self.launch})"
        )


def run_receiver_task(_split: int, elements: Iterable[bytes]) -> Iterator[bytes]:
    """The Python function of a receiver job's one task. Yields nothing: the outcome is logged
    here and reported to the tracker, so nothing has to travel back through Spark's pickles."""
    for raw in elements:
        description = ReceiverTaskDescription.decode(raw)
        with receiver_task_logging(description.stream_id):
            logger.info("%s", _run(description))
    return iter(())


class _ReceiverStreamFilter(logging.Filter):
    """Adds ``receiver_stream`` to every record: the stream of the receiver task this worker runs
    (a Python worker runs one task at a time), "-" between tasks (a reused worker's batch tasks)."""

    def __init__(self) -> None:
        super().__init__()
        self.stream_id: int | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        record.receiver_stream = "-" if self.stream_id is None else self.stream_id
        return True


_stream_filter = _ReceiverStreamFilter()
_handler_lock = threading.Lock()


@contextmanager
def receiver_task_logging(stream_id: int) -> Iterator[None]:
    """Log the receiver task of ``stream_id`` through Python logging, to the worker's stderr.

    A Python worker starts with no logging configuration, so a WARNING reached stderr through
    logging's last resort: the bare message, without time, level or logger, and nothing saying
    which receiver it is about. Installs one handler on the root logger per worker, unless the
    application configured the worker's logging itself (then its handlers stay in charge).
    """
    with _handler_lock:
        root = logging.getLogger()
        if not root.handlers:
            handler = logging.StreamHandler()  # stderr: Spark keeps it in the executor's log
            handler.setFormatter(logging.Formatter(RECEIVER_TASK_LOG_FORMAT))
            handler.addFilter(_stream_filter)
            root.addHandler(handler)
        _stream_filter.stream_id = stream_id
    try:
        yield
    finally:
        _stream_filter.stream_id = None


def _run(description: ReceiverTaskDescription) -> str:
    sid = description.stream_id
    attempt = task_attempt_number()
    if attempt > 0:
        # Spark's rule: a retried receiver task exits so that the tracker reschedules it.
        return f"Receiver {sid} task attempt {attempt} exits: the tracker relaunches receivers itself"
    host, executor_id = current_executor()
    store = ExecutorBlockStore(f"{description.app_id}-stream-{sid}")
    settings = StreamingSettings(**description.settings)
    tls = settings.receiver.tls()
    server = _start_block_server(store, description.secret, settings, current_executor_bind_address())
    port = server.address[1]
    lost = threading.Event()
    supervisor: ReceiverSupervisor | None = None

    def on_lost(error: BaseException | None) -> None:
        lost.set()
        if supervisor is not None and not supervisor.is_terminated():
            # On a helper thread: the connection's own thread must not wait for the stop.
            threading.Thread(
                target=supervisor.stop,
                args=("Lost the connection to the driver's receiver tracker", error),
                name=f"Receiver-{sid}-connection-lost",
                daemon=True,
            ).start()

    try:
        endpoint = _StopAwareEndpoint(
            RemoteTrackerEndpoint.connect(
                description.tracker_host,
                description.tracker_port,
                description.secret,
                block_server=(host, port),
                on_lost=on_lost,
                ssl_context=None if tls is None else tls.client_context(),
            )
        )
    except BaseException:
        server.stop()
        store.close()
        raise
    reporter: _InstrumentsReporter | None = None
    peers = BlockFetcher(description.secret, ssl_context=None if tls is None else tls.client_context())
    try:
        try:
            receiver = description.receiver.build()
            receiver.set_receiver_id(sid, launch=description.launch)
            supervisor = ReceiverSupervisor(
                receiver,
                endpoint,
                store,
                settings=settings,
                checkpoint_dir=description.checkpoint_dir,
                filesystem_options=description.filesystem_options,
                host=host,
                executor_id=executor_id,
                block_locator=lambda block_id: BlockLocation(
                    host, executor_id, store.path_of(block_id), port
                ),
                block_replicator=BlockReplicator(
                    sid, host, lambda: endpoint.remote.replica_peers(sid), peers
                ),
            )
        except Exception as exc:
            # Reported as a launch that ended with this error (not a receiver's report_error): the
            # tracker counts it in the failure streak, so a receiver that cannot be built on
            # every launch is logged and told to the listeners once, and restarted less often.
            endpoint.deregister_receiver(
                sid, f"Could not create receiver {sid} on executor {executor_id}", format_error(exc)
            )
            return f"Receiver {sid} could not be created: {exc!r}"
        logger.info(
            "Starting receiver %d (launch %d) on executor %s/%s", sid, description.launch, host, executor_id
        )
        reporter = _InstrumentsReporter(endpoint.remote, f"{executor_id}/{os.getpid()}")
        supervisor.start()
        outcome = f"Receiver {sid} (launch {description.launch}) stopped"
        try:
            supervisor.await_termination()
        except Exception as exc:
            outcome += f" with error {exc!r}"
        reporter.report()  # the last figures of this incarnation, before it idles or ends
        if endpoint.stopped_by_driver.is_set() and not lost.is_set():
            logger.info("Receiver %d stopped by the driver; serving its blocks until released", sid)
            lost.wait()
        return outcome
    finally:
        if reporter is not None:
            reporter.stop()
        peers.close()
        endpoint.close()
        server.stop()
        store.close()


def _start_block_server(
    store: ExecutorBlockStore, secret: bytes, settings: StreamingSettings, bind_address: str
) -> BlockServer:
    """Listens where the executor's own servers do (other hosts fetch from it); advertised under
    the executor's host. Serves the store's blocks, and keeps peers' second copies in it."""
    tls = settings.receiver.tls()
    return BlockServer(
        _reader_of(store),
        secret,
        host=bind_address,
        port=settings.receiver.block_server_port,
        port_retries=settings.receiver.port_max_retries,
        ssl_context=None if tls is None else tls.server_context(),
        keep_replica=replica_keeper(store),
    ).start()


def _reader_of(store: ExecutorBlockStore) -> Any:
    def read(name: str) -> bytes | None:
        return store.get(StreamBlockId.parse(name))

    return read


def replica_keeper(store: ExecutorBlockStore) -> KeepReplica:
    """A peer's second copies go to this receiver's store: served, and removed when the tracker
    removes the block (it tells the receivers on the replica's executor too), like its own."""

    def keep(name: str, data: bytes, level: StorageLevel) -> str | None:
        block_id = StreamBlockId.parse(name)
        put_or_raise(store, block_id, data, level)
        return store.path_of(block_id)

    return keep


class _InstrumentsReporter:
    """Sends this process's instruments (WAL writes, commits, block bytes) to the driver's
    metrics every :data:`INSTRUMENTS_INTERVAL_S`; ``source`` tells processes apart."""

    def __init__(self, endpoint: RemoteTrackerEndpoint, source: str) -> None:
        self._endpoint = endpoint
        self._source = source
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="receiver-instruments", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(INSTRUMENTS_INTERVAL_S):
            self.report()

    def report(self) -> None:
        try:
            self._endpoint.report_instruments(self._source, instruments.local_snapshot().to_dict())
        except Exception as exc:  # metrics are best effort; the data path does not wait on them
            logger.debug("Could not report instruments: %r", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class _StopAwareEndpoint:
    """The remote endpoint, noting whether the driver itself asked the receiver to stop."""

    def __init__(self, remote: RemoteTrackerEndpoint) -> None:
        self.remote = remote
        self._remote = remote
        self.stopped_by_driver = threading.Event()

    def register_receiver(
        self, stream_id: int, receiver_type: str, host: str, executor_id: str, control: ReceiverControl
    ) -> bool:
        return self._remote.register_receiver(
            stream_id, receiver_type, host, executor_id, _StopAwareControl(control, self.stopped_by_driver)
        )

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        return self._remote.add_block(info)

    def report_error(self, stream_id: int, message: str, error: str) -> None:
        self._remote.report_error(stream_id, message, error)

    def deregister_receiver(self, stream_id: int, message: str, error: str, *, fatal: bool = False) -> bool:
        return self._remote.deregister_receiver(stream_id, message, error, fatal=fatal)

    def close(self) -> None:
        self._remote.close()


class _StopAwareControl:
    def __init__(self, control: ReceiverControl, stopped: threading.Event) -> None:
        self._control = control
        self._stopped = stopped

    def update_rate_limit(self, rate: int) -> None:
        self._control.update_rate_limit(rate)

    def stop_receiver(self, message: str) -> None:
        self._stopped.set()
        self._control.stop_receiver(message)

    def cleanup_old_blocks(self, thresh_time_ms: int) -> None:
        self._control.cleanup_old_blocks(thresh_time_ms)

    def remove_blocks(self, block_ids: list[str]) -> None:
        self._control.remove_blocks(block_ids)
