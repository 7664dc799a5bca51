"""ZooKeeper session expiry of an in-process consumer, and consumer id registration conflicts (Kafka 1.1.1
``ZKSessionExpireListener.handleNewSession``; ``ZKCheckedEphemeral``, KAFKA-1387), against a real ZooKeeper.

Forcing expiry: a second client attaches to the consumer's session with the same session id *and password*
(``KazooClient(client_id=(id, passwd))``) and closes it. Closing sends a CloseSession request, so the server ends
that session at once; the consumer's own connection then learns on its next request/reconnect that the session
has expired (kazoo state LOST), exactly as after a real expiry. Checked with ZooKeeper 3.9: merely attaching a
second client to the session, without closing it, does not expire it — the two clients just steal the connection
from each other, the first flapping SUSPENDED/CONNECTED.
"""
import logging
import threading
import time

import pytest

from tests.support.consumer_helpers import (FAST_PROPS, BackgroundProducer, StreamCollector, connector, expire_session,
                                            owners, produce_tracked)
from tests.support.waiting import wait_until
from zkconsumer.consumer import RebalanceListener
from zkconsumer.errors import RebalanceError, RegistrationConflictError
from zkconsumer.core.layout import paths


class _Recorder(RebalanceListener):
    """Hook calls with their times; on_lost reads the committed offsets at that moment (it runs on the
    rebalancer thread, before any re-registration or new claim can happen)."""

    def __init__(self, zk, group, topic, partitions, outage=1.5):
        self.zk, self.group, self.topic, self.partitions = zk, group, topic, partitions
        self.outage = outage
        self.calls = []
        self.lost_at = None
        self.committed_at_loss = None

    def on_revoke(self, partitions):
        self.calls.append(("revoke", set(partitions), time.monotonic()))

    def on_assign(self, partitions):
        self.calls.append(("assign", set(partitions), time.monotonic()))

    def on_lost(self, partitions):
        self.committed_at_loss = {}
        for p in range(self.partitions):
            path = paths.partition_offset_path(self.group, self.topic, p)
            self.committed_at_loss[p] = int(self.zk.get(path)[0]) if self.zk.exists(path) else 0
        self.lost_at = time.monotonic()
        self.calls.append(("lost", set(partitions), self.lost_at))
        # a slow hook keeps the consumer out of the group for a while (it runs on the rebalancer thread, before
        # re-registration): a real outage window, in which nothing may be delivered and messages keep coming
        time.sleep(self.outage)


