"""The library API (``ZookeeperConsumerConnector``) in-process, against real ZooKeeper + broker.

Streams, mixed subscriptions, consumer.timeout.ms, rebalance-listener ordering relative to the owner znodes,
commit_offsets(), shutdown() clean-up, wildcard subscriptions and partition-map growth.
"""
import time

import pytest

from consumer_helpers import (StreamCollector, connector, expected_range, owners, produce_tracked, wait_until)
from zkconsumer.consumer import RebalanceListener, Whitelist
from zkconsumer.errors import ConsumerTimeoutError
from zkconsumer.layout import paths


def _start_collectors(streams):
    cols = [StreamCollector(s, name="collector-%d" % i) for i, s in enumerate(streams)]
    for c in cols:
        c.start()
    return cols


def _offset(zk, group, topic, p):
    path = paths.partition_offset_path(group, topic, p)
    return int(zk.get(path)[0].decode()) if zk.exists(path) else None


def test_two_streams_each_gets_only_its_threads_partitions(services, zk, unique, conns):
    g, t = unique("g"), unique("t")
    services.create_topic(t, 4)
    conn = connector(services, g)
    conns.append(conn)
    streams = conn.create_message_streams({t: 2})[t]
    assert len(streams) == 2
    own = wait_until(lambda: len(owners(zk, g, [t])) == 4 and owners(zk, g, [t]), 10, message="owner nodes")
    cid = conn.consumer_id
    # range inside one member: threads <cid>-0, <cid>-1 (sorted as strings) get p0-p1 and p2-p3
    assert own == {(t, 0): cid + "-0", (t, 1): cid + "-0", (t, 2): cid + "-1", (t, 3): cid + "-1"}
    assert own == expected_range(zk, g, [t])
    cols = _start_collectors(streams)
    produced = produce_tracked(services.bootstrap_servers, t, 80, partitions=4)
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: set(cols[0].seen()) | set(cols[1].seen()) == want, 15, message="all 80 delivered")
    for i, col in enumerate(cols):
        parts = {p for _, p, _ in col.seen()}
        assert parts == {p for (_, p), th in own.items() if th == "%s-%d" % (cid, i)}, \
            "stream %d got partitions %s" % (i, parts)
        for p in parts:  # in offset order within a partition
            offs = [o for _, q, o in col.seen() if q == p]
            assert offs == sorted(offs) == list(range(len(offs)))


def test_mixed_subscriptions_range_per_topic(services, zk, unique, conns):
    g, x, y = unique("g"), unique("x"), unique("y")
    services.create_topic(x, 4)
    services.create_topic(y, 4)
    a = connector(services, g, **{"consumer.id": "a"})
    conns.append(a)
    a_streams = a.create_message_streams({x: 1, y: 1})
    b = connector(services, g, **{"consumer.id": "b"})
    conns.append(b)
    [b_stream] = b.create_message_streams({y: 1})[y]

    want = {**{(x, p): g + "_a-0" for p in range(4)},
            (y, 0): g + "_a-0", (y, 1): g + "_a-0", (y, 2): g + "_b-0", (y, 3): g + "_b-0"}
    wait_until(lambda: owners(zk, g, [x, y]) == want, 15, message="mixed assignment")
    assert expected_range(zk, g, [x, y]) == want
    assert a.owned_partitions() == {tp: th for tp, th in want.items() if th.startswith(g + "_a")}
    assert b.owned_partitions() == {(y, 2): g + "_b-0", (y, 3): g + "_b-0"}

    col_ax, col_ay, col_b = _start_collectors([a_streams[x][0], a_streams[y][0], b_stream])
    px = produce_tracked(services.bootstrap_servers, x, 20, partitions=4, tag="x")
    py = produce_tracked(services.bootstrap_servers, y, 20, partitions=4, tag="y")
    wait_until(lambda: len(col_ax.seen()) == 20 and len(col_ay.seen()) + len(col_b.seen()) == 20, 15,
               message="delivery")
    assert set(col_ax.seen()) == {(x, p, o) for p, o, _ in px}
    assert set(col_ay.seen()) == {(y, p, o) for p, o, _ in py if p in (0, 1)}
    assert set(col_b.seen()) == {(y, p, o) for p, o, _ in py if p in (2, 3)}


def test_consumer_timeout_raises_and_iteration_continues(services, unique, conns):
    g, t = unique("g"), unique("t")
    services.create_topic(t, 1)
    conn = connector(services, g, **{"consumer.timeout.ms": "500"})
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    it = iter(stream)
    t0 = time.monotonic()
    with pytest.raises(ConsumerTimeoutError):
        next(it)
    assert 0.4 <= time.monotonic() - t0 < 5
    with pytest.raises(ConsumerTimeoutError):  # again: still nothing, still a timeout (not StopIteration)
        next(it)
    produced = produce_tracked(services.bootstrap_servers, t, 3, partition=0)
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 3 and time.monotonic() < deadline:
        try:
            got.append(next(it))
        except ConsumerTimeoutError:
            continue
    assert [(m.partition, m.offset, m.value.decode()) for m in got] == produced
    with pytest.raises(ConsumerTimeoutError):  # drained: times out again
        next(it)


