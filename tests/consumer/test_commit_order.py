"""Commits made by several threads of one member land in the order they read the consumed positions.

A commit reads the positions under the ownership lock and writes the store without it, so two committers can reach
the store in the other order than they read: an application thread's commit_offsets() that read its positions just
before shutdown's final commit (or before the commit of the partitions a rebalance takes away), and got to the store
after it, wrote its older offsets over the newer ones, and the partitions' next owner delivered again what was
between them, after a clean hand-over. Each commit now carries a sequence number taken with its positions; the
store leaves out a partition whose write with a newer one it confirmed (``superseded``).

Members on the defaults; the application's commit is held between its read of the positions and its store write by
a wrapper around the member's own offset store, and let go from ``on_revoke`` (the documented place to wait for
application threads that commit), i.e. after the final commit and before the owner nodes go.
"""
import threading

import pytest

from tests.support.consumer_helpers import SteadyProducer, StreamCollector, connector, owners
from tests.support.spark_support import zk_offsets
from tests.support.waiting import wait_until
from zkconsumer.consumer.connector import RebalanceListener

pytestmark = pytest.mark.live


class HeldStore:
    """The member's offset store, except that a commit made from ``hold_thread`` waits for ``go`` before it
    reaches the store (as a committer does that loses the race for the store's lock)."""

    def __init__(self, store):
        self.store = store
        self.hold_thread = None
        self.entered = threading.Event()
        self.go = threading.Event()
        self.held = None

    def commit(self, offsets, fence=None, **kw):
        if threading.current_thread() is self.hold_thread:
            self.held = dict(offsets)
            self.entered.set()
            assert self.go.wait(60), "the held commit was never let go"
        return self.store.commit(offsets, fence=fence, **kw)

    def __getattr__(self, name):
        return getattr(self.store, name)


class LetGoOnRevoke(RebalanceListener):
    """on_revoke lets the held application commit go and waits for it (once armed)."""

    def __init__(self):
        self.store = None
        self.worker = None
        self.revoked = []

    def on_revoke(self, partitions):
        self.revoked.append(set(partitions))
        if self.worker is not None:
            self.store.go.set()
            self.worker.join(30)


def _next_offsets(collector, topic):
    """{partition: the offset after the last record *collector* delivered}."""
    out = {}
    for _, p, o in collector.seen(topic):
        out[p] = max(out.get(p, 0), o + 1)
    return out


def _member_with_a_held_commit(services, unique, conns, tag):
    """A member on the defaults delivering a 2-partition topic a producer writes to, whose application thread's
    commit_offsets() has read the positions and is held before the store; delivery then went on past them and the
    producer stopped. Returns (group, topic, member, collector, store, listener, worker, the worker's results)."""
    g, t = unique(tag), services.create_topic(unique(tag), 2)
    producer = SteadyProducer(services.bootstrap_servers, t, 2, pause=0.005, tag=tag)
    producer.start()
    try:
        listener = LetGoOnRevoke()
        a = connector(services, g, listener=listener, defaults=True, **{"consumer.id": "a"})
        conns.append(a)
        store = HeldStore(a.offset_store)
        a.offset_store = store
        [stream] = a.create_message_streams({t: 1})[t]
        ca = StreamCollector(stream, name="a")
        ca.start()
        wait_until(lambda: set(_next_offsets(ca, t)) == {0, 1} and len(ca.seen(t)) >= 100, 30,
                   message="a delivering both partitions")
        results = []
        worker = threading.Thread(target=lambda: results.append(a.commit_offsets()), daemon=True,
                                  name="application-committer")
        store.hold_thread = worker
        worker.start()
        assert store.entered.wait(10), "the application's commit did not reach the store"
        early = {p: store.held[(t, p)] for p in (0, 1)}
        wait_until(lambda: all(_next_offsets(ca, t).get(p, 0) >= early[p] + 20 for p in (0, 1)), 30,
                   message="a to deliver past what the held commit read")
    finally:
        produced = producer.stop()
    last = {p: max(o for q, o, _ in produced if q == p) + 1 for p in (0, 1)}
    wait_until(lambda: _next_offsets(ca, t) == last, 30, message="a to deliver everything produced")
    listener.store, listener.worker = store, worker
    return g, t, a, ca, store, listener, worker, results, early


def test_an_application_commit_read_before_the_final_commit_does_not_write_over_it(services, zk, unique, conns):
    g, t, a, ca, store, listener, worker, results, early = _member_with_a_held_commit(services, unique, conns, "cof")
    delivered = _next_offsets(ca, t)
    assert all(delivered[p] > early[p] for p in (0, 1))
    a.shutdown()
    assert not worker.is_alive() and listener.revoked == [{(t, 0), (t, 1)}]
    assert zk_offsets(zk, g, t) == delivered, (
        "committed %s after a clean shutdown, delivered up to %s; the application's commit read %s before the "
        "final commit and wrote it after" % (zk_offsets(zk, g, t), delivered, early))
    [result] = results
    assert result.superseded == {(t, 0), (t, 1)} and not result.committed and not result.failed, result


def test_an_application_commit_read_before_the_leaving_commit_does_not_write_over_it(services, zk, unique, conns):
    g, t, a, ca, store, listener, worker, results, early = _member_with_a_held_commit(services, unique, conns, "col")
    delivered = _next_offsets(ca, t)
    # b sorts after a: the range assignor gives it partition 1, which a commits and releases (on_revoke between)
    b = connector(services, g, defaults=True, **{"consumer.id": "b"})
    conns.append(b)
    [sb] = b.create_message_streams({t: 1})[t]
    cb = StreamCollector(sb, name="b")
    cb.start()
    wait_until(lambda: owners(zk, g, [t]) == {(t, 0): "%s_a-0" % g, (t, 1): "%s_b-0" % g}, 30,
               message="partition 1 handed to b")
    assert not worker.is_alive() and listener.revoked == [{(t, 1)}]
    committed = zk_offsets(zk, g, t)
    assert committed[1] == delivered[1], (
        "partition 1 committed at %d when a released it, a delivered up to %d; the application's commit read %d "
        "before the commit of the partitions leaving and wrote it after" % (committed[1], delivered[1], early[1]))
    [result] = results
    assert (t, 1) in result.superseded and (t, 1) not in result.committed and not result.failed, result
    # partition 0 stays with a: the held commit's value for it is the newest written, so it is written
    assert result.committed == {(t, 0): early[0]}


def test_a_reset_point_covered_by_a_newer_confirmed_commit_is_done():
    """``superseded`` means the store confirmed a commit that read the partition's position later (at or past the
    reset point): the reset point is not retried after the backoff."""
    import types

    from zkconsumer.consumer.connector import ZookeeperConsumerConnector
    from zkconsumer.offsets import CommitResult

    covered, failed = ("t", 0), ("t", 1)
    parts = {tp: types.SimpleNamespace(reset_to=None, consumed=5) for tp in (covered, failed)}
    member = types.SimpleNamespace(
        rebalancer=types.SimpleNamespace(lock=threading.Lock(), parts=parts),
        commit_partitions=lambda tps: CommitResult(superseded={covered}, failed={failed: OSError("down")}))
    pending = dict(parts)
    assert ZookeeperConsumerConnector._commit_reset_points(member, pending) is True
    assert list(pending) == [failed]
