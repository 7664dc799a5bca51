"""Chaos: restarting the servers under a running group, on a private cluster (the session-wide ZooKeeper and
broker are never touched).

* ZooKeeper server restart (stopped for less than the session timeout, started again on the same port and data
  dir): the members reconnect with their *same* sessions (no "lost" event, same ephemeral owners), the group stays
  at range_assign of 3, consumption continues, nothing lost;
* broker outage (SIGSTOP/SIGCONT) and a real Apache Kafka broker restart on the same port (its log dir kept): the
  members keep running, resume by themselves without a rebalance, and deliver every message exactly once.
"""
import time

import pytest

from tests.support.chaos_support import TimedConsumer, own_cluster_fixture
from tests.support.consumer_helpers import BackgroundProducer, group_members, produce_tracked, wait_for_assignment
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.core.layout import paths

pytestmark = pytest.mark.live

PARTITIONS = 6
SESSION_MS = 15000
PROPS = {"zookeeper.session.timeout.ms": str(SESSION_MS), "auto.commit.interval.ms": "200",
         "rebalance.backoff.ms": "200", "zookeeper.suspended.grace.ms": "1000", "refresh.leader.backoff.ms": "200"}


own = own_cluster_fixture("chaos-own-cluster")


@pytest.fixture
def ownzk(own):
    client = zkmod.connect(own.zookeeper_connect, session_timeout_ms=SESSION_MS)
    yield client
    zkmod.close(client)


def _start_group(own, zk, procs, g, t):
    for name in ("a", "b", "c"):
        procs.append(TimedConsumer(own, g, [t], consumer_id=name, props=PROPS))
    return wait_for_assignment(zk, g, [t], 3, timeout=40)


def _all_delivered(procs, t, produced, timeout):
    want = {(p, o) for p, o, _ in produced}

    def union():
        return {x for c in procs for x in c.seen(t)}
    try:
        wait_until(lambda: want <= union(), timeout, interval=0.3, message="every produced message to be printed")
    except AssertionError:
        miss = sorted(want - union())
        raise AssertionError("%d of %d never printed, e.g. %s\n%s" % (len(miss), len(want), miss[:10],
                                                                     "\n".join(c.describe() for c in procs)))


def test_zookeeper_server_restart(own, ownzk, unique, procs):
    g, t = unique("zkr"), unique("zkr")
    own.create_topic(t, PARTITIONS)
    before = _start_group(own, ownzk, procs, g, t)
    sessions = {c.consumer_id: ownzk.exists(paths.consumer_registration_path(g, c.consumer_id)).ephemeralOwner
                for c in procs}
    producer = BackgroundProducer(own.bootstrap_servers, t, PARTITIONS, batch=6, pause=0.1, tag="zkr")
    producer.start()
    try:
        wait_until(lambda: all(c.seen(t) for c in procs), 20, message="every member to consume")
        own.stop("zookeeper")
        stopped_at = time.monotonic()
        time.sleep(4.0)  # well below the 15 s session timeout; the producer keeps going (broker is up)
        own.start_zookeeper()
        restarted_at = time.monotonic()
        assert restarted_at - stopped_at < SESSION_MS / 1000.0 - 3
        wait_until(lambda: ownzk.connected and ownzk.exists(paths.group_ids_path(g)), 20,
                   message="the test's own client to reconnect")
        after = wait_for_assignment(ownzk, g, [t], 3, timeout=30)
        n_after = {c.name: len(c.seen(t)) for c in procs}
        wait_until(lambda: all(len(c.seen(t)) > n_after[c.name] for c in procs), 20,
                   message="every member to consume after the restart")
    finally:
        produced = producer.stop()
    assert after == before, "the assignment changed across a ZooKeeper restart that kept every session"
    for c in procs:
        st = ownzk.exists(paths.consumer_registration_path(g, c.consumer_id))
        assert st is not None and st.ephemeralOwner == sessions[c.consumer_id], "%s got a new session\n%s" % (c.name, "\n".join(x.describe() for x in procs))
        assert not any(e["event"] == "lost" for e in c.timed_events()), c.describe()
        assert c.alive(), c.describe()
        assert not c.stderr_problems(), c.describe()
    _all_delivered(procs, t, produced, 30)


def test_broker_outage_and_restart(own, ownzk, unique, procs):
    g, t = unique("brk"), unique("brk")
    own.create_topic(t, PARTITIONS)
    assignment = _start_group(own, ownzk, procs, g, t)

    # 1. outage: the broker frozen for 6 s (connections stay open, requests time out)
    produced = produce_tracked(own.bootstrap_servers, t, 60, partitions=PARTITIONS, tag="pre")
    _all_delivered(procs, t, produced, 30)
    own.freeze("broker")
    try:
        time.sleep(6.0)
    finally:
        own.thaw("broker")
    produced += produce_tracked(own.bootstrap_servers, t, 60, partitions=PARTITIONS, tag="thawed")
    _all_delivered(procs, t, produced, 40)
    assert wait_for_assignment(ownzk, g, [t], 3, timeout=20) == assignment

    # 2. a real restart on the same port (SIGTERM: controlled shutdown; the log dir is kept). The members keep
    # their assignment (no ZooKeeper change), reconnect by themselves, lose nothing and deliver nothing twice.
    def delivered():
        return [(r["partition"], r["offset"]) for c in procs for r in list(c.records) if r["topic"] == t]
    before_restart = len(delivered())
    own.stop("broker")
    time.sleep(2.0)
    own.start_broker()
    restarted_at = time.monotonic()
    fresh = produce_tracked(own.bootstrap_servers, t, 120, partitions=PARTITIONS, tag="fresh")
    produced += fresh
    _all_delivered(procs, t, produced, 60)
    resumed_after = max(r["_t"] for c in procs for r in list(c.records)
                        if r["topic"] == t and r["value"].startswith("fresh")) - restarted_at
    seen = delivered()
    dups = sorted({x for x in seen if seen.count(x) > 1})
    assert not dups, "delivered twice across a broker restart: %s" % dups[:10]
    assert len(seen) == len(produced) and len(seen) > before_restart
    assert wait_for_assignment(ownzk, g, [t], 3, timeout=30) == assignment
    assert set(group_members(ownzk, g)) == {c.consumer_id for c in procs}
    for c in procs:
        assert c.alive(), c.describe()
        assert not c.stderr_problems(), c.describe()
        assert not any(e["event"] in ("lost", "revoke") and e["_t"] > restarted_at - 3
                       for e in c.timed_events()), c.describe()
    print("\nbroker restart: every message delivered once; last fresh message %.1f s after the restart"
          % resumed_after)
