"""Commit sequences: a store does not write a partition's offset from a commit older (by sequence, not by value)
than one whose write it confirmed for that partition; while the newer write is in flight or of unknown outcome, the
older commit writes the newer one's offset; a newer write that did not happen does not count.

The ordering itself (:class:`~zkconsumer.offsets.base.CommitOrder`) is pure; the stores are checked against a real
ZooKeeper and broker.
"""
import contextlib

import pytest
from kafka import errors as Errors
from kazoo.exceptions import ConnectionLoss

from tests.support.waiting import wait_for_coordinator
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.core.layout import partition_offset_path, partition_owner_path
from zkconsumer.errors import OffsetManagerUnavailableError, OffsetStoreError, OwnershipLostError
from zkconsumer.offsets import CommitResult, OwnershipFence, ZooKeeperOffsetStore
from zkconsumer.offsets.base import CommitOrder
from zkconsumer.offsets.dual import DualOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore
from zkconsumer.zookeeper import multi as zk_multi

A, B = ("t", 0), ("t", 1)


# -- the ordering (pure) -----------------------------------------------------------------------------------------

def _landed(order, offsets, sequence):
    ticket = order.begin(offsets, sequence)
    order.settle(ticket, ticket.write)
    return ticket


def test_an_older_sequence_is_superseded_only_by_a_confirmed_newer_write():
    order = CommitOrder()
    _landed(order, {A: 20}, 5)
    t = order.begin({A: 10, B: 10}, 4)
    assert t.superseded == {A} and t.write == {B: 10}
    # the same sequence again (the dual store hands one commit to both stores) and newer ones pass
    assert order.begin({A: 20}, 5).write == {A: 20} and order.begin({A: 30}, 6).write == {A: 30}


def test_an_older_commit_writes_the_offset_of_a_newer_one_in_flight_or_of_unknown_outcome():
    order = CommitOrder()
    _landed(order, {A: 10}, 1)
    newer = order.begin({A: 50}, 3)
    older = order.begin({A: 40, B: 7}, 2)
    assert older.write == {A: 50, B: 7} and not older.superseded
    # the newer one's answer was lost; the older one landed: the newest position is confirmed
    order.settle(newer, {}, uncertain={A})
    order.settle(older, older.write)
    assert order.newest(A) == (3, 50, True) and order.newest(B) == (2, 7, True)
    assert order.begin({A: 45}, 2).superseded == {A}


def test_a_newer_write_that_did_not_happen_is_withdrawn_and_the_older_one_writes_its_own():
    order = CommitOrder()
    _landed(order, {A: 10, B: 10}, 1)
    newer = order.begin({A: 50, B: 50}, 3)
    # A not sent (or refused, rolled back); B's outcome unknown
    order.settle(newer, {}, uncertain={B})
    assert order.newest(A) == (1, 10, True) and order.newest(B) == (3, 50, False)
    older = order.begin({A: 40, B: 40}, 2)
    assert older.write == {A: 40, B: 50} and not older.superseded


def test_withdrawing_keeps_a_newer_commit_admitted_meanwhile_and_a_first_record_goes():
    order = CommitOrder()
    first = order.begin({A: 5}, 5)
    order.begin({A: 8}, 8)
    order.settle(first, {})
    assert order.newest(A) == (8, 8, False)
    fresh = CommitOrder()
    fresh.settle(fresh.begin({A: 1}, 1), {})
    assert fresh.newest(A) is None


def test_a_retry_follows_the_commits_admitted_meanwhile():
    order = CommitOrder()
    older = order.begin({A: 10, B: 10}, 1)
    newer = order.begin({A: 20}, 2)
    assert order.replan(older, [A, B]) == ({A: 20, B: 10}, set())
    order.settle(newer, newer.write)
    assert order.replan(older, [A, B]) == ({B: 10}, {A})
    # the older call's write of B lands; A, superseded, is neither confirmed nor withdrawn by it
    order.settle(older, {B: 10})
    assert order.newest(A) == (2, 20, True) and order.newest(B) == (1, 10, True)


