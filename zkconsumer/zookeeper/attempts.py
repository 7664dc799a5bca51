"""Bounded connection attempts: a reconnect that hangs leaves time for more tries within the session timeout.

ZooKeeper expires a session ``T`` (the session timeout) after it last heard from the client, and a restarted server
counts ``T`` again from its start. kazoo 2.x gives one connection attempt up to ``T`` to open the TCP connection and
``T / number of servers`` to answer the handshake (the ConnectRequest); the Java client's ``ClientCnxn`` gives the
whole attempt ``T / number of servers`` (``connectTimeout``). Against one server, then, an attempt that hangs uses
the whole session: a server restarted for 4 s under 15 s sessions (ZooKeeper 3.8.4, the server of Kafka 3.9) accepted
a connection made while it was starting and never answered it; kazoo waited 15.6-16.3 s for the answer, and by then
the server had expired the session: the member lost its registration and owner nodes across a restart it should have
survived (3 of 160 reconnects of 20 clients over 8 restarts; ``tests/chaos/test_chaos_restarts.py``). A firewall that
drops the packets to a powered-off server of an ensemble makes the TCP connect hang the same way.

Here an attempt that reconnects a session gets at most ``T / 3`` for each of the two (never more than kazoo gives):
a hung attempt leaves a third of the session or more for another. A handshake for a new session keeps kazoo's wait
(nothing to lose; a server slow to answer is not left an orphan session by every abandoned attempt); its TCP connect
is bounded too. With three or more servers the handshake bound is what kazoo already uses. The steps after the
handshake (SASL, digest credentials) keep kazoo's waits. Where the server gets the requests and its answers are
lost (a network broken one way), every bounded retry renews the session on the server, as kazoo's and the Java
client's retries do against three servers: the member cannot work (its lease goes stale, it delivers nothing) and
keeps its partitions until the network is mended, where one unbounded attempt would have let the session expire.
"""
from __future__ import annotations

__all__ = ["ATTEMPT_FRACTION", "attempt_timeout_s"]

#: the share of the session timeout one connection attempt may wait for the TCP connection, and again for the
#: handshake's answer
ATTEMPT_FRACTION = 1.0 / 3.0


def attempt_timeout_s(session_timeout_ms: float) -> float:
    """Seconds one connection attempt may wait for the TCP connection, and again for the handshake's answer."""
    return session_timeout_ms / 1000.0 * ATTEMPT_FRACTION
