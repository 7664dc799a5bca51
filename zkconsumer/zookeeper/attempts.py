"""Bounded connection attempts: a reconnect that hangs leaves time for more tries within the session timeout.

ZooKeeper expires a session ``T`` (the session timeout) after it last heard from the client, and a restarted server
counts ``T`` again from its start. kazoo 2.x gives one connection attempt up to ``T`` to open the TCP connection and
``T / number of servers`` to answer the handshake (the ConnectRequest); the Java client's ``ClientCnxn`` gives the
whole attempt ``T / number of servers`` (``connectTimeout``). Against one server, then, an attempt that hangs uses
the whole session: a server restarted for 4 s under 15 s sessions (ZooKeeper 3.8.4, the server of Kafka 3.9) accepted
a connection made while it was starting and never answered it; kazoo waited the 15 s for the answer, and by then the
server had expired the session: the member lost its registration and owner nodes across a restart it should have
survived (3 of 160 reconnects of 20 clients over 8 restarts; ``tests/chaos/test_chaos_restarts.py``). A firewall that
drops the packets to a powered-off server of an ensemble makes the TCP connect hang the same way.

Here an attempt gets at most ``T / 3`` for each of the two (never more than kazoo gives): a hung attempt leaves at
least two more within ``T``. With three or more servers the handshake bound is what kazoo already uses.
"""
from __future__ import annotations

from typing import Any

__all__ = ["ATTEMPT_FRACTION", "attempt_timeout_s", "bound_attempts"]

#: the share of the session timeout one connection attempt may wait for the TCP connection, and again for the
#: handshake's answer
ATTEMPT_FRACTION = 1.0 / 3.0


def attempt_timeout_s(session_timeout_ms: float) -> float:
    """Seconds one connection attempt may wait for the TCP connection, and again for the handshake's answer."""
    return session_timeout_ms / 1000.0 * ATTEMPT_FRACTION


def bound_attempts(client: Any, session_timeout_ms: float) -> Any:
    """Bound the handshake wait of *client* (an unstarted KazooClient) at :func:`attempt_timeout_s`; returns
    *client*. Its TCP connect is bounded by its handler (:class:`~zkconsumer.zookeeper.handler.PollHandler`)."""
    from ..kafka.internals import kazoo_bound_handshake
    kazoo_bound_handshake(client, attempt_timeout_s(session_timeout_ms))
    return client
