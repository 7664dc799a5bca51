"""The broker-side (Kafka-coordinated) group of a group id: state and members, via one DescribeGroups request.

kafka-python 3.0.12's ``KafkaAdminClient.describe_groups`` fails against tansu on the ``authorized_operations``
field, so, like :mod:`zkconsumer.offsets.kafka`, we send FindCoordinator and DescribeGroups ourselves through the admin
client's connection manager, at DescribeGroups **v0** (no ACL field; every broker decodes it).

Broker group states (seeds 000/001/004): ``Empty``, ``PreparingRebalance``, ``CompletingRebalance`` (older brokers:
``AwaitingSync``), ``Stable``, ``Dead``.  tansu reports ``Unknown`` while a join is in progress.  A group is
*active* when it has members and is not ``Empty``/``Dead`` (split brain with a ZooKeeper group of the same id).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import List, Optional

import kafka.errors as Errors
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import CoordinatorType, FindCoordinatorRequest

from zkconsumer.errors import ClusterUnavailableError
from zkconsumer.layout import validate_group

__all__ = ["BrokerGroup", "describe_broker_group", "INACTIVE_STATES"]

log = logging.getLogger(__name__)

INACTIVE_STATES = ("Empty", "Dead")


@dataclasses.dataclass
class BrokerGroup:
    group: str
    state: str
    protocol_type: str
    members: List[dict]
    error: Optional[str] = None

    @property
    def active(self) -> bool:
        """Members present and not Empty/Dead: a broker-coordinated group is consuming under this id."""
        return bool(self.members) and self.state not in INACTIVE_STATES

    @property
    def stable_with_members(self) -> bool:
        return self.state == "Stable" and bool(self.members)

    def as_dict(self) -> dict:
        return {"group": self.group, "state": self.state, "protocol_type": self.protocol_type,
                "members": self.members, "active": self.active, "error": self.error}


def describe_broker_group(bootstrap_servers, group: str, timeout_ms: int = 5000, security=None) -> BrokerGroup:
    """FindCoordinator + DescribeGroups v0 for *group*.

    Raises :class:`ClusterUnavailableError` (naming the servers and *security*, a
    :class:`~zkconsumer.kafka_security.KafkaSecurity`) when the broker cannot be reached or does not answer within
    *timeout_ms*.
    """
    from zkconsumer.kafka_connect_errors import connect_error
    from zkconsumer.kafka_security import PLAINTEXT
    from zkconsumer.offsets.kafka import _AdminClient
    security = security or PLAINTEXT
    group = validate_group(group)
    servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
    try:
        admin = _AdminClient(bootstrap_servers=bootstrap_servers, client_id="zkmigrate-describe",
                             request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms,
                             reconnect_backoff_ms=50, reconnect_backoff_max_ms=500, **security.client_kwargs())
    except Exception as e:
        raise connect_error("reach Kafka to describe the broker-side group %s" % group, servers, security, e) from e
    try:
        async def go():
            mgr = admin._manager
            resp = await mgr.send(FindCoordinatorRequest(key=group, key_type=0, max_version=3))
            node = mgr.cluster.add_coordinator(resp, CoordinatorType.GROUP, group, synthesize_node_id=True)
            return await mgr.send(DescribeGroupsRequest[0](groups=[group]), node_id=node)
        try:
            resp = admin._manager.run(go)
        except (Errors.KafkaError, OSError) as e:
            raise ClusterUnavailableError("DescribeGroups for group %s at %s failed: %r" % (group, servers, e)) from e
    finally:
        try:
            admin.close()
        except Exception:
            pass
    for g in resp.groups:
        if g.group_id != group:
            continue
        err = Errors.for_code(g.error_code)
        members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host}
                   for m in g.members]
        return BrokerGroup(group, g.group_state or "Unknown", g.protocol_type or "", members,
                           None if err is Errors.NoError else err.__name__)
    return BrokerGroup(group, "Dead", "", [], "group missing from the DescribeGroups answer")
