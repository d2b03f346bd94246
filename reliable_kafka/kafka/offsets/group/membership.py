"""Membership of a consumer group through Kafka's group coordinator, with no ZooKeeper.

One confluent-kafka Consumer subscribes to the topics and is the group member: it joins,
heartbeats, receives the partitions the group's ``partition.assignment.strategy`` gives it
(range, roundrobin, or cooperative-sticky), and is the client offsets are committed through,
so the coordinator accepts them (generation and member id) while the group is active. It never
reads a record: every partition it is given is paused at once, and the receiver's per-partition
consumers (``PartitionConsumer``, by ``assign()``) read them, as with ZooKeeper membership.

State machine, on the member's own poll thread (librdkafka calls the rebalance callbacks from
``poll``; heartbeats run on librdkafka's threads, so a callback that blocks does not cost the
session, only ``max.poll.interval.ms``, which a revoke's bounded flush stays far below):

    joining --assign(ps)--> owning ps: paused, added to the owned set, listener told
    owning --revoke(ps)---> listener stops ps's consumers and lets their blocks commit (ps still
                            owned); then ps leave the owned set and are never committed again
    owning --lost(ps)-----> ps leave the owned set first (the group has moved on: a commit
                            would be refused or, worse, accepted for another member's
                            partition), then the listener stops their consumers
    any ----fatal error---> everything owned is lost, the listener hears on_rebalance_failed
    any ----stop()--------> close(): revoke everything (as above), LeaveGroup

Eager protocols (range, roundrobin) revoke everything on every rebalance and assign the whole
new assignment; cooperative-sticky revokes and assigns only what moves (incremental_assign /
incremental_unassign), so the partitions a member keeps are never interrupted.

Every request through the member's client (the offset store's commits and fetches) runs on the
poll thread (:meth:`KafkaGroupMembership.call`). A synchronous commit from another thread waits
until a rebalance callback running on the poll thread returns (seen here with confluent-kafka
2.16 on Kafka 4), while a revoke's flush waits for exactly those commits: the flush gave up after
its timeout and the next owner read the revoked blocks again, at every rebalance of a group with
two receivers. So a revoke runs the listener on a helper thread while the poll thread serves the
commits it causes, as Kafka's own consumer commits in ``onPartitionsRevoked``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from reliable_kafka.kafka.client.error_log import ClientErrorLog
from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.offsets.group_member import RebalanceListener, consumer_thread_id, new_consumer_id
from reliable_kafka.util.librdkafka_log import LibrdkafkaLog

# Types only: the refusal judge imports the receiver package, too heavy for the ZooKeeper wing.
if TYPE_CHECKING:
    from reliable_kafka.kafka.client.access_refusal import AccessRefusals

logger = logging.getLogger(__name__)

ASSIGNMENT_STRATEGIES = ("range", "roundrobin", "cooperative-sticky")
# The poll thread never blocks inside poll(): while one thread waits in a poll with a timeout,
# a synchronous commit() or committed() of the same client from another thread hangs
# (confluent-kafka 2.16 / librdkafka 2.16, seen here), and offsets are committed through this
# member from the receivers' threads. Rebalance callbacks still run within this interval.
_POLL_INTERVAL_S = 0.05
_T = TypeVar("_T")
# How often a group refusal librdkafka reported once is told again while it stands.
_REFUSAL_REPEAT_S = 0.5
# librdkafka's default is 45 s; a dead receiver's partitions would wait that long for a new owner.
DEFAULT_SESSION_TIMEOUT_MS = 10000


class GroupJoinFailedError(RuntimeError):
    """The member got no assignment in time, or the client failed fatally while joining."""


class KafkaGroupMembership:
    """This process's membership in ``group_id`` through the group coordinator.

    ``config`` is a confluent-kafka Consumer config that reaches the brokers (``bootstrap.servers``,
    security); group timeouts in it (``session.timeout.ms``, ``heartbeat.interval.ms``,
    ``max.poll.interval.ms``) are honoured, the assignor is ``assignment_strategy``. ``topics``
    maps topic -> consumer threads, which only name the threads here: the coordinator's assignor
    splits partitions by member.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        group_id: str,
        topics: Mapping[str, int],
        listener: RebalanceListener,
        *,
        assignment_strategy: str = "range",
        consumer_id: str | None = None,
        refusals: AccessRefusals | None = None,
    ) -> None:
        if not topics:
            raise ValueError("a consumer group member needs at least one topic")
        if assignment_strategy not in ASSIGNMENT_STRATEGIES:
            raise ValueError(
                f"partition.assignment.strategy={assignment_strategy!r}: "
                f"expected one of {', '.join(ASSIGNMENT_STRATEGIES)}"
            )
        self.group_id = group_id
        # librdkafka runs the cooperative protocol exactly when every strategy is cooperative.
        self._incremental = assignment_strategy == "cooperative-sticky"
        self.consumer_id = new_consumer_id(group_id, consumer_id)
        self._topics = dict(topics)
        self._listener = listener
        # Refusals (a group ACL among them) go to the receiver's streak (see access_refusal).
        self._error_log = ClientErrorLog(self.consumer_id, refusals)
        member_config = {
            "session.timeout.ms": DEFAULT_SESSION_TIMEOUT_MS,
            **config,
            "group.id": group_id,
            "client.id": self.consumer_id,
            "partition.assignment.strategy": assignment_strategy,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "error_cb": self._on_client_error,
            "logger": LibrdkafkaLog(),
        }
        try:
            self.consumer = Consumer(member_config)
        except (KafkaException, TypeError, ValueError) as exc:
            raise ValueError(f"kafka params rejected by confluent-kafka: {exc}") from exc
        self._owned: dict[TopicAndPartition, str] = {}
        self._owned_lock = threading.Lock()
        self._stopping = threading.Event()
        self._joined = threading.Event()
        self._fatal: BaseException | None = None
        self._start_aborted: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.rebalance_count = 0
        # Requests through the client from other threads, served on the poll thread.
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._calls_lock = threading.Lock()
        self._serving = False
        # A group ACL refusal, until an assignment proves it gone: librdkafka reports it once and
        # then asks the coordinator again in silence (see _repeat_refusal).
        self._group_refused: KafkaError | None = None
        self._refusal_repeat_due = 0.0

    # -- ownership view (for the offset store) ------------------------------------------------

    def owns(self, tp: TopicAndPartition) -> bool:
        """True while ``tp`` is this member's, including during its revoke flush."""
        with self._owned_lock:
            return tp in self._owned

    def owned_partitions(self) -> dict[TopicAndPartition, str]:
        with self._owned_lock:
            return dict(self._owned)

    # -- requests through the member's client -------------------------------------------------

    def call(self, request: Callable[[], _T]) -> _T:
        """``request()`` (a commit or fetch through :attr:`consumer`) on the poll thread, where
        it cannot wait on a rebalance callback; directly when no poll thread serves."""
        if threading.current_thread() is self._thread:
            return request()
        result: Future[_T] = Future()

        def run() -> None:
            if result.set_running_or_notify_cancel():
                try:
                    result.set_result(request())
                except BaseException as exc:
                    result.set_exception(exc)

        with self._calls_lock:
            serving = self._serving
            if serving:
                self._calls.put(run)
        if not serving:
            return request()
        return result.result()

    def _serve_calls(self, wait_s: float) -> None:
        """Run the queued requests, waiting up to ``wait_s`` for the first."""
        try:
            run = self._calls.get(timeout=wait_s) if wait_s > 0 else self._calls.get_nowait()
        except queue.Empty:
            return
        while True:
            run()
            try:
                run = self._calls.get_nowait()
            except queue.Empty:
                return

    def _serving_calls_meanwhile(self, work: Callable[[], None], name: str) -> None:
        """``work()`` on a helper thread while this (poll) thread serves the requests it causes."""
        if threading.current_thread() is not self._thread:
            work()
            return
        failure: list[BaseException] = []
        done = threading.Event()

        def run() -> None:
            try:
                work()
            except BaseException as exc:
                failure.append(exc)
            finally:
                done.set()
                self._calls.put(lambda: None)  # wakes the serving loop

        threading.Thread(target=run, name=f"{self.consumer_id}-{name}", daemon=True).start()
        while not done.is_set():
            self._serve_calls(_POLL_INTERVAL_S)
        self._serve_calls(0)
        if failure:
            raise failure[0]

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def suspended(self) -> bool:
        """Never: a member has no session to wait out as a ZooKeeper client does. A member that
        misses its session timeout loses its partitions (``on_partitions_lost``), and a commit in
        between is refused by the coordinator, not held."""
        return False

    def wait_connected(self, timeout_s: float) -> bool:
        """Nothing to wait for (see :attr:`suspended`)."""
        return True

    def start(self, timeout_s: float = 60.0) -> None:
        """Subscribe and wait for the first assignment (possibly empty: more members than partitions)."""
        if self._thread is not None:
            raise RuntimeError("consumer group member already started")
        self.consumer.subscribe(
            sorted(self._topics), on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._thread = threading.Thread(target=self._run, name=f"group-{self.consumer_id}", daemon=True)
        self._thread.start()
        if not self._joined.wait(timeout_s) or self._fatal is not None or self._start_aborted is not None:
            if self._start_aborted is not None:
                self.stop()
                raise self._start_aborted
            error = self._fatal
            self.stop()
            reason = f"failed: {error!r}" if error else f"got no assignment within {timeout_s:.0f} s"
            raise GroupJoinFailedError(
                f"{self.consumer_id}: joining group {self.group_id} {reason}"
            ) from error

    def abort_start(self, error: BaseException) -> bool:
        """Make a :meth:`start` still waiting for the first assignment raise ``error``; False when
        there is none. librdkafka does not join for a subscription whose topics are all missing,
        so a start on a topic Kafka does not have would otherwise wait out its whole timeout.
        An assignment arriving at the same moment changes nothing: the error stands."""
        if self._joined.is_set():
            return False
        self._start_aborted = error
        self._joined.set()
        return True

    def stop(self, timeout_s: float = 120.0) -> None:
        """Give up every partition (listener first), then leave the group. Idempotent.

        ``timeout_s`` bounds the wait for the poll thread, which runs the revoke callbacks.
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        thread = self._thread
        if thread is None:
            self._close()
        elif thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("%s: the group member's poll thread did not stop in time", self.consumer_id)

    # -- poll thread --------------------------------------------------------------------------

    def _run(self) -> None:
        with self._calls_lock:
            self._serving = True
        try:
            while not self._stopping.is_set():
                self._serve_calls(_POLL_INTERVAL_S)
                self._repeat_refusal()
                message = self.consumer.poll(0)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    self._on_client_error(error)
                # A record before its pause took effect: the partition's own consumer reads it.
        except BaseException as exc:
            self._fail(exc)
        finally:
            try:
                self._close()
            finally:
                with self._calls_lock:
                    self._serving = False
                self._serve_calls(0)  # queued before serving ended: they run here, on a closed client

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            # Runs the revoke callback for what is still owned, then sends LeaveGroup.
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            logger.warning("%s: leaving group %s cleanly failed: %r", self.consumer_id, self.group_id, exc)
        self._lose(list(self.owned_partitions()))

    def _on_client_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fail(KafkaException(error))
            return
        if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED and not self._joined.is_set():
            self._group_refused = error
            self._refusal_repeat_due = time.monotonic() + _REFUSAL_REPEAT_S
        self._error_log.log(error)

    def _repeat_refusal(self) -> None:
        """Tell the refusals again, while no assignment came, that the group is refused: they end
        the stream once it has lasted (access_refusal), and librdkafka said it only once."""
        error = self._group_refused
        if error is None or time.monotonic() < self._refusal_repeat_due:
            return
        if self._joined.is_set():
            self._group_refused = None
            return
        self._refusal_repeat_due = time.monotonic() + _REFUSAL_REPEAT_S
        self._error_log.log(error)

    def _fail(self, exc: BaseException) -> None:
        """A fatal client error: the member is out of the group and owns nothing any more."""
        if self._fatal is not None:
            return
        self._fatal = exc
        logger.error("%s: group membership failed: %r", self.consumer_id, exc)
        self._stopping.set()
        if not self._joined.is_set():
            self._joined.set()
            return
        self._lose(list(self.owned_partitions()))
        self._listener.on_rebalance_failed(exc)

    # -- rebalance callbacks (on the poll thread) ---------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        incremental = self._incremental
        # Assigned and paused before the callback returns, so the member never fetches.
        if incremental:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if partitions:
            consumer.pause(partitions)
        added = self._thread_ids([TopicAndPartition(p.topic, p.partition) for p in partitions])
        with self._owned_lock:
            self._owned.update(added)
        self.rebalance_count += 1
        logger.info(
            "%s: assigned %s (%s)",
            self.consumer_id,
            ", ".join(map(str, sorted(added))) or "nothing",
            "incremental" if incremental else "eager",
        )
        try:
            if added and not self._stopping.is_set():
                self._listener.on_partitions_assigned(added)
        finally:
            self._joined.set()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = sorted(TopicAndPartition(p.topic, p.partition) for p in partitions)
        try:
            if revoked:
                # Still owned here: the flush of their stored blocks commits through this member.
                self._serving_calls_meanwhile(lambda: self._listener.on_partitions_revoked(revoked), "revoke")
        finally:
            with self._owned_lock:
                for tp in revoked:
                    self._owned.pop(tp, None)
            self._unassign(consumer, partitions)
            if revoked:
                logger.info("%s: revoked %s", self.consumer_id, ", ".join(map(str, revoked)))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lost = [TopicAndPartition(p.topic, p.partition) for p in partitions]
        logger.warning(
            "%s: lost %s (session expired or fenced); their last blocks are read again by the next owner",
            self.consumer_id,
            ", ".join(map(str, sorted(lost))),
        )
        try:
            self._lose(lost)
        finally:
            self._unassign(consumer, partitions)

    def _lose(self, partitions: list[TopicAndPartition]) -> None:
        """Disown first, then stop the consumers: nothing of these may be committed any more."""
        with self._owned_lock:
            gone = sorted(tp for tp in partitions if self._owned.pop(tp, None) is not None)
        if gone:
            self._serving_calls_meanwhile(lambda: self._listener.on_partitions_revoked(gone), "lose")

    def _unassign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            if self._incremental:
                consumer.incremental_unassign(partitions)
            else:
                consumer.unassign()
        except KafkaException as exc:
            # The client unassigns by itself after the callback when this did not happen.
            logger.debug("unassigning %s: %r", partitions, exc)

    def _thread_ids(self, partitions: list[TopicAndPartition]) -> dict[TopicAndPartition, str]:
        """Each partition's consumer thread name, numbered per topic within the topic's thread count."""
        ids: dict[TopicAndPartition, str] = {}
        for tp in sorted(partitions):
            index = sum(1 for other in ids if other.topic == tp.topic)
            ids[tp] = consumer_thread_id(self.consumer_id, index % self._topics.get(tp.topic, 1))
        return ids
