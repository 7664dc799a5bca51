"""Single flight: the members of one process that ask the same question at the same time share one asking.

A mass start runs many members of one group in one process, each asking the broker the same start-up question
(is the broker-side group active? what offsets does Kafka hold?). Each asking on its own costs a client, a bootstrap
and its round trips on an IO thread that competes with every other thread of the process, and on a loaded machine
those askings then time out together. Here the callers of one key wait for one asking instead:

* an answer is handed only to the callers that were waiting before that asking started, so no caller gets an
  answer older than its own call (a caller that arrives while an asking is under way waits for the next one,
  which starts as soon as the current one ends and serves everyone who came meanwhile);
* an error is handed, like an answer, to every caller of that asking (each decides whether to ask again);
* each caller waits only until its own deadline: past it, :class:`NoAnswerInTime`, whatever the others wait for;
  an asking runs until the latest deadline of its callers;
* the asker (e.g. a connection to the cluster) is opened by the first asking of a key and kept for the next ones
  while callers keep coming (members starting a few at a time reuse it); it is closed when nobody has asked for
  *linger_s* after an asking ended;
* an asking that has not ended *overrun_s* after its deadline while callers wait for the next one is abandoned
  (its callers have all left by then): the next asking opens a new asker, and the abandoned one is closed if its
  call ever returns. A call that hangs (a client library stuck in a call) thus costs the callers of its own
  asking, never the later ones.

The askings of one key run one at a time, each on a thread of its own (so that a hung one can be left behind),
driven by a thread of the key, started when the key gets its first caller and ending when no caller waits. A
process forked from this one starts with no askings (the parent's threads, and the askers they hold, do not exist
in the child): its callers start their own.
"""
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, Generic, Hashable, Optional, Protocol, TypeVar

from ..errors import ZkConsumerError

__all__ = ["Asker", "NoAnswerInTime", "SingleFlight"]

log = logging.getLogger(__name__)

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Asker(Protocol[T_co]):
    """What asks the question of one key: ``ask(deadline)`` (a deadline on the flight's clock), ``close()``."""

    def ask(self, deadline: float) -> T_co: ...

    def close(self) -> None: ...


class NoAnswerInTime(ZkConsumerError):
    """A caller's deadline passed before the asking it waits for ended."""


class _Flight:
    def __init__(self) -> None:
        self.deadline = float("-inf")
        self.waiters = 0
        self.done = threading.Event()
        self.value: Any = None
        self.error: Optional[BaseException] = None


class _Key:
    def __init__(self) -> None:
        # callers waiting for an asking not yet started
        self.pending: Optional[_Flight] = None
        self.running = False


#: every SingleFlight of this process, forgotten in a forked child (see _after_fork_in_child)
_ALL: "weakref.WeakSet[SingleFlight[Any]]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for flight in list(_ALL):
        flight._forget_parent()


os.register_at_fork(after_in_child=_after_fork_in_child)


class SingleFlight(Generic[T]):
    """Askings shared per key; ``open(key)`` makes the :class:`Asker` of a key. *name* names the threads."""

    def __init__(self, open: Callable[[Hashable], Asker[T]], name: str = "single-flight", linger_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, overrun_s: float = 5.0) -> None:
        self._open = open
        self._name = name
        self._linger_s = linger_s
        self._overrun_s = overrun_s
        self._clock = clock
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._keys: Dict[Hashable, _Key] = {}
        #: askings started, askings abandoned, and callers waiting now: for the tests and the bench
        self.askings = 0
        self.abandoned = 0
        self.waiting = 0
        _ALL.add(self)

    def _forget_parent(self) -> None:
        """In a forked child: the parent's askings run on threads the child does not have (a key marked running
        would never be asked again, and a lock held at the fork would never be released), so start empty."""
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._keys = {}
        self.waiting = 0

    def ask(self, key: Hashable, deadline: float, what: str = "the answer") -> T:
        """The answer of an asking of *key* started after this call, or its error; :class:`NoAnswerInTime`
        (naming *what*) when *deadline* (on the clock given) passes first."""
        with self._lock:
            k = self._keys.setdefault(key, _Key())
            if k.pending is None:
                k.pending = _Flight()
                self._arrived.notify_all()
            flight = k.pending
            flight.deadline = max(flight.deadline, deadline)
            flight.waiters += 1
            self.waiting += 1
            start = not k.running
            k.running = True
        if start:
            try:
                threading.Thread(target=self._run, args=(key, k), daemon=True, name=self._name).start()
            except BaseException:
                # no thread asks for this key: the next caller starts one (else every later caller waited in vain)
                with self._lock:
                    k.running = False
                    flight.waiters -= 1
                    self.waiting -= 1
                raise
        answered = flight.done.wait(max(0.0, deadline - self._clock()))
        with self._lock:
            self.waiting -= 1
            if not answered:
                flight.waiters -= 1
        if not flight.done.is_set():
            raise NoAnswerInTime("no answer for %s within the time given (an asking shared by the members of this "
                                 "process that asked at the same time)" % what)
        if flight.error is not None:
            raise flight.error
        return flight.value

    def _run(self, key: Hashable, k: _Key) -> None:
        asker: Optional[Asker[T]] = None
        try:
            while True:
                with self._lock:
                    if k.pending is None:
                        self._arrived.wait_for(lambda: k.pending is not None, self._linger_s)
                    flight = k.pending
                    k.pending = None
                    if flight is None:
                        k.running = False
                        if self._keys.get(key) is k:
                            del self._keys[key]
                        return
                    if flight.waiters <= 0:
                        continue  # every caller of it gave up
                    self.askings += 1
                asker = self._asked(key, k, asker, flight)
                flight.done.set()
        finally:
            if asker is not None:
                asker.close()

    def _asked(self, key: Hashable, k: _Key, asker: Optional[Asker[T]], flight: _Flight) -> Optional[Asker[T]]:
        """Run one asking of *key* (opening an asker when *asker* is None) on a thread of its own and put its answer
        or error in *flight*; the asker to keep for the next asking (None: abandoned, or never opened)."""
        box: Dict[str, Any] = {"asker": asker, "abandoned": False}
        finished = threading.Event()

        def work() -> None:
            try:
                if box["asker"] is None:
                    box["asker"] = self._open(key)
                box["value"] = box["asker"].ask(flight.deadline)
            except BaseException as e:  # handed to every caller of this asking
                box["error"] = e
            finally:
                with self._lock:
                    finished.set()
                    late = box["abandoned"]
                if late and box["asker"] is not None:
                    box["asker"].close()
        try:
            threading.Thread(target=work, daemon=True, name="%s-asking" % self._name).start()
        except BaseException as e:
            flight.error = e
            return asker
        # nothing to decide before the asking is overdue; after that, a look every 0.2 s for callers left waiting
        while not finished.wait(max(0.2, flight.deadline + self._overrun_s - self._clock())):
            with self._lock:
                waited_for = k.pending is not None and k.pending.waiters > 0
                if finished.is_set() or not waited_for or self._clock() <= flight.deadline + self._overrun_s:
                    continue
                box["abandoned"] = True
                self.abandoned += 1
            # the key is not logged: it may hold credentials
            log.warning("%s: an asking has not ended %.0f s after its deadline: left behind, the next asking opens "
                        "a new connection", self._name, self._overrun_s)
            flight.error = NoAnswerInTime("an asking shared by the members of this process did not end in time")
            return None
        if "error" in box:
            flight.error = box["error"]
        else:
            flight.value = box["value"]
        return box["asker"]
