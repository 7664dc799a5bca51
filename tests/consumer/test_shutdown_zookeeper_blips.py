"""shutdown()'s final commit after ZooKeeper was away for a moment and the session lived.

* The session lease is stale after a disconnection longer than 0.6 x the session timeout (3.6 s with the defaults)
  until the next heartbeat renews it (0.45 x the timeout apart on a quiet topic), and after a pause of the process; a
  commit then waits for a round trip under the session first. shutdown()'s own commit waits for it too (within its
  share of the bound), though shutdown has begun.
* shutdown() begun while the connection is down for a moment waits for it (until 30 % of its bound) before it
  decides whether it can commit and release.

Otherwise the final commit is skipped and the next owner starts from the last auto-commit (a minute back with the
defaults, or the reset point) and delivers again what this member delivered since: after a clean shutdown, a
hand-over delivers nothing twice (README "Guarantees under the defaults"). Members on the defaults behind a relay
that makes ZooKeeper unreachable.
"""
import threading
import time

from kazoo.protocol.states import KazooState

from tests.support.consumer_helpers import SteadyProducer, StreamCollector, connector, owners
from tests.support.spark_support import zk_offsets
from tests.support.waiting import wait_until
from tests.support.zk_relay import Relay, zk_target


def _member_behind_relay(services, unique, conns, tag, quiet=True):
    """A member on the defaults whose ZooKeeper connection goes through a relay, delivering a 2-partition topic that
    a producer writes to: (group, topic, relay, producer, member, what it delivered). With *quiet* the producer has
    stopped and the member has delivered everything it produced (nothing asks its session lease for a renewal but
    its heartbeat, 0.45 x the timeout apart). The caller stops the producer and closes the relay."""
    g, t = unique(tag), services.create_topic(unique(tag), 2)
    relay = Relay(zk_target(services))
    relay.start()
    producer = SteadyProducer(services.bootstrap_servers, t, 2, pause=0.02 if quiet else 0.005, tag=tag)
    producer.start()
    try:
        wait_until(lambda: len(producer.produced) >= 20, 30, message="data in both partitions")
        a = connector(services, g, defaults=True, **{"zookeeper.connect": relay.connect})
        conns.append(a)
        [sa] = a.create_message_streams({t: 1})[t]
        ca = StreamCollector(sa, name="a")
        ca.start()
        wait_until(lambda: {p for _, p, _ in ca.seen(t)} == {0, 1} and len(ca.seen(t)) >= 100, 30,
                   message="a delivering both partitions")
        if quiet:
            produced = producer.stop()
            last = {p: max(o for q, o, _ in produced if q == p) for p in (0, 1)}
            wait_until(lambda: {(p, o) for _, p, o in ca.seen(t)} >= set(last.items()), 30,
                       message="a to deliver the last record produced to each partition")
    except BaseException:
        if producer.is_alive():
            producer.stop()
        relay.close()
        raise
    return g, t, relay, producer, a, ca


def _committed_and_delivered(zk, g, t, ca):
    """(the offsets committed in ZooKeeper, the next offsets after what *ca* delivered), per partition."""
    delivered = {}
    for _, p, o in ca.seen(t):
        delivered[p] = max(delivered.get(p, -1), o)
    committed = zk_offsets(zk, g, t)
    return committed, {p: o + 1 for p, o in delivered.items()}


def test_shutdown_commits_what_was_delivered_when_the_lease_is_stale(services, zk, unique, conns):
    g, t, relay, _, a, ca = _member_behind_relay(services, unique, conns, "stl")
    try:
        session = a.zk.client_id[0]
        stale_at_shutdown = False
        for _ in range(6):
            # ZooKeeper unreachable for a few seconds: the session lives, the lease goes stale
            relay.blackhole()
            wait_until(lambda: not a.lease.fresh(), 10, message="the lease to go stale")
            relay.release()
            wait_until(lambda: a.zk.state == KazooState.CONNECTED, 10, message="a reconnected", interval=0.002)
            assert a.zk.client_id[0] == session, "the session did not survive: the test proves nothing"
            if not a.lease.fresh():  # the window this test is about: reconnected, not renewed yet
                stale_at_shutdown = True
                break
            time.sleep(2.0)
        assert stale_at_shutdown, "never reconnected before the lease was renewed: the test proves nothing"
        a.shutdown()
    finally:
        relay.close()
    committed, want = _committed_and_delivered(zk, g, t, ca)
    assert committed == want, ("after a clean shutdown the committed offsets %s are behind what a delivered (next "
                               "offsets %s): its successor delivers %d record(s) again; the lease was stale when "
                               "shutdown() was called" % (committed, want, sum(want[p] - committed[p] for p in want)))


def test_shutdown_during_a_short_zookeeper_disconnection_still_commits(services, zk, unique, conns):
    """The same hand-over when shutdown() begins while the connection to ZooKeeper is down for a moment (a leader
    election, a dropped connection): ZooKeeper is back 0.3 s later, well inside the shutdown's bound (12 s), with the
    same session. shutdown() waits for it before it decides whether it can commit and release."""
    g, t, relay, _, a, ca = _member_behind_relay(services, unique, conns, "sdz")
    try:
        session = a.zk.client_id[0]
        relay.blackhole()
        wait_until(lambda: a.zk.state != KazooState.CONNECTED, 10, message="a to see the connection drop",
                   interval=0.005)
        stopper = threading.Thread(target=a.shutdown, daemon=True)
        stopper.start()
        time.sleep(0.3)
        relay.release()
        stopper.join(30)
        assert not stopper.is_alive(), "a's shutdown did not return"
        owners_left = sorted(owners(zk, g, [t]))
    finally:
        relay.close()
    committed, want = _committed_and_delivered(zk, g, t, ca)
    assert committed == want, ("after a clean shutdown begun during a 0.3 s ZooKeeper disconnection (session 0x%x "
                               "kept), the committed offsets %s are behind what a delivered (next offsets %s): its "
                               "successor delivers %d record(s) again; owner nodes left behind: %s"
                               % (session, committed, want, sum(want[p] - committed[p] for p in want), owners_left))
    assert not owners_left, "owner nodes left behind for the session expiry: %s" % owners_left


def test_shutdown_while_zookeeper_is_away_stops_delivery_first(services, zk, unique, conns):
    """shutdown() begun while ZooKeeper is unreachable stops delivery before it waits for the connection: what a
    member hands out then cannot be committed if the connection does not come back in time, and its successor would
    deliver it again."""
    g, t, relay, producer, a, ca = _member_behind_relay(services, unique, conns, "sza", quiet=False)
    try:
        relay.blackhole()
        wait_until(lambda: a.zk.state != KazooState.CONNECTED, 10, message="a to see the connection drop",
                   interval=0.005)
        stopper = threading.Thread(target=a.shutdown, daemon=True)
        called = time.monotonic()
        stopper.start()
        time.sleep(3.0)  # ZooKeeper away for 3 s (shutdown waits for it until 60 % of its 12 s bound)
        relay.release()
        stopper.join(30)
        assert not stopper.is_alive(), "a's shutdown did not return"
    finally:
        producer.stop()
        relay.close()
    late = [x for x, at in zip(ca.seen(t), ca.times) if at > called + 0.5]
    assert not late, "%d record(s) handed out more than 0.5 s after shutdown() began (ZooKeeper away), e.g. %s" % (
        len(late), late[:3])
