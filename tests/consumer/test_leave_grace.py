"""rebalance.leave.grace.ms: a rolling bounce of 4 members costs at most one reassignment per bounce (the bouncer's
own), where the legacy behaviour costs the others two rebalances per bounce; a leaver that does not come back hands
its partitions over when the grace ends; with a JVM-style member (no member info) in the group, markers are
ignored. Real ZooKeeper + Apache Kafka, in-process members."""
import threading
import time

import pytest

from tests.support.consumer_helpers import StreamCollector, connector, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.consumer import RebalanceListener
from zkconsumer.consumer import rebalancer as rebalancer_module
from zkconsumer.errors import ConfigError
from zkconsumer.core.layout import paths

PARTS = 8


class Counting(RebalanceListener):
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()

    def on_assign(self, partitions):
        with self.lock:
            self.events.append(("assign", time.monotonic(), frozenset(partitions)))

    def on_revoke(self, partitions):
        with self.lock:
            self.events.append(("revoke", time.monotonic(), frozenset(partitions)))

    def since(self, t0):
        with self.lock:
            return [e for e in self.events if e[1] >= t0 and e[2]]


def _start(services, g, t, cid, grace, conns, listeners, collectors):
    lis = Counting()
    props = {"consumer.id": cid, "rebalance.backoff.ms": "200"}
    if grace:
        props["rebalance.leave.grace.ms"] = str(grace)
    c = connector(services, g, listener=lis, **props)
    conns.append(c)
    [stream] = c.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    listeners[cid] = lis
    collectors.setdefault(cid, []).append(col)
    return c


def _full(members):
    owned = [tp for c in members.values() for tp in c.owned_partitions()]
    return len(owned) == PARTS and len(set(owned)) == PARTS


def _bounce_all(services, unique, conns, grace):
    g, t = unique("lg"), services.create_topic(unique("lg"), PARTS)
    listeners, collectors, members = {}, {}, {}
    for cid in "abcd":
        members[cid] = _start(services, g, t, cid, grace, conns, listeners, collectors)
    wait_until(lambda: _full(members), 40, message="4 members own the 8 partitions")
    produced = produce_tracked(services.bootstrap_servers, t, 80, partitions=PARTS, tag="before")
    others_changes = []
    for cid in "abcd":
        time.sleep(1.0)  # settled
        before = {k: set(c.owned_partitions()) for k, c in members.items()}
        t0 = time.monotonic()
        members[cid].shutdown()
        time.sleep(1.5)  # the restart takes a moment; a legacy group rebalances meanwhile
        members[cid] = _start(services, g, t, cid, grace, conns, listeners, collectors)
        wait_until(lambda: _full(members), 40, message="the group whole again after bouncing %s" % cid)
        time.sleep(1.0)
        others_changes.append(sum(len(listeners[k].since(t0)) for k in "abcd" if k != cid) // 2)
        if grace:
            assert {k: set(c.owned_partitions()) for k, c in members.items()} == before
    produced += produce_tracked(services.bootstrap_servers, t, 80, partitions=PARTS, tag="after")
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: want <= {x for cols in collectors.values() for col in cols for x in col.seen(t)}, 40,
               message="every message delivered")
    return others_changes, g


def test_rolling_bounce_with_leave_grace_costs_the_others_nothing(services, unique, conns, zk):
    changes, g = _bounce_all(services, unique, conns, grace=20000)
    assert changes == [0, 0, 0, 0], "the others were reassigned during a bounce: %s" % changes
    assert not zk.exists(paths.group_leaving_dir(g)) or zk.get_children(paths.group_leaving_dir(g)) == []
    print("\nleave grace: rebalances of the other members per bounce %s" % changes)


def test_rolling_bounce_without_grace_costs_the_others_two_rebalances(services, unique, conns):
    changes, _ = _bounce_all(services, unique, conns, grace=0)
    assert all(c >= 2 for c in changes), changes  # the legacy behaviour, for comparison (figures in the docs)
    print("\nno leave grace: rebalances of the other members per bounce %s" % changes)


