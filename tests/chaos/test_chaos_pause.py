"""Chaos: stop-the-world pauses longer than the session timeout (SIGSTOP for 6 s against a 4 s session), four times,
while the two other members keep consuming and a producer runs. The session lease (zkconsumer/consumer/lease.py)
makes a resumed member ask ZooKeeper before its next hand-out, so it learns of the expiry first and hands out
nothing its peers already own: per partition, no two members' delivery runs overlap (runs split at 0.3 s gaps,
0.2 s tolerance), and nothing is lost. Before the lease, a resumed member handed out queued records for up to ~1 s."""
import signal
import time

from tests.support.chaos_support import TimedConsumer, check_delivery_overlaps
from tests.support.consumer_helpers import BackgroundProducer, wait_for_assignment
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths

PARTITIONS = 6
SESSION_MS = 4000
PROPS = {"zookeeper.session.timeout.ms": str(SESSION_MS), "auto.commit.interval.ms": "200",
         "rebalance.backoff.ms": "200", "queued.max.message.chunks": "10", "fetch.message.max.bytes": "2048"}


def test_pauses_past_the_session_timeout_deliver_nothing_stale(services, zk, unique, procs):
    g, t = unique("pause"), unique("pause")
    services.create_topic(t, PARTITIONS)
    for name in ("a", "b", "c"):
        procs.append(TimedConsumer(services, g, [t], consumer_id=name, props=PROPS))
    wait_for_assignment(zk, g, [t], 3, timeout=30)
    producer = BackgroundProducer(services.bootstrap_servers, t, PARTITIONS, batch=30, pause=0.05, tag="pz")
    producer.start()
    stale = []
    try:
        for victim in (procs[1], procs[2], procs[1], procs[0]):
            reg = paths.consumer_registration_path(g, victim.consumer_id)
            wait_for_assignment(zk, g, [t], 3, timeout=40)
            wait_until(lambda: len(victim.seen(t)) > 0, 20, message="%s to consume" % victim.name)
            time.sleep(1.0)  # its queues fill up (the producer keeps writing)
            victim.proc.send_signal(signal.SIGSTOP)
            wait_until(lambda: not zk.exists(reg), SESSION_MS / 1000.0 * 3 + 5,
                       message="%s's session to expire" % victim.name)
            time.sleep(6.0 - SESSION_MS / 1000.0)  # frozen about 6 s; the peers own its partitions meanwhile
            victim.proc.send_signal(signal.SIGCONT)
            thawed = time.monotonic()
            lost = wait_until(lambda: next((e for e in victim.timed_events()
                                            if e["event"] == "lost" and e["_t"] > thawed), None), 15,
                              message="%s's lost event" % victim.name)
            time.sleep(0.5)
            stale.append(sum(1 for _, _, tt in victim.timed_records(t) if thawed < tt < lost["_t"]))
        wait_for_assignment(zk, g, [t], 3, timeout=40)
        time.sleep(1.0)
    finally:
        produced = producer.stop()
    want = {(p, o) for p, o, _ in produced}
    wait_until(lambda: want <= {x for c in procs for x in c.seen(t)}, 40, interval=0.3,
               message="every produced message to be printed")
    bad = check_delivery_overlaps(procs, t)
    assert not bad, "\n".join(bad[:10] + [c.describe() for c in procs])
    # what a resumed member printed between SIGCONT and its lost event: at most the record it was writing out when
    # it froze (already handed out before the pause)
    assert all(n <= 1 for n in stale), stale
    for c in procs:
        assert c.alive(), c.describe()
    print("\npauses: 4 freezes of 6 s (session 4 s), %d messages, 0 lost, no overlapping delivery; records printed "
          "between SIGCONT and the lost event per pause: %s" % (len(want), stale))
