"""A member whose connection to ZooKeeper drops during its start (a mass start loads the ensemble: a server too busy
to answer a ping in time, a follower that loses its leader for a moment, closes its clients' connections) makes its
start-up checks again once its client has reconnected, and joins (real ZooKeeper; a TCP relay between the member
and ZooKeeper cuts the connection while a check's read is unanswered)."""
import threading

from tests.support.consumer_helpers import connector, owners
from tests.support.waiting import wait_until
from tests.support.zk_relay import Relay, zk_target


def test_a_connection_lost_during_the_start_up_checks_is_retried_and_the_member_joins(services, zk, unique, conns):
    g, t = unique("start-loss"), services.create_topic(unique("start-loss"), 2)
    relay = Relay(zk_target(services))
    relay.start()
    try:
        member = connector(services, g, defaults=True, **{"zookeeper.connect": relay.connect})
        conns.append(member)
        # the first request of the start that names the group (a start-up check's read) reaches the server; its
        # answer is held, then the connection is cut: the client sees ConnectionLoss and reconnects, same session
        relay.sever_after(("/consumers/%s" % g).encode(), op=None)
        outcome = []

        def start():
            try:
                member.create_message_streams({t: 1})
                outcome.append("joined")
            except Exception as e:  # noqa: BLE001 - the outcome is asserted
                outcome.append(e)
        th = threading.Thread(target=start, daemon=True)
        th.start()
        assert relay.fired.wait(30), "no request of the start went through the relay"
        relay.sever()
        th.join(120)
        assert outcome == ["joined"], outcome
        mine = {(t, 0): member.consumer_id + "-0", (t, 1): member.consumer_id + "-0"}
        wait_until(lambda: owners(zk, g, [t]) == mine, 30, message="the member to own both partitions")
    finally:
        relay.close()


def test_a_check_whose_client_was_closed_is_not_made_again(services):
    """A start-up check whose ZooKeeper client was closed under it (the member shut down while starting) fails with
    the closed client's error: a closed client never reconnects, so the check is not made again after waiting
    ``zookeeper.connection.timeout.ms`` for a connection that cannot come back, reported as ZooKeeper unreachable."""
    import pytest
    from kazoo.exceptions import ConnectionClosedError

    from zkconsumer.zookeeper import client as zkmod
    from zkconsumer.zookeeper.retry import retry_until_connected
    own = zkmod.connect(services.zookeeper_connect)
    zkmod.close(own)
    calls = []

    def check():
        calls.append("called")
        return own.get("/")
    with pytest.raises(ConnectionClosedError):
        retry_until_connected(own, check, 1000, "m: the split-brain check")
    assert calls == ["called"]
