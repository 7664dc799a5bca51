"""Owner nodes of our own session that we do not track, and claims that wait (real ZooKeeper; the first test puts a
TCP relay between a member and ZooKeeper to lose the answer of a claim the server applied).

* A claim multi-op whose answer is lost (ConnectionLoss after the server applied it) leaves owner nodes of our
  session that the member does not know it holds; when the assignment then moves those partitions to another member,
  the member deletes them (it reconciles the nodes of every claim whose outcome it could not know), instead of
  keeping the other member waiting for ever.
* A claim is refused when the session is not the one the member registered under, even when it owns nothing yet
  (after a session expiry during a slow release it would create owner nodes of a member nobody sees).
* A claim that waits longer than twice ``zookeeper.session.timeout.ms`` is visible: a warning naming the owner node,
  its data and its session, and the member's metrics (``ClaimWait``).
"""
import logging
import threading

from tests.support.consumer_helpers import connector, expire_session, group_members, owners
from tests.support.waiting import wait_until
from tests.support.zk_relay import Relay, zk_target
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.consumer import RebalanceListener
from zkconsumer.core.layout import paths


def _start(conn, topic, streams=1):
    """create_message_streams on a thread (it waits for the first rebalance)."""
    th = threading.Thread(target=lambda: conn.create_message_streams({topic: streams}), daemon=True)
    th.start()
    return th


def test_a_claim_applied_but_lost_to_connection_loss_is_reconciled(services, zk, unique, conns):
    g, t = unique("orphan"), services.create_topic(unique("orphan"), 2)
    relay = Relay(zk_target(services))
    relay.start()
    try:
        relay.sever_after(("/consumers/%s/owners/" % g).encode())
        # "b" sorts after "a": alone it claims both partitions, with "a" in the group it gets partition 1 only
        b = connector(services, g, **{"zookeeper.connect": relay.connect, "consumer.id": "b"})
        conns.append(b)
        _start(b, t)
        assert relay.fired.wait(30), "the claim multi-op never went through the relay"
        wait_until(lambda: len(owners(zk, g, [t])) == 2, 10, message="the server to apply b's claim")
        a = connector(services, g, **{"consumer.id": "a"})
        conns.append(a)
        _start(a, t)
        wait_until(lambda: len(group_members(zk, g)) == 2, 20, message="a to register")
        relay.sever()  # b's client loses the answer of its claim; it reconnects with the same session
        want = {(t, 0): "%s_a-0" % g, (t, 1): "%s_b-0" % g}
        wait_until(lambda: owners(zk, g, [t]) == want, 30,
                   message="a to own partition 0 and b partition 1 (b deleting the owner node of its lost claim)")
        wait_until(lambda: a.owned_partitions() == {(t, 0): want[(t, 0)]}, 10, message="a to fetch partition 0")
    finally:
        relay.close()


class _SlowRevoke(RebalanceListener):
    """on_revoke waits (an application finishing its work) while armed; on_assign checks that the member's
    registration is there, under the session of its claim."""

    def __init__(self, conn_ref, group):
        self.conn_ref, self.group = conn_ref, group
        self.armed = False
        self.in_revoke = threading.Event()
        self.go_on = threading.Event()
        self.unregistered_claims = []

    def on_revoke(self, partitions):
        if self.armed:
            self.armed = False
            self.in_revoke.set()
            self.go_on.wait(60)

    def on_assign(self, partitions):
        conn = self.conn_ref[0]
        session = conn.zk.client_id[0]
        stat = conn.zk.exists(paths.consumer_registration_path(self.group, conn.consumer_id))
        if stat is None or stat.ephemeralOwner != session:
            self.unregistered_claims.append((sorted(partitions), session))


def _fake_registration(g, cid, topic):
    from zkconsumer.core.layout import codecs
    reg = codecs.ConsumerRegistration.static({topic: 1})
    return paths.consumer_registration_path(g, "%s_%s" % (g, cid)), codecs.encode_consumer_registration(reg)


