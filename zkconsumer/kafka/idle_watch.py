"""The idle watch: asking the leaders of caught-up partitions whether anything arrived, without kafka-python.

An idle fetcher's kafka-python client sends a Fetch every ``fetch.wait.max.ms`` (the broker holds each one that
long when nothing arrives) and spends ~2 ms of CPU on each round trip, most of it in kafka-python's request path
(its fetch session's request built partition by partition, its generic protocol objects, its event loop): ~20 ms of
CPU per idle member per second, so 300 idle members want ~6 cores.

While every partition of a fetcher is caught up (its position at the high watermark the last answer gave), the
fetcher stops polling its client and asks the same question itself (:meth:`IdleWatch.watch`): a Fetch v4 request
to each leader (the partitions at the client's positions, the member's ``fetch.min.bytes`` and
``fetch.wait.max.ms``), encoded and read with ``struct`` (:mod:`.protocol.fetch_v4`) over plain sockets of its own
(to the address the client's own connection to that broker reached: no name lookup), each leader asked again as
soon as it answered, ~0.1-0.3 ms of CPU per answer. The broker answers when it would have answered the client's
fetch. The first answer with records, a high watermark other than the position asked about, or any error ends the
watch at once, whatever the other leaders are doing; the client then fetches from its own positions. The watch moves
no position and hands over no record (an answer's records, at most one batch as the request's ``max_bytes`` is
``fetch.min.bytes``, are dropped: the client fetches them), so it can neither lose nor repeat one. A connection that
fails, an answer that does not parse, or a leader that does not answer within ``fetch.wait.max.ms`` plus
:data:`ANSWER_MARGIN_S` ends it too (:class:`WatchTrouble`), and the fetcher leaves it alone for a while: the
client's own path, with its reconnects and metadata refreshes, handles what went wrong. A wake (an assignment
change, a shutdown) ends it at once, connecting included. Its sockets are closed whenever a watch ends.

Only plain TCP connections (``security.protocol=PLAINTEXT``) are watched: TLS and SASL stay on the client's path.
"""
from __future__ import annotations

import errno
import os
import select
import socket
import struct
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from .protocol import fetch_v4

__all__ = ["IdleWatch", "WatchTrouble", "Plan", "ANSWER_MARGIN_S"]

#: {node id: (socket address (host, port) or IPv6's 4-tuple, [(topic, partition, fetch offset), ...])}
Plan = Dict[object, Tuple[tuple, List[Tuple[str, int, int]]]]

#: how much longer than ``fetch.wait.max.ms`` a leader may take to connect or to answer before the watch ends
ANSWER_MARGIN_S = 5.0

_LENGTH = struct.Struct(">i")
_IN, _OUT = select.POLLIN, select.POLLOUT
_GONE = select.POLLERR | select.POLLHUP | select.POLLNVAL


class WatchTrouble(Exception):
    """A connection, an answer or a leader's silence the watch could not use: the fetcher goes back to its client."""


class _Leader:
    """One leader's socket in a watch: connecting, then one request in flight at a time."""

    __slots__ = ("node", "address", "parts", "sock", "connecting", "buf", "correlation", "sent_at", "deadline")

    def __init__(self, node: object, address: tuple, parts: List[Tuple[str, int, int]],
                 sock: socket.socket, deadline: float) -> None:
        self.node, self.address, self.parts, self.sock = node, address, parts, sock
        self.connecting = True
        self.buf = bytearray()
        self.correlation = 0
        self.sent_at = 0.0
        self.deadline: Optional[float] = deadline  # None: nothing asked (the watch is draining)


