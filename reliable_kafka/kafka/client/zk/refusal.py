"""ZooKeeper refusing this client: one error naming who was refused and what to set or grant.

kazoo raises a refusal like any other failed call, and the group's retries (and the receiver's
restarts) would take it for an outage for ever. Three refusals, none of which a retry mends:

- ``AuthFailedError``: the SASL (or digest) credentials were refused; kazoo's ``start()`` still
  reports CONNECTED, and every call of the session fails so.
- ``SessionClosedRequireSaslError``: the servers require SASL (``enforce.auth.enabled``) and this
  client did not authenticate.
- ``NoAuthError``: the node's ACL does not let this client's identity write (or read) it: the
  group's nodes were made by another user (``zookeeper.set.acl``), or the brokers' ACLs.

:func:`zookeeper_refusal` finds one in an exception's chain (the group wraps what it retried) and
says what to set or grant; the caller decides what ends (a receiver's stream: its connector).
"""

from __future__ import annotations

from kazoo.exceptions import AuthFailedError, NoAuthError, SessionClosedRequireSaslError

from reliable_kafka.kafka.client.zk.paths import group_dir

_REFUSALS = (AuthFailedError, SessionClosedRequireSaslError, NoAuthError)
# The chain is short (a retry's last error, wrapped once or twice); a cycle must not hang us.
_MAX_CHAIN = 10


def refusal_in(exc: BaseException) -> BaseException | None:
    """The ZooKeeper refusal in ``exc``'s chain (its causes and contexts), if any."""
    seen: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if seen is None:
            return None
        if isinstance(seen, _REFUSALS):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def zookeeper_refusal(
    exc: BaseException, connect: str, identity: str, group: str | None = None
) -> str | None:
    """What to say when ``exc`` is (or wraps) a refusal of ZooKeeper at ``connect`` to
    ``identity`` (who the client is: ``digest user 'alice'``, never a password), for the group's
    nodes (``/consumers/<group>``) when ``group`` is given; None for any other error."""
    refusal = refusal_in(exc)
    if refusal is None:
        return None
    where = f"ZooKeeper at {connect}"
    if isinstance(refusal, AuthFailedError):
        return (
            f"{where} refused the credentials of {identity} (AuthFailedError): set the right ZooKeeper "
            "user and password in kafkaParams (zookeeper.sasl.username and zookeeper.sasl.password), or "
            "add the user to the servers' JAAS Server section"
        )
    if isinstance(refusal, SessionClosedRequireSaslError):
        return (
            f"{where} requires SASL authentication (enforce.auth.enabled) and {identity} did not "
            "authenticate with SASL (SessionClosedRequireSaslError): set zookeeper.sasl.username and "
            "zookeeper.sasl.password in kafkaParams"
        )
    nodes = f"the group's nodes under {group_dir(group)}" if group else "a node"
    return (
        f"{where} refused {identity} access to {nodes} (NoAuthError: their ACL does not allow this "
        "user): connect as the user that made them (the ZooKeeper user in kafkaParams), or grant "
        f"that user access (setAcl on {group_dir(group) if group else 'the node'} and its children)"
    )
