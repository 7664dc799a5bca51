"""Members at the defaults (``largest``, 60 s auto-commit) whose partitions are caught up stop polling their
kafka-python client and watch the leaders themselves (zkconsumer.kafka.idle_watch): records produced while they
watch are delivered, each exactly once and in order; the watch starts again once they are caught up again; the
watch's answers are counted as Fetch responses (FetchRequestRateAndTimeMs, MinFetchRate); a member joining while the
first watches rebalances the group; after the rebalance every record is delivered exactly once across the two. A
fetcher's new assignment and its shutdown end its watch at once (WATCH_MAX_S made 10 minutes long, so that a missed
wake shows). Real ZooKeeper and broker."""
import time

import pytest

from zkconsumer.consumer import fetcher as fetcher_mod
from zkconsumer.consumer.fetcher import FetcherThread
from zkconsumer.core.config import ConsumerConfig

from tests.support.consumer_helpers import StreamCollector, connector, fetcher_part, owners, produce_tracked
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(
    __import__("os").environ.get("ZKCONSUMER_TEST_FETCH_ENGINE") == "librdkafka",
    reason="the idle watch is the kafka-python engine's")


def _watch_rounds(conn):
    return sum(f.watch_rounds for f in conn.fetchers.fetchers)


def _watching(conn, after=0):
    """Wait until *conn*'s fetchers have had idle watch rounds answered beyond *after*; their number."""
    return wait_until(lambda: _watch_rounds(conn) > after and _watch_rounds(conn), 30,
                      message="the member's fetcher to watch its caught-up partitions")


def _delivered_once(cols, produced, t):
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: want <= {x for c in cols for x in c.seen()}, 30, message="every produced record delivered")
    seen = [x for c in cols for x in c.seen()]
    dups = sorted({x for x in seen if seen.count(x) > 1})
    assert not dups, "delivered twice: %s" % dups[:10]
    for c in cols:
        for p in {p for _, p, _ in c.seen()}:
            offs = [o for _, q, o in c.seen() if q == p]
            assert offs == sorted(offs), "partition %d out of order" % p


def test_records_produced_while_a_member_watches_are_delivered_once(services, zk, unique, conns):
    g, t = unique("iwm"), unique("iwm")
    services.create_topic(t, 3)
    a = connector(services, g, defaults=True, **{"consumer.id": "a"})
    conns.append(a)
    col = StreamCollector(a.create_message_streams({t: 1})[t][0], name="a")
    col.start()
    wait_until(lambda: len(owners(zk, g, [t])) == 3, 30, message="a to own every partition")
    rounds = _watching(a)
    counted = sum(f.fetches for f in a.fetchers.fetchers)
    _watching(a, after=_watch_rounds(a) + 3)
    assert sum(f.fetches for f in a.fetchers.fetchers) >= counted + 3, "the watch's answers were not counted"

    produced = produce_tracked(services.bootstrap_servers, t, 30, partitions=3, tag="first")
    _delivered_once([col], produced, t)
    assert len(col.seen()) == 30  # largest: nothing from before the member started; nothing twice
    _watching(a, after=_watch_rounds(a))  # caught up again: watching again

    # a member joins while a watches: the rebalance wakes the watch, both consume, nothing is lost or repeated
    b = connector(services, g, defaults=True, **{"consumer.id": "b"})
    conns.append(b)
    col_b = StreamCollector(b.create_message_streams({t: 1})[t][0], name="b")
    col_b.start()
    wait_until(lambda: {v.rsplit("_", 1)[-1] for v in owners(zk, g, [t]).values()} == {"a-0", "b-0"}, 30, message=lambda: "a and b to share the topic: %s" % owners(zk, g, [t]))
    _watching(b)
    produced += produce_tracked(services.bootstrap_servers, t, 60, partitions=3, tag="second")
    _delivered_once([col, col_b], produced, t)
    assert rounds > 0


