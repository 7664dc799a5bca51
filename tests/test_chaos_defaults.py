"""Chaos under the settings users run: ``kill -9`` of group members inside their first auto-commit interval while
data is produced, and their restart; nothing acknowledged may be lost.

A producer writes to every partition of a topic of 8 partitions; once each has data, three ``zkconsumer consume``
processes (``consumer.id`` a, b, c) join a new group for it. Variant ``defaults``: nothing but the documented defaults (``auto.offset.reset=largest``,
``auto.commit.interval.ms=60000``, 6 s sessions, the default rebalance back-off), so no member has auto-committed
yet when it is killed: every process is SIGKILLed well within 60 s of its start. Variant ``fast``: the suite's
FAST_PROPS (``smallest``, 200 ms commits, 4 s sessions), the same steps.

Steps (each restart is a new process with the same ``consumer.id``, as a supervisor restarts a service): once every
partition has delivered, SIGKILL a and restart it; SIGKILL b and c together and restart them; SIGKILL all three,
keep producing for 3 s while no member runs, restart them; stop the producer.

**Which messages count.** A message counts as acknowledged when the broker acknowledged its write (acks=1) and its
offset is at or above the first offset the group delivered of its partition. Under ``largest`` that first offset
is the partition's reset point: the log end the partition's first owner found when it claimed it (the producer
keeps writing, so the first owner's first delivery is the message at its reset point); messages below it were
produced before the group had a position there and are skipped by design (``before_reset_point`` in the figures).
Under ``smallest`` the first offset delivered is 0 and every message counts. Every counted message must be delivered
by some member at least once (the exact (partition, offset) set delivered is a superset of the counted set);
duplicates are allowed (an at-least-once consumer killed before its commit replays) and are counted and reported,
with the other figures, as one ``CHAOS-DEFAULTS-FIGURES {json}`` line (run with ``-s``). Also checked: per
partition, no two members' delivery runs overlap.

The loss this catches under the defaults: a member killed before its first auto-commit leaves no offset node; the
next owner of its partitions (a survivor, or the restarted process) resets to the log end again and skips what was
produced since the first reset point — unless the reset point is written when the partition is claimed.
"""
import json
import time

import pytest

from chaos_support import TimedConsumer, check_delivery_overlaps, counted_from_first_delivery, delivered_after_waiting
from consumer_helpers import BackgroundProducer, duplicates, wait_for_assignment, wait_until
from zkconsumer.config import ConsumerConfig
from zkconsumer.layout import paths

PARTITIONS = 8
MEMBERS = ("a", "b", "c")
DOWN_S = 3.0     # seconds the producer keeps writing while every member is down
RUN_S = 2.0      # seconds of delivery between two kills


def _outcome(procs, t, produced):
    """(the counted (partition, offset) set, every delivery in print order, the counted ones never delivered)."""
    want = counted_from_first_delivery(procs, t, produced)
    seen = delivered_after_waiting(procs, t, want)
    return want, seen, sorted(want - set(seen))


def test_the_defaults_are_what_the_defaults_variant_claims():
    """The ``defaults`` variant starts members with no property at all; this is what that means."""
    cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"})
    assert (cfg.auto_offset_reset, cfg.auto_commit_interval_ms, cfg.auto_commit_enable,
            cfg.zookeeper_session_timeout_ms) == ("largest", 60000, True, 6000)