def test_session_expiry_lost_reregister_resume_without_loss(services, zk, unique, conns):
    g, t = unique("g"), unique("t")
    services.create_topic(t, 3)
    # a backlog and a slow application with small queues: at the moment of the loss chunks fetched under the old
    # session are sitting in the queue, and must not be handed out any more
    backlog = produce_tracked(services.bootstrap_servers, t, 600, partitions=3, tag="backlog")
    rec = _Recorder(zk, g, t, 3)
    conn = connector(services, g, listener=rec, **{"queued.max.message.chunks": "2",
                                                   "fetch.message.max.bytes": "4096"})
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    col = StreamCollector(stream, delay=0.003)
    col.start()
    reg = paths.consumer_registration_path(g, conn.consumer_id)
    mine = {(t, p): conn.consumer_id + "-0" for p in range(3)}
    wait_until(lambda: owners(zk, g, [t]) == mine, 10, message="owner nodes")
    producer = BackgroundProducer(services.bootstrap_servers, t, 3, batch=6, pause=0.1, tag="live")
    producer.start()
    try:
        wait_until(lambda: len(col.seen()) >= 150 and _committed_any(zk, g, t), 15,
                   message="consumption and a first auto-commit")
        old_session = zk.exists(reg).ephemeralOwner
        assert old_session == conn.zk.client_id[0]
        gen_before = conn.generation.value

        expire_session(services, conn.zk)
        wait_until(lambda: rec.lost_at is not None, 10, message="the lost hook")
        assert [c[1] for c in rec.calls if c[0] == "lost"] == [set(mine)]
        assert conn.generation.value > gen_before

        # re-registered under a new session, rebalanced, owns its partitions again
        def back():
            st = zk.exists(reg)
            return st is not None and st.ephemeralOwner != old_session and owners(zk, g, [t]) == mine and st
        st = wait_until(back, 20, message="re-registration and re-claim under a new session")
        assert st.ephemeralOwner == conn.zk.client_id[0] != old_session
        for p in range(3):
            assert zk.exists(paths.partition_owner_path(g, t, p)).ephemeralOwner == st.ephemeralOwner
        wait_until(lambda: any(c[0] == "assign" and c[2] > rec.lost_at for c in rec.calls), 10,
                   message="the assign hook after the loss")
        reassigned_at = min(c[2] for c in rec.calls if c[0] == "assign" and c[2] > rec.lost_at)
        wait_until(lambda: len(col.seen_between(reassigned_at, 1e18)) > 0, 15,
                   message="delivery to resume after the new assignment")
        time.sleep(0.5)
    finally:
        live = producer.stop()
    produced = backlog + live
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(col.seen()), 25,
               message="every message (including those produced during the outage) to be delivered")

    # delivery stopped: nothing was handed out between the loss (fence, then the hook) and the new assignment
    assert reassigned_at - rec.lost_at >= rec.outage
    stale = col.seen_between(rec.lost_at + 0.05, reassigned_at)
    assert not stale, "delivered after the session loss, before the new assignment: %s" % stale[:10]
    # the new generation resumes exactly at the committed offsets; re-delivery only of the uncommitted window
    seen = col.seen()
    times = list(col.times)
    after = [(x, ts) for x, ts in zip(seen, times) if ts >= reassigned_at]
    for p in range(3):
        first_after = next((x[2] for x, _ in after if x[1] == p), None)
        assert first_after == rec.committed_at_loss[p], \
            "p%d resumed at %s, committed at loss %s" % (p, first_after, rec.committed_at_loss[p])
    before_loss = {x for x, ts in zip(seen, times) if ts <= rec.lost_at}
    counts = {}
    for x in seen:
        counts[x] = counts.get(x, 0) + 1
    for x, n in counts.items():
        if n > 1:
            assert n == 2 and x in before_loss and x[2] >= rec.committed_at_loss[x[1]], \
                "unexpected duplicate %s (x%d)" % (x, n)
    assert conn.state in ("IDLE", "SETTLING")


def _committed_any(zk, g, t):
    return any(zk.exists(paths.partition_offset_path(g, t, p)) for p in range(3))


def test_duplicate_consumer_id_is_refused(services, zk, unique, conns, caplog):
    """KAFKA-1387: a second connector with the same explicit consumer.id, while the first lives, must not loop
    forever nor take over: registration waits a bounded time for the node to go, then fails with a clear
    RebalanceError; the member never owns anything and the first one is undisturbed."""
    g, t = unique("g"), unique("t")
    services.create_topic(t, 2)
    first = connector(services, g, **{"consumer.id": "same"})
    conns.append(first)
    first.create_message_streams({t: 1})
    reg = paths.consumer_registration_path(g, g + "_same")
    owner_session = zk.exists(reg).ephemeralOwner
    assert owner_session == first.zk.client_id[0]
    wait_until(lambda: len(owners(zk, g, [t])) == 2, 10, message="owner nodes of the first")

    caplog.set_level(logging.INFO, logger="zkconsumer.consumer.rebalancer")
    second = connector(services, g, **{"consumer.id": "same", "rebalance.max.retries": "2",
                                       "rebalance.slow.retry.ms": "60000"})
    conns.append(second)
    t0 = time.monotonic()
    with pytest.raises(RegistrationConflictError) as err:  # like Scala 0.9+: the subscription call fails
        second.create_message_streams({t: 1})
    took = time.monotonic() - t0
    session_s = int(FAST_PROPS["zookeeper.session.timeout.ms"]) / 1000.0
    # registration waits at most 2 session timeouts for the node to go
    assert took < 2 * session_s + 5, "registration conflict not reported in bounded time (%.1f s)" % took
    assert not second.owned_partitions()
    msg = str(err.value)
    assert "already registered" in msg
    assert g + "_same" in msg and "0x%x" % owner_session in msg and "same consumer.id" in msg
    # the first member keeps its registration, its member info node and its partitions
    assert zk.exists(reg).ephemeralOwner == owner_session
    assert zk.exists(paths.member_info_path(g, g + "_same")).ephemeralOwner == owner_session
    assert owners(zk, g, [t]) == {(t, 0): g + "_same-0", (t, 1): g + "_same-0"}
    assert first.owned_partitions() == {(t, 0): g + "_same-0", (t, 1): g + "_same-0"}
    # the registration call itself raises the RebalanceError (bounded by wait_timeout)
    from zkconsumer.consumer.registration import register
    from zkconsumer.core.layout import codecs
    t0 = time.monotonic()
    with pytest.raises(RebalanceError, match="already registered"):
        register(zk, g, g + "_same", codecs.ConsumerRegistration.static({t: 1}), wait_timeout=0.5)
    assert time.monotonic() - t0 < 3
    # the failed second (already shut down by the failed call) did not delete the first's registration
    second.shutdown()
    assert zk.exists(reg).ephemeralOwner == owner_session
    assert owners(zk, g, [t]) == {(t, 0): g + "_same-0", (t, 1): g + "_same-0"}


