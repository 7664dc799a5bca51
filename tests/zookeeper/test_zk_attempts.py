"""A connection attempt that hangs leaves time for more within the session timeout
(:mod:`zkconsumer.zookeeper.attempts`): a member whose reconnect lands on a server that accepts the connection and
never answers (a ZooKeeper starting up) keeps its session, and a TCP connect to a host that drops the packets gives up
after a third of the session timeout. Real ZooKeeper; a TCP relay in front of it leaves the connection silent."""
import socket
import time

from tests.support.consumer_helpers import connector, owners
from tests.support.waiting import wait_until
from tests.support.zk_relay import Relay, zk_target
from zkconsumer.core.layout import paths
from zkconsumer.zookeeper import client as zkmod


def test_a_reconnect_never_answered_does_not_cost_the_members_session(services, zk, unique, conns):
    """Kafka 1.1.1's default session timeout (6 s): the member's first reconnect is accepted and never answered. It
    gives up on it after 2 s and reconnects with the same session: same registration, same owner nodes. kazoo alone
    waits the whole 6 s for that answer, and by then ZooKeeper has expired the session."""
    g, t = unique("silent"), services.create_topic(unique("silent"), 2)
    relay = Relay(zk_target(services))
    relay.start()
    member = None
    try:
        member = connector(services, g, defaults=True, **{"zookeeper.connect": relay.connect})
        conns.append(member)
        member.create_message_streams({t: 1})
        mine = {(t, 0): member.consumer_id + "-0", (t, 1): member.consumer_id + "-0"}
        wait_until(lambda: owners(zk, g, [t]) == mine, 30, message="the member to own both partitions")
        registration = paths.consumer_registration_path(g, member.consumer_id)
        session = zk.exists(registration).ephemeralOwner
        assert member.zk.client_id[0] == session
        relay.mute()
        muted_at = time.monotonic()
        wait_until(lambda: relay.silent, 10, interval=0.01, message="the member's reconnect to reach the relay")
        relay.unmute()
        wait_until(lambda: member.zk.connected, 20, interval=0.02, message="the member to reconnect")
        back_after = time.monotonic() - muted_at
        assert member.zk.client_id[0] == session, "the member's session expired while its reconnect hung"
        assert back_after < 4.0, "the hung reconnect was given up after %.1f s, not 2 s" % back_after
        st = zk.exists(registration)
        assert st is not None and st.ephemeralOwner == session
        wait_until(lambda: owners(zk, g, [t]) == mine, 30, message="the member to keep both partitions")
        assert member.rebalancer.stats["session_expiries"] == 0
    finally:
        # leave through the relay while it still forwards: closed first, it made the shutdown wait its whole bound
        if member is not None:
            member.shutdown()
        relay.close()


def test_a_tcp_connect_to_a_host_dropping_the_packets_gives_up_after_a_third_of_the_session():
    """A listener whose accept queue is full drops new connections' packets, as a firewall in front of a
    powered-off server does: the connect waits 0.5 s of a 1.5 s session, not the 1.5 s kazoo asks for."""
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    address = full.getsockname()
    filling = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(address)
            filling.append(s)
        time.sleep(0.2)
        client = zkmod.make_client("%s:%d" % address, session_timeout_ms=1500)
        t0 = time.monotonic()
        try:
            client.handler.create_connection(address=address, hostname=address[0], timeout=1.5).close()
            outcome = "connected"  # the kernel lets a retransmitted SYN in after about 1 s
        except OSError as e:
            outcome = e
        waited = time.monotonic() - t0
        assert isinstance(outcome, OSError) and waited < 1.0, \
            "the TCP connect waited %.2f s of a 1.5 s session (%s)" % (waited, outcome)
    finally:
        for s in filling:
            s.close()
        full.close()
