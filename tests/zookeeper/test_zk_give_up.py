"""A tool's kazoo client gives up on a lost ZooKeeper (``zookeeper.client.connect(give_up_after_ms=)``): its session
is stopped on a thread of its own once the connection stayed lost for the bound. The lost ZooKeeper here is a port
that accepts connections and never answers, so kazoo's connection thread is slow to stop, as with a host gone from
the network; the connection's state changes are given to the give-up as kazoo gives them."""
import socket

import pytest
from kazoo.protocol.states import KazooState

from tests.support.waiting import outcome_within, wait_until
from zkconsumer.zookeeper import client as zkmod


@pytest.fixture
def silent_client():
    """An unstarted client of a ZooKeeper that never answers."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    client = zkmod.make_client("127.0.0.1:%d" % silent.getsockname()[1], session_timeout_ms=2000)
    try:
        yield client
    finally:
        zkmod.close(client)
        silent.close()


def test_closing_a_client_while_its_give_up_stops_it_waits_for_that_stop(silent_client):
    """The command may close the client while the give-up stops it: the close waits for that stop, never fails with
    kazoo's "Cannot close connection until it is stopped" (a traceback instead of the command's own outcome)."""
    silent_client.start_async()
    give_up = zkmod._GiveUp(silent_client, 0.05, "the silent port")
    give_up._on_state(KazooState.SUSPENDED)
    wait_until(silent_client._stopped.is_set, 10, message="the give-up started stopping the client")
    zkmod.close(silent_client)
    assert silent_client.state == KazooState.LOST


def test_a_session_lost_then_not_reconnected_gives_up_too(silent_client):
    """A session that expired while disconnected is LOST (not SUSPENDED) when kazoo learns it; kazoo then connects
    anew without another state event and queues requests until it has. When that reconnect does not succeed either,
    the bound applies all the same: the queued request fails instead of waiting for ever."""
    from migrate.fleet import unavailable_error
    silent_client.start_async()
    give_up = zkmod._GiveUp(silent_client, 0.05, "the silent port")
    give_up._on_state(KazooState.LOST)
    outcome = outcome_within(lambda: silent_client.exists("/"), 30)
    assert outcome, "the request still waits after 30 s"
    assert unavailable_error(outcome[0]), outcome
