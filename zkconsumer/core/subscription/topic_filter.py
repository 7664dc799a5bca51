"""Topic filters for wildcard subscriptions: Scala ``kafka.consumer.TopicFilter`` (Kafka 1.1.1,
``core/src/main/scala/kafka/consumer/TopicFilter.scala``).

``Whitelist(regex)`` allows topics whose *whole* name matches the regex (Java ``String.matches``);
``Blacklist(regex)`` allows topics that do not. Both refuse the internal topic ``__consumer_offsets`` unless
``exclude_internal_topics`` is false (``exclude.internal.topics``).

The raw regex is normalised exactly as Scala does (property files may bring quotes)::

    rawRegex.trim.replace(',', '|').replace(" ", "")
            .replaceAll("^[\\"']+", "").replaceAll("[\\"']+$", "")

and the normalised string (``.regex``) is what a registration stores as its subscription key.

Wildcard regexes are written for ``java.util.regex``; :mod:`.java_regex` evaluates them as Java does
(JVM members of the group register such regexes too, so every member must match them alike).
"""

from typing import ClassVar, Optional

from ...errors import ConfigError
from .java_regex import compile_java_regex

INTERNAL_TOPICS = frozenset(["__consumer_offsets"])
WHITE_LIST = "white_list"
BLACK_LIST = "black_list"


def normalise_regex(raw: object) -> str:
    """Scala's normalisation of a filter regex: trim, ',' -> '|', drop spaces, strip outer quotes."""
    if not isinstance(raw, str):
        raise ConfigError("topic filter", raw, "a regular expression string")
    # Java's String.trim removes every char <= U+0020 (str.strip would also remove Unicode spaces)
    text = raw.strip("".join(chr(c) for c in range(0x21))).replace(",", "|").replace(" ", "")
    return text.lstrip("\"'").rstrip("\"'")


def is_internal_topic(topic: str) -> bool:
    """``Topic.InternalTopics.contains(topic)`` (0.8.2) / ``Topic.isInternal`` (1.1.1): only __consumer_offsets."""
    return topic in INTERNAL_TOPICS


class TopicFilter:
    """Base of Whitelist / Blacklist. ``regex`` is the normalised string, compiled once."""

    pattern: ClassVar[Optional[str]] = None

    def __init__(self, raw_regex: str) -> None:
        self.raw_regex = raw_regex
        self.regex = normalise_regex(raw_regex)
        self._compiled = compile_java_regex(self.regex)

    def matches(self, topic: str) -> bool:
        """Java ``topic.matches(regex)``: the regex must match the whole name."""
        return self._compiled.fullmatch(topic) is not None

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        # isinstance: what the type is for type checkers that do not narrow by type(x) is type(y) (mypy < 2)
        return type(self) is type(other) and isinstance(other, TopicFilter) and self.regex == other.regex

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.regex))

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.regex)

    def __str__(self) -> str:
        return self.regex


class Whitelist(TopicFilter):
    """Allow topics whose whole name matches; internal topics only if exclude_internal_topics is false."""

    pattern = WHITE_LIST

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        return self.matches(topic) and not (is_internal_topic(topic) and exclude_internal_topics)


class Blacklist(TopicFilter):
    """Allow topics whose whole name does not match; internal topics only if exclude_internal_topics is false."""

    pattern = BLACK_LIST

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        return (not self.matches(topic)) and not (is_internal_topic(topic) and exclude_internal_topics)


def topic_filter_for(pattern: str, regex: str) -> TopicFilter:
    """Rebuild the filter of a wildcard registration: pattern "white_list" -> Whitelist, "black_list" -> Blacklist."""
    if pattern == WHITE_LIST:
        return Whitelist(regex)
    if pattern == BLACK_LIST:
        return Blacklist(regex)
    raise ConfigError("topic filter pattern", pattern, "%r or %r" % (WHITE_LIST, BLACK_LIST))
