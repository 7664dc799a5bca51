"""The session lease: never hand out a record after a stop-the-world pause that may have cost us the session.

ZooKeeper expires a session ``T`` (the negotiated session timeout) after the server last heard from the client,
and peers then take over its partitions. A member frozen longer than that (a GC pause, a VM freeze, SIGSTOP) resumes
not knowing it: the notice of the expiry only arrives with the first answer from the server, some milliseconds to
a second later, while its streams go on handing out records already queued (the Scala consumer has this window).

The lease closes it from the member's own monotonic clock. A heartbeat thread sends a cheap request (``exists /``)
every ``0.45 T``; when the answer arrives under the same session, the server has heard from us no earlier than when
the request was sent, so the session lives at least until ``sent + T``: the lease is renewed to ``sent + 0.6 T``
(the next heartbeat renews it before that, unless the answer takes longer than ``0.15 T``). The interval is longer
than kazoo's own ping interval (a third of ``T`` or less) on purpose: kazoo counts every request as a ping and
detects a dead server only by a ping left unanswered, so heartbeats more frequent than its pings would hide a
frozen server from it.
Streams read the clock before every hand-out (one ``time.monotonic()`` and one comparison, about 0.07 µs), fetchers
before every chunk they queue, commits before they write; past the deadline they wait until a fresh round trip
renews it under the same session (the session survived: go on), or the session is found expired (the connector's
generation moves on and what was queued is dropped, as today). A frozen process's first hand-out after it resumes
is therefore always preceded by a round trip to ZooKeeper.

The clock and the sleeping are injectable (tests drive the lease with a fake clock).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Optional

from ..kafka.internals import kazoo_session_timeout_ms

log = logging.getLogger(__name__)

__all__ = ["SessionLease", "NoLease"]

INFINITY = float("inf")


class SessionLease:
    """``deadline`` (monotonic seconds): hand-outs are safe before it. ``+inf`` until :meth:`start` (a member not yet
    registered delivers nothing anyway), ``-inf`` after :meth:`stop`."""

    # the deadline in a slot of its own: a stream's hand-out reads it there (zkconsumer/_stream.c)
    __slots__ = ("deadline", "__dict__", "__weakref__")

    def __init__(self, zk: Any, session_timeout_ms: int, fraction: float = 0.6, interval_fraction: float = 0.45,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.zk = zk
        self.configured_timeout_s = session_timeout_ms / 1000.0
        self.fraction = fraction
        self.interval_fraction = interval_fraction
        self.clock = clock
        self.deadline = INFINITY
        self.renewals = 0
        # how often a hand-out had to wait for a renewal (metrics, tests)
        self.stale_waits = 0
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._session: Optional[int] = None
        # a heartbeat sent and not answered yet
        self._outstanding = False
        # a stream waits for a renewal: beat now
        self._wanted = False

    # -- the session timeout the server granted ----------------------------------------------------------------
    def timeout_s(self) -> float:
        negotiated = kazoo_session_timeout_ms(self.zk)
        return negotiated / 1000.0 if negotiated is not None else self.configured_timeout_s

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin heartbeating under the client's current session (the lease starts fresh: we just talked to it)."""
        cid = self.zk.client_id
        self._session = cid[0] if cid else None
        self._renew(self.clock())
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="zkconsumer-lease")
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self._cond:
            self.deadline = -INFINITY
            self._cond.notify_all()

    def new_session(self, session: int, sent: float) -> None:
        """After a (re-)registration under *session*, whose request was sent at *sent* (this lease's clock): the
        lease follows that session, renewed from *sent* (the session lives at least until ``sent + T``). Not the
        client's current session: none while kazoo is disconnected, and maybe a newer one already."""
        self._session = session
        self._renew(sent)

    # -- the hot-path check ---------------------------------------------------------------------------------------
    def fresh(self) -> bool:
        return self.clock() < self.deadline

    def wait_fresh(self, abort: Callable[[], bool] = lambda: False, poll: float = 0.05) -> bool:
        """Block until the lease is renewed (True) or *abort()* says to give up (False, e.g. a new generation)."""
        self.stale_waits += 1
        with self._cond:
            while not (self.clock() < self.deadline):
                if abort() or self._stopped.is_set():
                    return False
                self._wanted = True
                # wake the heartbeat: renew now
                self._cond.notify_all()
                self._cond.wait(poll)
        return True

    # -- heartbeat ------------------------------------------------------------------------------------------------
    def _renew(self, sent: float) -> None:
        if self._stopped.is_set():
            return
        with self._cond:
            new = sent + self.timeout_s() * self.fraction
            if new > self.deadline or self.deadline == INFINITY:
                self.deadline = new
            self.renewals += 1
            self._cond.notify_all()

    def _beat(self) -> None:
        zk = self.zk
        cid = zk.client_id
        if not cid or cid[0] != self._session or not zk.connected:
            # disconnected or another session: no renewal (the connector handles SUSPENDED/LOST)
            return
        if self._outstanding:
            # one heartbeat at a time: more would keep resetting kazoo's ping timer (see the module doc)
            return
        sent = self.clock()
        session = cid[0]

        def done(result: Any) -> None:
            self._outstanding = False
            try:
                result.get_nowait()
            except Exception:
                # no answer from this session: no renewal
                return
            now = zk.client_id
            if now and now[0] == session == self._session:
                self._renew(sent)
        self._outstanding = True
        try:
            zk.exists_async("/").rawlink(done)
        except Exception as e:
            # connection closing: the next beat tries again
            self._outstanding = False
            log.debug("lease heartbeat not sent: %r", e)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._beat()
            next_beat = self.clock() + max(0.05, self.timeout_s() * self.interval_fraction)
            with self._cond:
                # sleep until the next beat, or earlier when a stream waits for a renewal of a stale lease. A
                # renewal's notify (for the streams) wakes this loop too: it goes back to sleep, it does not beat
                # again (one heartbeat per interval, not one per round trip)
                self._wanted = False
                while not self._stopped.is_set():
                    now = self.clock()
                    if now >= next_beat:
                        break
                    stale = not (now < self.deadline)
                    if stale and self._wanted and not self._outstanding:
                        break
                    self._cond.wait(min(next_beat - now, 0.05) if stale else next_beat - now)


class NoLease:
    """For streams and fetchers used without a connector (tests): always fresh."""

    deadline = INFINITY
    clock = staticmethod(time.monotonic)

    def wait_fresh(self, abort: Callable[[], bool] = lambda: False, poll: float = 0.05) -> bool:
        return True

    def fresh(self) -> bool:
        return True