def test_writes_without_a_sequence_are_not_ordered():
    order = CommitOrder()
    _landed(order, {A: 5}, 5)
    t = order.begin({A: 1}, None)
    assert t.write == {A: 1} and not t.superseded
    order.settle(t, t.write)
    assert order.newest(A) == (5, 5, True)


def test_a_superseded_partition_is_neither_committed_nor_failed_and_a_failure_wins():
    r = CommitResult(committed={A: 1, B: 2}, unchanged={A})
    r.supersede(A)
    assert r.committed == {B: 2} and r.unchanged == set() and r.superseded == {A} and r.ok
    assert r.raise_for_errors() is r
    other = CommitResult(committed={B: 2}, superseded={B})
    r.merge(other)
    assert r.committed == {} and r.superseded == {A, B}
    r.merge(CommitResult(failed={A: OffsetStoreError("x")}))
    assert r.superseded == {B} and set(r.failed) == {A}
    r.supersede(A)
    assert set(r.failed) == {A} and A not in r.superseded


# -- the ZooKeeper store -------------------------------------------------------------------------------------------

def test_zookeeper_store_drops_an_older_commit_but_writes_a_newer_one_that_moves_back(zk, unique):
    g, t = unique("g"), unique("t")
    tp, other = (t, 0), (t, 1)
    store = ZooKeeperOffsetStore(zk, g)
    assert store.commit({tp: 20, other: 20}, sequence=2).committed == {tp: 20, other: 20}
    # read before it (sequence 1), written after it: left out, the newer value stands
    r = store.commit({tp: 10, other: 25}, sequence=1)
    assert r.superseded == {tp, other} and not r.committed and r.ok
    assert store.fetch([tp, other]) == {tp: 20, other: 20}
    # a reset point read later moves the offset back: written (sequences are compared, not values)
    r = store.commit({tp: 5}, sequence=3)
    assert r.committed == {tp: 5} and zk.get(partition_offset_path(g, t, 0))[0] == b"5"
    # an unchanged value counts as written at its sequence
    assert store.commit({other: 20}, sequence=4).unchanged == {other}
    assert store.commit({other: 30}, sequence=3).superseded == {other}
    # tools (no sequence, force) are not ordered
    assert store.commit({tp: 1}, force=True).committed == {tp: 1}
    assert ZooKeeperOffsetStore(zk, g).fetch([tp]) == {tp: 1}


def test_zookeeper_store_a_refused_newer_commit_does_not_supersede_an_older_one(zk, unique):
    """A newer commit that the fence refused wrote nothing: an older one for the same partition is still written
    (it is progress over what the store holds)."""
    g, t = unique("g"), unique("t")
    tp = (t, 0)
    owner = partition_owner_path(g, t, 0)
    store = ZooKeeperOffsetStore(zk, g)
    store.commit({tp: 3}, sequence=1).raise_for_errors()
    fence = OwnershipFence(zk.client_id[0], {tp: owner})
    r = store.commit({tp: 20}, fence=fence, sequence=5)  # no owner node: refused
    assert isinstance(r.failed[tp], OwnershipLostError)
    zk.create(owner, b"us-0", ephemeral=True, makepath=True)
    r = store.commit({tp: 10}, fence=OwnershipFence(zk.client_id[0], {tp: owner}), sequence=4)
    assert r.committed == {tp: 10}, r
    assert store.commit({tp: 8}, sequence=3).superseded == {tp}
    assert store.fetch([tp]) == {tp: 10}


