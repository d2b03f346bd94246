"""Membership of a Kafka 0.8 consumer group in ZooKeeper, and rebalancing its partitions.

Layout (ZookeeperConsumerConnector's): each member registers an ephemeral
``/consumers/<group>/ids/<consumer_id>`` with its subscription; each partition's owner holds
the ephemeral ``/consumers/<group>/owners/<topic>/<partition>`` (value: the owning consumer
thread id). Whenever membership or a topic's partitions change, every member recomputes the
range assignment, releases what it should no longer own, and claims what it now should;
a claim that finds the node still held by another member fails the attempt, which is retried
after ``rebalance.backoff.ms``, up to ``rebalance.max.retries`` times.

Unlike 0.8, partitions this member keeps are not released and re-claimed: their consumer
threads keep running, so a rebalance does not make them re-read uncommitted data.

State machine. Rebalances run one at a time on the member's own rebalance thread; requests that
arrive meanwhile (watches, session events, stop) fold into one more. Kazoo's connection thread
only records session changes and asks for a rebalance: it must never block.

    idle ---------request--------> rebalancing
    rebalancing: drop void claims (listener first), register (waiting out a stale registration
                 of an earlier session), range-assign, release what moved away (listener
                 first, then the claim, then the owner node), claim the rest all or none,
                 tell the listener what was claimed; then idle
    rebalancing --a partition still owned elsewhere, or a ZooKeeper error--> back off
                 rebalance.backoff.ms and try again, rebalance.max.retries times in all
    rebalancing --retries used up--> release everything; the first rebalance fails start(),
                 a later one reaches the listener as on_rebalance_failed
    any ---------SUSPENDED-------> consumers paused; claims kept (the session may come back)
    suspended ---CONNECTED-------> same session: consumers resumed; rebalance
    any ---------LOST------------> generation bumped: every claim is void at once (the offset
                                   store refuses their commits); the next rebalance stops their
                                   consumers and registers in the new session
    any ---------stop()----------> a start() still waiting fails; the rebalance thread is woken
                                   and joined (bounded, within the caller's deadline); then
                                   release everything, delete the owner nodes, deregister. A
                                   rebalance thread still running keeps its claims, which end
                                   with the session: releasing beside it would race its claims
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, suppress
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.security import ACL

from reliable_kafka.kafka.client.params import ConsumerGroupParams
from reliable_kafka.kafka.client.zk.broker_discovery import topic_partitions
from reliable_kafka.kafka.client.zk.client import RETRIABLE_ZOOKEEPER_ERRORS, ensure_connected, zk_retrying
from reliable_kafka.kafka.client.zk.paths import (
    BROKER_TOPICS_PATH,
    TopicAndPartition,
    consumer_registration_path,
    consumer_registry_dir,
    owner_path,
    topic_path,
)
from reliable_kafka.kafka.client.zk.refusal import refusal_in
from reliable_kafka.kafka.offsets.group_member import RebalanceListener, consumer_thread_id, new_consumer_id
from reliable_kafka.kafka.offsets.zk.ownership import DEFAULT_RELEASE_WAIT_S, Claim, CommitsInFlight
from reliable_kafka.kafka.offsets.zk.range_assignor import consumer_threads_per_topic, range_assign

logger = logging.getLogger(__name__)


class ConsumerRebalanceFailedError(RuntimeError):
    """Every rebalance attempt failed (Kafka 0.8's ConsumerRebalanceFailedException)."""


def registration_json(subscription: Mapping[str, int]) -> bytes:
    return json.dumps(
        {
            "version": 1,
            "subscription": dict(subscription),
            "pattern": "static",
            "timestamp": str(int(time.time() * 1000)),
        },
        separators=(",", ":"),
    ).encode("utf-8")


def subscription_for(registration: bytes, topics: list[str]) -> dict[str, int]:
    """Which of ``topics`` a member registration subscribes, with its thread counts.

    Wildcard members (``white_list``/``black_list``) subscribe a regex; what it matches among
    our topics is what Kafka's WildcardTopicCount would give them.
    """
    try:
        info = json.loads(registration.decode("utf-8"))
        pattern = info.get("pattern", "static")
        subscription = {str(k): int(v) for k, v in (info.get("subscription") or {}).items()}
    except (UnicodeDecodeError, ValueError, AttributeError, TypeError):
        logger.warning("unreadable consumer registration %r; member ignored", registration[:200])
        return {}
    if pattern == "static":
        return {t: n for t, n in subscription.items() if t in topics}
    result: dict[str, int] = {}
    for regex, count in subscription.items():
        try:
            compiled = re.compile(regex.replace(",", "|"))
        except re.error:
            logger.warning("unusable %s pattern %r in a consumer registration", pattern, regex)
            continue
        for topic in topics:
            matches = compiled.fullmatch(topic) is not None
            if matches == (pattern == "white_list"):
                result[topic] = count
    return result


class ZookeeperConsumerGroup:
    """This process's membership in ``group.group_id``, subscribed to ``topics`` (topic -> threads).

    :meth:`start` registers and blocks until the first rebalance is done. Ownership changes go
    to ``listener`` on the rebalance thread. The kazoo client belongs to the caller.
    """

    def __init__(
        self,
        zk: KazooClient,
        group: ConsumerGroupParams,
        topics: Mapping[str, int],
        listener: RebalanceListener,
        *,
        acl: list[ACL] | None = None,
        session_timeout_ms: int = 6000,
        release_wait_s: float = DEFAULT_RELEASE_WAIT_S,
    ) -> None:
        if not topics:
            raise ValueError("a consumer group member needs at least one topic")
        for topic, threads in topics.items():
            if threads < 1:
                raise ValueError(f"topic {topic!r} needs at least one consumer thread, got {threads}")
        self._zk = zk
        self._group = group
        self._topics = dict(topics)
        self._listener = listener
        self._acl = acl
        self._session_timeout_s = session_timeout_ms / 1000.0
        self.consumer_id = new_consumer_id(group.group_id, group.consumer_id)
        self._my_threads = {
            consumer_thread_id(self.consumer_id, i) for count in topics.values() for i in range(count)
        }

        self._ownership_lock = threading.RLock()
        self.commits_in_flight = CommitsInFlight(self._ownership_lock, release_wait_s)
        self._claims: dict[TopicAndPartition, Claim] = {}
        self._undeleted: dict[TopicAndPartition, Claim] = {}  # released, owner node still there
        self._generation = 0  # bumped when the session is lost: every claim of it is void
        self._connected = threading.Event()  # cleared while the session is SUSPENDED or LOST
        self._connected.set()
        self._suspended_in: int | None = None  # the generation a suspension began in

        self._wake = threading.Condition()
        self._rebalance_requested = False
        self._registered_session: int | None = None
        self._stopping = threading.Event()
        self._first_rebalance = threading.Event()
        self._first_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._watches_installed = False
        self.rebalance_count = 0

    # -- ownership view (for the offset store) ------------------------------------------------

    @property
    def ownership_lock(self) -> AbstractContextManager[bool]:
        return self._ownership_lock

    @property
    def generation(self) -> int:
        return self._generation

    def claim_of(self, tp: TopicAndPartition) -> Claim | None:
        return self._claims.get(tp)

    def owned_partitions(self) -> dict[TopicAndPartition, str]:
        with self._ownership_lock:
            return {tp: claim.thread_id for tp, claim in self._claims.items()}

    def wait_connected(self, timeout_s: float) -> bool:
        """True once connected to ZooKeeper (at once when not suspended), False after ``timeout_s``."""
        return self._connected.wait(timeout_s)

    @property
    def suspended(self) -> bool:
        """Disconnected, and the session may still come back with every claim in it."""
        return self._suspended_in == self._generation and not self._connected.is_set()

    # -- life cycle ---------------------------------------------------------------------------

    def start(self, timeout_s: float | None = None) -> None:
        """Register, watch, and wait for the first rebalance (ConsumerRebalanceFailedError if it fails)."""
        if self._thread is not None:
            raise RuntimeError("consumer group member already started")
        self._zk.add_listener(self._on_state_change)
        self._thread = threading.Thread(target=self._run, name=f"rebalance-{self.consumer_id}", daemon=True)
        self._thread.start()
        self._install_watches()
        if timeout_s is None:
            timeout_s = self._group.rebalance_max_retries * (self._group.rebalance_backoff_ms / 1000.0 + 15.0)
        if not self._first_rebalance.wait(timeout_s):
            self.stop()
            raise ConsumerRebalanceFailedError(
                f"{self.consumer_id}: no rebalance completed within {timeout_s:.0f} s"
            )
        if self._first_error is not None:
            error = self._first_error
            self.stop()
            raise error

    def stop(self, timeout_s: float | None = None) -> None:
        """Give up every partition (listener first), then leave the group. Idempotent.

        ``timeout_s`` (a caller's deadline) shortens the wait for the rebalance thread, which
        is otherwise bounded by the session timeout and the rebalance backoff.
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        if not self._first_rebalance.is_set():  # a start() still waiting returns, failed
            self._first_error = ConsumerRebalanceFailedError(f"{self.consumer_id}: stopped while starting")
            self._first_rebalance.set()
        self._request_rebalance()
        if self._thread is not None and self._thread is not threading.current_thread():
            # A rebalance blocked on an unreachable ZooKeeper must not hold the stop for ever.
            bound_s = self._session_timeout_s + self._group.rebalance_backoff_ms / 1000.0 + 10.0
            self._thread.join(bound_s if timeout_s is None else min(bound_s, timeout_s))
            if self._thread.is_alive():
                # Releasing now would race its claims: they go with the session (ephemeral nodes).
                logger.warning(
                    "%s: the rebalance thread did not stop in time; its claims end with the session",
                    self.consumer_id,
                )
                self._zk.remove_listener(self._on_state_change)
                return
        self._zk.remove_listener(self._on_state_change)
        with self._ownership_lock:
            owned = list(self._claims)
        try:
            self._release(owned)
            self._delete_owner_nodes()
            # Owners first, then the registration: members that rebalance on our departure
            # find the partitions already free and need no retry.
            self._deregister()
        except (KazooException, *RETRIABLE_ZOOKEEPER_ERRORS) as exc:
            # The session ends with the client anyway, and the nodes are ephemeral.
            logger.warning(
                "%s: leaving group %s cleanly failed: %r", self.consumer_id, self._group.group_id, exc
            )

    # -- events -------------------------------------------------------------------------------

    def _on_state_change(self, state: str) -> None:
        # Runs on kazoo's connection thread before any call of the new session: must not block.
        if state == KazooState.SUSPENDED:
            self._connected.clear()
            self._suspended_in = self._generation
            logger.warning("%s: ZooKeeper connection lost; consumers paused", self.consumer_id)
            self._listener.on_session_suspended()
        elif state == KazooState.LOST:
            self._connected.clear()
            self._generation += 1
            logger.warning("%s: ZooKeeper session lost; all partitions are void", self.consumer_id)
        elif state == KazooState.CONNECTED:
            resumed = self._suspended_in == self._generation
            self._suspended_in = None
            self._connected.set()
            if resumed:
                logger.info("%s: ZooKeeper connection back; consumers resumed", self.consumer_id)
                self._listener.on_session_resumed()
        if state in (KazooState.LOST, KazooState.CONNECTED):
            self._request_rebalance()

    def _request_rebalance(self) -> None:
        with self._wake:
            self._rebalance_requested = True
            self._wake.notify_all()

    def _install_watches(self) -> None:
        def on_members(_children: list[str]) -> bool:
            self._request_rebalance()
            return not self._stopping.is_set()

        def on_topic(_data: bytes | None, _stat: Any) -> bool:
            self._request_rebalance()
            return not self._stopping.is_set()

        ids_dir = consumer_registry_dir(self._group.group_id)
        self._retry(lambda: self._zk.ensure_path(ids_dir, acl=self._acl))
        self._retry(lambda: self._zk.ensure_path(BROKER_TOPICS_PATH))
        ChildrenWatch(self._zk, ids_dir, on_members)
        for topic in self._topics:
            DataWatch(self._zk, topic_path(topic), on_topic)

    def _retry(self, call: Any) -> Any:
        return zk_retrying(30.0, stop_event=self._stopping)(call)

    # -- rebalance thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._rebalance_requested and not self._stopping.is_set():
                    self._wake.wait()
                self._rebalance_requested = False
            if self._stopping.is_set():
                return
            try:
                self._synced_rebalance()
            except BaseException as exc:
                self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        logger.error("%s: rebalance failed: %r", self.consumer_id, exc)
        with self._ownership_lock:
            owned = list(self._claims)
        try:
            self._release(owned)
        except (KazooException, *RETRIABLE_ZOOKEEPER_ERRORS) as release_error:
            logger.warning("%s: releasing after a failed rebalance: %r", self.consumer_id, release_error)
        if not self._first_rebalance.is_set():
            self._first_error = exc
            self._first_rebalance.set()
        else:
            self._listener.on_rebalance_failed(exc)

    def _synced_rebalance(self) -> None:
        retries = self._group.rebalance_max_retries
        last_error: BaseException | None = None
        for attempt in range(retries):
            if self._stopping.is_set():
                return
            self._drop_void_claims()
            try:
                if self._rebalance_once():
                    self.rebalance_count += 1
                    self._first_rebalance.set()
                    return
                last_error = None
            except (KazooException, *RETRIABLE_ZOOKEEPER_ERRORS) as exc:
                if refusal_in(exc) is not None:
                    raise  # refused credentials or ACLs: no attempt fares better
                last_error = exc
                logger.info("%s: rebalance attempt %d: %r", self.consumer_id, attempt + 1, exc)
            if attempt + 1 < retries and self._sleep_backoff():
                return
        raise ConsumerRebalanceFailedError(
            f"{self.consumer_id} can't rebalance after {retries} retries"
            + (f" (last error: {last_error!r})" if last_error else "")
        ) from last_error

    def _sleep_backoff(self) -> bool:
        """Sleep rebalance.backoff.ms; True if the member is stopping meanwhile."""
        return self._stopping.wait(self._group.rebalance_backoff_ms / 1000.0)

    def _drop_void_claims(self) -> None:
        """Claims of a lost session: stop their consumers; their nodes are already gone."""
        with self._ownership_lock:
            void = [tp for tp, c in self._claims.items() if c.generation != self._generation]
            for tp in void:
                del self._claims[tp]
        if void:
            self._listener.on_partitions_revoked(sorted(void))

    def _session_id(self) -> int:
        ensure_connected(self._zk)
        client_id = self._zk.client_id
        if client_id is None:
            raise KazooException("no ZooKeeper session")
        return int(client_id[0])

    def _register(self, session_id: int) -> bool:
        """Create our ephemeral registration, waiting out a stale one of an earlier session;
        False if the member stops meanwhile."""
        path = consumer_registration_path(self._group.group_id, self.consumer_id)
        data = registration_json(self._topics)
        # A node of our own expired session lingers until ZooKeeper notices the expiry.
        deadline = time.monotonic() + 2 * self._session_timeout_s + 5.0
        while True:
            try:
                self._zk.create(path, data, acl=self._acl, ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == session_id:
                    self._zk.set(path, data)
                    break
                if time.monotonic() > deadline:
                    raise ConsumerRebalanceFailedError(
                        f"{path} is held by another live session: is consumer.id shared by two consumers?"
                    ) from None
                if self._stopping.wait(0.5):  # a stop must not wait out the stale session
                    return False
        self._registered_session = session_id
        logger.info("%s: registered in group %s", self.consumer_id, self._group.group_id)
        return True

    def _deregister(self) -> None:
        if self._registered_session is None or not self._zk.connected:
            return
        path = consumer_registration_path(self._group.group_id, self.consumer_id)
        try:
            _, stat = self._zk.get(path)
            if stat.ephemeralOwner == self._registered_session:
                self._zk.delete(path, version=stat.version)
        except NoNodeError:
            pass
        self._registered_session = None

    def _members(self) -> dict[str, dict[str, int]]:
        ids_dir = consumer_registry_dir(self._group.group_id)
        topics = list(self._topics)
        members: dict[str, dict[str, int]] = {}
        for member in self._zk.get_children(ids_dir):
            try:
                data, _ = self._zk.get(f"{ids_dir}/{member}")
            except NoNodeError:
                continue  # left between the listing and the read
            members[member] = subscription_for(data, topics)
        return members

    def _rebalance_once(self) -> bool:
        session_id = self._session_id()
        # Owner nodes an earlier release failed to delete; those of a dead session are gone.
        self._undeleted = {tp: c for tp, c in self._undeleted.items() if c.session_id == session_id}
        self._delete_owner_nodes()
        if self._registered_session != session_id and not self._register(session_id):
            return False
        members = self._members()
        if self.consumer_id not in members:
            # Our registration vanished under a live session (deleted by hand?): register again.
            self._registered_session = None
            if not self._register(session_id):
                return False
            members = self._members()
        partitions = topic_partitions(self._zk, self._topics)
        assignment = range_assign(consumer_threads_per_topic(members), partitions, list(self._topics))
        mine = {tp: thread for tp, thread in assignment.items() if thread in self._my_threads}

        with self._ownership_lock:
            current = dict(self._claims)
        to_release = [
            tp
            for tp, claim in current.items()
            if mine.get(tp) != claim.thread_id or claim.session_id != session_id
        ]
        self._release(to_release)
        to_claim = {tp: thread for tp, thread in mine.items() if tp not in current or tp in to_release}
        claimed = self._claim(to_claim, session_id)
        if claimed is None:
            return False
        logger.info(
            "%s: rebalanced group %s; owns %s",
            self.consumer_id,
            self._group.group_id,
            ", ".join(str(tp) for tp in sorted(mine)) or "nothing",
        )
        if claimed:
            try:
                self._listener.on_partitions_assigned({tp: c.thread_id for tp, c in claimed.items()})
            except BaseException:
                # Give them back, so that the next attempt claims and starts them afresh
                # instead of believing they are already being consumed.
                self._release(sorted(claimed))
                raise
        return True

    def _claim(
        self, wanted: Mapping[TopicAndPartition, str], session_id: int
    ) -> dict[TopicAndPartition, Claim] | None:
        """Create owner nodes for ``wanted``; all of them, or none (None) when one is still held."""
        generation = self._generation
        claimed: dict[TopicAndPartition, Claim] = {}
        for tp in sorted(wanted):
            thread_id = wanted[tp]
            path = owner_path(self._group.group_id, tp)
            try:
                self._zk.create(path, thread_id.encode("utf-8"), acl=self._acl, ephemeral=True, makepath=True)
                claimed[tp] = Claim(thread_id, 0, session_id, generation)
                continue
            except NodeExistsError:
                pass
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                data, stat = None, None
            if stat is not None and stat.ephemeralOwner == session_id:
                self._undeleted.pop(tp, None)
                # Ours already (an earlier attempt of this session); make the value current.
                if data != thread_id.encode("utf-8"):
                    stat = self._zk.set(path, thread_id.encode("utf-8"), version=stat.version)
                claimed[tp] = Claim(thread_id, stat.version, session_id, generation)
                continue
            logger.info(
                "%s: %s is still owned by %s; waiting for its release",
                self.consumer_id,
                tp,
                data.decode("utf-8", "replace") if data else "?",
            )
            self._undeleted.update(claimed)
            self._delete_owner_nodes()
            return None
        with self._ownership_lock:
            if generation != self._generation:
                # The session died while claiming: these nodes are gone again.
                return None
            self._claims.update(claimed)
        return claimed

    def _release(self, partitions: list[TopicAndPartition]) -> None:
        """Stop the consumers, withdraw the claims, delete the owner nodes, in that order.

        The partitions stay ours while their consumers stop, so what those consumers stored
        can still be committed (0.8 committed before releasing too). Withdrawing takes the
        ownership lock for a moment only; the owner nodes are deleted after the commits already
        out for these partitions (at most ``release_wait_s``), so none lands after them.
        """
        with self._ownership_lock:
            held = {tp: self._claims[tp] for tp in partitions if tp in self._claims}
        if not held:
            return
        self._listener.on_partitions_revoked(sorted(held))
        with self._ownership_lock:
            for tp in held:
                self._claims.pop(tp, None)
        # No commit starts for these any more; one already out may still land, so the owner nodes
        # go only after it (bounded: its store asks for the claim again before another attempt).
        if not self.commits_in_flight.wait_for(held):
            logger.warning(
                "%s: a commit of %s was still out after %.0f s; releasing anyway",
                self.consumer_id,
                ", ".join(str(tp) for tp in sorted(held)),
                self.commits_in_flight.bound_s,
            )
        self._undeleted.update(held)
        self._delete_owner_nodes()
        logger.info("%s: released %s", self.consumer_id, ", ".join(str(tp) for tp in sorted(held)))

    def _delete_owner_nodes(self) -> None:
        """Delete the owner nodes of released claims; what fails stays listed for the next try,
        since a node left behind would block the member that should own the partition."""
        if self._undeleted:
            ensure_connected(self._zk)
        for tp, claim in list(self._undeleted.items()):
            path = owner_path(self._group.group_id, tp)
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                self._undeleted.pop(tp, None)
                continue
            # Only our own node: after a session loss another member may own it already.
            if stat.ephemeralOwner == claim.session_id and data == claim.thread_id.encode("utf-8"):
                with suppress(NoNodeError):
                    self._zk.delete(path, version=stat.version)
            self._undeleted.pop(tp, None)