@pytest.mark.parametrize("variant", ["defaults", "fast"])
def test_kill_9_inside_the_first_commit_interval_loses_nothing(services, zk, unique, procs, variant):
    g, t = unique("cdef"), services.create_topic(unique("cdef"), PARTITIONS)
    runs = {}

    def start(member):
        runs[member] = runs.get(member, 0) + 1
        c = TimedConsumer(services, g, [t], consumer_id=member, defaults=(variant == "defaults"))
        c.name = "%s#%d" % (member, runs[member])
        procs.append(c)
        return c

    def converged(started):
        """The new processes each got partitions and the owner nodes equal the range assignment of a, b, c."""
        wait_until(lambda: all(any(ev["event"] == "assign" and ev["partitions"] for ev in c.timed_events())
                               for c in started), 90, message="%s to be assigned partitions"
                   % [c.name for c in started])
        wait_for_assignment(zk, g, [t], len(MEMBERS), timeout=90)

    def delivered_since(since):
        return {p for c in procs for p, _, ts in c.timed_records(t) if ts > since} == set(range(PARTITIONS))

    no_offset_node = []  # (member, partition) it owned when killed and for which the group had no offset node

    def sigkill(victims):
        for c in victims:
            owned = c.owned_now(t)
            c.sigkill()
            no_offset_node.extend((c.name, p) for p in sorted(owned)
                                  if not zk.exists(paths.partition_offset_path(g, t, p)))

    def kill(victims):
        sigkill(victims)
        return [start(c.name.split("#")[0]) for c in victims]

    t_begin = time.monotonic()
    producer = BackgroundProducer(services.bootstrap_servers, t, PARTITIONS, batch=PARTITIONS, pause=0.05,
                                  tag="cdef")
    producer.start()
    try:
        wait_until(lambda: len(producer.produced) >= 4 * PARTITIONS, 30, message="data in every partition")
        live = {m: start(m) for m in MEMBERS}
        converged(list(live.values()))
        wait_until(lambda: delivered_since(0), 60, message="every partition to deliver before the first kill")
        for group in (["a"], ["b", "c"]):
            new = kill([live[m] for m in group])
            live.update(zip(group, new))
            converged(new)
            settled = time.monotonic()
            wait_until(lambda: delivered_since(settled), 60, message="every partition to deliver again")
            time.sleep(RUN_S)
        sigkill(list(live.values()))
        time.sleep(DOWN_S)
        live = {m: start(m) for m in MEMBERS}
        converged(list(live.values()))
        settled = time.monotonic()
        wait_until(lambda: delivered_since(settled), 60, message="every partition to deliver after the restart")
        time.sleep(RUN_S)
    finally:
        produced = producer.stop()

    want, seen, lost = _outcome(procs, t, produced)
    ages = [c.killed_at - c.started_at for c in procs if c.killed_at is not None]
    figures = {"variant": variant, "partitions": PARTITIONS, "processes": len(procs), "kills": len(ages),
               "max_age_at_kill_s": round(max(ages), 1), "produced": len(produced),
               "before_reset_point": len(produced) - len(want), "counted": len(want), "delivered": len(seen),
               "lost": len(lost), "duplicates": len(duplicates(seen)),
               "duplicate_deliveries": len(seen) - len(set(seen)),
               "owned_at_kill_without_offset_node": len(no_offset_node),
               "runtime_s": round(time.monotonic() - t_begin, 1)}
    print("\nCHAOS-DEFAULTS-FIGURES " + json.dumps(figures, sort_keys=True))
    by_p = {}
    for p, o in lost:
        by_p.setdefault(p, []).append(o)
    assert not lost, "%d of %d acknowledged messages never delivered; per partition (lost offsets): %s; " \
                     "partitions a member owned when killed with no offset node in ZooKeeper: %s" % (
                         len(lost), len(want), {p: "%d..%d (%d)" % (min(os), max(os), len(os))
                                                for p, os in sorted(by_p.items())}, no_offset_node)
    overlaps = check_delivery_overlaps(procs, t)
    assert not overlaps, "\n".join(overlaps[:20])
    problems = {c.name: c.stderr_problems() for c in procs if c.stderr_problems()}
    assert not problems, problems


def test_a_sigterm_hand_over_with_the_defaults_delivers_nothing_twice(services, zk, unique, procs):
    """Graceful stops with the defaults (no auto-commit in their lifetime: the 60 s interval never comes): each
    member stopped with SIGTERM commits what it delivered before it lets its partitions go, so the member that takes
    them over starts right after the last record delivered: nothing twice, nothing lost, no overlapping delivery.
    a, b, c share the group while a producer runs; c is stopped, then b, and a ends up with every partition."""
    g, t = unique("cterm"), services.create_topic(unique("cterm"), PARTITIONS)
    producer = BackgroundProducer(services.bootstrap_servers, t, PARTITIONS, batch=PARTITIONS, pause=0.05,
                                  tag="cterm")
    producer.start()
    live = {}
    try:
        wait_until(lambda: len(producer.produced) >= 4 * PARTITIONS, 30, message="data in every partition")
        for m in MEMBERS:
            live[m] = TimedConsumer(services, g, [t], consumer_id=m, defaults=True)
            procs.append(live[m])
        wait_for_assignment(zk, g, [t], len(MEMBERS), timeout=90)
        for m in ("c", "b"):
            settled = time.monotonic()
            wait_until(lambda: {p for c in live.values() for p, _, ts in c.timed_records(t) if ts > settled}
                       == set(range(PARTITIONS)), 60, message="every partition to deliver before %s stops" % m)
            time.sleep(RUN_S)
            assert live.pop(m).terminate() == 0
            wait_for_assignment(zk, g, [t], len(live), timeout=90)
        settled = time.monotonic()
        wait_until(lambda: {p for p, _, ts in live["a"].timed_records(t) if ts > settled} == set(range(PARTITIONS)),
                   60, message="a delivering every partition")
        time.sleep(RUN_S)
    finally:
        produced = producer.stop()
    want, seen, lost = _outcome(procs, t, produced)
    assert not lost, "%d of %d acknowledged messages never delivered: %s" % (len(lost), len(want), lost[:20])
    twice = duplicates(seen)
    assert not twice, "%d messages delivered twice after SIGTERM hand-overs, e.g. %s" % (len(twice), sorted(twice)[:10])
    overlaps = check_delivery_overlaps(procs, t)
    assert not overlaps, "\n".join(overlaps[:20])
