"""Read-mostly operations on ZooKeeper-coordinated groups: list, describe, owners, verify, delete.

Kafka 1.1.1 ``kafka.tools.VerifyConsumerRebalance`` and ``kafka.admin.ConsumerGroupCommand``'s
``ZkConsumerGroupService`` (``kafka-consumer-groups --zookeeper``).
The CLI is :mod:`zkconsumer.cli.groups`; :mod:`migrate` uses the same readers (members, owners, offsets).

Differences from the Scala tools, on purpose:

* ``describe`` lists the topics of ``/owners`` **and** ``/offsets`` **and** the live members' subscriptions (the
  tool used ``/owners`` only, so a group whose owners were released showed nothing);
* ``verify`` compares owner values with live thread ids as strings (the 0.8.2-0.10.0 tool compared a String with
  an Int / a ConsumerThreadId and always failed: KAFKA-2140, KAFKA-3952) and also reports owners of topics nobody
  subscribes to any more;
* ``delete`` refuses (GroupConflictError) while ``/consumers/G/ids`` has children, and deletes in multi-ops
  that cannot remove a registration or owner node created meanwhile (the tool deleted recursively).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from kazoo.exceptions import NoNodeError, NotEmptyError

from ..errors import ClusterUnavailableError, GroupConflictError, ZkConsumerError
from ..core.layout import codecs, paths, validate_group
from ..core.layout.names import is_legal_name
from ..core.subscription.topic_count import consumers_per_topic
from ..consumer.registration import live_members

from ..kafka.connect_errors import connect_error
from ..kafka import internals
from ..core.kafka_security import PLAINTEXT

__all__ = ["GroupNotFoundError", "list_groups", "group_exists", "owners", "zk_offsets",
           "topic_partitions", "log_end_offsets", "log_ranges", "verify", "delete", "VerifyReport",
           "group_topics"]

log = logging.getLogger(__name__)


class GroupNotFoundError(ZkConsumerError):
    """The group has no node under /consumers."""


TP = Tuple[str, int]


def list_groups(zk) -> List[str]:
    """Every child of ``/consumers`` (like ``--list``: includes dead groups that only hold offsets)."""
    try:
        return sorted(zk.get_children(paths.consumers_path()))
    except NoNodeError:
        return []


def group_exists(zk, group) -> bool:
    return zk.exists(paths.group_path(validate_group(group))) is not None


def require_group(zk, group) -> str:
    group = validate_group(group)
    if not group_exists(zk, group):
        raise GroupNotFoundError("the consumer group %r does not exist (no %s in ZooKeeper)"
                                 % (group, paths.group_path(group)))
    return group


def _children(zk, path) -> List[str]:
    try:
        return zk.get_children(path)
    except NoNodeError:
        return []


def _legal_topics(names, where: str) -> List[str]:
    """The *names* that are legal topic names. Others cannot be Kafka topics (pykafka's balanced consumer on
    Python 3 writes owner nodes named ``b'topic'``; a static subscription may name ``x.*``); they are left out with a
    warning naming *where* they were found."""
    legal = []
    for name in names:
        if is_legal_name(name):
            legal.append(name)
        else:
            log.warning("ignoring %r of %s: not a legal topic name, so no Kafka topic", name, where)
    return legal


def _topic_children(zk, path) -> List[str]:
    """The children of *path* that are legal topic names (see :func:`_legal_topics`)."""
    return _legal_topics(_children(zk, path), path)


def owners(zk, group) -> Dict[TP, str]:
    """``{(topic, partition): owner thread id string}`` from ``/consumers/G/owners`` (malformed names skipped)."""
    from ..consumer.ownership import read_owners
    return dict(sorted(read_owners(zk, validate_group(group)).items()))


def zk_offsets(zk, group, strict=False) -> Dict[TP, int]:
    """Every offset stored under ``/consumers/G/offsets`` (all topics)."""
    from ..offsets import ZooKeeperOffsetStore
    group = validate_group(group)
    parts = []
    for topic in _topic_children(zk, paths.group_offsets_path(group)):
        for p in _children(zk, paths.topic_offsets_path(group, topic)):
            if p.isdigit():
                parts.append((topic, int(p)))
    if not parts:
        return {}
    return dict(sorted(ZooKeeperOffsetStore(zk, group, strict=strict).fetch(parts).items()))


def topic_partitions(zk, topic) -> List[int]:
    """Partition ids of ``/brokers/topics/T`` ([] when the topic is unknown)."""
    path = paths.topic_path(topic)
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return []
    return decode_partition_ids(data, path)


def decode_partition_ids(data: bytes, path: str) -> List[int]:
    """Partition ids in the bytes of a ``/brokers/topics/T`` node (read from *path*)."""
    return sorted(codecs.decode_topic_assignment(data, path).partition_ids())


def subscribed_topics(zk, members) -> Dict[str, List[str]]:
    """``{topic: [thread ids]}`` the live members subscribe to (wildcards evaluated against /brokers/topics)."""
    regs = {cid: (r.subscription, r.pattern) for cid, r in members.items() if r is not None}
    if not regs:
        return {}
    return consumers_per_topic(regs, _children(zk, paths.broker_topics_path()))


def group_topics(zk, group, members=None) -> List[str]:
    """Topics of the group: owners + offsets + live subscriptions."""
    members = live_members(zk, group) if members is None else members
    topics = set(_topic_children(zk, paths.group_owners_path(group)))
    topics |= set(_topic_children(zk, paths.group_offsets_path(group)))
    topics |= set(_legal_topics(subscribed_topics(zk, members), "group %s's member subscriptions" % group))
    return sorted(topics)


def _offsets_client(bootstrap_servers, timeout_ms, security, what):
    """A kafka-python KafkaConsumer that only lists offsets (ListOffsets), or the connect error saying it cannot
    reach Kafka for *what*."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError
    try:
        return KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id="zkconsumer-groups",
                             request_timeout_ms=max(timeout_ms, 1000), enable_auto_commit=False,
                             **(security or PLAINTEXT).client_kwargs())
    except (KafkaError, OSError, ValueError) as e:
        raise connect_error("reach Kafka for " + what, bootstrap_servers, security, e) from e