def test_zookeeper_store_refuses_rather_than_supersedes_a_partition_its_fence_gave_up(zk, unique):
    """An older commit of a partition released since (withdrawn from its fence), after the partition was claimed
    again and committed with a newer sequence: a fence refusal (the partition is not ours in that generation), not
    a write covered by the newer one."""
    g, t = unique("g"), unique("t")
    tp = (t, 0)
    owner = partition_owner_path(g, t, 0)
    zk.create(owner, b"us-0", ephemeral=True, makepath=True)
    store = ZooKeeperOffsetStore(zk, g)
    old = OwnershipFence(zk.client_id[0], {tp: owner})
    old.withdraw([tp])
    new = OwnershipFence(zk.client_id[0], {tp: owner})
    assert store.commit({tp: 90}, fence=new, sequence=9).committed == {tp: 90}
    r = store.commit({tp: 100}, fence=old, sequence=5)
    assert isinstance(r.failed.get(tp), OwnershipLostError) and not r.superseded, r
    assert store.fetch([tp]) == {tp: 90}


# -- the Kafka and dual stores -------------------------------------------------------------------------------------

def _config(group):
    return ConsumerConfig.from_properties(
        {"group.id": group, "offsets.channel.backoff.ms": "100", "offsets.commit.max.retries": "2",
         "offsets.channel.socket.timeout.ms": "3000"}, require_zookeeper=False)


def test_kafka_store_drops_an_older_commit_at_its_first_attempt_and_at_a_retry(services, unique):
    """A commit whose first attempt (sent by begin_commit, as the dual store sends it) met a retriable error does
    not send its retry once a newer commit was sent meanwhile: its older value would land last."""
    from kafka import errors as Errors

    t = services.create_topic(unique("ko"), 1)
    tp = (t, 0)
    g = unique("ko")
    loading = []

    class LoadingOnce(KafkaOffsetStore):
        async def _async_commit(self, node, offsets):
            if offsets.get(tp) == 10 and not loading:  # the older commit's first attempt: "loading"
                loading.append(True)
                return {k: (Errors.CoordinatorLoadInProgressError, None) for k in offsets}
            return await super()._async_commit(node, offsets)

    store = LoadingOnce(services.bootstrap_servers, g, _config(g))
    try:
        wait_for_coordinator(store, tp)
        finish = store.begin_commit({tp: 10}, sequence=1)
        assert store.commit({tp: 20}, sequence=2).committed == {tp: 20}
        r = finish()
        assert loading and r.superseded == {tp} and not r.committed and not r.failed, r
        assert store.fetch([tp]) == {tp: 20}
        assert store.commit({tp: 15}, sequence=1).superseded == {tp}
        assert store.commit({tp: 4}, sequence=3).committed == {tp: 4}  # a reset read later: written
        assert store.fetch([tp]) == {tp: 4}
    finally:
        store.close()


@contextlib.contextmanager
def _dual_store(services, zk, unique, name, kafka_class=KafkaOffsetStore):
    """(a dual store of a new group whose coordinator answers, its 1-partition topic's partition); closed after."""
    t = services.create_topic(unique(name), 1)
    g = unique(name)
    dual = DualOffsetStore(ZooKeeperOffsetStore(zk, g), kafka_class(services.bootstrap_servers, g, _config(g)))
    try:
        wait_for_coordinator(dual.kafka_store, (t, 0))
        yield dual, (t, 0)
    finally:
        dual.close()


@pytest.mark.parametrize("healthy", [True, False], ids=["overlapped", "sequential"])
def test_dual_store_drops_an_older_commit_in_both_stores(services, zk, unique, healthy):
    with _dual_store(services, zk, unique, "do") as (dual, tp):
        assert dual.commit({tp: 20}, sequence=2).committed == {tp: 20}
        dual._kafka_healthy = healthy
        r = dual.commit({tp: 10}, sequence=1)
        assert r.superseded == {tp} and not r.committed and r.ok, r
        assert dual.fetch_both([tp]) == {tp: (20, 20)}
        dual._kafka_healthy = healthy
        assert dual.commit({tp: 7}, sequence=3).committed == {tp: 7}
        assert dual.fetch_both([tp]) == {tp: (7, 7)}


