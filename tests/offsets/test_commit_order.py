"""Commit sequences: a store does not write a partition's offset from a commit older (by sequence, not by value)
than one it has written or is writing for that partition.

The ordering itself (:class:`~zkconsumer.offsets.base.CommitOrder`) is pure; the stores are checked against a real
ZooKeeper and broker.
"""
import pytest

from tests.support.waiting import wait_until
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.core.layout import partition_offset_path, partition_owner_path
from zkconsumer.errors import OffsetStoreError, OwnershipLostError
from zkconsumer.offsets import CommitResult, OwnershipFence, ZooKeeperOffsetStore
from zkconsumer.offsets.base import CommitOrder
from zkconsumer.offsets.dual import DualOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore

A, B = ("t", 0), ("t", 1)


# -- the ordering (pure) -----------------------------------------------------------------------------------------

def test_an_older_sequence_is_superseded_per_partition():
    order = CommitOrder()
    assert order.superseded([A, B], 5) == set()
    order.admit([A], 5)
    assert order.superseded([A, B], 4) == {A}
    # the same sequence again (the dual store hands one commit to both stores) and newer ones pass
    assert order.superseded([A, B], 5) == set() and order.superseded([A, B], 6) == set()
    order.admit([A, B], 7)
    assert order.superseded([A, B], 6) == {A, B} and order.newest(A) == 7


def test_admitting_an_older_sequence_never_lowers_the_record():
    order = CommitOrder()
    order.admit([A], 9)
    assert order.admit([A], 3) == {A: 9}
    assert order.newest(A) == 9


def test_a_write_that_did_not_happen_is_withdrawn_and_an_older_one_may_write_again():
    order = CommitOrder()
    order.admit([A, B], 2)
    before = order.admit([A, B], 5)
    assert before == {A: 2, B: 2}
    order.withdraw({A: before[A]}, 5)  # A's write of 5 was refused; B's went through
    assert order.newest(A) == 2 and order.newest(B) == 5
    assert order.superseded([A, B], 4) == {B}


def test_withdrawing_keeps_a_newer_sequence_admitted_meanwhile():
    order = CommitOrder()
    before = order.admit([A], 5)
    order.admit([A], 8)
    order.withdraw(before, 5)
    assert order.newest(A) == 8
    fresh = CommitOrder()
    fresh.withdraw(fresh.admit([A], 1), 1)
    assert fresh.newest(A) is None


def test_writes_without_a_sequence_are_not_ordered():
    order = CommitOrder()
    order.admit([A], 5)
    assert order.superseded([A], None) == set()
    assert order.admit([A], None) == {} and order.newest(A) == 5


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


# -- the Kafka and dual stores -------------------------------------------------------------------------------------

def _config(group):
    return ConsumerConfig.from_properties(
        {"group.id": group, "offsets.channel.backoff.ms": "100", "offsets.commit.max.retries": "2",
         "offsets.channel.socket.timeout.ms": "3000"}, require_zookeeper=False)


def _fetch_works(store, tp):
    try:
        store.fetch([tp])
        return True
    except OffsetStoreError:
        return False


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
        wait_until(lambda: _fetch_works(store, tp), 60, interval=0.5, message="the group's coordinator")
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


@pytest.mark.parametrize("healthy", [True, False], ids=["overlapped", "sequential"])
def test_dual_store_drops_an_older_commit_in_both_stores(services, zk, unique, healthy):
    t = services.create_topic(unique("do"), 1)
    tp = (t, 0)
    g = unique("do")
    dual = DualOffsetStore(ZooKeeperOffsetStore(zk, g), KafkaOffsetStore(services.bootstrap_servers, g, _config(g)))
    try:
        wait_until(lambda: _fetch_works(dual.kafka_store, tp), 60, interval=0.5, message="the group's coordinator")
        assert dual.commit({tp: 20}, sequence=2).committed == {tp: 20}
        dual._kafka_healthy = healthy
        r = dual.commit({tp: 10}, sequence=1)
        assert r.superseded == {tp} and not r.committed and r.ok, r
        assert dual.fetch_both([tp]) == {tp: (20, 20)}
        dual._kafka_healthy = healthy
        assert dual.commit({tp: 7}, sequence=3).committed == {tp: 7}
        assert dual.fetch_both([tp]) == {tp: (7, 7)}
    finally:
        dual.close()
