"""The broker-side (Kafka-coordinated) group of a group id: state and members, via DescribeGroups and, for a
consumer-protocol group (KIP-848), ConsumerGroupDescribe.

kafka-python 3.0.12's ``KafkaAdminClient.describe_groups`` fails against tansu on the ``authorized_operations``
field, so, like :mod:`zkconsumer.offsets.kafka`, we send FindCoordinator and DescribeGroups ourselves through the admin
client's connection manager, at DescribeGroups **v0** (no ACL field; every broker decodes it).

Classic group states: ``Empty``, ``PreparingRebalance``, ``CompletingRebalance`` (older brokers: ``AwaitingSync``),
``Stable``, ``Dead``.  tansu reports ``Unknown`` while a join is in progress.

A group using the consumer group protocol of KIP-848 (``group.protocol=consumer``: Kafka 4.x by default, Kafka
3.7-3.9 KRaft when ``group.coordinator.rebalance.protocols`` includes ``consumer``) is not a classic group: its
coordinator answers DescribeGroups v0-v5 with ``Dead``, no error and no members, exactly as for a group that does
not exist (v6 says ``GROUP_ID_NOT_FOUND``, "Group G is not a classic group."; see Kafka's
``GroupMetadataManager.describeGroups``). So when the classic answer is that, and the coordinator supports
ConsumerGroupDescribe (API key 69, in its ApiVersions), we ask that too
(:mod:`zkconsumer.kafka.protocol.consumer_group_describe`). Its states are ``Empty``, ``Assigning``, ``Reconciling``,
``Stable``, ``Dead``; ``GROUP_ID_NOT_FOUND`` there means no consumer-protocol group of that id either.

A group is *active* when it has members and is not ``Empty``/``Dead`` (split brain with a ZooKeeper group of the
same id), whatever its protocol.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import List, Optional

import kafka.errors as Errors
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from zkconsumer.errors import BrokerGroupDescribeError, ClusterUnavailableError
from zkconsumer.core.layout import validate_group
from zkconsumer.kafka.protocol.consumer_group_describe import ConsumerGroupDescribeRequest

__all__ = ["BrokerGroup", "describe_broker_group", "INACTIVE_STATES", "CLASSIC", "CONSUMER"]

log = logging.getLogger(__name__)

INACTIVE_STATES = ("Empty", "Dead")
# group types, as Kafka's ListGroups v5 names them
CLASSIC, CONSUMER = "classic", "consumer"
# ConsumerGroupDescribe v1 MemberType (-1: not said)
MEMBER_TYPES = {0: CLASSIC, 1: CONSUMER}
# ConsumerGroupDescribe errors that mean "ask again" (the guard retries on BrokerGroup.error), as for DescribeGroups
RETRIABLE = (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError, Errors.CoordinatorLoadInProgressError)


@dataclasses.dataclass
class BrokerGroup:
    group: str
    state: str
    protocol_type: str
    members: List[dict]
    error: Optional[str] = None
    # "classic", "consumer" (KIP-848), or None: no such group on the broker
    group_type: Optional[str] = None

    @property
    def active(self) -> bool:
        """Members present and not Empty/Dead: a broker-coordinated group is consuming under this id."""
        return bool(self.members) and self.state not in INACTIVE_STATES

    @property
    def stable_with_members(self) -> bool:
        return self.state == "Stable" and bool(self.members)

    def describe_protocol(self) -> str:
        """How the group is coordinated, for messages."""
        if self.group_type == CONSUMER:
            return "consumer group protocol, KIP-848"
        return "classic group protocol" if self.group_type == CLASSIC else "no such group"

    def as_dict(self) -> dict:
        return {"group": self.group, "state": self.state, "protocol_type": self.protocol_type,
                "group_type": self.group_type, "members": self.members, "active": self.active, "error": self.error}


def describe_broker_group(bootstrap_servers, group: str, timeout_ms: int = 5000, security=None) -> BrokerGroup:
    """FindCoordinator + DescribeGroups v0 for *group*, and ConsumerGroupDescribe when the classic answer is the one
    a consumer-protocol group gets and the coordinator has API 69.

    Raises :class:`ClusterUnavailableError` (naming the servers and *security*, a
    :class:`~zkconsumer.core.kafka_security.KafkaSecurity`) when the broker cannot be reached or does not answer within
    *timeout_ms*, and :class:`BrokerGroupDescribeError` (naming the group) when ConsumerGroupDescribe fails for the
    group with anything but "not found" or a coordinator error worth asking again for.
    """
    from zkconsumer.kafka.connect_errors import connect_error
    from zkconsumer.core.kafka_security import PLAINTEXT
    from zkconsumer.kafka import internals
    security = security or PLAINTEXT
    group = validate_group(group)
    servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
    try:
        admin = internals.AdminClient(bootstrap_servers=bootstrap_servers, client_id="zkmigrate-describe",
                             request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms,
                             reconnect_backoff_ms=50, reconnect_backoff_max_ms=500, **security.client_kwargs())
    except Exception as e:
        raise connect_error("reach Kafka to describe the broker-side group %s" % group, servers, security, e) from e
    try:
        async def go():
            resp = await internals.send(admin, FindCoordinatorRequest(key=group, key_type=0, max_version=3))
            node = internals.add_group_coordinator(admin, resp, group)
            classic = _classic(group, await internals.send(admin, DescribeGroupsRequest[0](groups=[group]),
                                                           node_id=node))
            if classic.state != "Dead" or classic.members or classic.error not in (None, "GroupIdNotFoundError"):
                return classic, None
            # sent at the highest version both know; a broker without API 69 fails it before sending
            try:
                req = ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
                return classic, await internals.send(admin, req, node_id=node)
            except Errors.IncompatibleBrokerVersion:
                return classic, None
        try:
            classic, resp = internals.run(admin, go)
        except (Errors.KafkaError, OSError) as e:
            raise ClusterUnavailableError("DescribeGroups for group %s at %s failed: %r" % (group, servers, e)) from e
    finally:
        try:
            admin.close()
        except Exception:
            pass
    return classic if resp is None else _consumer_protocol(group, resp, classic)


def _classic(group: str, resp) -> BrokerGroup:
    for g in resp.groups:
        if g.group_id != group:
            continue
        err = Errors.for_code(g.error_code)
        members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host}
                   for m in g.members]
        state = g.group_state or "Unknown"
        return BrokerGroup(group, state, g.protocol_type or "", members,
                           None if err is Errors.NoError else err.__name__,
                           None if state == "Dead" and not members else CLASSIC)
    return BrokerGroup(group, "Dead", "", [], "group missing from the DescribeGroups answer")


def _assignment(a) -> dict:
    return {tp.topic_name: sorted(tp.partitions) for tp in (a.topic_partitions if a is not None else [])}


def _consumer_protocol(group: str, resp, classic: BrokerGroup) -> BrokerGroup:
    """The ConsumerGroupDescribe answer as a BrokerGroup; *classic* when there is no consumer-protocol group."""
    for g in resp.groups:
        if g.group_id != group:
            continue
        err = Errors.for_code(g.error_code)
        # no such group, or a classic one; or a coordinator without the consumer protocol (Kafka 3.9 in ZooKeeper
        # mode lists API 69 but answers UNSUPPORTED_VERSION for every group): the classic answer stands
        if err in (Errors.GroupIdNotFoundError, Errors.UnsupportedVersionError):
            return classic
        if err in RETRIABLE:
            return dataclasses.replace(classic, error=err.__name__)
        if err is not Errors.NoError:
            raise BrokerGroupDescribeError(
                "the broker refused to describe consumer-protocol group %s: %s%s" % (
                    group, err.__name__, (" (%s)" % g.error_message) if g.error_message else ""))
        members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                    "member_epoch": m.member_epoch, "member_type": MEMBER_TYPES.get(getattr(m, "member_type", -1)),
                    "assignment": _assignment(m.assignment)} for m in g.members]
        return BrokerGroup(group, g.group_state or "Unknown", "consumer", members, None, CONSUMER)
    return classic
