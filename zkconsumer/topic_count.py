"""A member's registration turned into consumer thread ids per topic: Scala ``kafka.consumer.TopicCount``.

Reference §2.6 (registration ``subscription`` / ``pattern``), §3.6 step 6 (``getConsumersPerTopic``) and §3.9
(wildcard subscriptions are re-evaluated against the current children of ``/brokers/topics``).

A thread id is the string ``"<consumerId>-<n>"`` for ``n`` in ``0 .. streams-1`` (``ConsumerThreadId.toString``).
Thread ids are ordered as Java strings (``ConsumerThreadId.compare`` is ``toString.compare``), so
``"c-10" < "c-2"``; :func:`java_string_sort_key` gives that order (UTF-16 code units, like ``String.compareTo``).
"""

from .errors import ConfigError, RebalanceError
from .topic_filter import BLACK_LIST, WHITE_LIST, topic_filter_for

STATIC = "static"
PATTERNS = (STATIC, WHITE_LIST, BLACK_LIST)


def java_string_sort_key(s):
    """Sort key giving Java ``String.compareTo`` order (lexicographic over UTF-16 code units).

    Differs from Python's code-point order only between supplementary characters and U+E000..U+FFFF.
    """
    return s.encode("utf-16-be", "surrogatepass")


def sort_thread_ids(thread_ids):
    """Thread ids sorted as Scala ``ConsumerThreadId`` (as strings): ``"c-10"`` before ``"c-2"``."""
    return sorted(thread_ids, key=java_string_sort_key)


def make_thread_id(consumer_id, n):
    """``TopicCount.makeThreadId``: ``consumerId + "-" + n``."""
    return "%s-%d" % (consumer_id, n)


def _check_streams(consumer_id, topic, streams):
    # Scala: assert(nConsumers >= 1) in makeConsumerThreadIdsPerTopic
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise RebalanceError("consumer %s subscribes to %r with %r streams; the stream count must be an integer >= 1"
                             % (consumer_id, topic, streams))


def make_thread_ids_per_topic(consumer_id, topic_count_map):
    """``TopicCount.makeConsumerThreadIdsPerTopic``: ``{topic: ["<id>-0", ..., "<id>-<n-1>"]}``."""
    result = {}
    for topic, streams in topic_count_map.items():
        _check_streams(consumer_id, topic, streams)
        result[topic] = [make_thread_id(consumer_id, i) for i in range(streams)]
    return result


def is_wildcard(subscription, pattern):
    """Scala rule (§2.6): empty subscription, or a pattern other than white_list/black_list, means static."""
    return bool(subscription) and pattern in (WHITE_LIST, BLACK_LIST)


def thread_ids_per_topic(consumer_id, subscription, pattern, all_topics, exclude_internal_topics=True):
    """Thread ids per topic for one member (``TopicCount.constructTopicCount(...).getConsumerThreadIdsPerTopic``).

    * static (or empty subscription, or unknown pattern): the subscription's topics, as registered; internal
      topics are *not* filtered;
    * ``white_list`` / ``black_list``: the single subscription key is the filter regex, matched against
      ``all_topics`` (the current children of ``/brokers/topics``), each matching topic getting the key's stream
      count.

    Raises :class:`RebalanceError` for a stream count < 1 (Scala's ``assert``), a wildcard subscription with more
    than one key (Scala takes ``topMap.head`` of an unordered map, which is not reproducible) or an invalid regex.
    Thread-id lists are in stream order; :func:`consumers_per_topic` sorts them.
    """
    if subscription is None:
        raise RebalanceError("registration of consumer %s has no subscription" % consumer_id)
    if not is_wildcard(subscription, pattern):
        return make_thread_ids_per_topic(consumer_id, subscription)
    if len(subscription) != 1:
        raise RebalanceError("wildcard registration of consumer %s must have exactly one regex key, got %r"
                             % (consumer_id, sorted(subscription)))
    (regex, streams), = subscription.items()
    _check_streams(consumer_id, regex, streams)
    try:
        topic_filter = topic_filter_for(pattern, regex)
    except ConfigError as exc:
        raise RebalanceError("consumer %s registered an invalid %s filter: %s" % (consumer_id, pattern, exc)) from None
    topics = [t for t in all_topics if topic_filter.is_topic_allowed(t, exclude_internal_topics)]
    return make_thread_ids_per_topic(consumer_id, {t: streams for t in topics})


def consumers_per_topic(members, all_topics, exclude_internal_topics=True):
    """``ZkUtils.getConsumersPerTopic``: every member's thread ids per topic, each list sorted as strings.

    ``members`` maps consumer id -> ``(subscription, pattern)`` (the decoded ``/consumers/[g]/ids/[id]`` nodes).
    Topics no member subscribes to are absent; no list is empty.
    """
    all_topics = list(all_topics)
    merged = {}
    for consumer_id, (subscription, pattern) in members.items():
        per_topic = thread_ids_per_topic(consumer_id, subscription, pattern, all_topics, exclude_internal_topics)
        for topic, thread_ids in per_topic.items():
            merged.setdefault(topic, []).extend(thread_ids)
    result = {}
    for topic, thread_ids in merged.items():
        if len(set(thread_ids)) != len(thread_ids):
            raise RebalanceError("duplicate consumer thread ids for topic %r: %r" % (topic, thread_ids))
        if thread_ids:
            result[topic] = sort_thread_ids(thread_ids)
    return result