@pytest.mark.parametrize("earlier_info", [True, False], ids=["earlier-zkconsumer", "earlier-jvm"])
def test_a_member_waiting_for_its_id_never_stands_for_the_session_holding_it(services, zk, unique, conns,
                                                                          earlier_info):
    """A member restarted under its consumer.id finds its registration still held by another session: an earlier
    session of its own, not expired yet (its info node beside it, or none: a JVM member with that id). While it
    waits, the info node is the other session's or absent, never this member's (standing for a JVM member, it would
    turn every leave grace in the group on beside a member that knows nothing of it). Once the other session is
    gone, the member registers with an info node of its own."""
    from zkconsumer.core.layout import codecs
    from zkconsumer.zookeeper import client as zkmod
    g, t = unique("g"), unique("t")
    services.create_topic(t, 2)
    reg_path, info_path = paths.consumer_registration_path(g, g + "_again"), paths.member_info_path(g, g + "_again")
    earlier = zkmod.connect(services.zookeeper_connect)
    try:
        earlier.create(reg_path, codecs.encode_consumer_registration(codecs.ConsumerRegistration.static({t: 1})),
                       ephemeral=True, makepath=True)
        if earlier_info:
            earlier.create(info_path, b"the earlier session's", ephemeral=True, makepath=True)
        member = connector(services, g, **{"consumer.id": "again"})
        conns.append(member)
        started = []
        threading.Thread(target=lambda: started.append(member.create_message_streams({t: 1})), daemon=True).start()
        owners_seen = set()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.5:  # the member waits (up to 2 session timeouts) for the registration
            stat = zk.exists(info_path)
            owners_seen.add(stat.ephemeralOwner if stat is not None else None)
            time.sleep(0.02)
        assert zk.exists(reg_path).ephemeralOwner == earlier.client_id[0]
        assert owners_seen == {earlier.client_id[0] if earlier_info else None}, owners_seen
    finally:
        zkmod.close(earlier)
    wait_until(lambda: started and len(member.owned_partitions()) == 2, 20,
               message="the member registers once the earlier session is gone")
    assert zk.exists(reg_path).ephemeralOwner == member.zk.client_id[0]
    assert zk.exists(info_path).ephemeralOwner == member.zk.client_id[0]


def test_an_earlier_sessions_member_info_is_replaced_at_registration(services, zk, unique, conns):
    """A member restarted under its consumer.id before its earlier session expired finds that session's member info
    node (here: the earlier session deleted its registration and died before its info node went). The registration
    is made alone, then the node replaced in one multi-op: the member ends with a node of its own."""
    from zkconsumer.zookeeper import client as zkmod
    g, t = unique("g"), unique("t")
    services.create_topic(t, 2)
    info_path = paths.member_info_path(g, g + "_again")
    earlier = zkmod.connect(services.zookeeper_connect)
    try:
        earlier.create(info_path, b"the earlier session's", ephemeral=True, makepath=True)
        first = connector(services, g, **{"consumer.id": "again"})
        conns.append(first)
        first.create_message_streams({t: 1})
        wait_until(lambda: len(first.owned_partitions()) == 2, 20, message="the restarted member owns its partitions")
        stat = zk.exists(info_path)
        assert stat is not None and stat.ephemeralOwner == first.zk.client_id[0]
        assert zk.get(info_path)[0] != b"the earlier session's"
    finally:
        zkmod.close(earlier)