class _CheckingListener(RebalanceListener):
    """Records every hook call with the state of the owner znodes at that moment (read with a separate client)."""

    def __init__(self, zk, group):
        self.zk, self.group = zk, group
        self.calls = []
        self.conn = None

    def _nodes(self, partitions):
        out = {}
        for t, p in partitions:
            path = paths.partition_owner_path(self.group, t, p)
            st = self.zk.exists(path)
            out[(t, p)] = self.zk.get(path)[0].decode() if st else None
        return out

    def on_revoke(self, partitions):
        self.calls.append(("revoke", set(partitions), self._nodes(partitions)))

    def on_assign(self, partitions):
        self.calls.append(("assign", set(partitions), self._nodes(partitions)))

    def on_lost(self, partitions):
        self.calls.append(("lost", set(partitions), None))


def test_listener_revoke_before_release_and_assign_after_claim(services, zk, unique, conns):
    g, t = unique("g"), unique("t")
    services.create_topic(t, 4)
    la = _CheckingListener(zk, g)
    a = connector(services, g, listener=la, **{"consumer.id": "a"})
    conns.append(a)
    a.create_message_streams({t: 1})
    aid = a.consumer_id + "-0"
    wait_until(lambda: la.calls, 10, message="first assign")
    kind, parts, nodes = la.calls[0]
    assert kind == "assign" and parts == {(t, p) for p in range(4)}
    assert nodes == {(t, p): aid for p in range(4)}, "on_assign ran before the owner nodes were claimed"

    b = connector(services, g, **{"consumer.id": "b"})
    conns.append(b)
    b.create_message_streams({t: 1})
    wait_until(lambda: owners(zk, g, [t]) == expected_range(zk, g, [t]) and len(owners(zk, g, [t])) == 4, 15,
               message="two-member assignment")
    revokes = [c for c in la.calls if c[0] == "revoke"]
    assert revokes, la.calls
    kind, parts, nodes = revokes[0]
    assert parts == {(t, 2), (t, 3)}
    assert nodes == {(t, 2): aid, (t, 3): aid}, "on_revoke ran after the owner nodes were deleted: %s" % nodes
    assigns = [c for c in la.calls if c[0] == "assign"]
    assert assigns[-1][1] == {(t, 0), (t, 1)}
    assert assigns[-1][2] == {(t, 0): aid, (t, 1): aid}

    n = len(la.calls)
    a.shutdown()
    kind, parts, nodes = la.calls[n]
    assert kind == "revoke" and parts == {(t, 0), (t, 1)}
    assert nodes == {(t, 0): aid, (t, 1): aid}, "shutdown: on_revoke after the owner nodes were deleted"
    assert not [c for c in la.calls if c[0] == "lost"]


def test_commit_offsets_writes_next_offsets(services, zk, unique, conns):
    g, t = unique("g"), unique("t")
    services.create_topic(t, 2)
    produced = produce_tracked(services.bootstrap_servers, t, 20, partitions=2)
    conn = connector(services, g, **{"auto.commit.enable": "false", "consumer.timeout.ms": "3000"})
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    got = [next(stream) for _ in range(15)]
    # nothing is committed without auto-commit until commit_offsets()
    assert _offset(zk, g, t, 0) is None and _offset(zk, g, t, 1) is None
    conn.commit_offsets(raise_errors=True)
    last = {}
    for m in got:
        last[m.partition] = max(last.get(m.partition, -1), m.offset)
    for p, off in last.items():
        assert _offset(zk, g, t, p) == off + 1
    # the rest, then commit again: next offsets are the log ends
    rest = []
    while len(got) + len(rest) < 20:
        rest.append(next(stream))
    conn.commit_offsets(raise_errors=True)
    for p in (0, 1):
        assert _offset(zk, g, t, p) == 1 + max(o for q, o, _ in produced if q == p)
    assert {(m.partition, m.offset) for m in got + rest} == {(p, o) for p, o, _ in produced}


