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
import time
from typing import Any, Callable, List, Optional

import kafka.errors as Errors
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from zkconsumer.errors import BrokerGroupDescribeError, ClusterUnavailableError
from zkconsumer.core.layout import validate_group
from zkconsumer.kafka.protocol.consumer_group_describe import ConsumerGroupDescribeRequest

__all__ = ["BrokerGroup", "BrokerGroupClient", "describe_broker_group", "INACTIVE_STATES", "CLASSIC", "CONSUMER"]

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
    def consumers_joined(self) -> bool:
        """Broker-coordinated consumers have joined this group, now or before (Empty since): a classic group keeps
        its protocol type after its members leave (a group only committed to, as the ZooKeeper-coordinated members
        with ``offsets.storage=kafka`` and the tools do, has none), and a KIP-848 group exists only once one
        joined. False when that is not known."""
        if self.group_type == CONSUMER:
            return True
        return bool(self.protocol_type) and self.state != "Dead"

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
    a consumer-protocol group gets and the coordinator has API 69: one :meth:`BrokerGroupClient.describe` on a
    client of its own.

    Raises :class:`ClusterUnavailableError` (naming the servers and *security*, a
    :class:`~zkconsumer.core.kafka_security.KafkaSecurity`) when the broker cannot be reached or does not answer within
    *timeout_ms*, and :class:`BrokerGroupDescribeError` (naming the group) when ConsumerGroupDescribe fails for the
    group with anything but "not found" or a coordinator error worth asking again for.
    """
    client = BrokerGroupClient(bootstrap_servers, security)
    try:
        return client.describe(group, timeout_ms, timeout_ms)
    finally:
        client.close()


class BrokerGroupClient:
    """A connection to a cluster for asking about broker-side groups again and again (the split-brain guard asks
    until it has an answer): the bootstrap (connect, ApiVersions, Metadata) is done once and kept, so a second
    attempt on a loaded machine does not start over from the bootstrap the first one paid for."""

    def __init__(self, bootstrap_servers, security=None) -> None:
        from zkconsumer.core.kafka_security import PLAINTEXT
        self.bootstrap_servers = bootstrap_servers
        self.servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        self.security = security or PLAINTEXT
        self._admin: Any = None

    def describe(self, group: str, bootstrap_timeout_ms: int, request_timeout_ms: int,
                 deadline: Optional[float] = None, clock: Callable[[], float] = time.monotonic) -> BrokerGroup:
        """The broker-side group *group*. The first call bootstraps within *bootstrap_timeout_ms*; each request then
        waits up to *request_timeout_ms* for its answer (a timed-out request loses its connection, not the
        client), and with a *deadline* (on *clock*) no longer than the time left to it: a request not sent by then
        is not sent, and the call fails as for a broker that did not answer. Raises as
        :func:`describe_broker_group` does."""
        from zkconsumer.kafka.connect_errors import connect_error
        from zkconsumer.kafka import internals
        group = validate_group(group)
        if self._admin is None:
            try:
                self._admin = internals.AdminClient(
                    bootstrap_servers=self.bootstrap_servers, client_id="zkmigrate-describe",
                    request_timeout_ms=request_timeout_ms, bootstrap_timeout_ms=bootstrap_timeout_ms,
                    reconnect_backoff_ms=50, reconnect_backoff_max_ms=500, **self.security.client_kwargs())
            except Exception as e:
                raise connect_error("reach Kafka to describe the broker-side group %s" % group, self.servers,
                                    self.security, e) from e
        admin = self._admin

        def send(request, node=None):
            timeout_ms = request_timeout_ms
            if deadline is not None:
                left_ms = int((deadline - clock()) * 1000)
                if left_ms <= 0:
                    raise Errors.KafkaTimeoutError("the time given ran out before %s" % type(request).__name__)
                timeout_ms = min(timeout_ms, left_ms)
            return internals.send(admin, request, node_id=node, request_timeout_ms=timeout_ms)

        async def go():
            resp = await send(FindCoordinatorRequest(key=group, key_type=0, max_version=3))
            node = internals.add_group_coordinator(admin, resp, group)
            classic = _classic(group, await send(DescribeGroupsRequest[0](groups=[group]), node))
            if classic.state != "Dead" or classic.members or classic.error not in (None, "GroupIdNotFoundError"):
                return classic, None
            # sent at the highest version both know; a broker without API 69 fails it before sending
            try:
                req = ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
                return classic, await send(req, node)
            except Errors.IncompatibleBrokerVersion:
                return classic, None
        try:
            classic, resp = internals.run(admin, go)
        except (Errors.KafkaError, OSError) as e:
            raise ClusterUnavailableError("DescribeGroups for group %s at %s failed: %r"
                                          % (group, self.servers, e)) from e
        except BaseException:
            self.close()  # not a broker's failure: the next call starts on a new client
            raise
        return classic if resp is None else _consumer_protocol(group, resp, classic)

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:
                pass


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
