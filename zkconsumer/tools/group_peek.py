"""Read a group's stream from its committed offsets without joining the group (``zkconsumer consume --from-group``).

Nothing is written anywhere: no registration under ``/consumers/G/ids`` (the group does not rebalance), no owner
node, no offset in ZooKeeper or Kafka. The start offsets are the group's committed offsets, read where its members
commit (:func:`zkconsumer.tools.group_describe.describe` with ``auto``: ZooKeeper, Kafka, or for a dual-commit group the
greater of both); a partition without one starts where ``auto.offset.reset`` says (``largest`` by default). The
records are read by one kafka-python consumer in manual-assignment mode with no group id, so the broker sees no
group either.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import ClusterUnavailableError, ZkConsumerError
from .group_describe import describe

__all__ = ["start_offsets", "peek_records"]

log = logging.getLogger(__name__)

TP = Tuple[str, int]


def start_offsets(zk: Any, group: str, bootstrap_servers: str, topics: Sequence[str] = (),
                  security: Any = None) -> Tuple[Dict[TP, Optional[int]], str]:
    """``({(topic, partition): committed offset or None}, where the offsets were read)`` for every partition of the
    group's topics (only *topics* when given: their partitions with no offset of the group are included)."""
    from .groups import topic_partitions
    rows = describe(zk, group, bootstrap_servers, "auto", security=security)
    out: Dict[TP, Optional[int]] = {}
    source = "zookeeper"
    for r in rows:
        if r.topic is None or r.partition is None or (topics and r.topic not in topics):
            continue
        out[(r.topic, r.partition)] = r.current_offset
        source = r.offsets_from
    for t in topics:
        for p in topic_partitions(zk, t):
            out.setdefault((t, p), None)
    if not out:
        raise ZkConsumerError("group %s has no partitions to read%s" % (
            group, (" of topic(s) %s" % ", ".join(topics)) if topics else " (no offsets, owners or subscriptions)"))
    return out, source


def peek_records(bootstrap_servers: str, offsets: Dict[TP, Optional[int]], auto_offset_reset: str = "largest",
                 security: Any = None, timeout_ms: int = -1, stop: Any = None) -> Iterator[Any]:
    """kafka-python ConsumerRecords of *offsets*' partitions, each from its offset (None: per *auto_offset_reset*,
    ``smallest`` or ``largest``), until *stop* (a threading.Event) is set or nothing arrived for *timeout_ms*
    (-1: never). No group id, no commit."""
    import time
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    from ..kafka.connect_errors import connect_error
    from ..core.kafka_security import PLAINTEXT
    security = security or PLAINTEXT
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id="zkconsumer-peek", group_id=None,
                                 enable_auto_commit=False,
                                 auto_offset_reset="earliest" if auto_offset_reset == "smallest" else "latest",
                                 **security.client_kwargs())
    except (KafkaError, OSError, ValueError) as e:
        raise connect_error("read the group's partitions", bootstrap_servers, security, e) from e
    try:
        tps: List[Any] = [TopicPartition(t, p) for t, p in sorted(offsets)]
        consumer.assign(tps)
        for tp in tps:
            off = offsets[(tp.topic, tp.partition)]
            if off is not None:
                consumer.seek(tp, off)
        last = time.monotonic()
        while stop is None or not stop.is_set():
            try:
                batch = consumer.poll(timeout_ms=200)
            except KafkaError as e:
                raise ClusterUnavailableError("reading from %s failed: %s" % (bootstrap_servers, e)) from e
            if batch:
                last = time.monotonic()
            elif timeout_ms >= 0 and (time.monotonic() - last) * 1000 >= timeout_ms:
                return
            for records in batch.values():
                yield from records
    finally:
        from ..kafka.internals import close_quietly
        close_quietly(consumer, autocommit=False)
