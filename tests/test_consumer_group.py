"""A group of ``zkconsumer consume`` processes against real ZooKeeper + broker.

Each member is a separate OS process (so ``kill -9`` really leaves its ephemeral nodes to die with the session).
Assignments are checked against ``range_assign`` computed from the members actually registered in
``/consumers/[g]/ids``, compared with the owner znodes' data (``<consumerId>-<n>``).
"""
import time


from consumer_helpers import (BackgroundProducer, CliConsumer, duplicates, expected_range, group_members,
                              owners, produce_tracked, wait_for_assignment, wait_until)
from zkconsumer.layout import paths

SESSION_S = 4.0
PARTITIONS = 12


def _union(consumers, topic):
    out = []
    for c in consumers:
        out.extend(c.seen(topic))
    return out


def _assert_all_delivered(produced, consumers, topic, timeout):
    want = {(p, o) for p, o, _ in produced}

    def missing():
        got = set(_union(consumers, topic))
        return want - got
    try:
        wait_until(lambda: not missing(), timeout, interval=0.2, message="every produced message to be printed")
    except AssertionError:
        miss = sorted(missing())
        raise AssertionError("%d of %d produced messages never printed, e.g. %s\n%s"
                             % (len(miss), len(want), miss[:10], "\n".join(c.describe() for c in consumers)))


def _by_member(assignment):
    """{consumer id: sorted [partition]} from a {(t, p): thread id} assignment."""
    out = {}
    for (_, p), th in assignment.items():
        out.setdefault(th.rsplit("-", 1)[0], []).append(p)
    return {k: sorted(v) for k, v in out.items()}


def _offset(zk, group, topic, p):
    path = paths.partition_offset_path(group, topic, p)
    if not zk.exists(path):
        return None
    return int(zk.get(path)[0].decode())


def test_range_split_then_kill9_failover_without_loss(services, zk, unique, procs):
    g, t = unique("grp"), unique("topic")
    services.create_topic(t, PARTITIONS)
    for name in ("c1", "c2", "c3"):
        procs.append(CliConsumer(services, g, [t], consumer_id=name))
    c1, c2, c3 = procs

    assignment = wait_for_assignment(zk, g, [t], 3, timeout=25)
    produced = produce_tracked(services.bootstrap_servers, t, 240, partitions=PARTITIONS, tag="pre")
    # Scala's range: 12 partitions / 3 threads sorted as strings -> 4 consecutive partitions each
    assert _by_member(assignment) == {g + "_c1": [0, 1, 2, 3], g + "_c2": [4, 5, 6, 7], g + "_c3": [8, 9, 10, 11]}
    assert set(group_members(zk, g)) == {g + "_c1", g + "_c2", g + "_c3"}
    _assert_all_delivered(produced, procs, t, timeout=20)
    # each member printed only its own partitions, and its last assign event names exactly them
    for c, parts in ((c1, range(0, 4)), (c2, range(4, 8)), (c3, range(8, 12))):
        assert {p for p, _ in c.seen(t)} == set(parts), c.describe()
        assigns = [e for e in c.events if e["event"] == "assign"]
        assert sorted(p for _, p in assigns[-1]["partitions"]) == list(parts), c.describe()

    # kill -9 c2 while a producer is running: its uncommitted window is re-delivered, nothing is lost
    producer = BackgroundProducer(services.bootstrap_servers, t, PARTITIONS, tag="live")
    producer.start()
    try:
        wait_until(lambda: len(producer.produced) >= 48, 20, message="live production")
        wait_until(lambda: {p for p, _ in c2.seen(t)} >= {4, 5, 6, 7} and len(c2.seen(t)) > 4 * 20,
                   15, message="c2 to print some live messages")
        c2.kill()
        t_kill = time.monotonic()
        # nobody but the dead c2 could have written these: they are where the survivors must resume
        committed_at_kill = {p: _offset(zk, g, t, p) for p in range(4, 8)}
        c2_seen = set(c2.seen(t))

        def survivors_own_everything():
            have = owners(zk, g, [t])
            if len(have) != PARTITIONS or any(v.startswith(g + "_c2-") for v in have.values()):
                return None
            return have
        have = wait_until(survivors_own_everything, SESSION_S + 2.0 + 1.0, interval=0.05,
                          message="survivors to own c2's partitions")
        took = time.monotonic() - t_kill
        assert took <= SESSION_S + 2.0, "failover took %.2f s (session timeout %.1f s + 2 s)" % (took, SESSION_S)
        time.sleep(1.0)
    finally:
        more = producer.stop()
    # the stable result is range over the two remaining members
    final = wait_for_assignment(zk, g, [t], 2, timeout=10)
    assert _by_member(final) == {g + "_c1": [0, 1, 2, 3, 4, 5], g + "_c3": [6, 7, 8, 9, 10, 11]}
    assert set(have.values()) <= set(final.values())

    all_produced = produced + more
    _assert_all_delivered(all_produced, [c1, c2, c3], t, timeout=20)

    # duplicates only from c2's uncommitted window: offsets c2 printed at/after its last commit, re-delivered
    # by the new owner, which resumes exactly at the committed offset
    seen_all = _union([c1, c2, c3], t)
    dups = duplicates(seen_all)
    for p, o in dups:
        assert 4 <= p <= 7, "duplicate outside the dead member's partitions: %s" % ((p, o),)
        assert (p, o) in c2_seen
        assert o >= (committed_at_kill[p] or 0), "offset %d of p%d re-delivered although committed (%s)" % (
            o, p, committed_at_kill[p])
    for c in (c1, c3):
        assert not duplicates(c.seen(t)), "a survivor printed the same message twice"
        for p in range(4, 8):
            offs = [o for q, o in c.seen(t) if q == p]
            if offs:
                start = committed_at_kill[p] or 0
                assert offs[0] == start, "p%d: new owner started at %d, committed was %s" % (p, offs[0], start)
                assert offs == list(range(start, start + len(offs))), "p%d delivered out of order/gaps" % p
    for c in (c1, c3):
        assert c.alive(), c.describe()


