"""ZooKeeper refusing the group's client (issue 41, "Bad input"): refused credentials, SASL the
servers require, an ACL that does not let this user write the group's nodes. Each ends the stream
with one error naming the user and what to set or grant, instead of failed starts for ever."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.exceptions import AuthFailedError, ConnectionLoss, NoAuthError, SessionClosedRequireSaslError
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from reliable_kafka.kafka import KafkaReceiver
from reliable_kafka.kafka.client.zk.paths import consumer_registry_dir, group_dir
from reliable_kafka.kafka.client.zk.refusal import refusal_in, zookeeper_refusal
from reliable_kafka.local import LocalCluster
from reliable_kafka.receiver.fatal_error import FatalReceiverError
from reliable_kafka.storage import StorageLevel
from reliable_kafka.util.kazoo_log import kazoo_client, stop_kazoo
from tests.cluster_backends import unique_name
from tests.support import wait_until
from tests.support.scheduler_fakes import FakeStream, FakeStreamingContext, quick_settings


class RebalanceFailed(RuntimeError):
    pass


def _wrapped(error: BaseException) -> BaseException:
    """As the group raises it: its last attempt's error as the cause."""
    try:
        raise RebalanceFailed("can't rebalance after 4 retries") from error
    except RebalanceFailed as wrapped:
        return wrapped


def test_a_refusal_is_found_in_the_chain_and_an_outage_is_not() -> None:
    assert isinstance(refusal_in(_wrapped(NoAuthError())), NoAuthError)
    assert refusal_in(_wrapped(ConnectionLoss())) is None
    assert zookeeper_refusal(_wrapped(ConnectionLoss()), "zk:2181", "digest user 'bob'") is None


def test_each_refusal_names_the_user_and_what_to_set_or_grant() -> None:
    who = "digest user 'bob'"
    credentials = zookeeper_refusal(AuthFailedError(), "zk:2181", who, "orders")
    sasl = zookeeper_refusal(SessionClosedRequireSaslError(), "zk:2181", "an unauthenticated client")
    acl = zookeeper_refusal(_wrapped(NoAuthError()), "zk:2181", who, "orders")

    assert credentials is not None and credentials.startswith(
        "ZooKeeper at zk:2181 refused the credentials of digest user 'bob' (AuthFailedError)"
    )
    assert sasl is not None and "requires SASL authentication (enforce.auth.enabled)" in sasl
    assert acl == (
        "ZooKeeper at zk:2181 refused digest user 'bob' access to the group's nodes under /consumers/orders "
        "(NoAuthError: their ACL does not allow this user): connect as the user that made them (the "
        "ZooKeeper user in kafkaParams), or grant that user access (setAcl on /consumers/orders and its "
        "children)"
    )


@pytest.fixture
def group_of_another_user(local_cluster: LocalCluster) -> Iterator[tuple[str, str]]:
    """A group whose nodes another digest user made owner-only (as ``zookeeper.set.acl`` makes
    them), and a topic that exists: the refusal is the stream's only problem."""
    if not local_cluster.has_zookeeper:
        pytest.skip("a ZooKeeper group needs ZooKeeper")
    group, topic = unique_name("owned"), unique_name("owned-topic")
    local_cluster.create_topic(topic)
    owner = kazoo_client(
        local_cluster.zookeeper_connect, timeout=10.0, auth_data=[("digest", "owner:owner-pw")]
    )
    owner.start(timeout=10.0)
    try:
        owner.ensure_path(group_dir(group))
        owner.create(consumer_registry_dir(group), acl=[*CREATOR_ALL_ACL, *READ_ACL_UNSAFE])
        yield group, topic
        owner.delete(group_dir(group), recursive=True)
    finally:
        stop_kazoo(owner)


def test_a_group_another_user_owns_ends_the_stream_naming_the_user_and_nodes(
    local_cluster: LocalCluster, group_of_another_user: tuple[str, str]
) -> None:
    group, topic = group_of_another_user
    kafka_params = {
        "zookeeper.auth": "intruder:intruder-pw",
        "bootstrap.servers": local_cluster.bootstrap_servers,
    }

    def make() -> KafkaReceiver:
        return KafkaReceiver(
            local_cluster.zookeeper_connect, group, {topic: 1}, kafka_params, StorageLevel.MEMORY_ONLY
        )

    ssc = FakeStreamingContext([FakeStream(0, make)], quick_settings())
    tracker = ssc.receiver_tracker()
    tracker.start()
    try:
        wait_until(lambda: ssc.errors, what="the refusal to reach awaitTermination")
        wait_until(tracker.all_receivers_stopped, what="the receiver to stop for good")
    finally:
        tracker.stop(graceful=False)

    (error,) = ssc.errors
    assert isinstance(error, FatalReceiverError)
    assert (
        f"refused digest user 'intruder' access to the group's nodes under /consumers/{group} (NoAuthError"
        in str(error)
    )
    assert "intruder-pw" not in str(error)
    assert tracker.launch_count(0) == 1
