"""The idle watch: asking the leaders of caught-up partitions whether anything arrived, without kafka-python.

An idle fetcher's kafka-python client sends a Fetch every ``fetch.wait.max.ms`` (the broker holds each one that
long when nothing arrives) and spends ~2 ms of CPU on each round trip, most of it in kafka-python's request path
(its fetch session's request built partition by partition, its generic protocol objects, its event loop): ~20 ms of
CPU per idle member per second, so 300 idle members want ~6 cores.

While every partition of a fetcher is caught up (its position at the high watermark the last answer gave), the
fetcher stops polling its client and asks the same question itself (:meth:`IdleWatch.watch`): a Fetch v4 request
to each leader (the partitions at the client's positions, the member's ``fetch.min.bytes``, and a wait of
``fetch.idle.wait.ms``, 1 s by default, when ``fetch.min.bytes`` is 1: the broker answers as soon as a record is
there, so the longer wait delays nothing and an idle member is answered ~1 time a second instead of ~10; else
``fetch.wait.max.ms``, as the client), encoded and read with ``struct`` (:mod:`.protocol.fetch_v4`) over a plain socket of its own
per leader (to the address the client's own connection to that broker reached: no name lookup; kept from one watch
to the next, as the client keeps its connections), each leader asked again as soon as it answered, ~0.1-0.3 ms of
CPU per answer. The broker answers when it would have answered the client's fetch. The first answer with records,
a high watermark other than the position asked about, or any error ends the watch at once, whatever the other
leaders are doing; the client then fetches from its own positions. The watch moves no position and hands over no
record (an answer's records, little more than ``fetch.min.bytes`` as that is the request's ``max_bytes``, are
dropped: the client fetches them), so it can neither lose nor repeat one. A connection that fails or does not
connect within :data:`CONNECT_S`, an answer that does not parse, or a leader that does not answer within
the watch's wait plus :data:`ANSWER_MARGIN_S` ends it too (:class:`WatchTrouble`; its sockets are closed),
and the fetcher leaves it alone for a while: the client's own path, with its reconnects and metadata refreshes,
handles what went wrong. A wake (an assignment change, a shutdown) ends it at once, connecting included (a request
being written excepted: a few hundred bytes on a connection with no other request in flight).

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

__all__ = ["IdleWatch", "WatchTrouble", "Plan", "ANSWER_MARGIN_S", "CONNECT_S", "KEEP_IDLE_S"]

#: {node id: (socket address (host, port) or IPv6's 4-tuple, [(topic, partition, fetch offset), ...])}
Plan = Dict[object, Tuple[tuple, List[Tuple[str, int, int]]]]

#: how much longer than the watch's wait (``max_wait_ms``) a leader may take to answer before the watch ends
ANSWER_MARGIN_S = 5.0
#: how long a new connection to a leader may take before the watch ends
CONNECT_S = 2.0
#: a socket not used for this long is closed and opened again (brokers close connections idle for
#: ``connections.max.idle.ms``, 10 minutes by default)
KEEP_IDLE_S = 300.0

_LENGTH = struct.Struct(">i")
_IN, _OUT = select.POLLIN, select.POLLOUT
_GONE = select.POLLERR | select.POLLHUP | select.POLLNVAL


class WatchTrouble(Exception):
    """A connection, an answer or a leader's silence the watch could not use: the fetcher goes back to its client.

    ``late``: a leader did not connect or answer in time, what an overloaded broker or host gives for a while (a
    fleet's mass start on the same machines); not a refused or closed connection or an answer that could not be
    used."""

    def __init__(self, message: str, late: bool = False) -> None:
        super().__init__(message)
        self.late = late


class _Leader:
    """One leader's socket, kept from one watch to the next: connecting, then one request at a time."""

    __slots__ = ("node", "address", "parts", "sock", "connecting", "buf", "asked", "asked_about", "mine", "sent_at",
                 "deadline", "used_at")

    def __init__(self, node: object, address: tuple, sock: socket.socket, deadline: float) -> None:
        self.node, self.address, self.sock = node, address, sock
        self.parts: List[Tuple[str, int, int]] = []
        self.connecting = True
        self.buf = bytearray()
        self.asked: Optional[int] = None  # the correlation id of the request in flight
        self.asked_about: frozenset = frozenset()  # the (topic, partition)s that request asks about
        self.mine = False  # whether that request was sent by the watch in progress (else by an earlier one)
        self.sent_at = 0.0
        self.deadline: Optional[float] = deadline  # None: nothing awaited in this watch
        self.used_at = 0.0


class IdleWatch:
    """One fetcher's idle watch; :meth:`watch` and :meth:`close` run on the fetcher thread, :meth:`wake` on any."""

    def __init__(self, client_id: str, max_wait_ms: int, min_bytes: int, partition_max_bytes: int,
                 answer_margin_s: float = ANSWER_MARGIN_S, connect_s: float = CONNECT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client_id = client_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.partition_max_bytes = partition_max_bytes
        self.answer_margin_s = answer_margin_s
        self.connect_s = connect_s
        self.clock = clock
        self._correlation = 0
        self._kept: Dict[object, _Leader] = {}
        self._lock = threading.Lock()  # wake() against close(): never a write to a closed (reused) descriptor
        self._closed = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    @property
    def answer_bound_s(self) -> float:
        """How long a leader may take to answer a request: the watch's wait + its margin."""
        return self.max_wait_ms / 1000.0 + self.answer_margin_s

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

    def connections(self) -> int:
        """The sockets kept to leaders now."""
        return len(self._kept)

    def watch(self, plan: Plan, until: float, on_answer: Callable[[object, float], None]) -> Optional[bool]:
        """Ask every leader of *plan*, each again as soon as it answered, until: an answer says the client should
        fetch (True); *until* (the clock's time) passed and the last requests were answered (False); a wake (None).
        ``on_answer(node id, seconds from its request)`` is called for every answer read. WatchTrouble when a
        connection or an answer failed or a leader did not connect or answer in time (every socket is closed then).
        The sockets are kept for the next watch (one request at a time per leader: a request still in flight when an
        answer ended this one is answered first then, and its answer dropped), but those with a request or a
        connection in flight when a wake came."""
        try:
            return self._watch(plan, until, on_answer)
        except WatchTrouble:
            self.close_connections()
            raise
        except Exception as e:  # a watch's failure is never the fetcher's: its client takes over
            self.close_connections()
            # a request the broker did not read in time (socket.timeout is a TimeoutError) is a late leader's
            raise WatchTrouble("%s: %s" % (type(e).__name__, e), late=isinstance(e, TimeoutError)) from e

    def _leader(self, node: object, address: tuple, now: float) -> _Leader:
        """The kept socket to *node* at *address*, or a new one (connecting)."""
        leader = self._kept.get(node)
        if leader is not None and (leader.connecting or leader.address != address or
                                   now - leader.used_at > KEEP_IDLE_S or
                                   (leader.asked is None and _readable(leader.sock))):
            # still connecting when the last watch ended, moved, idle long enough for the broker to close it
            # (connections.max.idle.ms: 10 minutes by default), or closed by the broker (or sent something unasked)
            self._drop(node)
            leader = None
        if leader is None:
            sock = socket.socket(socket.AF_INET6 if len(address) == 4 else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                err = sock.connect_ex(address)
            except OSError:
                _close(sock)
                raise
            if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                _close(sock)
                raise WatchTrouble("cannot connect to broker %s at %s: %s" % (node, _where(address),
                                                                              os.strerror(err)))
            leader = self._kept[node] = _Leader(node, address, sock, now + self.connect_s)
            leader.used_at = now
        return leader

    def _watch(self, plan: Plan, until: float, on_answer: Callable[[object, float], None]) -> Optional[bool]:
        now = self.clock()
        for node in [n for n in self._kept if n not in plan]:
            self._drop(node)
        poller = select.poll()
        wake_fd = self._wake_r.fileno()
        poller.register(wake_fd, _IN)
        bound = self.answer_bound_s
        by_fd: Dict[int, _Leader] = {}
        for node, (address, parts) in plan.items():
            leader = self._leader(node, address, now)
            if leader.asked is not None and not {(t, p) for t, p, _ in parts} <= leader.asked_about:
                # an earlier watch's request in flight leaves out a partition of this plan (one that moved to this
                # leader): a record there would not end its hold, so it would wait for that hold. A new connection.
                self._drop(node)
                leader = self._leader(node, address, now)
            leader.parts = parts
            by_fd[leader.sock.fileno()] = leader
            leader.mine = False
            if leader.connecting:
                poller.register(leader.sock, _OUT)
            else:
                poller.register(leader.sock, _IN)
                if leader.asked is None:
                    self._ask(leader, bound)
                # else an earlier watch's request is in flight: its answer (dropped) first, then this watch's, by the
                # deadline _ask gave it (a leader silent since then is not given more time; an answer already in
                # its socket is read before it is called silent)
        while True:
            waiting = [x for x in by_fd.values() if x.deadline is not None]
            if not waiting:
                return False
            now = self.clock()
            late = [x for x in waiting if x.deadline is not None and x.deadline <= now]
            if late:
                # an answer already there (an earlier watch's request, answered while nobody watched) is read first
                ready = {fd for fd, _ in poller.poll(0)}
                late = [x for x in late if x.sock.fileno() not in ready]
            if late:
                raise WatchTrouble("broker %s did not %s within %.1f s" % (
                    ", ".join(str(x.node) for x in late), "connect" if late[0].connecting else "answer",
                    self.connect_s if late[0].connecting else bound), late=True)
            left = max(0.0, min(x.deadline for x in waiting if x.deadline is not None) - now)
            events = poller.poll(max(1, int(left * 1000) + 1))
            if any(fd == wake_fd for fd, _ in events):
                self.clear_wake()
                # a wake is rare (an assignment change, a shutdown): a request the broker may hold for as long as
                # the watch's wait is not left in the next watch's way
                for leader in list(by_fd.values()):
                    if leader.asked is not None or leader.connecting:
                        self._drop(leader.node)
                return None
            for fd, event in events:
                leader = by_fd[fd]
                if leader.connecting:
                    err = leader.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise WatchTrouble("cannot connect to broker %s at %s: %s" % (
                            leader.node, _where(leader.address), os.strerror(err)))
                    leader.connecting = False
                    poller.modify(fd, _IN)
                    self._ask(leader, bound)
                    continue
                payloads = self._read(leader)
                if not payloads and event & _GONE and not event & _IN:
                    raise WatchTrouble("broker %s closed the connection" % leader.node)
                for payload in payloads:
                    got, answers = fetch_v4.decode_response(payload)
                    if got != leader.asked:
                        raise WatchTrouble("broker %s answered request %d, not %s" % (leader.node, got, leader.asked))
                    leader.asked = None
                    leader.used_at = self.clock()
                    if leader.mine:
                        on_answer(leader.node, leader.used_at - leader.sent_at)
                        if _moved(leader.parts, answers):
                            return True
                    # (an earlier watch's answer, about positions that may have moved since, is dropped)
                    if leader.used_at < until:
                        self._ask(leader, bound)
                    else:
                        leader.deadline = None

    def _ask(self, leader: _Leader, bound: float) -> None:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        # max_bytes (the whole answer's) = fetch.min.bytes: the broker answers when it would answer the client's
        # fetch (the partitions' own limits decide that) but sends little more than fetch.min.bytes (at least one
        # batch), which the watch drops
        request = fetch_v4.encode_request(self._correlation, self.client_id, self.max_wait_ms, self.min_bytes,
                                          self.min_bytes, leader.parts, self.partition_max_bytes)
        # a request of a few hundred bytes on a connection with no other request in flight: the send buffer has room
        leader.sock.settimeout(self.answer_margin_s)
        try:
            leader.sock.sendall(request)
        finally:
            leader.sock.setblocking(False)
        leader.asked = self._correlation
        leader.asked_about = frozenset((t, p) for t, p, _ in leader.parts)
        leader.mine = True
        leader.sent_at = self.clock()
        leader.deadline = leader.sent_at + bound

    @staticmethod
    def _read(leader: _Leader) -> List[bytes]:
        """Read what *leader*'s socket has; the complete answers in it (each after its length), oldest first."""
        try:
            data = leader.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        if not data:
            raise WatchTrouble("broker %s closed the connection" % leader.node)
        buf = leader.buf
        buf += data
        out = []
        while len(buf) >= 4:
            (size,) = _LENGTH.unpack_from(buf, 0)
            if size < 4:
                raise WatchTrouble("broker %s sent an answer of length %d" % (leader.node, size))
            if len(buf) < 4 + size:
                break
            out.append(bytes(buf[4:4 + size]))
            del buf[:4 + size]
        return out

    def _drop(self, node: object) -> None:
        leader = self._kept.pop(node, None)
        if leader is not None:
            _close(leader.sock)

    def close_connections(self) -> None:
        for node in list(self._kept):
            self._drop(node)

    def close(self) -> None:
        self.close_connections()
        with self._lock:
            self._closed = True
            _close(self._wake_r)
            _close(self._wake_w)


def _readable(sock: socket.socket) -> bool:
    """Whether *sock* has something to read (or was closed) now."""
    poller = select.poll()
    poller.register(sock, _IN)
    return bool(poller.poll(0))


def _where(address: tuple) -> str:
    return "[%s]:%d" % address[:2] if len(address) == 4 else "%s:%d" % address[:2]


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