def test_a_record_ends_a_long_held_watch_at_once(services, zk, unique, conns):
    """The watch asks the broker to hold each Fetch fetch.idle.wait.ms (here its maximum, 30 s): a record produced
    while a Fetch is held is answered when it arrives, not when the hold ends, so the longer hold delays nothing
    (delivered well within the hold; a watch that waited for its answer's end would take ~30 s). At the defaults
    otherwise (largest, 60 s auto-commit); each record once and in order."""
    g, t = unique("iwl"), unique("iwl")
    services.create_topic(t, 2)
    a = connector(services, g, defaults=True, **{"consumer.id": "a", "fetch.idle.wait.ms": "30000"})
    conns.append(a)
    col = StreamCollector(a.create_message_streams({t: 1})[t][0], name="a")
    col.start()
    wait_until(lambda: len(owners(zk, g, [t])) == 2, 30, message="a to own both partitions")
    [f] = a.fetchers.fetchers
    assert f._watch is not None and f._watch.max_wait_ms == 30000

    def held():  # a watch's Fetch is in flight to the leader (the broker holds it)
        watch = f._watch
        return watch is not None and any(x.asked is not None and x.mine for x in list(watch._kept.values()))
    everything = []
    for tag in ("first", "second"):
        wait_until(held, 60, message="the fetcher's watch to have a Fetch held by the broker")
        time.sleep(0.5)  # in the broker's hands by now
        wait_until(held, 60, message="the fetcher's watch to have a Fetch held by the broker")
        sent = time.monotonic()
        produced = produce_tracked(services.bootstrap_servers, t, 10, partitions=2, tag=tag)
        everything += produced
        want = {(t, p, o) for p, o, _ in produced}
        wait_until(lambda: want <= set(col.seen()), 30, message="the records produced during the hold")
        took = max(ts for r, ts in zip(list(col.records), list(col.times))
                   if (r.topic, r.partition, r.offset) in want) - sent
        assert took < 10.0, "delivered %.1f s after the produce: the watch waited for its 30 s hold" % took
    _delivered_once([col], everything, t)
    assert len(col.seen()) == 20  # largest: nothing from before; nothing twice


@pytest.fixture
def long_watches(monkeypatch):
    monkeypatch.setattr(fetcher_mod, "WATCH_MAX_S", 600.0)


def test_an_assignment_change_and_a_shutdown_end_a_fetchers_watch(services, unique, long_watches):
    t = services.create_topic(unique("iwf"), 2)
    cfg = ConsumerConfig.from_properties({"group.id": unique("iwf"), "zookeeper.connect": services.zookeeper_connect})
    f = FetcherThread(0, services.bootstrap_servers, cfg)
    f.start()
    try:
        f.assign(1, {(t, 0): fetcher_part(t, 0, 0)})
        assert f._watch is not None, "no idle watch for a PLAINTEXT fetcher"
        wait_until(lambda: f.watch_rounds > 3, 30, message="the fetcher to watch its caught-up partition")
        f.assign(2, {(t, 1): fetcher_part(t, 1, 0)}, timeout=30)  # raises unless the watch ended
        before = f.watch_rounds
        wait_until(lambda: f.watch_rounds > before + 3, 30, message="the fetcher to watch its new partition")
        started = time.monotonic()
    finally:
        f.shutdown()
        f.join(30)
    assert not f.is_alive(), "the shutdown did not end the watch"
    assert time.monotonic() - started < 30