def test_a_leaver_that_does_not_come_back_is_replaced_when_the_grace_ends(services, unique, conns):
    g, t = unique("lgx"), services.create_topic(unique("lgx"), 4)
    listeners, collectors, members = {}, {}, {}
    for cid in "ab":
        members[cid] = _start(services, g, t, cid, 3000, conns, listeners, collectors)
    wait_until(lambda: sum(len(c.owned_partitions()) for c in members.values()) == 4, 30, message="assigned")
    members["b"].shutdown()
    t0 = time.monotonic()
    time.sleep(1.5)
    assert len(members["a"].owned_partitions()) == 2, "b's partitions were taken inside its grace"
    wait_until(lambda: len(members["a"].owned_partitions()) == 4, 20, message="a takes b's partitions")
    took = time.monotonic() - t0
    assert 2.0 <= took <= 15, took
    members["b"].shutdown(leave_grace=False)  # idempotent


def test_markers_are_ignored_while_a_member_without_member_info_is_live(services, unique, conns, zk):
    """A JVM member cannot honour ghosts, so nobody does: its registration has no member info node."""
    g, t = unique("lgj"), services.create_topic(unique("lgj"), 4)
    listeners, collectors, members = {}, {}, {}
    for cid in "ab":
        members[cid] = _start(services, g, t, cid, 30000, conns, listeners, collectors)
    wait_until(lambda: sum(len(c.owned_partitions()) for c in members.values()) == 4, 30, message="assigned")
    zk.delete(paths.member_info_path(g, members["a"].consumer_id))  # a now looks like a JVM member
    members["b"].shutdown()
    wait_until(lambda: len(members["a"].owned_partitions()) == 4, 20,
               message="a takes b's partitions at once (no ghost with a JVM-style member live)")


def test_grace_needs_an_explicit_consumer_id(services, unique):
    with pytest.raises(ConfigError) as info:
        connector(services, unique("g"), **{"rebalance.leave.grace.ms": "5000"})
    assert "consumer.id" in str(info.value)


def test_a_joiner_is_never_listed_without_its_member_info(services, unique, conns, monkeypatch):
    """A member listed before its member info node exists looks like a JVM member: every member reading the group
    meanwhile turns the leave grace off and hands a ghost's partitions out. Publishing an info node is slowed down
    here (1 s) to hold that moment open if the joiner's comes after its registration (it comes with it, in one
    multi-op). b, ghost c and joiner a on 6 partitions: with the ghost b goes from 0-2 to 2-3; without it, b would
    take 3-5 (the ghost's) first."""
    g, t = unique("lgn"), services.create_topic(unique("lgn"), 6)
    listeners, collectors, members = {}, {}, {}
    for cid in "bc":
        members[cid] = _start(services, g, t, cid, 30000, conns, listeners, collectors)

    def owned(cid):
        return {tp[1] for tp in members[cid].owned_partitions()}

    wait_until(lambda: owned("b") == {0, 1, 2} and owned("c") == {3, 4, 5}, 30, message="b and c assigned")
    members["c"].shutdown()  # c leaves a marker: a ghost for 30 s
    time.sleep(1.0)
    assert owned("b") == {0, 1, 2}, "c's partitions were taken inside its grace"
    real = rebalancer_module.publish_member_info

    def slow(zk, group, consumer_id, info, **kw):
        if consumer_id.endswith("_a"):
            time.sleep(1.0)
        return real(zk, group, consumer_id, info, **kw)

    monkeypatch.setattr(rebalancer_module, "publish_member_info", slow)
    t0 = time.monotonic()
    members["a"] = _start(services, g, t, "a", 30000, conns, listeners, collectors)
    wait_until(lambda: owned("a") == {0, 1} and owned("b") == {2, 3}, 30, message="a joins beside ghost c")
    time.sleep(1.0)
    given = [{tp[1] for tp in e[2]} for e in listeners["b"].since(t0) if e[0] == "assign"]
    assert all(not parts & {4, 5} for parts in given), "b was handed the ghost's partitions: %s" % given
    assert owned("b") == {2, 3}
