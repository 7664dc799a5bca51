"""zkconsumer.zookeeper.handler: kazoo's select contract on one poll(2) call (pure, on socket pairs), and every
client the project makes uses it against the real ZooKeeper."""
import socket
import time

import pytest

from zkconsumer.zookeeper import client as zkmod
from zkconsumer.zookeeper.handler import PollHandler, poll_select


def test_ready_sockets_come_back_as_passed():
    a, b = socket.socketpair()
    try:
        t0 = time.monotonic()
        assert poll_select([a], [], [], 0.2) == ([], [], [])
        assert 0.15 <= time.monotonic() - t0 < 2
        assert poll_select([a], [b], [], 0) == ([], [b], [])  # b can be written, a has nothing to read
        b.send(b"x")
        assert poll_select([a, b], [], [], 1) == ([a], [], [])
        assert poll_select([a.fileno()], [], [], 1) == ([a.fileno()], [], [])  # plain descriptors too
        assert poll_select([a], [a], [], 1) == ([a], [], [])  # readable wins, as in kazoo's own select
        b.close()
        a.recv(1)
        assert poll_select([a], [], [], 1) == ([a], [], [])  # the peer hung up: readable (recv sees it)
    finally:
        a.close()
        b.close()


def test_bad_arguments_are_refused_like_kazoos():
    a, b = socket.socketpair()
    with pytest.raises(TypeError):
        poll_select([a], [], [], "1")
    with pytest.raises(ValueError):
        poll_select([a], [], [], -1)
    a.close()
    b.close()
    with pytest.raises(ValueError):
        poll_select([a], [], [], 0)  # closed: fileno() is -1


def test_the_projects_clients_use_it(services):
    client = zkmod.connect(services.zookeeper_connect)
    try:
        assert isinstance(client.handler, PollHandler)
        for i in range(50):
            client.ensure_path("/zk-handler-test/%d" % (i % 5))
        assert client.get_children("/zk-handler-test") and client.exists("/zk-handler-test/4")
    finally:
        zkmod.close(client)