def test_a_group_refusing_the_info_nodes_directory_still_registers_and_consumes(services, zk, unique, conns,
                                                                              caplog):
    """An administrator's ACL on /consumers/G that refuses CREATE (its ids, owners and offsets directories made
    beforehand, open): the member info node's directory cannot be made, so the registration is made alone and the
    member consumes, with one warning that its info node could not be published (not the cutover fence's error)."""
    from kazoo.security import ACL, Id, OPEN_ACL_UNSAFE, Permissions
    g, t = unique("g"), unique("t")
    services.create_topic(t, 2)
    for path in (paths.group_ids_path(g), "/consumers/%s/owners" % g, "/consumers/%s/offsets" % g):
        zk.ensure_path(path)
    zk.set_acls("/consumers/" + g, [ACL(Permissions.ALL & ~Permissions.CREATE, Id("world", "anyone"))])
    try:
        caplog.set_level(logging.WARNING, logger="zkconsumer.consumer.registration")
        member = connector(services, g)
        conns.append(member)
        member.create_message_streams({t: 1})
        wait_until(lambda: len(member.owned_partitions()) == 2, 20, message="the member owns the topic")
        assert zk.exists(paths.consumer_registration_path(g, member.consumer_id)) is not None
        assert zk.exists(paths.member_info_path(g, member.consumer_id)) is None
        assert "could not publish member info" in caplog.text
    finally:
        zk.set_acls("/consumers/" + g, OPEN_ACL_UNSAFE)


def test_an_info_node_of_ours_does_not_stand_for_another_session_that_took_our_id(services, zk, unique, conns,
                                                                                 monkeypatch):
    """Our registration is deleted out of band, and as we register again another session (a JVM member with the
    same id) gets there first: our info node, left from before, goes while we wait for the id, so it does not
    stand for that member."""
    from zkconsumer.consumer import registration
    from zkconsumer.core.layout import codecs
    from zkconsumer.zookeeper import client as zkmod
    g, t = unique("g"), unique("t")
    services.create_topic(t, 2)
    member = connector(services, g, **{"consumer.id": "taken"})
    conns.append(member)
    member.create_message_streams({t: 1})
    wait_until(lambda: len(member.owned_partitions()) == 2, 20, message="the member owns the topic")
    reg_path, info_path = paths.consumer_registration_path(g, g + "_taken"), paths.member_info_path(g, g + "_taken")
    assert zk.exists(info_path).ephemeralOwner == member.zk.client_id[0]
    jvm = zkmod.connect(services.zookeeper_connect)
    real, taken = registration._create_with_info, []

    def jvm_first(*args):
        if not taken:
            taken.append(jvm.create(reg_path, codecs.encode_consumer_registration(
                codecs.ConsumerRegistration.static({t: 1})), ephemeral=True))
        return real(*args)
    monkeypatch.setattr(registration, "_create_with_info", jvm_first)
    try:
        zk.delete(reg_path)  # out of band: the member registers again
        # at once, not when the wait for the id gives up (2 session timeouts: 8 s)
        wait_until(lambda: taken and zk.exists(info_path) is None, 6,
                   message="our info node withdrawn while another session holds our id")
        assert zk.exists(reg_path).ephemeralOwner == jvm.client_id[0]
    finally:
        zkmod.close(jvm)
    wait_until(lambda: zk.exists(info_path) is not None
               and zk.exists(info_path).ephemeralOwner == member.zk.client_id[0], 20,
               message="registered again with its info node once the other session is gone")


def test_the_first_member_of_a_group_makes_its_info_node_with_its_registration(services, zk, unique, conns,
                                                                               monkeypatch):
    """A group's first zkconsumer member finds no directory for member info nodes: the directories come in the same
    multi-op as its info node and registration (leave markers can exist in a group whose members directory a tool
    removed, and a member listed without its info node turns every leave grace off), so nothing is published
    after the registration."""
    from zkconsumer.consumer import rebalancer as rebalancer_module
    g, t = unique("g"), unique("t")
    services.create_topic(t, 2)
    zk.ensure_path(paths.group_leaving_dir(g))  # a marker's directory, no members directory
    assert zk.exists(paths.group_member_info_dir(g)) is None
    real, published = rebalancer_module.publish_member_info, []
    monkeypatch.setattr(rebalancer_module, "publish_member_info",
                        lambda *a, **k: (published.append(a[2]), real(*a, **k))[1])
    member = connector(services, g)
    conns.append(member)
    member.create_message_streams({t: 1})
    wait_until(lambda: len(member.owned_partitions()) == 2, 20, message="the member owns the topic")
    assert zk.exists(paths.member_info_path(g, member.consumer_id)).ephemeralOwner == member.zk.client_id[0]
    assert published == [], "the info node was published after the registration"