# -- a newer commit that failed does not cost an older one its write -------------------------------------------------

class _AnswerLost:
    """A kazoo result whose answer never comes: the connection was lost (the request was never sent, which the
    store cannot tell from one ZooKeeper applied)."""

    def get(self, *args, **kwargs):
        raise ConnectionLoss()


def test_zookeeper_store_an_older_commit_writes_the_offset_of_a_newer_one_whose_answer_was_lost(
        zk, unique, monkeypatch):
    g, t = unique("g"), unique("t")
    tp = (t, 0)
    store = ZooKeeperOffsetStore(zk, g)
    store.commit({tp: 10}, sequence=1).raise_for_errors()
    with monkeypatch.context() as m:
        m.setattr(zk_multi, "submit", lambda zk_, request: _AnswerLost())
        assert isinstance(store.commit({tp: 60}, sequence=3).failed[tp], OffsetStoreError)
    # the older commit (shutdown's final one, say) is not dropped: whichever landed, the newest position is stored
    r = store.commit({tp: 50}, sequence=2)
    assert r.committed == {tp: 60} and not r.superseded, r
    assert ZooKeeperOffsetStore(zk, g).fetch([tp]) == {tp: 60}
    assert store.commit({tp: 55}, sequence=2).superseded == {tp}


def test_zookeeper_store_a_newer_commit_that_raised_before_sending_does_not_supersede(zk, unique, monkeypatch):
    g, t = unique("g"), unique("t")
    tp = (t, 0)
    store = ZooKeeperOffsetStore(zk, g)
    store.commit({tp: 10}, sequence=1).raise_for_errors()

    def refuse(zk_, request):
        raise RuntimeError("simulated: the request could not be queued")
    with monkeypatch.context() as m:
        m.setattr(zk_multi, "submit", refuse)
        with pytest.raises(RuntimeError):
            store.commit({tp: 60}, sequence=3)
    r = store.commit({tp: 50}, sequence=2)
    assert r.committed == {tp: 50} and not r.superseded, r
    assert ZooKeeperOffsetStore(zk, g).fetch([tp]) == {tp: 50}


class _Flaky(KafkaOffsetStore):
    """The Kafka store with failures injected around our own calls: the coordinator lookup (``down``), or the
    OffsetCommit of one offset value (``refuse`` with a broker error code, ``lose`` raising a transport error
    without sending), ``times`` times."""
    down = False
    refuse = lose = None
    times = 1 << 30

    def _coordinator(self):
        if self.down:
            raise OffsetManagerUnavailableError("no broker answered (simulated)")
        return super()._coordinator()

    async def _async_commit(self, node, offsets):
        tp = next(iter(offsets))
        if self.times > 0 and offsets[tp] in (self.refuse, self.lose):
            self.times -= 1
            if offsets[tp] == self.refuse:
                return {k: (Errors.OffsetMetadataTooLargeError, None) for k in offsets}
            raise Errors.KafkaConnectionError("simulated: connection lost, no answer")
        return await super()._async_commit(node, offsets)


@pytest.fixture
def flaky(services, unique):
    t = services.create_topic(unique("kf"), 1)
    g = unique("kf")
    store = _Flaky(services.bootstrap_servers, g, _config(g))
    wait_for_coordinator(store, (t, 0))
    store.commit({(t, 0): 10}, sequence=1).raise_for_errors()
    yield store, (t, 0)
    store.close()


def _older_commit_lands(store, tp, stored):
    """The older commit (sequence 2, offset 50) is written, not superseded, and the store then holds *stored*."""
    r = store.commit({tp: 50}, sequence=2)
    assert r.committed == {tp: stored} and not r.superseded, r
    assert store.fetch([tp]) == {tp: stored}


def test_kafka_store_a_newer_commit_not_sent_does_not_supersede(flaky):
    store, tp = flaky
    store.down = True
    with pytest.raises(OffsetStoreError):
        store.commit({tp: 60}, sequence=3)
    store.down = False
    _older_commit_lands(store, tp, 50)


