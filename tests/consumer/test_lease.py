"""The session lease (zkconsumer/consumer/lease.py) driven by an injected clock, against a real ZooKeeper.

The lease's clock is a fake one the test moves; its round trips go to the session's ZooKeeper through a small TCP
relay on loopback that the test can hold (answers wait in the relay, as they would behind a frozen network or
server). Covered: the deadline from start and from each answered heartbeat (the time it was *sent*), stale after the
deadline, a stale lease waiting for a fresh round trip (streams and fetchers hand nothing out meanwhile), no renewal
after the session expired until the lease follows the new session, stop. And the Spark source's driver member hands
out no ownership from a stale lease.
"""
import queue
import threading
import time
import types

import pytest
from kazoo.client import KazooClient

from zkconsumer.consumer.fetcher import FetcherThread
from zkconsumer.consumer.lease import NoLease, SessionLease
from zkconsumer.consumer.partition_info import PartitionTopicInfo
from zkconsumer.consumer.stream import Chunk, Generation, KafkaStream
from tests.support.zk_relay import Relay, zk_target


class FakeClock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t

    def advance(self, seconds):
        self.t += seconds


@pytest.fixture
def relayed(services):
    """(kazoo client connected through a relay, the relay): session timeout 6 s."""
    relay = Relay(zk_target(services))
    relay.start()
    client = KazooClient(hosts="127.0.0.1:%d" % relay.port, timeout=6.0)
    client.start(timeout=15)
    yield client, relay
    relay.release()
    client.stop()
    client.close()
    relay.close()


def _timeout(client):
    """The session timeout the lease uses: the one the server granted (kazoo keeps only the one asked for)."""
    from zkconsumer.kafka.internals import kazoo_session_timeout_ms
    return kazoo_session_timeout_ms(client) / 1000.0


def _started(lease):
    """start() the lease and wait until its first heartbeat was answered (none is in flight afterwards)."""
    lease.start()
    deadline = time.monotonic() + 10
    while lease.renewals < 2 or lease._outstanding:
        assert time.monotonic() < deadline, "the first heartbeat was not answered"
        time.sleep(0.01)


@pytest.fixture
def leased(relayed):
    """A started lease on a fake clock, its first heartbeat answered: ``.zk``, ``.relay``, ``.clock``, ``.lease``
    (released and stopped at the end)."""
    zk, relay = relayed
    clock = FakeClock()
    lease = SessionLease(zk, 6000, clock=clock)
    _started(lease)
    yield types.SimpleNamespace(zk=zk, relay=relay, clock=clock, lease=lease)
    relay.release()
    lease.stop()


def _held_while_stale(leased, hand_out, nothing_yet=lambda: True):
    """Run *hand_out* on a thread of its own while the lease is stale (ZooKeeper's answers held in the relay): it
    hands nothing out (it has not returned and ``nothing_yet()``) until a round trip is answered; returns what it
    returned then."""
    leased.relay.hold()
    leased.clock.advance(_timeout(leased.zk))
    got = []
    t = threading.Thread(target=lambda: got.append(hand_out()), daemon=True)
    t.start()
    time.sleep(1.0)
    assert not got and nothing_yet(), "handed out from a stale lease"
    leased.relay.release()
    t.join(5)
    assert len(got) == 1, "nothing handed out after the round trip was answered"
    return got[0]


def test_deadline_from_start_and_stale_after_it(relayed):
    zk, _ = relayed
    clock = FakeClock()
    lease = SessionLease(zk, 6000, clock=clock)
    try:
        assert lease.fresh()  # not started: +inf (a member not registered delivers nothing anyway)
        lease.start()
        T = _timeout(zk)
        assert lease.deadline == pytest.approx(1000.0 + 0.6 * T)
        clock.advance(0.6 * T - 0.01)
        assert lease.fresh()
        clock.advance(0.02)
        assert not lease.fresh()
    finally:
        lease.stop()
    assert not lease.fresh() and lease.wait_fresh() is False  # stopped: never fresh again


