"""Both offset stores of one group, side by side: which partitions the group has, and both stores' offsets.

The group's partitions are every partition (from ``/brokers/topics``) of its ZooKeeper topics (``owners`` +
``offsets`` + live subscriptions, :func:`zkconsumer.groups.group_topics`) and of the explicitly named topics.
Kafka's OffsetFetch cannot list "all topics of a group" on every broker (tansu times out on ``topics=null``), so
with ``scan_all_topics=True`` (when Kafka is the source, e.g. a rollback) every topic registered in ZooKeeper is
asked for and only the partitions that hold a Kafka offset are kept. Topics given to :meth:`GroupOffsets.exclude`
(``--exclude-topic``) are left out of everything.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from zkconsumer import groups as zkgroups
from zkconsumer.layout import paths, validate_group, validate_topic
from zkconsumer.offsets import ZooKeeperOffsetStore

from zkconsumer.offsets.kafka import KafkaOffsetStore

__all__ = ["GroupOffsets"]

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
        #: topics left out of :meth:`partitions` and :meth:`read_all` (``--exclude-topic``)
        self.excluded: set = set()

    def exclude(self, topics) -> "GroupOffsets":
        self.excluded |= set(validate_topic(t) for t in topics)
        return self

    def store(self, name):
        return self.zk_store if name == "zookeeper" else self.kafka_store

    def partitions(self, topics=(), scan_all_topics=False) -> List[TP]:
        wanted = set(validate_topic(t) for t in topics)
        wanted |= set(zkgroups.group_topics(self.zk, self.group))
        if scan_all_topics:
            try:
                wanted |= set(self.zk.get_children(paths.broker_topics_path()))
            except Exception:
                pass
        parts = {(t, p) for t in wanted - self.excluded for p in zkgroups.topic_partitions(self.zk, t)}
        parts |= {tp for tp in zkgroups.zk_offsets(self.zk, self.group) if tp[0] not in self.excluded}
        return sorted(parts)

    def read(self, partitions) -> Dict[TP, Tuple[Optional[int], Optional[int]]]:
        """``{tp: (zookeeper_offset, kafka_offset)}`` (None = no offset)."""
        partitions = list(partitions)
        z = self.zk_store.fetch(partitions) if partitions else {}
        k = self.kafka_store.fetch(partitions) if partitions and self.kafka_store is not None else {}
        return {tp: (z.get(tp), k.get(tp)) for tp in partitions}

    def read_all(self, topics=(), scan_all_topics=False):
        """Both stores for the group's partitions; with *scan_all_topics* partitions known to neither store's
        group-side listing are dropped when they hold no offset anywhere except ZooKeeper-known topics."""
        parts = self.partitions(topics, scan_all_topics)
        both = self.read(parts)
        if scan_all_topics:
            known = set(self.partitions(topics, False))
            both = {tp: v for tp, v in both.items() if tp in known or v[1] is not None}
        return both

    def close(self):
        if self.kafka_store is not None:
            self.kafka_store.close()
