"""Chaos: 200 random start / SIGTERM / SIGKILL events on a group of ``zkconsumer consume`` processes while a
producer runs (real ZooKeeper + broker; seeded RNG; ~2 min).

Invariants (timestamps = when the test read each stdout record / --events line, see chaos_support):

* every produced (partition, offset) is printed by some member at least once (messages lost = 0);
* split brain: every record is printed while its member owned the partition (within TOL s of an ownership
  interval from its assign/revoke/lost events; a SIGKILLed member's intervals end at the kill), and no two members'
  ownership intervals of a partition overlap by more than TOL s. (A killed member's owner nodes live on until its
  session expires — up to zookeeper.session.timeout.ms — but it cannot deliver; the survivors wait for the nodes.)
  And, on deliveries alone: per partition, no two members' delivery runs (split at gaps > 0.3 s) overlap by more
  than 0.2 s.
* after the last event: the registered members are exactly the live processes, every partition is owned and the
  owner nodes equal range_assign of the members;
* no member ever gives up or degrades ("can't rebalance" / DEGRADED / a traceback on stderr);
* every SIGTERMed member that had finished its first rebalance exits 0.

Figures are printed as one ``CHAOS-FIGURES {json}`` line (run with ``-s`` to see it).
"""
import json
import random
import time


from tests.support.chaos_support import TimedConsumer, check_deliveries, check_delivery_overlaps, recovery_times
from tests.support.consumer_helpers import BackgroundProducer, duplicates, group_members, wait_for_assignment
from tests.support.waiting import wait_until

SEED = 20240611
EVENTS = 200
PACE_S = 0.45           # mean seconds between events (+ jitter) -> ~1.5 min of churn
MAX_ALIVE = 8
MIN_ALIVE = 2
PARTITIONS = 12
SESSION_MS = 3000
PROPS = {"zookeeper.session.timeout.ms": str(SESSION_MS), "auto.commit.interval.ms": "200",
         "rebalance.backoff.ms": "200", "rebalance.max.retries": "20"}


def test_churn_200_events(services, zk, unique, procs):
    rng = random.Random(SEED)
    g, t = unique("churn"), unique("churn")
    services.create_topic(t, PARTITIONS)
    counter = [0]

    def start():
        counter[0] += 1
        c = TimedConsumer(services, g, [t], consumer_id="c%03d" % counter[0], props=PROPS)
        procs.append(c)
        return c

    for _ in range(3):
        start()
    wait_for_assignment(zk, g, [t], 3, timeout=40)

    producer = BackgroundProducer(services.bootstrap_servers, t, PARTITIONS, batch=12, pause=0.1, tag="churn")
    producer.start()
    counts = {"start": 0, "sigterm": 0, "sigkill": 0}
    t_begin = time.monotonic()
    try:
        for i in range(EVENTS):
            alive = [c for c in procs if c.alive() and c.killed_at is None and c.termed_at is None]
            if len(alive) < MIN_ALIVE:
                kind = "start"
            elif len(alive) >= MAX_ALIVE:
                kind = rng.choice(["sigterm", "sigkill"])
            else:
                kind = rng.choices(["start", "sigterm", "sigkill"], weights=[0.4, 0.3, 0.3])[0]
            if kind == "start":
                start()
            else:
                victim = rng.choice(alive)
                victim.sigkill() if kind == "sigkill" else victim.sigterm()
            counts[kind] += 1
            time.sleep(PACE_S * rng.uniform(0.5, 1.5))
        churn_s = time.monotonic() - t_begin
        # quiet point: at least 3 live members, then convergence
        live = [c for c in procs if c.alive() and c.killed_at is None and c.termed_at is None]
        while len(live) < 3:
            live.append(start())
        time.sleep(1.0)
    finally:
        produced = producer.stop()

    # terminated members finish their shutdown (bounded), killed ones are gone
    for c in procs:
        if c.termed_at is not None:
            try:
                c.proc.wait(30)
            except Exception:
                pass
    live = [c for c in procs if c.alive()]
    assert all(c.killed_at is None and c.termed_at is None for c in live), \
        "a signalled member is still running: %s" % [c.describe() for c in live if c.termed_at or c.killed_at]
    t_quiet = time.monotonic()
    final = wait_for_assignment(zk, g, [t], len(live), timeout=60)
    converge_s = time.monotonic() - t_quiet
    assert set(group_members(zk, g)) == {c.consumer_id for c in live}
    assert set(final) == {(t, p) for p in range(PARTITIONS)}
    assert {th.rsplit("-", 1)[0] for th in final.values()} <= {c.consumer_id for c in live}

    # every produced offset delivered at least once
    want = {(p, o) for p, o, _ in produced}

    def union():
        out = []
        for c in procs:
            out.extend(c.seen(t))
        return out
    try:
        wait_until(lambda: want <= set(union()), 60, interval=0.3, message="every produced message to be printed")
    except AssertionError:
        miss = sorted(want - set(union()))
        raise AssertionError("%d of %d produced messages never printed, e.g. %s" % (len(miss), len(want), miss[:10]))
    end = time.monotonic()
    # the live members' own view of what they own agrees with ZooKeeper
    for c in live:
        wait_until(lambda c=c: c.owned_now(t) == {p for (_, p), th in final.items()
                                                  if th.rsplit("-", 1)[0] == c.consumer_id},
                   15, message="%s's events to match its owner nodes" % c.name)

    violations = check_deliveries(procs, t, end) + check_delivery_overlaps(procs, t)
    assert not violations, "split brain / delivery outside ownership (%d):\n%s" % (len(violations),
                                                                                   "\n".join(violations[:20]))
    problems = {c.name: c.stderr_problems() for c in procs if c.stderr_problems()}
    assert not problems, "rebalance gave up / degraded / crashed: %s\n%s" % (
        json.dumps(problems)[:1000],
        "\n".join("--- %s (killed %s, terminated %s):\n%s" % (c.name, c.killed_at, c.termed_at,
                                                              "\n".join(c.log[-60:]))
                  for c in procs if c.stderr_problems())[:12000])
    bad_exit = [c.describe() for c in procs if c.termed_at is not None and c.proc.returncode != 0
                and any(ev["event"] == "assign" and ev["_t"] < c.termed_at for ev in c.timed_events())]
    assert not bad_exit, "SIGTERM did not end with exit 0:\n%s" % "\n".join(bad_exit)

    all_seen = union()
    dups = duplicates(all_seen)
    rec = recovery_times(procs, t)
    figures = {"seed": SEED, "events": EVENTS, "events_survived": sum(counts.values()), "starts": counts["start"],
               "sigterms": counts["sigterm"], "sigkills": counts["sigkill"], "processes": len(procs),
               "partitions": PARTITIONS, "session_timeout_ms": SESSION_MS, "churn_s": round(churn_s, 1),
               "produced": len(want), "delivered": len(all_seen), "lost": len(want - set(all_seen)),
               "duplicates": len(dups), "duplicate_deliveries": len(all_seen) - len(set(all_seen)),
               "kills_with_partitions": len(rec),
               "recovery_s": {"min": min(rec) if rec else None, "median": sorted(rec)[len(rec) // 2] if rec else None,
                              "max": max(rec) if rec else None},
               "final_members": len(live), "converge_after_last_event_s": round(converge_s, 1)}
    print("\nCHAOS-FIGURES " + json.dumps(figures, sort_keys=True))
    assert figures["lost"] == 0
    # a partition is re-owned after a kill once the dead session expires: bounded by session timeout + rebalances
    assert not rec or max(rec) < SESSION_MS / 1000.0 * 3 + 10, rec
