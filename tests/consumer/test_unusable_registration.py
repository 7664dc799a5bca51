"""One member whose registration cannot be evaluated must not stall the group.

The rule (zkconsumer.core.subscription.topic_count.consumers_per_topic,
zkconsumer.consumer.group_view.read_group): a registration
that is not JSON, lacks ``pattern``/``subscription``, has a bad stream count, a wildcard subscription without
exactly one key, or a regex that cannot be evaluated gives that member no thread id; the other members are
assigned all the partitions of their topics; one error naming the member and its pattern is logged per version of
its registration znode.
"""
import json
import logging

import pytest

from tests.support.consumer_helpers import CliConsumer, owners, produce_tracked, topic_partitions
from tests.support.waiting import wait_until
from zkconsumer.core.assignors import range_assign
from zkconsumer.consumer.group_view import read_group
from zkconsumer.core.layout import paths
from zkconsumer.core.subscription.topic_count import UnusableRegistration, consumers_per_topic, thread_ids_per_topic

# a construct java.util.regex accepts that zkconsumer does not evaluate (see tests/core/test_topic_filter_java.py)
UNEVALUABLE = "\\b{g}x.*"


@pytest.mark.parametrize("subscription, pattern", [
    ({"(": 1}, "white_list"),                 # Java rejects it too
    ({"a{2,}": 1}, "black_list"),             # (as Kafka normalises it: a{2|})
    ({UNEVALUABLE: 1}, "white_list"),         # Java accepts it, we cannot evaluate it
    ({"a.*": 1, "b.*": 1}, "white_list"),     # not exactly one regex key
    ({"t": 0}, "static"),                     # stream count < 1
    ({"t.*": -2}, "white_list"),
    (None, "static"),
])
def test_an_unusable_member_is_assigned_nothing_and_the_others_everything(subscription, pattern):
    topics = ["t", "u", "x1"]
    members = {"g_good": ({"t": 2, "u": 1}, "static"), "g_wild": ({"x.*": 1}, "white_list"),
               "g_bad": (subscription, pattern)}
    with pytest.raises(UnusableRegistration) as info:
        thread_ids_per_topic("g_bad", subscription, pattern, topics)
    assert "g_bad" in str(info.value) and str(pattern) in str(info.value)
    problems = {}
    cft = consumers_per_topic(members, topics, unusable=problems)
    assert cft == {"t": ["g_good-0", "g_good-1"], "u": ["g_good-0"], "x1": ["g_wild-0"]}
    assert list(problems) == ["g_bad"] and problems["g_bad"].consumer_id == "g_bad"
    # the same without the bad member: it changes nothing for the others
    del members["g_bad"]
    assert consumers_per_topic(members, topics) == cft
    assignment = range_assign(cft, {"t": [0, 1, 2, 3], "u": [0, 1], "x1": [0]})
    assert set(assignment) == {("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0), ("u", 1), ("x1", 0)}
    assert not any(th.startswith("g_bad") for th in assignment.values())


def test_a_java_only_whitelist_is_evaluated_not_skipped():
    members = {"g_jvm": ({"\\p{Lu}[a-z]+": 1}, "white_list"), "g_py": ({"Orders": 1}, "static")}
    problems = {}
    cft = consumers_per_topic(members, ["Orders", "orders", "ORDERS"], unusable=problems)
    assert problems == {}
    assert cft == {"Orders": ["g_jvm-0", "g_py-0"]}


def _register(zk, group, cid, body):
    path = paths.consumer_registration_path(group, cid)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)


def test_read_group_logs_one_error_per_registration_version(services, zk, unique, caplog):
    g, t = unique("unusable"), services.create_topic(unique("unusable"), 2)
    _register(zk, g, g + "_good", {"version": 1, "subscription": {t: 1}, "pattern": "static", "timestamp": "1"})
    _register(zk, g, g + "_bad", {"version": 1, "subscription": {UNEVALUABLE: 1}, "pattern": "white_list",
                                  "timestamp": "1"})
    _register(zk, g, g + "_junk", b"{not json")
    with caplog.at_level(logging.ERROR, logger="zkconsumer.consumer.group_view"):
        for _ in range(3):
            snap = read_group(zk, g)
            assert set(snap.members) == {g + "_good", g + "_bad"}
            assert snap.consumers_for_topic == {t: [g + "_good-0"]}
            assert snap.partitions == {t: [0, 1]}
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2, errors
    bad = [m for m in errors if g + "_bad" in m]
    assert len(bad) == 1 and UNEVALUABLE in bad[0] and "white_list" in bad[0], errors
    assert any(g + "_junk" in m and "malformed registration" in m for m in errors), errors
    # a new version of the registration is logged again, once
    caplog.clear()
    _register(zk, g, g + "_bad", {"version": 1, "subscription": {"(": 1}, "pattern": "black_list", "timestamp": "2"})
    with caplog.at_level(logging.ERROR, logger="zkconsumer.consumer.group_view"):
        read_group(zk, g)
        read_group(zk, g)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and g + "_bad" in errors[0] and "black_list" in errors[0], errors
    # a static subscription of a name that cannot be a topic (Kafka reads an unknown pattern kind as static)
    _register(zk, g, g + "_odd", {"version": 1, "subscription": {"x.*": 1}, "pattern": "whitelist", "timestamp": "1"})
    snap = read_group(zk, g)
    assert snap.partitions["x.*"] == [] and snap.consumers_for_topic[t] == [g + "_good-0"]


def test_live_member_consumes_everything_beside_an_unevaluable_jvm_registration(services, zk, unique, procs):
    """A registration znode written by hand for a fake member (as a JVM member with a whitelist we cannot evaluate
    would write it): a real zkconsumer member of the same group still owns and consumes every partition."""
    g, t = unique("unusable"), services.create_topic(unique("unusable"), 4)
    fake = g + "_jvmfake"
    _register(zk, g, fake, {"version": 1, "subscription": {UNEVALUABLE: 2}, "pattern": "white_list",
                            "timestamp": "1"})
    member = CliConsumer(services, g, [t], consumer_id="real")
    procs.append(member)
    produced = produce_tracked(services.bootstrap_servers, t, 40, partitions=4, tag="u")
    want = {(p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(member.seen(t)), 60, interval=0.2,
               message=lambda: "all 40 messages\n" + member.describe())
    assert owners(zk, g, [t]) == {(t, p): member.consumer_id + "-0" for p in topic_partitions(zk, t)}
    log = "\n".join(member.log)
    assert log.count(fake) == 1 and UNEVALUABLE in log, log
    assert "Traceback" not in log and "can't rebalance" not in log, log
    assert member.terminate() == 0, member.describe()


def test_live_java_only_whitelist_member_gets_its_share(services, zk, unique, procs):
    """The issue's example, ``\\p{Lu}[a-z]+``, written by hand for a fake member: it is evaluated as Java does, so
    the real member owns exactly the partitions the range assignment leaves it (the fake member's stay unowned)."""
    g = unique("javaonly")
    letters = "".join(chr(ord("a") + int(c, 16)) for c in unique("x").split("-")[1])
    t = services.create_topic("Q" + letters, 4)
    fake = g + "_jvmfake"
    _register(zk, g, fake, {"version": 1, "subscription": {"\\p{Lu}[a-z]+": 1}, "pattern": "white_list",
                            "timestamp": "1"})
    member = CliConsumer(services, g, [t], consumer_id="real")
    procs.append(member)
    cft = {t: sorted([fake + "-0", member.consumer_id + "-0"])}
    want = {tp: th for tp, th in range_assign(cft, {t: topic_partitions(zk, t)}).items()
            if th == member.consumer_id + "-0"}
    assert len(want) == 2
    wait_until(lambda: owners(zk, g, [t]) == want, 60, interval=0.2, message="the real member to own its share")
    assert "Traceback" not in "\n".join(member.log)
    assert member.terminate() == 0, member.describe()