def test_member_joins_midstream_then_graceful_sigterm(services, zk, unique, procs):
    g, t = unique("grp"), unique("topic")
    services.create_topic(t, PARTITIONS)
    for name in ("c1", "c2", "c3"):
        procs.append(CliConsumer(services, g, [t], consumer_id=name))
    wait_for_assignment(zk, g, [t], 3, timeout=25)

    producer = BackgroundProducer(services.bootstrap_servers, t, PARTITIONS, tag="live")
    producer.start()
    try:
        wait_until(lambda: len(producer.produced) >= 36, 20, message="live production")
        procs.append(CliConsumer(services, g, [t], consumer_id="c4"))
        final = wait_for_assignment(zk, g, [t], 4, timeout=25)
        time.sleep(1.0)  # keep producing after the rebalance
    finally:
        produced = producer.stop()
    produced += produce_tracked(services.bootstrap_servers, t, 24, partitions=PARTITIONS, tag="post")
    assert _by_member(final) == {g + "_c1": [0, 1, 2], g + "_c2": [3, 4, 5], g + "_c3": [6, 7, 8],
                                 g + "_c4": [9, 10, 11]}
    # the assignment is still the same once everything settled
    assert owners(zk, g, [t]) == expected_range(zk, g, [t]) == final
    _assert_all_delivered(produced, procs, t, timeout=25)
    c1, c2, c3, c4 = procs
    assert c4.seen(t) and {p for p, _ in c4.seen(t)} <= {9, 10, 11}
    # a graceful handover (commit, then release; the new owner reads the offset after its claim) re-delivers
    # nothing
    dups = duplicates(_union(procs, t))
    assert not dups, "graceful rebalance re-delivered %d messages, e.g. %s" % (len(dups), sorted(dups)[:10])

    # graceful SIGTERM of c4 after everything was delivered: exit 0, offsets = 1 + last printed, nodes gone
    wait_until(lambda: all(_offset(zk, g, t, p) is not None for p in range(PARTITIONS)), 10,
               message="auto-commit of every partition")
    last = c4.last_offsets(t)
    assert set(last) == {9, 10, 11}
    rc = c4.terminate(timeout=20)
    assert rc == 0, c4.describe()
    assert not zk.exists(paths.consumer_registration_path(g, g + "_c4"))
    assert not any(v.startswith(g + "_c4-") for v in owners(zk, g, [t]).values())
    for p, off in last.items():
        assert _offset(zk, g, t, p) == off + 1, "p%d committed %s, last printed %d" % (p, _offset(zk, g, t, p), off)
    assert [e["event"] for e in c4.events][-1] == "revoke"
    assert sorted(tuple(x) for x in c4.events[-1]["partitions"]) == [(t, 9), (t, 10), (t, 11)]
    # the others take c4's partitions over (range for 3 again) and, with nothing new, the offsets stay
    wait_for_assignment(zk, g, [t], 3, timeout=15)
    for p, off in last.items():
        assert _offset(zk, g, t, p) == off + 1

    # stop the rest gracefully: all exit 0, each committed 1 + its last printed offset; nothing is left behind
    for c in (c3, c2, c1):
        owned_before = {p for (_, p), th in owners(zk, g, [t]).items() if th.startswith(c.consumer_id + "-")}
        assert owned_before
        rc = c.terminate(timeout=20)
        assert rc == 0, c.describe()
        assert not zk.exists(paths.consumer_registration_path(g, c.consumer_id))
        for p in owned_before:
            assert _offset(zk, g, t, p) == 1 + max(o for q, o in _union(procs, t) if q == p)
    assert zk.get_children(paths.group_ids_path(g)) == []
    assert owners(zk, g, [t]) == {}
    for p in range(PARTITIONS):
        # every partition ends committed at its log end: nothing consumed twice, nothing skipped
        assert _offset(zk, g, t, p) == 1 + max(o for q, o, _ in produced if q == p)
