"""The idle watch: asking the leaders of caught-up partitions whether anything arrived, without kafka-python.

An idle fetcher's kafka-python client sends a Fetch every ``fetch.wait.max.ms`` (the broker holds each one that
long when nothing arrives) and spends ~2 ms of CPU on each round trip, most of it in kafka-python's request path
(its fetch session's request built partition by partition, its generic protocol objects, its event loop): ~20 ms of
CPU per idle member per second, so 300 idle members want ~6 cores. The Scala consumer's fetcher threads sent the
same requests for a fraction of that.

While every partition of a fetcher is caught up (its position at the high watermark the last answer gave), the
fetcher stops polling its client and asks the same question itself: one Fetch v4 request per leader (the partitions
at the client's positions, the member's ``fetch.min.bytes`` and ``fetch.wait.max.ms``), encoded and read with
``struct`` (:mod:`.protocol.fetch_v4`) over plain sockets of its own, ~0.1 ms per round trip. The broker answers
when it would have answered the client's fetch. An answer with records, a high watermark above a position or any
error ends the watch and the client fetches again from its own positions: the watch reads no record and moves no
position, so it cannot lose or repeat one; at worst it ends early. Connection or protocol trouble ends it too, and
the fetcher then leaves it alone for a while (the client's own path, with its reconnects and metadata refreshes,
handles what went wrong).

Only plain TCP connections (``security.protocol=PLAINTEXT``) are watched: TLS and SASL stay on the client's path.
"""
from __future__ import annotations

import select
import socket
import struct
import time
from typing import Callable, Dict, List, Optional, Tuple

from .protocol import fetch_v4

__all__ = ["IdleWatch", "WatchTrouble", "Plan"]

#: {node id: ((host, port), [(topic, partition, fetch offset), ...])}
Plan = Dict[object, Tuple[Tuple[str, int], List[Tuple[str, int, int]]]]

_LENGTH = struct.Struct(">i")


class WatchTrouble(Exception):
    """A connection or an answer the watch could not use: the fetcher goes back to its client's path."""


class IdleWatch:
    """The sockets (one per broker) and the rounds of one fetcher's idle watch; used by the fetcher thread only,
    except :meth:`wake`, which any thread may call."""

    def __init__(self, client_id: str, max_wait_ms: int, min_bytes: int, partition_max_bytes: int,
                 timeout_s: float, connect_timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.client_id = client_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.partition_max_bytes = partition_max_bytes
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.clock = clock
        self._socks: Dict[object, Tuple[Tuple[str, int], socket.socket]] = {}
        self._correlation = 0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def wake(self) -> None:
        """End the round in progress (or the next one) at once."""
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # already woken (the pair's buffer is full) or closed

    def clear_wake(self) -> None:
        """Forget wakes from before now (the fetcher checks for a change after this)."""
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def round(self, plan: Plan) -> Tuple[Optional[bool], List[Tuple[object, float]]]:
        """Send one request to each broker of *plan* and wait for every answer: ``(moved, answered)``, *moved* True
        when some partition has records, a high watermark above its position or an error, False when none has, None
        when woken first (the unanswered requests are dropped with their sockets); *answered*: ``(node id, seconds
        from its request)`` per answer read. WatchTrouble for a connection or an answer that failed (every socket is
        closed then)."""
        try:
            return self._round(plan)
        except WatchTrouble:
            self.close_sockets()
            raise
        except (OSError, fetch_v4.FetchAnswerError) as e:
            self.close_sockets()
            raise WatchTrouble("%s: %s" % (type(e).__name__, e)) from e

    def _round(self, plan: Plan) -> Tuple[Optional[bool], List[Tuple[object, float]]]:
        for node in [n for n in self._socks if n not in plan]:
            self._drop(node)
        waiting: Dict[socket.socket, Tuple[object, int, float, List[Tuple[str, int, int]]]] = {}
        for node, (address, parts) in plan.items():
            sock = self._socket(node, address)
            self._correlation = (self._correlation + 1) & 0x7FFFFFFF
            request = fetch_v4.encode_request(self._correlation, self.client_id, self.max_wait_ms, self.min_bytes,
                                              self.min_bytes, parts, self.partition_max_bytes)
            sock.sendall(request)
            waiting[sock] = (node, self._correlation, self.clock(), parts)
        deadline = self.clock() + self.timeout_s
        buffers: Dict[socket.socket, bytearray] = {s: bytearray() for s in waiting}
        answered: List[Tuple[object, float]] = []
        moved = False
        while waiting:
            left = deadline - self.clock()
            if left <= 0:
                raise WatchTrouble("no answer from broker(s) %s within %.1f s"
                                   % (", ".join(str(w[0]) for w in waiting.values()), self.timeout_s))
            readable, _, _ = select.select(list(waiting) + [self._wake_r], [], [], left)
            if self._wake_r in readable:
                self.clear_wake()
                for sock in list(waiting):
                    self._drop(waiting[sock][0])
                return None, answered
            for sock in readable:
                payload = self._read(sock, buffers[sock])
                if payload is None:
                    continue
                node, correlation, sent_at, parts = waiting.pop(sock)
                got, answers = fetch_v4.decode_response(payload)
                if got != correlation:
                    raise WatchTrouble("broker %s answered request %d, not %d" % (node, got, correlation))
                answered.append((node, self.clock() - sent_at))
                moved = moved or _moved(parts, answers)
        return moved, answered

    @staticmethod
    def _read(sock: socket.socket, buf: bytearray) -> Optional[bytes]:
        """Read what *sock* has into *buf*; the answer's bytes (after its length) once complete, else None."""
        data = sock.recv(65536)
        if not data:
            raise WatchTrouble("the broker closed the connection")
        buf += data
        if len(buf) < 4:
            return None
        (size,) = _LENGTH.unpack_from(buf, 0)
        if len(buf) < 4 + size:
            return None
        if len(buf) > 4 + size:
            raise WatchTrouble("more bytes than one answer")
        return bytes(buf[4:])

    def _socket(self, node: object, address: Tuple[str, int]) -> socket.socket:
        have = self._socks.get(node)
        if have is not None and have[0] == address:
            return have[1]
        if have is not None:
            self._drop(node)
        sock = socket.create_connection(address, timeout=self.connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        self._socks[node] = (address, sock)
        return sock

    def _drop(self, node: object) -> None:
        have = self._socks.pop(node, None)
        if have is not None:
            try:
                have[1].close()
            except OSError:
                pass

    def close_sockets(self) -> None:
        for node in list(self._socks):
            self._drop(node)

    def close(self) -> None:
        self.close_sockets()
        for s in (self._wake_r, self._wake_w):
            try:
                s.close()
            except OSError:
                pass


def _moved(parts: List[Tuple[str, int, int]], answers: Dict[Tuple[str, int], fetch_v4.PartitionAnswer]) -> bool:
    """Whether an answer says the client should fetch: a partition asked about that has records, a high watermark
    above its position, an error, or no answer at all."""
    for topic, partition, offset in parts:
        a = answers.get((topic, partition))
        if a is None or a.error_code != 0 or a.records_bytes > 0 or a.high_watermark > offset:
            return True
    return False
