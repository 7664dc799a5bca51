"""A member's registration turned into consumer thread ids per topic: Scala ``kafka.consumer.TopicCount``.

Kafka 1.1.1 ``TopicCount.constructTopicCount`` (reads a registration's ``subscription`` and ``pattern``),
``ZkUtils.getConsumersPerTopic`` (every member's thread ids per topic, sorted) and
``WildcardTopicCount.getConsumerThreadIdsPerTopic`` (a wildcard subscription is evaluated against the current
children of ``/brokers/topics`` at every rebalance).

A thread id is the string ``"<consumerId>-<n>"`` for ``n`` in ``0 .. streams-1`` (``ConsumerThreadId.toString``).
Thread ids are ordered as Java strings (``ConsumerThreadId.compare`` is ``toString.compare``), so
``"c-10" < "c-2"``; :func:`java_string_sort_key` gives that order (UTF-16 code units, like ``String.compareTo``).
"""

from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from ...errors import ConfigError, RebalanceError
from .topic_filter import BLACK_LIST, WHITE_LIST, topic_filter_for

STATIC = "static"
PATTERNS = (STATIC, WHITE_LIST, BLACK_LIST)


class UnusableRegistration(RebalanceError):
    """One member's registration cannot be turned into thread ids (a wildcard regex that cannot be evaluated, a
    wildcard subscription without exactly one key, a stream count < 1).

    :func:`consumers_per_topic` (and the group reader, ``zkconsumer.consumer.group_view``, which keeps static
    registrations' thread ids between reads) does not let it fail the group's rebalance: that member gets no thread
    id at all (it is assigned nothing) and everyone else is assigned as if it subscribed to nothing.
    """

    def __init__(self, consumer_id: str, pattern: str, subscription: object, reason: str) -> None:
        self.consumer_id, self.pattern, self.subscription, self.reason = consumer_id, pattern, subscription, reason
        super().__init__("consumer %s registered a %s subscription %s that cannot be evaluated: %s"
                         % (consumer_id, pattern, _describe(subscription), reason))


def _describe(subscription: object) -> str:
    if isinstance(subscription, dict) and len(subscription) == 1:
        (key, streams), = subscription.items()
        return "%r (%r streams)" % (key, streams)
    return repr(subscription)


def java_string_sort_key(s: str) -> bytes:
    """Sort key giving Java ``String.compareTo`` order (lexicographic over UTF-16 code units).

    Differs from Python's code-point order only between supplementary characters and U+E000..U+FFFF.
    """
    return s.encode("utf-16-be", "surrogatepass")


def sort_thread_ids(thread_ids: Iterable[str]) -> List[str]:
    """Thread ids sorted as Scala ``ConsumerThreadId`` (as strings): ``"c-10"`` before ``"c-2"``."""
    return sorted(thread_ids, key=java_string_sort_key)


def make_thread_id(consumer_id: str, n: int) -> str:
    """``TopicCount.makeThreadId``: ``consumerId + "-" + n``."""
    return "%s-%d" % (consumer_id, n)


def _check_streams(consumer_id: str, topic: str, streams: object, pattern: str = STATIC,
                   subscription: object = None) -> None:
    # Scala: assert(nConsumers >= 1) in makeConsumerThreadIdsPerTopic
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise UnusableRegistration(consumer_id, pattern, subscription if subscription is not None else {topic: streams},
                                   "%r streams for %r; the stream count must be an integer >= 1" % (streams, topic))


def make_thread_ids_per_topic(consumer_id: str, topic_count_map: Mapping[str, int]) -> Dict[str, List[str]]:
    """``TopicCount.makeConsumerThreadIdsPerTopic``: ``{topic: ["<id>-0", ..., "<id>-<n-1>"]}``."""
    result = {}
    for topic, streams in topic_count_map.items():
        _check_streams(consumer_id, topic, streams)
        result[topic] = [make_thread_id(consumer_id, i) for i in range(streams)]
    return result


def is_wildcard(subscription: object, pattern: str) -> bool:
    """The Scala rule (Kafka 1.1.1 ``TopicCount.constructTopicCount``): an empty subscription, or a pattern other
    than white_list/black_list, means static."""
    return bool(subscription) and pattern in (WHITE_LIST, BLACK_LIST)