def test_no_claim_under_a_session_the_member_is_not_registered_with(services, zk, unique, conns):
    """The session expires while the member releases its only partition (a slow on_revoke); its client opens a new
    session at once. The claim of the partition the same attempt assigned it must wait for the re-registration
    under that session. The other members are registrations the test writes: "k" (topic t1) leaves without releasing
    t1's partition yet (as a zkconsumer member does: registration first), "h" (topic t0) joins, in one multi-op."""
    g = unique("unreg")
    t0, t1 = services.create_topic(unique("unreg0"), 1), services.create_topic(unique("unreg1"), 1)
    k_path, k_data = _fake_registration(g, "k", t1)
    h_path, h_data = _fake_registration(g, "h", t0)
    zk.create(k_path, k_data, ephemeral=True, makepath=True)
    k_owner = paths.partition_owner_path(g, t1, 0)
    zk.create(k_owner, ("%s_k-0" % g).encode(), ephemeral=True, makepath=True)
    ref = []
    listener = _SlowRevoke(ref, g)
    m = connector(services, g, listener=listener, **{"consumer.id": "m"})
    ref.append(m)
    conns.append(m)
    th = threading.Thread(target=lambda: m.create_message_streams({t0: 1, t1: 1}), daemon=True)
    th.start()
    wait_until(lambda: m.owned_partitions() == {(t0, 0): "%s_m-0" % g}, 30, message="m owning t0's partition")
    listener.armed = True
    tx = zk.transaction()
    tx.delete(k_path)
    tx.create(h_path, h_data, ephemeral=True)
    assert not any(isinstance(r, Exception) for r in tx.commit())
    assert listener.in_revoke.wait(30), "m never started releasing t0's partition"
    old = expire_session(services, m.zk)
    wait_until(lambda: m.zk.connected and m.zk.client_id[0] != old, 20, message="m's client to open a new session")
    zk.delete(k_owner)  # k lets go of t1's partition: m's claim of it would succeed now
    listener.go_on.set()
    wait_until(lambda: m.owned_partitions() == {(t1, 0): "%s_m-0" % g}, 30, message="m owning t1's partition")
    assert listener.unregistered_claims == [], "m claimed %s under a session it was not registered with" % (
        listener.unregistered_claims,)


def test_a_long_claim_wait_names_the_node_and_its_session(services, zk, unique, conns, caplog):
    g, t = unique("wait"), services.create_topic(unique("wait"), 1)
    squatter = zkmod.connect(services.zookeeper_connect)
    try:
        path = paths.partition_owner_path(g, t, 0)
        squatter.create(path, b"someone-0", ephemeral=True, makepath=True)
        session = squatter.client_id[0]
        caplog.set_level(logging.WARNING, logger="zkconsumer")
        a = connector(services, g)  # session timeout 4 s: a claim waiting past 8 s is reported
        conns.append(a)
        _start(a, t)

        def reported():
            wait = a.metrics().get("ClaimWait") or {}
            return wait.get("seconds", 0) >= 8 and wait.get("owners")
        owners_seen = wait_until(reported, 30, message="the claim wait in the member's metrics")
        assert owners_seen == {path: {"owner": "someone-0", "session": "0x%x" % session}}, owners_seen
        assert a.metrics()["OwnedPartitionsCount"] == 0
        wait_until(lambda: any(path in r.getMessage() and "0x%x" % session in r.getMessage()
                               and "someone-0" in r.getMessage()
                               for r in caplog.records if r.levelno >= logging.WARNING), 10,
                   message="a warning naming the owner node, its data and its session")
        squatter.delete(path)
        wait_until(lambda: a.owned_partitions() == {(t, 0): "%s-0" % a.consumer_id}, 20, message="a to claim")
        wait_until(lambda: not (a.metrics().get("ClaimWait") or {}).get("owners"), 10,
                   message="the claim wait cleared")
    finally:
        zkmod.close(squatter)