def log_ranges(bootstrap_servers, partitions, timestamp_ms=None, timeout_ms=10000, security=None):
    """``(log start {tp: offset}, log end {tp: offset}, {tp: first offset at/after timestamp_ms or None})``
    through kafka-python (ListOffsets); the third is empty without *timestamp_ms*."""
    partitions = sorted(set(partitions))
    if not partitions:
        return {}, {}, {}
    from kafka import TopicPartition
    from kafka.errors import KafkaError
    consumer = _offsets_client(bootstrap_servers, timeout_ms, security, "the log ranges")
    try:
        tps = [TopicPartition(t, p) for t, p in partitions]
        start = {(tp.topic, tp.partition): o for tp, o in consumer.beginning_offsets(tps).items() if o is not None}
        end = {(tp.topic, tp.partition): o for tp, o in consumer.end_offsets(tps).items() if o is not None}
        at = {}
        if timestamp_ms is not None:
            found = consumer.offsets_for_times({tp: timestamp_ms for tp in tps})
            at = {(tp.topic, tp.partition): (v.offset if v is not None else None) for tp, v in found.items()}
        return start, end, at
    except (KafkaError, OSError) as e:
        raise ClusterUnavailableError("cannot read the log ranges from %s: %s" % (bootstrap_servers, e)) from e
    except KeyError as e:
        # kafka-python's answer when the broker refused one partition (e.g. not authorized)
        raise ClusterUnavailableError("cannot read the log range of %s from %s: the broker did not answer for it "
                                      "(may this Kafka identity Describe the topic?)" % (e, bootstrap_servers)) from e
    finally:
        internals.close_quietly(consumer)


def log_end_offsets(bootstrap_servers, partitions, timeout_ms=10000, security=None) -> Dict[TP, int]:
    """Log-end offsets (high watermark) through kafka-python's ``KafkaConsumer.end_offsets``."""
    partitions = sorted(set(partitions))
    if not partitions:
        return {}
    from kafka import TopicPartition
    from kafka.errors import KafkaError
    consumer = _offsets_client(bootstrap_servers, timeout_ms, security, "log-end offsets")
    try:
        got = consumer.end_offsets([TopicPartition(t, p) for t, p in partitions])
        return {(tp.topic, tp.partition): off for tp, off in got.items() if off is not None}
    except (KafkaError, OSError) as e:
        raise ClusterUnavailableError("cannot read log-end offsets from %s: %s" % (bootstrap_servers, e)) from e
    finally:
        internals.close_quietly(consumer)


