"""Both offset stores of one group, side by side: which partitions the group has, and both stores' offsets.

The group's partitions are every partition (from ``/brokers/topics``) of its ZooKeeper topics (``owners`` +
``offsets`` + live subscriptions, :func:`zkconsumer.groups.group_topics`) and of the explicitly named topics; with
``scan_all_topics=True`` (when Kafka is the source, e.g. a rollback) also every partition the group has an offset of
in Kafka, as one OffsetFetch of all its topics lists them (:meth:`KafkaOffsetStore.fetch_all`): Kafka is asked
about the group's own topics only, never about every topic of the cluster.

A partition Kafka will not answer for (TOPIC_AUTHORIZATION_FAILED: the operator's identity may not Describe the
topic; UNKNOWN_TOPIC_OR_PARTITION while a topic is deleted; LEADER_NOT_AVAILABLE or a coordinator still loading
after the retries...) is left out of what :meth:`GroupOffsets.read` returns, so no command plans or writes it, and
is kept in :attr:`GroupOffsets.unreadable` with the broker's error and the way out (:func:`unreadable_text`, one for
every error): the commands
report it per partition (their group's exit code 1, the other groups unaffected). Topics given to
:meth:`GroupOffsets.exclude` (``--exclude-topic``) are left out of everything.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from zkconsumer import groups as zkgroups
from zkconsumer.layout import validate_group, validate_topic
from zkconsumer.offsets import ZooKeeperOffsetStore

from zkconsumer.offsets.kafka import KafkaOffsetStore

__all__ = ["GroupOffsets", "unreadable_text"]

TP = Tuple[str, int]


class GroupOffsets:
    """ZooKeeper + Kafka offset stores of *group* (the kazoo client belongs to the caller)."""

    def __init__(self, zk, bootstrap_servers, group: str, config=None, security=None):
        from zkconsumer import kafka_security
        self.group = validate_group(group)
        self.zk = zk
        self.bootstrap_servers = bootstrap_servers
        #: the Kafka client security of every connection made for this group (PLAINTEXT by default)
        self.security = security if security is not None else kafka_security.of(config)
        self.zk_store = ZooKeeperOffsetStore(zk, self.group, strict=True)
        self.kafka_store = KafkaOffsetStore(bootstrap_servers, self.group, config=config, security=self.security) \
            if bootstrap_servers else None
        #: the group's lock (:class:`~.lock.GroupLock`) while a writing command holds it
        self.lock = None
        #: ``{tp: why}``: partitions whose Kafka offset the broker refused to give (left out of every read)
        self.unreadable: Dict[TP, str] = {}
        #: topics left out of :meth:`partitions` and :meth:`read_all` (``--exclude-topic``)
        self.excluded: set = set()

    def check_lock(self) -> None:
        """Before a write: raise :class:`~.lock.GroupLockedError` if the command holds the group's lock no more."""
        if self.lock is not None:
            self.lock.check()

    def exclude(self, topics) -> "GroupOffsets":
        self.excluded |= set(validate_topic(t) for t in topics)
        return self

    def store(self, name):
        return self.zk_store if name == "zookeeper" else self.kafka_store

    def partitions(self, topics=(), scan_all_topics=False) -> List[TP]:
        wanted = set(validate_topic(t) for t in topics)
        wanted |= set(zkgroups.group_topics(self.zk, self.group))
        parts = {(t, p) for t in wanted - self.excluded for p in zkgroups.topic_partitions(self.zk, t)}
        parts |= {tp for tp in zkgroups.zk_offsets(self.zk, self.group) if tp[0] not in self.excluded}
        if scan_all_topics and self.kafka_store is not None:
            parts |= {tp for tp in self.kafka_store.fetch_all() if tp[0] not in self.excluded}
        return sorted(parts)

    def read(self, partitions) -> Dict[TP, Tuple[Optional[int], Optional[int]]]:
        """``{tp: (zookeeper_offset, kafka_offset)}`` (None = no offset), without the partitions Kafka refused to
        answer for (in :attr:`unreadable` from then on)."""
        partitions = list(partitions)
        z = self.zk_store.fetch(partitions) if partitions else {}
        k, failed = {}, {}
        if partitions and self.kafka_store is not None:
            k, failed = self.kafka_store.fetch_detailed(partitions)
        for tp in partitions:
            if tp in failed:
                self.unreadable[tp] = unreadable_text(tp, failed[tp])
            else:
                self.unreadable.pop(tp, None)
        return {tp: (z.get(tp), k.get(tp)) for tp in partitions if tp not in failed}

    def read_all(self, topics=(), scan_all_topics=False):
        """Both stores for the group's partitions (see :meth:`partitions`)."""
        return self.read(self.partitions(topics, scan_all_topics))

    def unreadable_report(self) -> Dict[str, str]:
        """``{"topic-partition": why}`` of the partitions Kafka refused to answer for (for the commands' reports)."""
        return {"%s-%d" % tp: why for tp, why in sorted(self.unreadable.items())}

    def close(self):
        if self.kafka_store is not None:
            self.kafka_store.close()


def unreadable_text(tp: TP, error: Exception) -> str:
    """Why the Kafka offset of *tp* could not be read, and the way out: every error gets one (pure)."""
    text = "%s-%d: cannot read its Kafka offset: %s" % (tp[0], tp[1], error)
    leave_out = "or, if the group no longer reads topic %s, leave it out (--exclude-topic %s)" % (tp[0], tp[0])
    if "TopicAuthorizationFailed" in text:
        text += ("; this Kafka identity may not Describe topic %s: grant it Describe and Read on the topic, %s"
                 % (tp[0], leave_out))
    elif "GroupAuthorizationFailed" in text:
        text += "; this Kafka identity may not Describe the group: grant it Describe and Read on the group"
    elif "UnknownTopicOrPartition" in text:
        text += ("; the broker does not know the partition (the topic is being deleted or created, or its metadata "
                 "has not reached this broker yet): run again once 'kafka-topics --describe --topic %s' lists it, "
                 "%s" % (tp[0], leave_out))
    elif any(name in text for name in _TRANSIENT):
        text += ("; the partition or the group's coordinator is moving (a leader election, a broker restart, the "
                 "coordinator loading %s): run again in a moment, %s" % ("__consumer_offsets", leave_out))
    else:
        text += ("; the broker did not give it (see the brokers' logs for the group's coordinator): run again, %s"
                 % leave_out)
    return text


#: the names of the errors an OffsetFetch answers while a partition's leader or the group's coordinator moves
_TRANSIENT = ("LeaderNotAvailable", "NotLeaderForPartition", "NotLeaderOrFollower", "CoordinatorLoadInProgress",
              "CoordinatorNotAvailable", "NotCoordinator", "RequestTimedOut", "UnstableOffsetCommit",
              "failed after")
