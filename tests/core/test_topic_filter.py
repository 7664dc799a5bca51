"""Tests for zkconsumer.core.subscription.topic_filter (Kafka's TopicFilter.scala)."""

import pytest

from zkconsumer.errors import ConfigError, ZkConsumerError
from zkconsumer.core.subscription.java_regex import translate_java_regex
from zkconsumer.core.subscription.topic_filter import Blacklist, Whitelist, normalise_regex, topic_filter_for


@pytest.mark.parametrize("raw, expected", [
    ("a.*", "a.*"),
    ("  orders,clicks ", "orders|clicks"),
    ("orders, clicks", "orders|clicks"),
    ("\"mirror\\..*\"", "mirror\\..*"),
    ("'a'", "a"),
    ("\"'a,b'\"", "a|b"),
    ("' a b '", "ab"),
    ("a\"b", "a\"b"),            # only leading/trailing quotes are stripped
])
def test_normalisation(raw, expected):
    assert normalise_regex(raw) == expected
    assert Whitelist(raw).regex == expected
    assert Blacklist(raw).regex == expected


def test_pattern_names():
    assert Whitelist("a").pattern == "white_list"
    assert Blacklist("a").pattern == "black_list"
    assert isinstance(topic_filter_for("white_list", "x"), Whitelist)
    assert isinstance(topic_filter_for("black_list", "x"), Blacklist)
    with pytest.raises(ConfigError):
        topic_filter_for("static", "x")


def test_full_match_semantics():
    w = Whitelist("orders")
    assert w.is_topic_allowed("orders")
    assert not w.is_topic_allowed("orders2")
    assert not w.is_topic_allowed("my-orders")
    w = Whitelist("mirror\\..*")
    assert w.is_topic_allowed("mirror.a")
    assert not w.is_topic_allowed("xmirror.a")
    assert not w.is_topic_allowed("mirror")
    w = Whitelist("a|b")
    assert w.is_topic_allowed("a") and w.is_topic_allowed("b") and not w.is_topic_allowed("ab")


def test_comma_list_whitelist_and_blacklist():
    w = Whitelist("orders, clicks")
    b = Blacklist("orders, clicks")
    for topic, listed in [("orders", True), ("clicks", True), ("views", False), ("orders.x", False)]:
        assert w.is_topic_allowed(topic) is listed
        assert b.is_topic_allowed(topic) is (not listed)


def test_internal_topic_exclusion():
    w = Whitelist(".*")
    b = Blacklist("nothing")
    assert not w.is_topic_allowed("__consumer_offsets")
    assert not w.is_topic_allowed("__consumer_offsets", exclude_internal_topics=True)
    assert w.is_topic_allowed("__consumer_offsets", exclude_internal_topics=False)
    assert not b.is_topic_allowed("__consumer_offsets")
    assert b.is_topic_allowed("__consumer_offsets", exclude_internal_topics=False)
    assert w.is_topic_allowed("__other")
    # blacklisting it explicitly still blocks it when internal topics are included
    assert not Blacklist("__consumer_offsets").is_topic_allowed("__consumer_offsets", exclude_internal_topics=False)


@pytest.mark.parametrize("bad", ["*", "a(", "(a", "a)", "[a-", "a{2,3}", "a{b", "{", "\\p{Foo}", "(?q)a",
                                 "\\b{g}", "a{1}{2}", "a\\", "(?c)a"])
def test_invalid_regex(bad):
    with pytest.raises(ConfigError) as info:
        Whitelist(bad)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ZkConsumerError)
    assert info.value.key == "topic filter"
    with pytest.raises(ConfigError):
        Blacklist(bad)


def test_java_constructs_translated():
    assert Whitelist("\\p{Alpha}+\\p{Digit}").is_topic_allowed("abc1")
    assert not Whitelist("\\p{Alpha}+").is_topic_allowed("abc1")
    assert Whitelist("\\P{Digit}+").is_topic_allowed("abc")
    assert Whitelist("[\\p{Lower}_]+").is_topic_allowed("a_b")
    assert Whitelist("\\Qa.b\\E").is_topic_allowed("a.b")
    assert not Whitelist("\\Qa.b\\E").is_topic_allowed("axb")
    assert Whitelist("(?<x>ab)\\k<x>").is_topic_allowed("abab")
    assert Whitelist("(?i)orders").is_topic_allowed("ORDERS")
    w = Whitelist("a(?i)b")            # Java: flag applies to the rest of the pattern
    assert w.is_topic_allowed("aB") and not w.is_topic_allowed("AB")
    w = Whitelist("x(y(?i)z)w")        # ... up to the end of the enclosing group
    assert w.is_topic_allowed("xyZw") and not w.is_topic_allowed("xyZW")
    assert Whitelist("a++b").is_topic_allowed("aab")      # possessive (native in 3.11)
    assert Whitelist("a\\x{41}").is_topic_allowed("aA")
    assert Whitelist("a{2}").is_topic_allowed("aa")
    assert normalise_regex("a{2,}") == "a{2|}"          # Scala's comma replacement breaks repetitions...
    with pytest.raises(ConfigError):
        Whitelist("a{2,}")                               # ...and Java then rejects the pattern too
    assert translate_java_regex("a\\z") == "a\\Z"


def test_java_only_syntax_evaluated():
    w = Whitelist("\\p{Lu}[a-z]+")
    assert w.is_topic_allowed("Orders") and not w.is_topic_allowed("orders") and not w.is_topic_allowed("ORDERS")
    w = Whitelist("[a-z&&[^e]]+")
    assert w.is_topic_allowed("abc") and not w.is_topic_allowed("abe")
    assert Whitelist("[a-c[x-z]]+").is_topic_allowed("axz")
    assert Whitelist("[^a[b]]+").is_topic_allowed("cd") and not Whitelist("[^a[b]]+").is_topic_allowed("cb")
    assert Whitelist("\\p{javaLowerCase}+").is_topic_allowed("\u00e9t\u00e9")
    assert Whitelist("(?iu)\u00e9").is_topic_allowed("\u00c9") and not Whitelist("(?i)\u00e9").is_topic_allowed("\u00c9")
    assert Whitelist("a++").is_topic_allowed("aa") and not Whitelist("a++a").is_topic_allowed("aa")
    assert Whitelist("\\Qa.b\\E|c").is_topic_allowed("a.b") and Whitelist("\\Qa.b\\E|c").is_topic_allowed("c")


def test_ascii_semantics_like_java():
    # Java's \d and \w are ASCII-only by default
    assert not Whitelist("\\d").is_topic_allowed("\u0663")
    assert not Whitelist("\\w").is_topic_allowed("\u00e9")


def test_equality_and_str():
    assert Whitelist(" a,b ") == Whitelist("a|b")
    assert Whitelist("a") != Blacklist("a")
    assert str(Whitelist("'x'")) == "x"
    assert len({Whitelist("a"), Whitelist("a")}) == 1