class IdleWatch:
    """One fetcher's idle watch; :meth:`watch` runs on the fetcher thread, :meth:`wake` on any thread."""

    def __init__(self, client_id: str, max_wait_ms: int, min_bytes: int, partition_max_bytes: int,
                 answer_margin_s: float = ANSWER_MARGIN_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.client_id = client_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.partition_max_bytes = partition_max_bytes
        self.answer_margin_s = answer_margin_s
        self.clock = clock
        self._correlation = 0
        self._lock = threading.Lock()  # wake() against close(): never a write to a closed (reused) descriptor
        self._closed = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def wake(self) -> None:
        """End the watch in progress (or the next one) at once."""
        with self._lock:
            if self._closed:
                return
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass  # already woken (the pair's buffer is full)

    def clear_wake(self) -> None:
        """Forget wakes from before now (the fetcher checks for a change after this)."""
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def watch(self, plan: Plan, until: float, on_answer: Callable[[object, float], None]) -> Optional[bool]:
        """Ask every leader of *plan*, each again as soon as it answered, until: an answer says the client should
        fetch (True); *until* (the clock's time) passed and the last requests were answered (False); a wake (None).
        ``on_answer(node id, seconds from its request)`` is called for every answer read. WatchTrouble when a
        connection or an answer failed or a leader did not answer in time. Every socket is closed when it returns."""
        leaders: Dict[int, _Leader] = {}
        try:
            return self._watch(plan, until, on_answer, leaders)
        except WatchTrouble:
            raise
        except Exception as e:  # a watch's failure is never the fetcher's: its client takes over
            raise WatchTrouble("%s: %s" % (type(e).__name__, e)) from e
        finally:
            for leader in leaders.values():
                _close(leader.sock)

    def _watch(self, plan: Plan, until: float, on_answer: Callable[[object, float], None],
               leaders: Dict[int, _Leader]) -> Optional[bool]:
        poller = select.poll()
        wake_fd = self._wake_r.fileno()
        poller.register(wake_fd, _IN)
        bound = self.max_wait_ms / 1000.0 + self.answer_margin_s
        for node, (address, parts) in plan.items():
            sock = socket.socket(socket.AF_INET6 if len(address) == 4 else socket.AF_INET, socket.SOCK_STREAM)
            leaders[sock.fileno()] = leader = _Leader(node, address, parts, sock, self.clock() + bound)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = sock.connect_ex(address)
            if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                raise WatchTrouble("cannot connect to broker %s at %s:%d: %s" % (node, address[0], address[1],
                                                                                 os.strerror(err)))
            poller.register(sock.fileno(), _OUT)
        while True:
            waiting = [x.deadline for x in leaders.values() if x.deadline is not None]
            if not waiting:
                return False
            left = min(waiting) - self.clock()
            if left <= 0:
                late = [x for x in leaders.values() if x.deadline is not None and x.deadline <= self.clock()]
                raise WatchTrouble("broker %s did not %s within %.1f s" % (
                    ", ".join(str(x.node) for x in late), "connect" if late[0].connecting else "answer", bound))
            events = poller.poll(max(1, int(left * 1000) + 1))
            if any(fd == wake_fd for fd, _ in events):
                self.clear_wake()
                return None
            for fd, event in events:
                leader = leaders[fd]
                if leader.connecting:
                    err = leader.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise WatchTrouble("cannot connect to broker %s at %s:%d: %s" % (
                            leader.node, leader.address[0], leader.address[1], os.strerror(err)))
                    leader.connecting = False
                    poller.modify(fd, _IN)
                    self._ask(leader, bound)
                    continue
                payload = self._read(leader)
                if payload is None:
                    if event & _GONE and not event & _IN:
                        raise WatchTrouble("broker %s closed the connection" % leader.node)
                    continue
                got, answers = fetch_v4.decode_response(payload)
                if got != leader.correlation:
                    raise WatchTrouble("broker %s answered request %d, not %d" % (leader.node, got,
                                                                                  leader.correlation))
                on_answer(leader.node, self.clock() - leader.sent_at)
                if _moved(leader.parts, answers):
                    return True
                if self.clock() < until:
                    self._ask(leader, bound)
                else:
                    leader.deadline = None

    def _ask(self, leader: _Leader, bound: float) -> None:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        # max_bytes (the whole answer's) = fetch.min.bytes: the broker answers when it would answer the client's
        # fetch (the partitions' own limits decide that) but sends at most one batch, which the watch drops
        request = fetch_v4.encode_request(self._correlation, self.client_id, self.max_wait_ms, self.min_bytes,
                                          self.min_bytes, leader.parts, self.partition_max_bytes)
        leader.sock.settimeout(self.answer_margin_s)  # a request of a few hundred bytes to an empty socket buffer
        try:
            leader.sock.sendall(request)
        finally:
            leader.sock.setblocking(False)
        leader.correlation = self._correlation
        leader.sent_at = self.clock()
        leader.deadline = leader.sent_at + bound

    @staticmethod
    def _read(leader: _Leader) -> Optional[bytes]:
        """Read what *leader*'s socket has; the answer's bytes (after its length) once complete, else None."""
        try:
            data = leader.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return None
        if not data:
            raise WatchTrouble("broker %s closed the connection" % leader.node)
        buf = leader.buf
        buf += data
        if len(buf) < 4:
            return None
        (size,) = _LENGTH.unpack_from(buf, 0)
        if size < 4:
            raise WatchTrouble("broker %s sent an answer of length %d" % (leader.node, size))
        if len(buf) < 4 + size:
            return None
        if len(buf) > 4 + size:
            raise WatchTrouble("broker %s sent more than the answer asked for" % leader.node)
        payload = bytes(buf[4:])
        buf.clear()
        return payload

    def close(self) -> None:
        with self._lock:
            self._closed = True
            _close(self._wake_r)
            _close(self._wake_w)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _moved(parts: List[Tuple[str, int, int]], answers: Dict[Tuple[str, int], fetch_v4.PartitionAnswer]) -> bool:
    """Whether an answer says the client should fetch: a partition asked about that has records, a high watermark
    other than its position (above: something arrived; below: the log is not what the client thinks), an error, or
    no answer at all."""
    for topic, partition, offset in parts:
        a = answers.get((topic, partition))
        if a is None or a.error_code != 0 or a.records_bytes > 0 or a.high_watermark != offset:
            return True
    return False