def test_shutdown_removes_owner_nodes_and_registration(services, zk, unique, conns):
    g, t = unique("g"), unique("t")
    services.create_topic(t, 3)
    conn = connector(services, g)
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    reg = paths.consumer_registration_path(g, conn.consumer_id)
    assert zk.exists(reg) is not None
    wait_until(lambda: len(owners(zk, g, [t])) == 3, 10, message="owner nodes")
    assert zk.exists(reg).ephemeralOwner == conn.zk.client_id[0]
    col = _start_collectors([stream])[0]
    t0 = time.monotonic()
    conn.shutdown()
    assert time.monotonic() - t0 < 15
    # checked right away (not after a session timeout): deleted explicitly, not left to expire
    assert zk.exists(reg) is None
    assert owners(zk, g, [t]) == {}
    col.join(5)
    assert not col.is_alive(), "stream iteration did not end after shutdown()"
    assert col.error is None
    with pytest.raises(StopIteration):
        next(stream)
    conn.shutdown()  # idempotent


def test_wildcard_picks_up_topic_created_later(services, zk, unique, conns):
    g = unique("g")
    prefix = unique("wl")
    early = services.create_topic(prefix + "-a", 2)
    conn = connector(services, g)
    conns.append(conn)
    [stream] = conn.create_message_streams_by_filter(Whitelist(prefix + "-.*"), 1)
    col = _start_collectors([stream])[0]
    wait_until(lambda: len(owners(zk, g, [early])) == 2, 10, message="owner nodes of the early topic")
    late = services.create_topic(prefix + "-b", 3)
    services.create_topic(unique("other"), 1)  # not matching: must not be claimed
    wait_until(lambda: set(conn.owned_partitions()) == {(early, 0), (early, 1), (late, 0), (late, 1), (late, 2)},
               15, message="the late topic to be claimed without restart")
    assert owners(zk, g, [late]) == {(late, p): conn.consumer_id + "-0" for p in range(3)}
    pl = produce_tracked(services.bootstrap_servers, late, 12, partitions=3, tag="late")
    pe = produce_tracked(services.bootstrap_servers, early, 4, partitions=2, tag="early")
    want = {(late, p, o) for p, o, _ in pl} | {(early, p, o) for p, o, _ in pe}
    wait_until(lambda: set(col.seen()) == want, 15, message="messages of both topics")
    assert all(tp[0] in (early, late) for tp in conn.owned_partitions())


def test_added_partitions_are_picked_up(services, zk, unique, conns):
    """Partitions added to a topic (CreatePartitions; the controller rewrites /brokers/topics/[t] with the larger
    partition map and the consumer's data watch on that node fires): the member must end up owning and consuming
    every new partition."""
    g, t = unique("g"), unique("grow")
    services.create_topic(t, 2)
    conn = connector(services, g)
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    col = _start_collectors([stream])[0]
    wait_until(lambda: len(owners(zk, g, [t])) == 2, 10, message="owner nodes of 2 partitions")
    services.create_topic(t, 5)  # grows the topic in place

    want_owned = {(t, p): conn.consumer_id + "-0" for p in range(5)}
    wait_until(lambda: conn.owned_partitions() == want_owned and owners(zk, g, [t]) == want_owned, 20,
               message="all 5 partitions owned after the partition map grew")
    produced = []
    for p in range(5):
        produced += produce_tracked(services.bootstrap_servers, t, 3, partition=p, tag="p%d" % p)
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(col.seen()), 15, message="messages of the new partitions")


def admin_topics(services):
    from zkconsumer.kafka_metadata import admin_client, fetch_cluster_metadata
    admin = admin_client(services.bootstrap_servers)
    try:
        return set(fetch_cluster_metadata(admin).topics)
    finally:
        admin.close()


def test_member_left_with_no_partitions_after_an_offset_reset_rebalances_cleanly(services, zk, unique, conns):
    # A member whose fetcher reset offsets (auto.offset.reset, fresh group) and then loses every partition applies
    # that empty assignment without a failed attempt: no reset state of the partitions it gave up is left behind.
    g, t = unique("g"), unique("t")
    services.create_topic(t, 1)
    services.produce(t, 5)
    late = connector(services, g, **{"consumer.id": "b"})
    conns.append(late)
    [s_late] = late.create_message_streams({t: 1})[t]
    wait_until(lambda: owners(zk, g, [t]) == {(t, 0): late.consumer_id + "-0"}, 15, message="b owns the partition")
    [col] = _start_collectors([s_late])
    wait_until(lambda: len(col.seen()) == 5, 15, message="b consumed from the reset offset (auto.offset.reset)")
    early = connector(services, g, **{"consumer.id": "a"})  # sorts first: range gives it the only partition
    conns.append(early)
    early.create_message_streams({t: 1})
    wait_until(lambda: owners(zk, g, [t]) == {(t, 0): early.consumer_id + "-0"}, 15, message="a owns the partition")
    wait_until(lambda: late.rebalancer.state in ("IDLE", "FETCHING"), 15, message="b settled")
    assert late.metrics()["OwnedPartitionsCount"] == 0
    assert late.metrics()["RebalanceRateAndTime"]["failed_attempts"] == 0