def test_kafka_store_a_newer_commit_the_broker_refused_does_not_supersede(flaky):
    store, tp = flaky
    store.refuse = 60
    assert isinstance(store.commit({tp: 60}, sequence=3).failed[tp], OffsetStoreError)
    _older_commit_lands(store, tp, 50)


def test_kafka_store_an_older_commit_writes_the_offset_of_a_newer_one_without_an_answer(flaky):
    store, tp = flaky
    store.lose = 60
    assert isinstance(store.commit({tp: 60}, sequence=3).failed[tp], OffsetStoreError)
    store.lose = None
    _older_commit_lands(store, tp, 60)


def test_kafka_store_an_older_commit_writes_the_offset_of_a_newer_one_in_flight(flaky):
    """The dual store's overlapped path sends outside the store's lock: a newer commit in flight, refused by the
    broker once the older one has gone through, leaves the newest position stored."""
    store, tp = flaky
    store.refuse, store.times = 60, 1
    finish = store.begin_commit({tp: 60}, sequence=3)
    r = store.commit({tp: 50}, sequence=2)
    assert r.committed == {tp: 60} and not r.superseded, r
    assert isinstance(finish().failed[tp], OffsetStoreError)
    assert store.fetch([tp]) == {tp: 60}


class _PartlyAcknowledged(KafkaOffsetStore):
    """The OffsetCommit carrying ``mark``: the broker takes its first partition, the others answer NOT_COORDINATOR;
    then the coordinator lookup of the retry fails with an error that is not Kafka's (the store closing under it)."""
    mark = None
    broken = False

    def _coordinator(self):
        if self.broken:
            raise OffsetStoreError("the store is closed (simulated)")
        return super()._coordinator()

    async def _async_commit(self, node, offsets):
        if self.mark is None or self.mark not in offsets.values():
            return await super()._async_commit(node, offsets)
        self.mark = None
        first, *rest = sorted(offsets)
        await super()._async_commit(node, {first: offsets[first]})
        self.broken = True
        return {first: (Errors.NoError, None), **{tp: (Errors.NotCoordinatorError, None) for tp in rest}}


def test_kafka_store_keeps_what_the_broker_acknowledged_before_a_commit_raised(services, unique):
    """A commit that raises at a retry after the broker took some of its partitions: those stay the newest
    confirmed write (an older commit reaching the store later leaves them alone); the others were not taken."""
    t = services.create_topic(unique("kp"), 2)
    g = unique("kp")
    a, b = (t, 0), (t, 1)
    store = _PartlyAcknowledged(services.bootstrap_servers, g, _config(g))
    try:
        wait_for_coordinator(store, a)
        store.commit({a: 10, b: 10}, sequence=1).raise_for_errors()
        store.mark = 100
        with pytest.raises(OffsetStoreError):
            store.commit({a: 100, b: 100}, sequence=5)
        store.broken = False
        r = store.commit({a: 50, b: 50}, sequence=4)
        assert r.superseded == {a} and r.committed == {b: 50}, r
        assert store.fetch([a, b]) == {a: 100, b: 50}
    finally:
        store.close()


def test_dual_store_sequential_a_newer_commit_kafka_did_not_take_does_not_supersede(services, zk, unique):
    with _dual_store(services, zk, unique, "dn", _Flaky) as (dual, tp):
        assert dual.commit({tp: 10}, sequence=1).committed == {tp: 10}
        dual._kafka_healthy = False
        dual.kafka_store.down = True
        assert dual.commit({tp: 60}, sequence=3).failed
        dual.kafka_store.down = False
        r = dual.commit({tp: 50}, sequence=2)
        assert r.committed == {tp: 50} and not r.superseded, r
        assert dual.fetch_both([tp]) == {tp: (50, 50)}