def test_a_stale_lease_waits_for_a_round_trip_and_renews_from_its_send_time(leased):
    zk, relay, clock, lease = leased.zk, leased.relay, leased.clock, leased.lease
    T = _timeout(zk)
    renewals = lease.renewals
    relay.hold()                          # the server's answers wait in the relay
    clock.advance(T)                      # a "pause" longer than the lease
    assert not lease.fresh()
    sent_at = clock.t
    renewed_from = []                     # the send time of every answered heartbeat, in order
    renew = lease._renew
    lease._renew = lambda sent: (renewed_from.append(sent), renew(sent))
    got = []
    waiter = threading.Thread(target=lambda: got.append(lease.wait_fresh()), daemon=True)
    waiter.start()
    time.sleep(1.0)                       # no answer: still waiting, nothing renewed
    assert waiter.is_alive() and not got and lease.renewals == renewals and not lease.fresh()
    clock.advance(0.5)                    # time passes while the heartbeat is in flight
    released = time.monotonic()
    relay.release()
    waiter.join(5)
    assert got == [True] and lease.fresh(), "no renewal after the answer arrived"
    assert time.monotonic() - released < 2.0
    assert lease.renewals > renewals and lease.stale_waits == 1
    # renewed from when the heartbeat was sent (the server heard from us no earlier), not when it was answered
    assert renewed_from and renewed_from[0] == sent_at, renewed_from
    assert lease.deadline == pytest.approx(max(renewed_from) + 0.6 * T) and max(renewed_from) <= clock.t


def test_the_deadline_never_moves_back(leased):
    before = leased.lease.deadline
    leased.lease._renew(leased.clock.t - 5.0)           # a late answer to an older heartbeat
    assert leased.lease.deadline == before


def test_no_renewal_after_the_session_expired_until_the_lease_follows_the_new_session(services, leased):
    zk, clock, lease = leased.zk, leased.clock, leased.lease
    old = zk.client_id[0]
    sid, pw = zk.client_id
    other = KazooClient(hosts=services.zookeeper_connect, client_id=(sid, pw), timeout=6.0)
    other.start(timeout=15)
    other.stop()                          # closing the same session from another client: it is gone
    other.close()
    deadline = time.monotonic() + 20
    while not (zk.connected and zk.client_id and zk.client_id[0] != old):
        assert time.monotonic() < deadline, "kazoo did not start a new session"
        time.sleep(0.05)
    clock.advance(_timeout(zk))
    give_up = time.monotonic() + 1.5
    assert lease.wait_fresh(lambda: time.monotonic() > give_up) is False  # answers come under another session
    assert not lease.fresh()
    lease.new_session(zk.client_id[0], clock.t)  # the connector re-registered: the lease follows the new session
    assert lease.fresh()
    clock.advance(_timeout(zk))
    give_up = time.monotonic() + 5
    assert lease.wait_fresh(lambda: time.monotonic() > give_up) is True  # renewed under the new session


def test_the_lease_follows_a_session_that_replaced_the_first_one_before_the_first_registration(services, unique):
    """A member's lease starts under its first session before the rebalancer registers it; when that session
    expires in between (a pause at start) the member registers, claims and fetches under the new one, and its lease
    must follow it: a lease left on the dead session is never renewed, and every stream and fetcher then waits for
    ever, silently. The member runs at the defaults (smallest only so that it reads the records produced before it
    started)."""
    from tests.support.consumer_helpers import StreamCollector, connector, expire_session, produce_tracked
    from tests.support.waiting import wait_until
    g, t = unique("lease-first"), services.create_topic(unique("lease-first"), 1)
    member = connector(services, g, defaults=True, **{"auto.offset.reset": "smallest"})
    start = member.lease.start
    first_deadline = []

    def start_then_lose_the_session():
        start()
        first_deadline.append(member.lease.deadline)
        old = expire_session(services, member.zk)
        wait_until(lambda: member.zk.connected and member.zk.client_id and member.zk.client_id[0] != old, 30,
                   message="kazoo to start a new session")
    member.lease.start = start_then_lose_the_session
    try:
        [stream] = member.create_message_streams({t: 1})[t]
        col = StreamCollector(stream)
        col.start()
        # records handed out after the deadline the lease got at its start: only a renewal lets them through
        wait_until(lambda: time.monotonic() > first_deadline[0] + 1.0, 30, message="the first deadline to pass")
        sent = produce_tracked(services.bootstrap_servers, t, 5)
        wait_until(lambda: len(col.seen(t)) == len(sent), 30,
                   message="the member to deliver what was produced (lease fresh: %s)" % member.lease.fresh())
    finally:
        member.shutdown()