def _troubled_fetcher(services, unique, monkeypatch, where):
    """(a started FetcherThread of one fresh caught-up partition, that partition's PartitionTopicInfo, the list of
    ``(late, wait)`` its idle watch's troubles gave): every leader is watched at ``where()`` (None: the real leader;
    the client fetches from the broker), a leader is late 0.2 s after the watch's 100 ms wait, and the waits are
    WATCH_BACKOFF_S = 0.1 s and WATCH_LATE_BACKOFF_MAX_S = 0.6 s."""
    from zkconsumer.kafka import idle_watch, internals
    real_plan = internals.caught_up_plan

    def elsewhere(consumer, partitions):
        plan, address = real_plan(consumer, partitions), where()
        if plan is None or address is None:
            return plan
        return {node: (address, parts) for node, (_, parts) in plan.items()}
    monkeypatch.setattr(internals, "caught_up_plan", elsewhere)

    class Impatient(idle_watch.IdleWatch):
        def __init__(self, *a, **k):
            super().__init__(*a, **dict(k, answer_margin_s=0.2))
    monkeypatch.setattr(idle_watch, "IdleWatch", Impatient)
    monkeypatch.setattr(fetcher_mod, "WATCH_BACKOFF_S", 0.1)
    monkeypatch.setattr(fetcher_mod, "WATCH_LATE_BACKOFF_MAX_S", 0.6)
    waits = []
    real_retry = fetcher_mod.watch_retry

    def recorded(backoff, lates, late):
        out = real_retry(backoff, lates, late)
        waits.append((late, out[0]))
        return out
    monkeypatch.setattr(fetcher_mod, "watch_retry", recorded)
    t = services.create_topic(unique("iwl"), 1)
    cfg = ConsumerConfig.from_properties({"group.id": unique("iwl"), "zookeeper.connect": services.zookeeper_connect,
                                          "fetch.idle.wait.ms": "100"})
    f = FetcherThread(0, services.bootstrap_servers, cfg)
    f._watch_backoff = fetcher_mod.WATCH_BACKOFF_S
    f.start()
    part = fetcher_part(t, 0, 0)
    f.assign(1, {(t, 0): part})
    return f, part, waits


@pytest.mark.parametrize("leader", ["late", "refusing"])
def test_a_late_leader_has_the_watch_tried_again_soon_a_refusing_one_ever_later(services, unique, monkeypatch,
                                                                                silent, leader):
    """A leader that does not answer the watch in time is most often an overloaded broker, which passes: the fetcher
    tries the watch again after WATCH_BACKOFF_S WATCH_LATE_AT_BASE times in a row, then after a doubled wait up to
    WATCH_LATE_BACKOFF_MAX_S (doubled on every late answer up to 600 s, a fleet's mass start had left a sixth of its
    fetchers polling their clients for minutes afterwards). A refused connection doubles the wait at every trouble.
    Meanwhile the client fetches."""
    import socket
    if leader == "late":
        address = silent
    else:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        address = s.getsockname()
        s.close()
    f, part, waits = _troubled_fetcher(services, unique, monkeypatch, lambda: address)
    try:
        wait_until(lambda: len(waits) >= 7, 60, message="seven troubles of the idle watch")
        if leader == "late":
            assert waits[:7] == [(True, w) for w in (0.1, 0.1, 0.1, 0.2, 0.4, 0.6, 0.6)], waits
        else:
            assert waits[:4] == [(False, w) for w in (0.1, 0.2, 0.4, 0.8)], waits
        # the client fetches meanwhile: a record produced now is fetched
        produce_tracked(services.bootstrap_servers, part.tp[0], 1, partition=0)
        wait_until(lambda: not part.queue.empty(), 30, message="the record fetched by the client")
    finally:
        f.shutdown()
        f.join(30)


def test_a_watch_every_leader_answered_in_time_ends_a_row_of_late_troubles(services, unique, monkeypatch,
                                                                        silent):
    """Late troubles count in a row: a watch between them that lasted past every leader's bound (the watch's wait +
    its margin) and ended with a record shows each leader answering in time, so the next late trouble is the first
    of a new row (the base wait), not the fifth of the old one."""
    late = [True]
    f, part, waits = _troubled_fetcher(services, unique, monkeypatch, lambda: silent if late[0] else None)
    try:
        wait_until(lambda: len(waits) >= 4, 60, message="four late troubles")
        late[0] = False
        assert [w for _, w in waits[:4]] == [0.1, 0.1, 0.1, 0.2], waits
        rounds = f.watch_rounds
        wait_until(lambda: f.watch_rounds >= rounds + 8, 30, message="a watch of the real leader, past its bound")
        produce_tracked(services.bootstrap_servers, part.tp[0], 1, partition=0)  # ends that watch with a record
        wait_until(lambda: not part.queue.empty(), 30, message="the record fetched")
        seen = len(waits)
        late[0] = True
        wait_until(lambda: len(waits) > seen, 30, message="a late trouble again")
        assert waits[seen] == (True, 0.1), "the row went on across a watch every leader answered in time: %s" % waits
    finally:
        f.shutdown()
        f.join(30)
