"""A tool's kazoo client that gave up on a lost ZooKeeper (``zookeeper.client.connect(give_up_after_ms=)``) is
stopped on a thread of its own, while the command may be closing the same client: the close must wait for that stop,
never fail with kazoo's "Cannot close connection until it is stopped" (which would replace the command's own outcome
by a traceback). The lost ZooKeeper is a port that accepts connections and never answers, so kazoo's connection
thread is slow to stop, as with a host gone from the network."""
import socket

from kazoo.protocol.states import KazooState

from tests.support.waiting import outcome_within, wait_until
from zkconsumer.zookeeper import client as zkmod


def test_closing_a_client_while_its_give_up_stops_it_waits_for_that_stop():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    client = zkmod.make_client("127.0.0.1:%d" % silent.getsockname()[1], session_timeout_ms=2000)
    try:
        client.start_async()
        give_up = zkmod._GiveUp(client, 0.05, "the silent port")
        give_up._on_state(KazooState.SUSPENDED)
        wait_until(client._stopped.is_set, 10, message="the give-up started stopping the client")
        zkmod.close(client)
        assert client.state == KazooState.LOST
    finally:
        silent.close()


def test_a_session_lost_then_not_reconnected_gives_up_too():
    """A session that expired while disconnected is LOST (not SUSPENDED) when kazoo learns it; kazoo then connects
    anew without another state event and queues requests until it has. When that reconnect does not succeed either,
    the bound applies all the same: the queued request fails instead of waiting for ever."""
    from migrate.fleet import unavailable_error
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    client = zkmod.make_client("127.0.0.1:%d" % silent.getsockname()[1], session_timeout_ms=2000)
    try:
        client.start_async()
        give_up = zkmod._GiveUp(client, 0.05, "the silent port")
        give_up._on_state(KazooState.LOST)
        outcome = outcome_within(lambda: client.exists("/"), 30)
        assert outcome and unavailable_error(outcome[0]), "the request still waits after 30 s" if not outcome else outcome
    finally:
        zkmod.close(client)
        silent.close()
