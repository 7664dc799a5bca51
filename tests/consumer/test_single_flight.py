"""Single flight (pure): callers of one key at the same time share one asking; nobody gets an answer asked for
before their own call; an error reaches every caller of its asking; a caller leaves at its own deadline."""
import threading
import time

import pytest

from tests.support.waiting import wait_until
from zkconsumer.consumer.single_flight import NoAnswerInTime, SingleFlight


class Gate:
    """An asker whose askings block until released; records when each started and how it was opened."""

    def __init__(self, answers=None):
        self.release = threading.Event()
        self.started = []  # time.monotonic() at the start of each asking
        self.opened = 0
        self.closed = 0
        self.answers = answers or (lambda n: "answer %d" % n)

    def open(self, key):
        self.opened += 1
        return self

    def ask(self, deadline):
        self.started.append(time.monotonic())
        n = len(self.started)
        assert self.release.wait(30)
        return self.answers(n)

    def close(self):
        self.closed += 1


def _callers(flight, n, deadline_s=30.0, key="k"):
    results = [None] * n
    called = [None] * n

    def call(i):
        called[i] = time.monotonic()
        try:
            results[i] = ("ok", flight.ask(key, time.monotonic() + deadline_s))
        except Exception as e:
            results[i] = ("error", e)
    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results, called


def _all_wait_then_release(flight, gate, threads):
    """Wait until every caller waits and an asking has started; release the gate; wait for the callers."""
    wait_until(lambda: flight.waiting == len(threads) and gate.started, 10, message="all callers waiting")
    gate.release.set()
    for t in threads:
        t.join(30)


def test_concurrent_callers_share_askings_and_get_fresh_answers():
    gate = Gate()
    flight = SingleFlight(gate.open, linger_s=0.1)
    threads, results, called = _callers(flight, 30)
    _all_wait_then_release(flight, gate, threads)
    assert all(r is not None and r[0] == "ok" for r in results), results
    # the first caller's asking, then one for everyone who came while it ran: 30 callers, at most two askings
    assert flight.askings <= 2 and len(gate.started) == flight.askings
    for (_, answer), at in zip(results, called):
        n = int(answer.split()[1])
        assert gate.started[n - 1] >= at, "a caller got an answer asked for before its own call"
    # one asker, opened once and closed once nobody waited any more
    wait_until(lambda: gate.closed == 1, 10, message="the asker to be closed")
    assert gate.opened == 1


def test_a_caller_during_an_asking_waits_for_the_next_one():
    gate = Gate()
    flight = SingleFlight(gate.open, linger_s=0.1)
    first, results1, _ = _callers(flight, 1)
    wait_until(lambda: gate.started, 10, message="the first asking")
    second, results2, called2 = _callers(flight, 1)
    wait_until(lambda: flight.waiting == 2, 10, message="the second caller")
    gate.release.set()
    for t in first + second:
        t.join(30)
    assert results1[0] == ("ok", "answer 1")
    assert results2[0] == ("ok", "answer 2"), "got the answer of an asking started before its call"


def test_an_error_reaches_every_caller_of_its_asking():
    boom = RuntimeError("broker says no")

    def answers(n):
        raise boom
    gate = Gate(answers)
    flight = SingleFlight(gate.open, linger_s=0.1)
    threads, results, _ = _callers(flight, 8)
    _all_wait_then_release(flight, gate, threads)
    assert [r[0] for r in results] == ["error"] * 8
    assert all(r[1] is boom for r in results)
    assert flight.askings <= 2


def test_a_caller_leaves_at_its_own_deadline_the_others_keep_waiting():
    gate = Gate()
    flight = SingleFlight(gate.open, linger_s=0.1)
    patient, results, _ = _callers(flight, 1, deadline_s=30.0)
    wait_until(lambda: gate.started, 10, message="the first asking")
    with pytest.raises(NoAnswerInTime) as info:
        flight.ask("k", time.monotonic() + 0.2, "the broker-side group g")
    assert "the broker-side group g" in str(info.value)
    assert patient[0].is_alive() and results[0] is None
    gate.release.set()
    patient[0].join(30)
    assert results[0] == ("ok", "answer 1")
    # nobody waited for the asking the impatient caller had queued: it is not asked
    wait_until(lambda: gate.closed == 1, 10, message="the asker to be closed")
    assert flight.askings == 1


def test_keys_do_not_share():
    gate = Gate()
    flight = SingleFlight(gate.open, linger_s=0.1)
    a, ra, _ = _callers(flight, 1, key="a")
    b, rb, _ = _callers(flight, 1, key="b")
    wait_until(lambda: len(gate.started) == 2, 10, message="one asking per key")
    gate.release.set()
    for t in a + b:
        t.join(30)
    assert ra[0][0] == rb[0][0] == "ok" and gate.opened == 2


def test_the_asker_is_kept_for_callers_that_come_soon_after():
    gate = Gate()
    gate.release.set()
    flight = SingleFlight(gate.open, linger_s=30.0)
    assert flight.ask("k", time.monotonic() + 10) == "answer 1"
    # a second member starting after the first one's check: a new asking (a fresh answer), on the same asker
    assert flight.ask("k", time.monotonic() + 10) == "answer 2"
    assert gate.opened == 1 and gate.closed == 0


def test_a_forked_child_asks_on_its_own():
    """A process forked while a key's asker lingers (or while an asking runs) has none of the parent's threads:
    its callers get an asking of their own, not a wait for a thread that does not exist there."""
    import os
    gate = Gate()
    gate.release.set()
    flight = SingleFlight(gate.open, linger_s=30.0)
    assert flight.ask("k", time.monotonic() + 10) == "answer 1"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its outcome, never return into pytest
        try:
            try:
                outcome = "ok: %s" % flight.ask("k", time.monotonic() + 5)
            except Exception as e:  # noqa: BLE001 - reported to the parent
                outcome = "error: %r" % e
            os.write(write, outcome.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        outcome = f.read()
    os.waitpid(pid, 0)
    assert outcome == "ok: answer 2", outcome


def test_a_thread_that_cannot_start_leaves_the_key_to_the_next_caller(monkeypatch):
    from zkconsumer.consumer import single_flight

    class Refused(threading.Thread):
        def start(self):
            raise RuntimeError("can't start new thread")
    gate = Gate()
    gate.release.set()
    flight = SingleFlight(gate.open, linger_s=0.1)
    with monkeypatch.context() as m:
        m.setattr(single_flight.threading, "Thread", Refused)
        with pytest.raises(RuntimeError):
            flight.ask("k", time.monotonic() + 1)
    assert flight.waiting == 0
    assert flight.ask("k", time.monotonic() + 5) == "answer 1"


def test_a_hung_asking_does_not_block_later_callers():
    """An asking whose call never returns (a client library stuck in a call) is left behind once its callers have
    left and it is past its deadline: a later caller is answered by an asking on a new asker, and the hung asker is
    closed if its call ever returns."""
    hung = threading.Event()

    class Hanging(Gate):
        def ask(self, deadline):
            if self.opened == 1:
                assert hung.wait(60)
                return "late"
            return super().ask(deadline)
    gate = Hanging()
    gate.release.set()
    flight = SingleFlight(gate.open, linger_s=0.1, overrun_s=0.2)
    with pytest.raises(NoAnswerInTime):
        flight.ask("k", time.monotonic() + 0.3, "the broker-side group g")
    assert flight.ask("k", time.monotonic() + 10) == "answer 1"
    assert gate.opened == 2 and flight.abandoned == 1
    hung.set()
    wait_until(lambda: gate.closed == 2, 10, message="both askers to be closed")
