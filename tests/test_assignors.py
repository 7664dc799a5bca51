"""Tests for zkconsumer.assignors and zkconsumer.topic_count (Kafka 1.1.1 ``RangeAssignor``, ``RoundRobinAssignor``,
``TopicCount``, ``ZkUtils.getConsumersPerTopic``)."""

import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st

from zkconsumer.assignors import (assignment_for, get_assignor, java_string_hashcode, own_assignment, range_assign,
                                  range_assign_for, roundrobin_assign, roundrobin_partition_order, thread_owner)
from zkconsumer.errors import ConfigError, RebalanceError
from zkconsumer.topic_count import consumers_per_topic, sort_thread_ids, thread_ids_per_topic


# ---------------------------------------------------------------- Java String.hashCode

def independent_hashcode(s):
    """Second implementation: explicit surrogate split with ord arithmetic and signed reinterpretation."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % (1 << 32)
    return h if h < (1 << 31) else h - (1 << 32)


@pytest.mark.parametrize("s, expected", [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -2147483648),
    ("\U0001F600", 0xD83D * 31 + 0xDE00),
])
def test_java_hashcode_known_values(s, expected):
    assert java_string_hashcode(s) == expected


def test_java_hashcode_topic_partition_strings():
    assert java_string_hashcode("[t,0]") == independent_hashcode("[t,0]")
    # by hand: '['=91 't'=116 ','=44 '0'=48 ']'=93
    h = 0
    for c in (91, 116, 44, 48, 93):
        h = 31 * h + c
    assert java_string_hashcode("[t,0]") == h


@given(st.text(max_size=60))
def test_java_hashcode_matches_independent(s):
    h = java_string_hashcode(s)
    assert h == independent_hashcode(s)
    assert -2 ** 31 <= h < 2 ** 31


# ---------------------------------------------------------------- range

def test_range_ten_partitions_three_threads():
    a = range_assign({"t": ["c-0", "c-1", "c-2"]}, {"t": list(range(10))})
    owners = {tid: sorted(p for (_, p), o in a.items() if o == tid) for tid in ("c-0", "c-1", "c-2")}
    assert owners == {"c-0": [0, 1, 2, 3], "c-1": [4, 5, 6], "c-2": [7, 8, 9]}


def test_range_source_comment_example():
    a = range_assign({"t": ["C2-1", "C1-0", "C2-0", "C1-1"]}, {"t": [4, 3, 2, 1, 0]})
    assert a == {("t", 0): "C1-0", ("t", 1): "C1-0", ("t", 2): "C1-1", ("t", 3): "C2-0", ("t", 4): "C2-1"}


def test_thread_ids_sort_as_strings():
    threads = ["c-%d" % i for i in range(11)]
    assert sort_thread_ids(threads)[:3] == ["c-0", "c-1", "c-10"]
    a = range_assign({"t": threads}, {"t": list(range(11))})
    assert a[("t", 2)] == "c-10" and a[("t", 3)] == "c-2"


def test_range_more_threads_than_partitions():
    a = range_assign({"t": ["a-0", "a-1", "b-0"]}, {"t": [0, 1]})
    assert a == {("t", 0): "a-0", ("t", 1): "a-1"}


def test_range_edge_cases():
    assert range_assign({}, {"t": [0, 1]}) == {}                          # topic nobody consumes
    assert range_assign({"t": []}, {"t": [0]}) == {}
    assert range_assign({"t": ["a-0"]}, {"t": []}) == {}                  # zero partitions
    assert range_assign({"t": ["a-0"]}, {}) == {}                         # topic without a partition map
    with pytest.raises(RebalanceError):
        range_assign({"t": ["a-0", "a-0"]}, {"t": [0]})
    with pytest.raises(RebalanceError):
        roundrobin_assign({"t": ["a-0", "b-0", "a-0"]}, {"t": [0]})
    with pytest.raises(RebalanceError):
        range_assign({"t": ["a-0"]}, {"t": [0, 0]})


def test_range_per_topic_extra_partitions_go_to_lowest_threads():
    a = range_assign({"x": ["a-0", "b-0"], "y": ["a-0", "b-0"]}, {"x": [0, 1, 2], "y": [0, 1, 2]})
    assert [a[("x", p)] for p in range(3)] == ["a-0", "a-0", "b-0"]
    assert [a[("y", p)] for p in range(3)] == ["a-0", "a-0", "b-0"]


# ---------------------------------------------------------------- roundrobin

NEW_FMT, OLD_FMT = "%s-%d", "[%s,%d]"  # TopicAndPartition.toString from Kafka 1.0 / up to 0.11


def scala_like_roundrobin(consumers_for_topic, partitions_for_topic, fmt=NEW_FMT):
    """Independent transliteration: itertools.cycle + dropwhile on the shared iterator, stable sort by hash."""
    all_threads = sorted({t for ts in consumers_for_topic.values() for t in ts})
    circle = itertools.cycle(all_threads)
    layout = [(t, p) for t in sorted(consumers_for_topic) for p in sorted(partitions_for_topic.get(t, []))]
    layout.sort(key=lambda tp: independent_hashcode(fmt % tp))    # stable, like java.util.Arrays.sort
    out = {}
    for topic, p in layout:
        out[(topic, p)] = next(itertools.dropwhile(lambda t: t not in consumers_for_topic[topic], circle))
    return out


def pre_0_10_2_roundrobin(consumers_for_topic, partitions_for_topic, fmt=OLD_FMT):
    """0.8.2-0.10.1: identical thread sets required; plain round robin over the head set."""
    sets = [set(v) for v in consumers_for_topic.values()]
    assert all(s == sets[0] for s in sets)
    circle = itertools.cycle(sorted(sets[0]))
    layout = sorted(((t, p) for t in sorted(consumers_for_topic) for p in partitions_for_topic[t]),
                    key=lambda tp: independent_hashcode(fmt % tp))
    return {tp: next(circle) for tp in layout}


def test_roundrobin_identical_subscriptions_match_pre_0_10_2():
    threads = ["c1-0", "c1-1", "c2-0", "c2-1", "c2-10"]
    cft = {t: list(threads) for t in ("orders", "clicks", "views")}
    pft = {"orders": list(range(7)), "clicks": list(range(3)), "views": list(range(12))}
    a = roundrobin_assign(cft, pft, legacy_version="0.10")
    assert a == pre_0_10_2_roundrobin(cft, pft)
    counts = [list(a.values()).count(t) for t in threads]
    assert max(counts) - min(counts) <= 1
    # Kafka 1.0+ hashes "topic-partition": the same algorithm over another layout
    assert roundrobin_assign(cft, pft) == pre_0_10_2_roundrobin(cft, pft, NEW_FMT) != a


@pytest.mark.parametrize("version,fmt", [("0.8.2", "[t,%d]"), ("0.11", "[t,%d]"), ("1.0", "t-%d"), ("1.1", "t-%d")])
def test_roundrobin_layout_is_by_hashcode(version, fmt):
    layout = roundrobin_partition_order([("t", p) for p in range(12)], version)
    hashes = [java_string_hashcode(fmt % p) for _, p in layout]
    assert hashes == sorted(hashes)
    # equal hash codes across topics ("Aa" vs "BB") are broken by topic; same-topic order stays ascending
    assert roundrobin_partition_order([("BB", 0), ("Aa", 0)]) == [("Aa", 0), ("BB", 0)]


def test_roundrobin_mixed_subscriptions_hand_checked():
    # t1 consumed by a-0 only; t2 by a-0 and b-0.  Circle: a-0, b-0, a-0, ...
    cft = {"t1": ["a-0"], "t2": ["a-0", "b-0"]}
    pft = {"t1": [0, 1], "t2": [0, 1]}
    layout = roundrobin_partition_order([("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)])
    # "[t1,p]" < "[t2,p]" by hash (last-but-two unit differs by 1, times 31^3), p ascending within a topic
    assert layout == [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)]
    # t1/0 -> a-0 (cursor -> b-0); t1/1: skip b-0 -> a-0 (cursor -> b-0); t2/0 -> b-0; t2/1 -> a-0
    assert roundrobin_assign(cft, pft) == {("t1", 0): "a-0", ("t1", 1): "a-0", ("t2", 0): "b-0", ("t2", 1): "a-0"}
    assert roundrobin_assign(cft, pft) == scala_like_roundrobin(cft, pft)


def test_roundrobin_edge_cases():
    assert roundrobin_assign({}, {"t": [0]}) == {}
    assert roundrobin_assign({"t": []}, {"t": [0]}) == {}
    assert roundrobin_assign({"t": ["a-0"]}, {"t": []}) == {}
    assert roundrobin_assign({"t": ["a-0", "b-0", "c-0"]}, {"t": [0]}) == {("t", 0): "a-0"}
    assert roundrobin_assign({"t": ["a-0"], "u": ["b-0"]}, {"t": [0, 1]}) == {("t", 0): "a-0", ("t", 1): "a-0"}


# ---------------------------------------------------------------- helpers

def test_get_assignor():
    assert get_assignor("range") is range_assign
    assert get_assignor("roundrobin") is roundrobin_assign
    assert get_assignor("range", "0.10") is range_assign
    assert get_assignor("roundrobin", "0.10")({"t": ["a-0", "b-0"]}, {"t": [0, 1]}) == \
        roundrobin_assign({"t": ["a-0", "b-0"]}, {"t": [0, 1]}, legacy_version="0.10")
    with pytest.raises(RebalanceError, match="legacy.consumer.version"):
        get_assignor("roundrobin", "2.0")
    for bad in ("Range", "round-robin", "", None):
        with pytest.raises(ConfigError):
            get_assignor(bad)


def test_assignment_for_uses_last_dash():
    g = {("t", 0): "grp_host-1-abc-0", ("t", 1): "grp_host-1-abc-1", ("t", 2): "grp_host-1-0",
         ("t", 3): "grp_host-1-abc-x", ("t", 4): "grp_host-1-abc-10"}
    assert assignment_for("grp_host-1-abc", g) == {("t", 0): "grp_host-1-abc-0", ("t", 1): "grp_host-1-abc-1",
                                                   ("t", 4): "grp_host-1-abc-10"}
    assert assignment_for("grp_host", g) == {}
    assert assignment_for("grp_host-1", g) == {("t", 2): "grp_host-1-0"}
    assert thread_owner("nodash") is None and thread_owner("a-") is None


# ---------------------------------------------------------------- topic_count

def test_thread_ids_static_and_wildcard():
    assert thread_ids_per_topic("c", {"a": 2, "b": 1}, "static", []) == {"a": ["c-0", "c-1"], "b": ["c-0"]}
    topics = ["mirror.a", "mirror.b", "other", "__consumer_offsets"]
    assert thread_ids_per_topic("c", {"mirror\\..*": 2}, "white_list", topics) == \
        {"mirror.a": ["c-0", "c-1"], "mirror.b": ["c-0", "c-1"]}
    assert thread_ids_per_topic("c", {"mirror\\..*": 1}, "black_list", topics) == {"other": ["c-0"]}
    assert thread_ids_per_topic("c", {"mirror\\..*": 1}, "black_list", topics, exclude_internal_topics=False) \
        == {"other": ["c-0"], "__consumer_offsets": ["c-0"]}
    # unknown pattern / empty subscription -> static (Scala rule); static is not filtered for internal topics
    assert thread_ids_per_topic("c", {"x.*": 1}, "bogus", topics) == {"x.*": ["c-0"]}
    assert thread_ids_per_topic("c", {}, "white_list", topics) == {}
    assert thread_ids_per_topic("c", {"__consumer_offsets": 1}, "static", []) == {"__consumer_offsets": ["c-0"]}
    for bad in ({"a": 0}, {"a": -1}, {"a": True}, {"a": "2"}):
        with pytest.raises(RebalanceError):
            thread_ids_per_topic("c", bad, "static", [])
    with pytest.raises(RebalanceError):
        thread_ids_per_topic("c", {"a": 1, "b": 1}, "white_list", topics)
    with pytest.raises(RebalanceError):
        thread_ids_per_topic("c", {"(": 1}, "white_list", topics)


def test_consumers_per_topic_sorted_as_strings():
    members = {"g_b": ({"t": 1}, "static"), "g_a": ({"t": 11, "u": 1}, "static"),
               "g_w": ({"u|v": 1}, "white_list")}
    cpt = consumers_per_topic(members, ["t", "u", "v", "w"])
    assert cpt["t"][:4] == ["g_a-0", "g_a-1", "g_a-10", "g_a-2"] and cpt["t"][-1] == "g_b-0"
    assert cpt["u"] == ["g_a-0", "g_w-0"] and cpt["v"] == ["g_w-0"] and "w" not in cpt


# ---------------------------------------------------------------- properties

@st.composite
def groups(draw, identical=False):
    n_topics = draw(st.integers(1, 4))
    topics = ["t%d" % i for i in range(n_topics)] + draw(st.sampled_from([[], ["Aa", "BB"]]))
    n_members = draw(st.integers(1, 4))
    members = {}
    shared = {t: draw(st.integers(1, 3)) for t in topics}
    for m in range(n_members):
        cid = "g_host-%d" % draw(st.integers(0, 10 ** 6))
        if identical:
            sub = dict.fromkeys(topics, draw(st.integers(1, 12)))
        else:
            chosen = draw(st.lists(st.sampled_from(topics), unique=True, max_size=len(topics)))
            sub = {t: shared[t] + draw(st.integers(0, 11)) for t in chosen}
        members[cid] = (sub, "static")
    cft = consumers_per_topic(members, topics)
    pft = {t: list(range(draw(st.integers(0, 25)))) for t in topics}
    return cft, pft


def shuffled(cft, pft, rnd):
    def shuf(xs):
        xs = list(xs)
        rnd.shuffle(xs)
        return xs
    c_items, p_items = shuf(cft.items()), shuf(pft.items())
    return {t: shuf(v) for t, v in c_items}, {t: shuf(v) for t, v in p_items}


def check_common(assign, cft, pft, seed):
    a = assign(cft, pft)
    expected = {(t, p) for t, ts in cft.items() if ts for p in pft.get(t, [])}
    assert set(a) == expected                                      # exactly one owner each
    known = {tid for ts in cft.values() for tid in ts}
    for (t, _), tid in a.items():
        assert tid in known and tid in cft[t]                      # owner subscribes to the topic
    assert assign(*shuffled(cft, pft, random.Random(seed))) == a   # input order does not matter
    return a


@settings(max_examples=150, deadline=None)
@given(groups(), st.integers())
def test_range_properties(group, seed):
    cft, pft = group
    a = check_common(range_assign, cft, pft, seed)
    for t, ts in cft.items():
        counts = [sum(1 for (tt, _), o in a.items() if tt == t and o == tid) for tid in ts]
        assert max(counts) - min(counts) <= 1                      # per-topic balance
        # ranges are contiguous and follow the string order of threads
        owners = [a[(t, p)] for p in sorted(pft[t])]
        assert owners == sorted(owners, key=lambda x: x.encode("utf-16-be"))


@settings(max_examples=150, deadline=None)
@given(groups(), st.data())
def test_a_members_own_ranges_are_its_part_of_the_global_assignment(group, data):
    """range_assign_for (what a member computes) is assignment_for(range_assign(...)) for every member, for ids that
    are prefixes of each other ("a" and "a-1": thread "a-1-0" is a-1's) and for a consumer not in the group."""
    cft, pft = group
    members = sorted({thread_owner(tid) for ts in cft.values() for tid in ts})
    extra = data.draw(st.sampled_from(members or ["g_host-0"]))
    cft = {t: list(ts) + [extra + "-1-%d" % i for i in range(data.draw(st.integers(0, 2)))] for t, ts in cft.items()}
    whole = range_assign(cft, pft)
    for cid in members + [extra + "-1", "nobody"]:
        assert range_assign_for(cid, cft, pft) == assignment_for(cid, whole)
        assert own_assignment(range_assign, cid, cft, pft) == assignment_for(cid, whole)
        assert own_assignment(roundrobin_assign, cid, cft, pft) == assignment_for(cid, roundrobin_assign(cft, pft))


def test_bad_partition_ids_are_still_refused():
    for bad in ([0, -1], [0, True], [0, "1"], [0.0], [0, 0]):
        with pytest.raises(RebalanceError):
            range_assign_for("c", {"t": ["c-0"]}, {"t": bad})


@settings(max_examples=150, deadline=None)
@given(groups(), st.integers())
def test_roundrobin_properties(group, seed):
    cft, pft = group
    a = check_common(roundrobin_assign, cft, pft, seed)
    if not any(t in ("Aa", "BB") for t in cft):                    # no cross-topic hash ties: exact Scala order
        assert a == scala_like_roundrobin(cft, pft)
        assert roundrobin_assign(cft, pft, "0.10") == scala_like_roundrobin(cft, pft, OLD_FMT)


@settings(max_examples=100, deadline=None)
@given(groups(identical=True), st.integers())
def test_roundrobin_identical_balance(group, seed):
    cft, pft = group
    a = check_common(roundrobin_assign, cft, pft, seed)
    threads = set(next(iter(cft.values())))
    counts = [list(a.values()).count(t) for t in threads]
    assert max(counts) - min(counts) <= 1                          # overall balance within one
    if not any(t in ("Aa", "BB") for t in cft):
        assert a == pre_0_10_2_roundrobin(cft, pft, NEW_FMT)
