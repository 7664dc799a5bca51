"""ZooKeeper leader elections under a consuming group: a three-server ensemble (``LocalCluster.up(zookeepers=3)``,
Apache Kafka 3.9 in ZooKeeper mode on it) and three ``zkconsumer consume`` processes with the production defaults
(``largest``, 6 s sessions, 60 s auto-commit interval) while a producer writes to every partition.

A follower (the one serving the most members) is killed with SIGKILL and started again, then stopped (SIGTERM)
and started again; then the ZooKeeper leader is stopped and started again, then killed with SIGKILL and started
again. Each time the other servers keep a majority, so ZooKeeper keeps every client session (a new leader takes
the sessions over; clients of the server that went away reconnect to another one with the same session id).
Checked:

* no session lost: each member's registration node ``/consumers/G/ids/ID`` and its owner nodes keep their
  ephemeral owner (session id) and creation zxid (never re-registered nor re-claimed), no member prints a ``lost``
  event, none gives up, degrades or dies;
* no loss, no duplicate: per partition, the exact set of (partition, offset) delivered equals what the broker
  acknowledged from the first offset the group delivered of that partition on (under ``largest`` a group starts at
  the log end it finds when it first claims a partition; the producer starts once the group owns every partition,
  so in practice that is every message);
* no overlapping delivery: per partition, no two members' delivery runs overlap (the assignment never changes).

Measured, not asserted (printed as one ``ELECTION-FIGURES {json}`` line; run with ``-s``; docs/operators.md
reports them): how long the ensemble had no leader, how many members were disconnected and for how long (from their
kazoo client's log lines), and the stall of delivery around each event — per partition, the longest gap between
two consecutive deliveries from 1 s before the event until every partition delivered after the server was back,
beside the longest gap in the steady seconds before the event.
"""
import json
import re
import statistics
import time

import pytest

from tests.support.chaos_support import (TimedConsumer, check_delivery_overlaps, counted_from_first_delivery,
                                         delivered_after_waiting, own_cluster_fixture)
from tests.support.consumer_helpers import SteadyProducer, duplicates, wait_for_assignment
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.core.layout import paths
from zkconsumer.local.cluster import zk_four_letter

pytestmark = pytest.mark.live

PARTITIONS = 6
MEMBERS = ("a", "b", "c")
# (which server, SIGKILL?). The followers go first: a leader change moves every member's connection (a follower
# drops its clients while it looks for the new leader), and they mostly land on the new leader, so a follower
# taken away afterwards would serve none of them. Members connect to random servers at start, and the follower
# taken away is the one serving the most members.
EVENTS = (("follower", True), ("follower", False), ("leader", False), ("leader", True))
STEADY_S = 3.0   # seconds of undisturbed delivery before each event (the baseline gap is measured over them)

own = own_cluster_fixture("zk-ensemble", zookeepers=3)


def _sessions(zk, group, topic):
    """{node path: (ephemeral owner, czxid)} of the group's registration and owner nodes."""
    out = {}
    ids = paths.group_ids_path(group)
    for cid in zk.get_children(ids):
        stat = zk.exists(ids + "/" + cid)
        out[ids + "/" + cid] = (stat.ephemeralOwner, stat.czxid)
    for p in range(PARTITIONS):
        path = paths.partition_owner_path(group, topic, p)
        stat = zk.exists(path)
        out[path] = (stat.ephemeralOwner, stat.czxid) if stat else None
    return out


def _sessions_served(own, name):
    """The session ids of the clients connected to ZooKeeper server ``name`` (four-letter ``cons``)."""
    answer = zk_four_letter(own.cluster.HOST, own.cluster.record(name)["port"], b"cons", timeout=5)
    return {int(m, 16) for m in re.findall(r"sid=0x([0-9a-f]+)", answer)}


def _delivery_times(members, topic):
    """{partition: sorted read times of every delivery}."""
    out = {p: [] for p in range(PARTITIONS)}
    for c in members:
        for p, _, t in c.timed_records(topic):
            out[p].append(t)
    return {p: sorted(ts) for p, ts in out.items()}


def _max_gap(times, start, end):
    """The longest time between two consecutive deliveries that lie (at least partly) in [start, end]."""
    inside = [t for t in times if start <= t <= end]
    before = [t for t in times if t < start][-1:]
    after = [t for t in times if t > end][:1]
    seq = before + inside + after
    return max((b - a for a, b in zip(seq, seq[1:])), default=None)


def _disconnections(consumer, start, end):
    """[seconds] of each ZooKeeper disconnection the member's kazoo client logged between wall-clock times start
    and end ("connection lost" ... "connection re-established")."""
    out, lost = [], None
    for line in list(consumer.log):
        try:
            stamp = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000.0
        except ValueError:
            continue
        if not start <= stamp <= end:
            continue
        if "ZooKeeper connection lost" in line and lost is None:
            lost = stamp
        elif "ZooKeeper connection re-established" in line and lost is not None:
            out.append(stamp - lost)
            lost = None
    return out