@dataclass
class VerifyReport:
    group: str
    ok: bool
    problems: List[str] = field(default_factory=list)
    checked_partitions: int = 0

    def as_dict(self):
        return dict(self.__dict__)


def verify(zk, group) -> VerifyReport:
    """VerifyConsumerRebalance: every partition of every topic a live member subscribes to has an owner, and
    every owner is a thread id of a live member subscribed to that topic."""
    group = require_group(zk, group)
    members = live_members(zk, group)
    own = owners(zk, group)
    report = VerifyReport(group, True)
    for cid, reg in members.items():
        if reg is None:
            report.problems.append("member %s has an unreadable registration" % cid)
    if not members:
        report.problems.append("No consumer ids registered for group %s" % group)
    threads = subscribed_topics(zk, members)
    for topic, thread_ids in sorted(threads.items()):
        valid = set(thread_ids)
        parts = topic_partitions(zk, topic)
        if not parts:
            report.problems.append("topic %s has no partitions in ZooKeeper" % topic)
        for p in parts:
            report.checked_partitions += 1
            owner = own.get((topic, p))
            if owner is None:
                report.problems.append("No owner for partition [%s,%d]" % (topic, p))
            elif owner not in valid:
                report.problems.append("Owner %s for partition [%s,%d] is not a valid member of consumer group %s"
                                       % (owner, topic, p, group))
    for (topic, p), owner in own.items():
        if topic not in threads:
            report.problems.append("Owner %s for partition [%s,%d] but no live member subscribes to %s"
                                   % (owner, topic, p, topic))
    report.ok = not report.problems
    return report


#: nodes deleted per multi-op while removing a group's offsets (a multi-op must fit ZooKeeper's jute.maxbuffer)
DELETE_BATCH = 500


def delete(zk, group, execute=False) -> dict:
    """Delete ``/consumers/G``, only without live members.  Dry run unless *execute*.

    It cannot remove a live registration or a live owner node: the committed offsets are deleted first (in
    multi-ops of :data:`DELETE_BATCH`, each re-checking that ``ids`` is still empty), then everything else — owner
    nodes, ``ids``, the group node — in ONE multi-op that lists every node it deletes. A member that registers
    (or claims) in between makes that multi-op fail as a whole (``ids`` or ``owners/T`` is no longer empty), so its
    nodes stay and the delete reports a conflict."""
    group = require_group(zk, group)
    members = _children(zk, paths.group_ids_path(group))
    if members:
        raise GroupConflictError("Delete for group '%s' failed because its consumers are still active (%d live "
                                 "member(s): %s)" % (group, len(members), ", ".join(sorted(members)[:5])))
    nodes = _post_order(zk, paths.group_path(group))
    if not execute:
        return {"group": group, "deleted": False, "dry_run": True, "znodes": len(nodes)}
    offsets_root = paths.group_path(group) + "/offsets/"
    offset_leaves = [n for n in nodes if n.startswith(offsets_root) and n.count("/") == offsets_root.count("/") + 1]
    rest = [n for n in nodes if n not in set(offset_leaves)]
    ids = paths.group_ids_path(group)
    for i in range(0, len(offset_leaves), DELETE_BATCH):
        if _children(zk, ids):
            raise GroupConflictError("Delete for group '%s' stopped: a member registered while deleting (%d "
                                     "offset node(s) were already deleted)" % (group, i))
        _commit_deletes(zk, group, offset_leaves[i:i + DELETE_BATCH])
    _commit_deletes(zk, group, rest)
    return {"group": group, "deleted": True, "dry_run": False, "znodes": len(nodes)}


def _commit_deletes(zk, group, paths_):
    from kazoo.exceptions import RolledBackError
    txn = zk.transaction()
    for path in paths_:
        txn.delete(path)
    results = txn.commit()
    failed = [(path, r) for path, r in zip(paths_, results)
              if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
    if failed:
        path, err = failed[0]
        why = ("a member registered or claimed a partition while deleting" if isinstance(err, NotEmptyError)
               else "%s changed while deleting" % path)
        raise GroupConflictError("Delete for group '%s' failed: %s (%s on %s); nothing of this step was "
                                 "deleted" % (group, why, type(err).__name__, path))


def _post_order(zk, path) -> List[str]:
    """Every node of the subtree at path, children before their parent."""
    out: List[str] = []
    for c in _children(zk, path):
        out.extend(_post_order(zk, path + "/" + c))
    out.append(path)
    return out
