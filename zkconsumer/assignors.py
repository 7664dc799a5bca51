"""Partition assignors of the old consumer: Kafka 1.1.1 ``kafka.consumer.RangeAssignor`` and ``RoundRobinAssignor``
(``PartitionAssignor.scala``), called by ``ZKRebalancerListener.rebalance`` with an ``AssignmentContext``.

Both assignors are pure and deterministic and compute the *global* assignment (0.9+ form, KAFKA-1997):

    assign(consumers_for_topic, partitions_for_topic) -> {(topic, partition): thread_id}

* ``consumers_for_topic``: ``{topic: [thread ids]}`` (``ZkUtils.getConsumersPerTopic``; see
  :func:`zkconsumer.topic_count.consumers_per_topic`). Any order: thread ids are re-sorted here as Java strings
  (``"c-10" < "c-2"``). Duplicate thread ids within a topic raise :class:`RebalanceError`.
* ``partitions_for_topic``: ``{topic: [partition ids]}`` (``ZkUtils.getPartitionsForTopics``). Any order: sorted
  ascending here. A topic of ``consumers_for_topic`` missing from it has zero partitions (Scala reads a missing
  ``/brokers/topics/[t]`` as an empty partition map); topics with no subscribed thread are skipped.

:func:`assignment_for` extracts one member's share, i.e. ``partitionAssignment.get(ctx.consumerId)``.
Range in Scala iterates only ``ctx.myTopicThreadIds``; computing it for every topic yields the same entries for
the member's own topics, because each topic is handled independently.
"""

import functools
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from .errors import ConfigError, RebalanceError
from .topic_count import java_string_sort_key, sort_thread_ids