def thread_ids_per_topic(consumer_id: str, subscription: object, pattern: str, all_topics: Iterable[str],
                         exclude_internal_topics: bool = True) -> Dict[str, List[str]]:
    """Thread ids per topic for one member (``TopicCount.constructTopicCount(...).getConsumerThreadIdsPerTopic``).

    * static (or empty subscription, or unknown pattern): the subscription's topics, as registered; internal
      topics are *not* filtered;
    * ``white_list`` / ``black_list``: the single subscription key is the filter regex, matched against
      ``all_topics`` (the current children of ``/brokers/topics``), each matching topic getting the key's stream
      count.

    Raises :class:`UnusableRegistration` (a :class:`RebalanceError`) for a stream count < 1 (Scala's ``assert``),
    a wildcard subscription with more than one key (Scala takes ``topMap.head`` of an unordered map, which is not
    reproducible) or a regex that cannot be evaluated (Java rejects it, or it is one of the few constructs
    :mod:`zkconsumer.core.subscription.topic_filter` does not support). Thread-id lists are in stream order;
    :func:`consumers_per_topic` sorts them.
    """
    if not isinstance(subscription, dict):
        raise UnusableRegistration(consumer_id, pattern, subscription, "no subscription object")
    if not is_wildcard(subscription, pattern):
        for topic, streams in subscription.items():
            _check_streams(consumer_id, topic, streams, pattern, subscription)
        return make_thread_ids_per_topic(consumer_id, subscription)
    if len(subscription) != 1:
        raise UnusableRegistration(consumer_id, pattern, subscription,
                                   "a wildcard subscription must have exactly one regex key, got %d" % len(subscription))
    (regex, streams), = subscription.items()
    _check_streams(consumer_id, regex, streams, pattern, subscription)
    try:
        topic_filter = topic_filter_for(pattern, regex)
    except ConfigError as exc:
        raise UnusableRegistration(consumer_id, pattern, subscription, exc.detail or str(exc)) from None
    topics = [t for t in all_topics if topic_filter.is_topic_allowed(t, exclude_internal_topics)]
    return make_thread_ids_per_topic(consumer_id, {t: streams for t in topics})


def consumers_per_topic(members: Mapping[str, Tuple[object, str]], all_topics: Iterable[str],
                        exclude_internal_topics: bool = True,
                        unusable: Optional[Dict[str, UnusableRegistration]] = None) -> Dict[str, List[str]]:
    """``ZkUtils.getConsumersPerTopic``: every member's thread ids per topic, each list sorted as strings.

    ``members`` maps consumer id -> ``(subscription, pattern)`` (the decoded ``/consumers/[g]/ids/[id]`` nodes).
    Topics no member subscribes to are absent; no list is empty.

    The rule for a registration that cannot be evaluated (:class:`UnusableRegistration`): that member gets no
    thread id for any topic — it subscribes to nothing it can be assigned — and the others are assigned all the
    partitions of their topics; it never fails the computation. When ``unusable`` is a dict, it receives
    ``consumer id -> UnusableRegistration`` for each such member (for the caller to log).
    """
    all_topics = list(all_topics)
    per_member = []
    for consumer_id, (subscription, pattern) in members.items():
        try:
            per_member.append(thread_ids_per_topic(consumer_id, subscription, pattern, all_topics,
                                                   exclude_internal_topics))
        except UnusableRegistration as exc:
            if unusable is not None:
                unusable[consumer_id] = exc
    return merge_thread_ids(per_member)


def merge_thread_ids(per_member: Iterable[Mapping[str, List[str]]]) -> Dict[str, List[str]]:
    """The members' thread ids per topic (each a :func:`thread_ids_per_topic` result) as
    :func:`consumers_per_topic` gives them: merged per topic, each list sorted as strings; a thread id that two
    members give is a :class:`RebalanceError`."""
    merged: Dict[str, List[str]] = {}
    for per_topic in per_member:
        for topic, thread_ids in per_topic.items():
            merged.setdefault(topic, []).extend(thread_ids)
    result = {}
    for topic, thread_ids in merged.items():
        if len(set(thread_ids)) != len(thread_ids):
            raise RebalanceError("duplicate consumer thread ids for topic %r: %r" % (topic, thread_ids))
        if thread_ids:
            result[topic] = sort_thread_ids(thread_ids)
    return result