def test_the_lease_follows_the_session_registered_under_while_kazoo_is_disconnected(services, unique, monkeypatch):
    """The rebalancer points the member's lease at the session it registered under. It once read the client's
    session at that moment instead, which is none while kazoo is disconnected (a network blip right after the
    registration; kazoo then reconnects under the same session): the lease followed no session, no heartbeat renewed
    it, and every stream waited for ever, silently. The blip is made by a relay between the member and ZooKeeper,
    right after the registration's last request (the leave marker's withdrawal), and lasts until the lease was
    pointed at a session. The member runs at the defaults (smallest only so that it reads the records produced
    before it started)."""
    from tests.support.consumer_helpers import StreamCollector, connector, produce_tracked
    from tests.support.waiting import wait_until
    from zkconsumer.consumer import rebalancer
    g, t = unique("lease-blip"), services.create_topic(unique("lease-blip"), 1)
    relay = Relay(zk_target(services))
    relay.start()
    member = connector(services, g, defaults=True, **{"auto.offset.reset": "smallest",
                                                      "zookeeper.connect": relay.connect})
    withdraw, new_session = rebalancer.withdraw_leave, member.lease.new_session
    blips = []

    def withdraw_then_blip(zk, group, consumer_id):
        withdraw(zk, group, consumer_id)
        if zk is member.zk and not blips:
            blips.append(zk.client_id[0])
            relay.blackhole()
            wait_until(lambda: zk.client_id is None, 10, message="kazoo to see its connection drop")

    def new_session_then_reconnect(*args):
        new_session(*args)
        relay.release()
    monkeypatch.setattr(rebalancer, "withdraw_leave", withdraw_then_blip)
    member.lease.new_session = new_session_then_reconnect
    try:
        [stream] = member.create_message_streams({t: 1})[t]
        col = StreamCollector(stream)
        col.start()
        assert blips, "no blip after the registration"
        wait_until(lambda: member.zk.connected, 30, message="kazoo to reconnect")
        assert member.zk.client_id[0] == blips[0], "not the same session after the blip"
        # records handed out after the deadline the registration gave the lease: only a renewal lets them through
        first_deadline = member.lease.deadline
        wait_until(lambda: time.monotonic() > first_deadline + 1.0, 30, message="the first deadline to pass")
        sent = produce_tracked(services.bootstrap_servers, t, 5)
        wait_until(lambda: len(col.seen(t)) == len(sent), 30,
                   message="the member to deliver what was produced (lease fresh: %s)" % member.lease.fresh())
    finally:
        relay.release()
        member.shutdown()
        relay.close()


def test_no_lease_is_always_fresh():
    assert NoLease().fresh() and NoLease().wait_fresh()