def _delivered_everywhere_after(members, topic, since):
    times = _delivery_times(members, topic)
    return all(any(t > since for t in times[p]) for p in range(PARTITIONS))


def test_leader_and_follower_go_away_under_a_consuming_group(own, unique, procs):
    g, t = unique("zkel"), own.create_topic(unique("zkel"), PARTITIONS)
    zk = zkmod.connect(own.zookeeper_connect)
    try:
        members = [TimedConsumer(own, g, [t], consumer_id=m, defaults=True) for m in MEMBERS]
        procs.extend(members)
        assert all(c.props == {} or set(c.props) == {"fetch.engine"} for c in members)  # the defaults
        wait_for_assignment(zk, g, [t], len(MEMBERS), timeout=60)
        producer = SteadyProducer(own.bootstrap_servers, t, PARTITIONS, pause=0.02, tag="zkel")
        producer.start()
        try:
            wait_until(lambda: _delivered_everywhere_after(members, t, 0), 60, interval=0.1,
                       message="every partition to deliver (the group's start positions are fixed)")
            before = _sessions(zk, g, t)
            assert all(v is not None for v in before.values()), before
            member_sessions = {before[paths.consumer_registration_path(g, c.consumer_id)][0] for c in members}
            figures = []
            for role, kill in EVENTS:
                time.sleep(STEADY_S)
                leader = own.wait_for_quorum(3)
                # of the followers, the one most members are connected to
                victim = leader if role == "leader" else max(
                    sorted(n for n, m in own.zookeeper_modes().items() if m == "follower"),
                    key=lambda n: len(_sessions_served(own, n) & member_sessions))
                on_victim = len(_sessions_served(own, victim) & member_sessions)
                at, wall_at = time.monotonic(), time.time()
                own.stop(victim, kill=kill)
                new_leader = own.wait_for_quorum(2)
                elected_s = time.monotonic() - at
                wait_until(lambda: _delivered_everywhere_after(members, t, at), 60, interval=0.05,
                           message="every partition to deliver again after %s %s went away" % (role, victim))
                resumed = time.monotonic()
                own.start(victim)
                own.wait_for_quorum(3)
                back = time.monotonic()
                wait_until(lambda: _delivered_everywhere_after(members, t, back), 60, interval=0.05,
                           message="every partition to deliver after %s came back" % victim)
                settled = time.monotonic()
                times = _delivery_times(members, t)
                cut = {c.name: _disconnections(c, wall_at - 0.5, time.time()) for c in members}
                stall = {p: _max_gap(times[p], at - 1.0, settled) for p in range(PARTITIONS)}
                baseline = {p: _max_gap(times[p], at - STEADY_S + 0.5, at - 1.0) for p in range(PARTITIONS)}
                figures.append({
                    "event": "%s %s" % (role, "SIGKILL" if kill else "SIGTERM"), "server": victim,
                    "new_leader": new_leader, "no_leader_s": round(elected_s, 2) if role == "leader" else 0.0,
                    "stall_max_s": round(max(stall.values()), 2),
                    "stall_median_s": round(statistics.median(stall.values()), 2),
                    "steady_max_gap_s": round(max(baseline.values()), 2),
                    "members_on_server": on_victim, "members_disconnected": sum(1 for v in cut.values() if v),
                    "longest_disconnection_s": round(max((x for v in cut.values() for x in v), default=0.0), 2),
                    "rejoin_s": round(back - resumed, 2)})
            time.sleep(1.0)
        finally:
            produced = producer.stop()
        after = _sessions(zk, g, t)

        want = counted_from_first_delivery(members, t, produced)
        seen = delivered_after_waiting(members, t, want)  # a loss is reported below, after the session checks
    finally:
        zkmod.close(zk)

    figures_line = {"partitions": PARTITIONS, "members": len(MEMBERS), "produced_counted": len(want),
                    "delivered": len(seen), "lost": len(want - set(seen)), "duplicates": len(duplicates(seen)),
                    "events": figures}
    print("\nELECTION-FIGURES " + json.dumps(figures_line, sort_keys=True))

    assert all(c.alive() for c in members), [c.describe() for c in members if not c.alive()]
    assert not [c.name for c in members if any(ev["event"] == "lost" for ev in c.timed_events())], \
        "a member lost its ZooKeeper session:\n%s" % "\n".join(c.describe() for c in members)
    assert after == before, "registration / owner nodes changed (a session was lost, or a member re-registered " \
                            "or re-claimed):\nbefore %s\nafter  %s" % (before, after)
    problems = {c.name: c.stderr_problems() for c in members if c.stderr_problems()}
    assert not problems, problems
    extra = set(seen) - {(p, o) for p, o, _ in produced}
    assert not extra, "delivered what was never produced: %s" % sorted(extra)[:10]
    lost = sorted(want - set(seen))
    assert not lost, "%d of %d acknowledged messages never delivered, e.g. %s" % (len(lost), len(want), lost[:10])
    assert not duplicates(seen), "delivered twice: %s" % sorted(duplicates(seen))[:20]
    overlaps = check_delivery_overlaps(members, t)
    assert not overlaps, "\n".join(overlaps[:20])
