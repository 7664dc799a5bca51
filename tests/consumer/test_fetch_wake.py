"""An idle fetcher polls long (one kafka-python poll per ``IDLE_POLL_MS``, fetching inside it every
``fetch.wait.max.ms``) and an assignment change or a shutdown wakes that poll at once
(:func:`zkconsumer.kafka.internals.install_poll_wake`): a rebalance never waits for an idle fetcher's poll, and a wake
never drops records kafka-python handed over. Real broker; the poll is made 10 s long so that a missed wake shows."""
import threading
import time

import pytest

from tests.support.consumer_helpers import fetcher_part, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.consumer import fetcher as fetcher_mod
from zkconsumer.consumer.fetcher import FetcherThread
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.kafka.fast_records import offset_at


@pytest.fixture
def long_idle_polls(monkeypatch):
    monkeypatch.setattr(fetcher_mod, "IDLE_POLL_MS", 120_000)


def _config(services, unique):
    return ConsumerConfig.from_properties({"group.id": unique("wake"), "zookeeper.connect": services.zookeeper_connect})


def _polling(f):
    """True once the fetcher's client exists and its poll can be woken."""
    return f._consumer is not None and f._wake is not None


def test_an_assignment_change_wakes_an_idle_fetchers_poll(services, unique, long_idle_polls):
    """A 120 s idle poll: applying a new assignment, then "stop", each within 30 s, or assign() raises."""
    t = services.create_topic(unique("wake"), 2)
    f = FetcherThread(0, services.bootstrap_servers, _config(services, unique))
    f.start()
    try:
        f.assign(1, {(t, 0): fetcher_part(t, 0, 0)})
        assert _polling(f), "this kafka-python's poll cannot be woken: the fetcher polls 20 ms at a time"
        time.sleep(1.0)  # inside its idle poll now
        f.assign(2, {(t, 1): fetcher_part(t, 1, 0)}, timeout=30)
        f.assign(3, {}, timeout=30)
    finally:
        f.shutdown()
        f.join(30)


def test_a_shutdown_wakes_an_idle_fetchers_poll(services, unique, long_idle_polls):
    t = services.create_topic(unique("wake"), 1)
    f = FetcherThread(0, services.bootstrap_servers, _config(services, unique))
    f.start()
    f.assign(1, {(t, 0): fetcher_part(t, 0, 0)})
    assert _polling(f)
    time.sleep(1.0)  # inside its idle poll now
    f.shutdown()
    f.join(30)
    assert not f.is_alive(), "the shutdown did not wake the idle poll"


def test_wakes_while_records_flow_drop_nothing(services, unique, long_idle_polls):
    """One assignment, records produced while another thread wakes the fetcher's poll every 2 ms (no reassignment,
    so nothing is sought again): every record is queued exactly once, in order, and polls were woken."""
    from zkconsumer.kafka.internals import PollWoken
    t = services.create_topic(unique("wake"), 1)
    f = FetcherThread(0, services.bootstrap_servers, _config(services, unique))
    f.start()
    part = fetcher_part(t, 0, 0)
    got, woken, stop = [], [0], threading.Event()
    try:
        f.assign(1, {(t, 0): part})
        assert _polling(f)
        poll = f._consumer.poll

        def counting_poll(*a, **k):
            try:
                return poll(*a, **k)
            except PollWoken:
                woken[0] += 1
                raise
        f._consumer.poll = counting_poll

        def waker():
            while not stop.is_set():
                f._wake_poll()
                time.sleep(0.002)
        threading.Thread(target=waker, daemon=True).start()
        for i in range(20):
            produce_tracked(services.bootstrap_servers, t, 50, partition=0, tag="w%d" % i)
            time.sleep(0.05)

        def drained():
            while not part.queue.empty():
                chunk = part.queue.get_nowait()
                assert chunk.generation == 1
                got.extend(offset_at(chunk.records, i) for i in range(len(chunk.records)))
            return len(got) >= 1000
        wait_until(drained, 60, interval=0.05, message="the 1000 records to be queued")
    finally:
        stop.set()
        f.shutdown()
        f.join(30)
    assert woken[0] > 20, "only %d polls were woken" % woken[0]
    assert got == list(range(1000)), "records lost or repeated across wakes: %d, first gap at %s" % (
        len(got), next((i for i, o in enumerate(got) if o != i), None))