# -- hand-outs from a stale lease --------------------------------------------------------------------------------
def test_a_fetcher_hands_no_chunk_from_a_stale_lease(services, leased):
    from zkconsumer.core.config import ConsumerConfig
    cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": services.zookeeper_connect})
    f = FetcherThread(0, services.bootstrap_servers, cfg)   # never started: only its hand-off is exercised
    f.lease = leased.lease
    q = queue.Queue(4)
    assert f._put(q, "fresh") is True and q.get_nowait() == "fresh"
    assert _held_while_stale(leased, lambda: f._put(q, "after-pause"), nothing_yet=q.empty) is True
    assert q.get_nowait() == "after-pause"
    # stale, and the assignment changes meanwhile: the chunk is dropped, never queued
    leased.relay.hold()
    leased.clock.advance(_timeout(leased.zk))
    done = []
    t = threading.Thread(target=lambda: done.append(f._put(q, "dropped")), daemon=True)
    t.start()
    time.sleep(0.3)
    f.shutdown()
    t.join(5)
    assert done == [False] and q.empty()


def test_a_stream_hands_no_record_from_a_stale_lease(leased):
    gen = Generation()
    q = queue.Queue()
    s = KafkaStream(q, gen, timeout_ms=5000, lease=leased.lease)
    Rec = type("Rec", (), {})
    records = []
    for off in range(2):
        r = Rec()
        r.topic, r.partition, r.offset = "t", 0, off
        records.append(r)
    q.put(Chunk(0, PartitionTopicInfo(("t", 0), "c-0"), records))
    assert next(s).offset == 0
    assert _held_while_stale(leased, lambda: next(s)).offset == 1


def test_the_spark_driver_member_hands_out_no_ownership_from_a_stale_lease(services, unique):
    """GroupMember.ownership() (what the Spark source plans its offset ranges from) returns None while the lease is
    stale and no round trip confirms the session; once one does, the same ownership again."""
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.spark.member import GroupMember
    t = services.create_topic(unique("lease"), 2)
    relay = Relay(zk_target(services))
    relay.start()
    cfg = ConsumerConfig.from_properties({"group.id": unique("lease"), "consumer.id": "driver",
                                          "zookeeper.connect": "127.0.0.1:%d" % relay.port,
                                          "zookeeper.session.timeout.ms": "6000", "split.brain.check": "off",
                                          "offsets.storage.switch.check": "off"})
    member = GroupMember(cfg, bootstrap_servers=services.bootstrap_servers, reaper=False)
    try:
        member.join(topics=[t], wait_timeout=60)
        snap = member.wait_ownership(30)
        assert snap is not None and snap[0] == {(t, 0), (t, 1)}
        lease = member.lease
        deadline = time.monotonic() + 10
        while lease._outstanding:  # no heartbeat in flight: the next one is sent after the "pause"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        renewals = lease.renewals
        relay.hold()
        lease.clock = lambda: time.monotonic() + 100.0   # the lease's clock jumps: a 100 s pause
        t0 = time.monotonic()
        assert member.ownership() is None, "ownership handed out from a stale lease"
        assert time.monotonic() - t0 >= 0.9            # it waited (stale_wait) for a round trip
        assert member.ownership(stale_wait=0.1) is None and lease.renewals == renewals
        relay.release()
        snap = member.wait_ownership(10)
        assert snap is not None and snap[0] == {(t, 0), (t, 1)} and lease.renewals > renewals
    finally:
        relay.release()
        member.shutdown()
        relay.close()


def test_one_heartbeat_per_interval_not_one_per_round_trip(relayed):
    """A renewal wakes the streams waiting on the lease, and the heartbeat thread with them: it must go back to
    sleep until its next beat (0.45 T), not beat again (it once heartbeat as fast as ZooKeeper answered: an idle
    member kept a core busy and hid a frozen server from kazoo's pings)."""
    zk, _ = relayed
    lease = SessionLease(zk, 6000)
    try:
        lease.start()
        time.sleep(1.5)  # 0.45 T is 2.7 s: the beat at start, and no other
        assert lease.renewals <= 3, "%d renewals in 1.5 s" % lease.renewals
        before = lease.renewals
        time.sleep(0.45 * _timeout(zk) + 0.5)
        assert 1 <= lease.renewals - before <= 2
    finally:
        lease.stop()