def java_string_hashcode(s: str) -> int:
    """Java ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, wrapping as a signed 32-bit int.

    A non-BMP character counts as its two surrogate code units. ``java_string_hashcode("") == 0``.
    """
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for k in range(0, len(data), 2):
        h = (31 * h + ((data[k] << 8) | data[k + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


#: ``(topic, partition)``
TopicPartition = Tuple[str, int]
#: A global assignment: ``{(topic, partition): thread id}``.
Assignment = Dict[TopicPartition, str]

#: Releases of the Scala consumer, for ``legacy.consumer.version``: the Kafka version of a group's JVM members.
LEGACY_VERSIONS = ("0.8.2", "0.9", "0.10", "0.11", "1.0", "1.1")
DEFAULT_LEGACY_VERSION = "1.1"
#: ``TopicAndPartition.toString`` was ``"[topic,partition]"`` up to 0.11 (kafka 0.11.0.3
#: core/src/main/scala/kafka/common/TopicAndPartition.scala) and ``"topic-partition"`` from 1.0 (kafka 1.0.0, the
#: same file); RoundRobinAssignor orders partitions by its hash code, so the two lay partitions out differently.
_BRACKET_VERSIONS = frozenset(("0.8.2", "0.9", "0.10", "0.11"))


def topic_partition_string(topic: str, partition: int, legacy_version: str = DEFAULT_LEGACY_VERSION) -> str:
    """``TopicAndPartition.toString`` of the Scala consumer release ``legacy_version``: ``"[topic,partition]"``
    up to 0.11, ``"topic-partition"`` from 1.0."""
    if legacy_version in _BRACKET_VERSIONS:
        return "[%s,%d]" % (topic, partition)
    if legacy_version not in LEGACY_VERSIONS:
        raise RebalanceError("unknown legacy.consumer.version %r: one of %s" % (legacy_version,
                                                                               ", ".join(LEGACY_VERSIONS)))
    return "%s-%d" % (topic, partition)


def _check_partition(topic: str, partition: object) -> None:
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise RebalanceError("topic %r has an invalid partition id %r" % (topic, partition))


def _prepare(consumers_for_topic: Mapping[str, Iterable[str]], partitions_for_topic: Mapping[str, Iterable[int]]
             ) -> Tuple[Dict[str, List[str]], Dict[str, List[int]]]:
    """Validate and normalise the inputs: ({topic: sorted threads}, {topic: sorted partitions}), subscribed only."""
    if not isinstance(consumers_for_topic, dict) or not isinstance(partitions_for_topic, dict):
        raise RebalanceError("assignor inputs must be dicts of topic -> list")
    threads = {}
    for topic, thread_ids in consumers_for_topic.items():
        thread_ids = list(thread_ids)
        for tid in thread_ids:
            if not isinstance(tid, str):
                raise RebalanceError("topic %r has a non-string consumer thread id %r" % (topic, tid))
        if len(set(thread_ids)) != len(thread_ids):
            dups = sorted({t for t in thread_ids if thread_ids.count(t) > 1}, key=java_string_sort_key)
            raise RebalanceError("duplicate consumer thread ids for topic %r: %s" % (topic, ", ".join(dups)))
        if thread_ids:
            threads[topic] = sort_thread_ids(thread_ids)
    partitions = {}
    for topic in threads:
        plist = list(partitions_for_topic.get(topic, ()))
        # (C loops: the usual case is cheap)
        if plist and (set(map(type, plist)) != {int} or min(plist) < 0):
            for p in plist:
                _check_partition(topic, p)
        if len(set(plist)) != len(plist):
            raise RebalanceError("duplicate partition ids for topic %r: %r" % (topic, sorted(plist)))
        partitions[topic] = sorted(plist)
    return threads, partitions


def range_assign(consumers_for_topic: Mapping[str, Iterable[str]],
                 partitions_for_topic: Mapping[str, Iterable[int]]) -> Assignment:
    """``RangeAssignor`` (the default; Kafka 1.1.1 ``RangeAssignor.assign``), per topic and independently.

    With ``n`` partitions (ascending) and ``k`` threads (sorted as strings), thread at position ``i`` gets
    ``n // k`` partitions plus one if ``i < n % k``, starting at ``(n // k) * i + min(i, n % k)``. Threads past the
    partitions get nothing (Scala only warns). Example: 10 partitions / 3 threads -> p0-p3, p4-p6, p7-p9.
    """
    threads, partitions = _prepare(consumers_for_topic, partitions_for_topic)
    result = {}
    for topic in sorted(threads, key=java_string_sort_key):
        cur_consumers, cur_partitions = threads[topic], partitions[topic]
        n_per, n_extra = divmod(len(cur_partitions), len(cur_consumers))
        for position, thread_id in enumerate(cur_consumers):
            start = n_per * position + min(position, n_extra)
            count = n_per + (0 if position + 1 > n_extra else 1)
            for i in range(start, start + count):
                result[(topic, cur_partitions[i])] = thread_id
    return result


def range_assign_for(consumer_id: str, consumers_for_topic: Mapping[str, Iterable[str]],
                     partitions_for_topic: Mapping[str, Iterable[int]]) -> Assignment:
    """``assignment_for(consumer_id, range_assign(...))`` without building the other consumers' part: a member
    needs only its own ranges, so its cost per topic is the sort of the thread ids, not one step per partition."""
    threads, partitions = _prepare(consumers_for_topic, partitions_for_topic)
    result = {}
    prefix = consumer_id + "-"
    for topic in sorted(threads, key=java_string_sort_key):
        cur_consumers, cur_partitions = threads[topic], partitions[topic]
        n_per, n_extra = divmod(len(cur_partitions), len(cur_consumers))
        for position, thread_id in enumerate(cur_consumers):
            if not thread_id.startswith(prefix) or thread_owner(thread_id) != consumer_id:
                continue
            start = n_per * position + min(position, n_extra)
            count = n_per + (0 if position + 1 > n_extra else 1)
            for i in range(start, start + count):
                result[(topic, cur_partitions[i])] = thread_id
    return result


def roundrobin_partition_order(partitions: Iterable[TopicPartition],
                               legacy_version: str = DEFAULT_LEGACY_VERSION) -> List[TopicPartition]:
    """Lay out ``(topic, partition)`` pairs as Scala's ``sortWith(tp.toString.hashCode < ...)`` does (the string
    depends on the release, see :func:`topic_partition_string`).

    Java's object sort is stable, so equal hash codes keep the input order of
    ``partitionsForTopic.flatMap(...)``. Within one topic that order is ascending partition id (the partitions
    are sorted), which is reproduced exactly. Between *different* topics whose ``"[t,p]"`` strings have equal
    hash codes (e.g. topics ``"Aa"`` and ``"BB"``), Scala's order is the iteration order of a
    ``mutable.HashMap``, which depends on its insertion history and ultimately on the order ZooKeeper returned
    the ``/ids`` children, so it is not a function of the assignor's inputs; we break such ties by topic in
    Java string order, then partition.
    """
    return sorted(partitions, key=lambda tp: (java_string_hashcode(topic_partition_string(tp[0], tp[1],
                                                                                          legacy_version)),
                                              java_string_sort_key(tp[0]), tp[1]))


def roundrobin_assign(consumers_for_topic: Mapping[str, Iterable[str]], partitions_for_topic: Mapping[str, Iterable[int]],
                      legacy_version: str = DEFAULT_LEGACY_VERSION) -> Assignment:
    """``RoundRobinAssignor`` as of 0.10.2+ (KAFKA-2434; Kafka 1.1.1 ``RoundRobinAssignor.assign``).

    1. ``allThreadIds``: the union of every topic's thread ids, sorted as strings, in a circular iterator;
    2. all partitions of all subscribed topics ordered by Java ``hashCode`` of ``"[topic,partition]"``
       (:func:`roundrobin_partition_order`);
    3. each partition goes to ``threadAssignor.dropWhile(t => !subscribed(t)).next``: the next thread in the
       circle that subscribes to the partition's topic. The shared iterator advances past every skipped thread
       and past the chosen one (Scala 2.10-2.12 ``Iterator.dropWhile`` buffers the first non-dropped element and
       ``next`` returns it, so nothing else is consumed).

    With identical subscriptions nothing is ever skipped and this equals the 0.8.2-0.10.1 algorithm.
    """
    threads, partitions = _prepare(consumers_for_topic, partitions_for_topic)
    if not threads:
        return {}
    all_threads = sort_thread_ids({t for tids in threads.values() for t in tids})
    subscribed = {topic: frozenset(tids) for topic, tids in threads.items()}
    layout = roundrobin_partition_order([(topic, p) for topic, plist in partitions.items() for p in plist],
                                        legacy_version)
    n = len(all_threads)
    cursor = 0
    result = {}
    for topic, partition in layout:
        # non-empty, so the scan below terminates within one lap
        members = subscribed[topic]
        while all_threads[cursor] not in members:
            cursor = (cursor + 1) % n
        result[(topic, partition)] = all_threads[cursor]
        cursor = (cursor + 1) % n
    return result


#: An assignor: ``(consumers_for_topic, partitions_for_topic) -> {(topic, partition): thread_id}``.
Assignor = Callable[[Mapping[str, Iterable[str]], Mapping[str, Iterable[int]]], Assignment]

ASSIGNORS: Dict[str, Assignor] = {"range": range_assign, "roundrobin": roundrobin_assign}


def get_assignor(name: str, legacy_version: str = DEFAULT_LEGACY_VERSION) -> Assignor:
    """Map ``partition.assignment.strategy`` to an assignor: ``"range"`` or ``"roundrobin"`` (laid out as the
    Scala consumer of release ``legacy_version`` does, see :func:`topic_partition_string`).

    Other values raise :class:`ConfigError`, as validated since 0.9.0.0 (KAFKA-2032); 0.8.2 silently used range.
    """
    try:
        assignor = ASSIGNORS[name]
    except (KeyError, TypeError):
        raise ConfigError("partition.assignment.strategy", name, "'range' or 'roundrobin'") from None
    if assignor is roundrobin_assign and legacy_version != DEFAULT_LEGACY_VERSION:
        # validates the version
        topic_partition_string("t", 0, legacy_version)
        return functools.partial(roundrobin_assign, legacy_version=legacy_version)
    return assignor


def thread_owner(thread_id: str) -> Optional[str]:
    """The consumer id of ``"<consumerId>-<n>"`` (split at the last '-'; ``n`` must be decimal digits), or None."""
    consumer_id, sep, n = thread_id.rpartition("-")
    if not sep or not n or not n.isascii() or not n.isdigit():
        return None
    return consumer_id


def own_assignment(assignor: Assignor, consumer_id: str, consumers_for_topic: Mapping[str, Iterable[str]],
                   partitions_for_topic: Mapping[str, Iterable[int]]) -> Assignment:
    """The partitions *assignor* gives ``consumer_id``'s threads: :func:`range_assign_for` for the range assignor,
    else the consumer's part of the global assignment (round robin needs all of it)."""
    if assignor is range_assign:
        return range_assign_for(consumer_id, consumers_for_topic, partitions_for_topic)
    return assignment_for(consumer_id, assignor(consumers_for_topic, partitions_for_topic))


def assignment_for(consumer_id: str, global_assignment: Mapping[TopicPartition, str]) -> Assignment:
    """The part of a global assignment owned by ``consumer_id``'s threads (``ConsumerThreadId.consumer``)."""
    return {tp: tid for tp, tid in global_assignment.items() if thread_owner(tid) == consumer_id}
