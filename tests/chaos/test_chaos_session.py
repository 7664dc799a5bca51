"""Chaos: ZooKeeper session expiry of a member *process* in a group of 3, forced from outside by freezing it
(SIGSTOP) for longer than its session timeout, then SIGCONT.

While frozen it cannot ping: the server expires its session, its registration and owner nodes vanish and the two
peers take its partitions over. When it runs again it must see LOST (the "lost" event), stop delivering,
re-register under a new session and rebalance; the group converges to range_assign of 3 and nothing is lost.

The only allowed double ownership: the frozen member's interval stays "open" from its own point of view until it
learns of the expiry after SIGCONT (it cannot know earlier) — it may hand out already-queued records in that
window, bounded by the session timeout; after the "lost" event it delivers nothing until its next "assign".
"""
import os
import signal
import time

import pytest

from tests.support.chaos_support import TimedConsumer, check_deliveries
from tests.support.consumer_helpers import BackgroundProducer, group_members, wait_for_assignment
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths

PARTITIONS = 6
SESSION_MS = 3000
PROPS = {"zookeeper.session.timeout.ms": str(SESSION_MS), "auto.commit.interval.ms": "200",
         "rebalance.backoff.ms": "200"}


@pytest.fixture
def procs():
    started = []
    yield started
    for c in started:
        try:
            os.kill(c.proc.pid, signal.SIGCONT)
        except OSError:
            pass
        c.kill()


def test_frozen_member_session_expires_and_rejoins(services, zk, unique, procs):
    g, t = unique("frz"), unique("frz")
    services.create_topic(t, PARTITIONS)
    for name in ("a", "b", "c"):
        procs.append(TimedConsumer(services, g, [t], consumer_id=name, props=PROPS))
    a, b, c = procs
    wait_for_assignment(zk, g, [t], 3, timeout=30)
    reg = paths.consumer_registration_path(g, b.consumer_id)
    old_session = zk.exists(reg).ephemeralOwner
    producer = BackgroundProducer(services.bootstrap_servers, t, PARTITIONS, batch=6, pause=0.1, tag="frz")
    producer.start()
    try:
        wait_until(lambda: len(b.seen(t)) >= 10, 20, message="b to consume")
        b_owned = b.owned_now(t)
        assert b_owned
        b.proc.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        # the peers take over once b's session expired (its registration vanishes)
        wait_until(lambda: not zk.exists(reg), SESSION_MS / 1000.0 * 3 + 5, message="b's session to expire")
        expired_at = time.monotonic()
        taken = wait_for_assignment(zk, g, [t], 2, timeout=20)
        assert {th.rsplit("-", 1)[0] for th in taken.values()} == {a.consumer_id, c.consumer_id}
        time.sleep(1.0)  # peers deliver b's partitions
        b.proc.send_signal(signal.SIGCONT)
        thawed_at = time.monotonic()
        lost = wait_until(lambda: next((e for e in b.timed_events() if e["event"] == "lost"), None),
                          SESSION_MS / 1000.0 + 10, message="b's lost event")
        assert {p for _, p in lost["partitions"]} == b_owned
        wait_until(lambda: (zk.exists(reg) or None) and zk.exists(reg).ephemeralOwner != old_session, 20,
                   message="b to re-register under a new session")
        final = wait_for_assignment(zk, g, [t], 3, timeout=30)
        time.sleep(1.0)
    finally:
        produced = producer.stop()
    assert set(group_members(zk, g)) == {a.consumer_id, b.consumer_id, c.consumer_id}
    assert {th.rsplit("-", 1)[0] for th in final.values()} == {a.consumer_id, b.consumer_id, c.consumer_id}
    want = {(p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(a.seen(t) + b.seen(t) + c.seen(t)), 30, interval=0.3,
               message="every produced message to be printed")
    end = time.monotonic()

    lost_at = lost["_t"]
    assert expired_at - frozen_at >= SESSION_MS / 1000.0 * 0.9
    assert lost_at - thawed_at < SESSION_MS / 1000.0 + 5, "b learned of its expiry %.1f s after SIGCONT" % (
        lost_at - thawed_at)
    # nothing printed by b between its lost event and its next assign
    next_assign = min(e["_t"] for e in b.timed_events() if e["event"] == "assign" and e["_t"] > lost_at)
    stale = [(p, o) for p, o, ts in b.timed_records(t) if lost_at + 0.5 < ts < next_assign - 0.5]
    assert not stale, "b printed after losing its session: %s" % stale[:10]
    after_thaw = [(p, o) for p, o, ts in b.timed_records(t) if thawed_at <= ts <= lost_at]

    def exempt(member, p, start, stop):
        # b's pre-freeze interval ends at its lost event: it overlaps the peers' from the takeover on
        return (stop - frozen_at) if member is b and start < frozen_at and stop >= lost_at - 0.01 else 0.0
    violations = check_deliveries(procs, t, end, exempt=exempt)
    assert not violations, "\n".join(violations[:20])
    for m in procs:
        assert m.alive(), m.describe()
        assert not m.stderr_problems(), m.describe()
    print("\nsession-expiry: frozen %.1f s, expiry after %.1f s, lost event %.2f s after SIGCONT, %d record(s) "
          "printed by b between SIGCONT and lost" % (thawed_at - frozen_at, expired_at - frozen_at,
                                                     lost_at - thawed_at, len(after_thaw)))
