"""ZooKeeperOffsetStore against a real ZooKeeper, fenced commits included."""
import time

import pytest
from kazoo.client import KazooClient

from zkconsumer.config import ConsumerConfig
from zkconsumer.errors import OffsetStoreError, OwnershipLostError
from zkconsumer.layout import partition_offset_path, partition_owner_path
from zkconsumer.offsets import CommitResult, OwnershipFence, ZooKeeperOffsetStore, make_offset_store


def test_round_trip_and_absent(zk, unique):
    g, t = unique("g"), unique("t")
    store = ZooKeeperOffsetStore(zk, g)
    assert store.fetch([(t, 0), (t, 1)]) == {}
    r = store.commit({(t, 0): 5, (t, 1): 0})
    assert r.ok and r.committed == {(t, 0): 5, (t, 1): 0}
    assert zk.get(partition_offset_path(g, t, 0))[0] == b"5"
    fresh = ZooKeeperOffsetStore(zk, g)
    assert fresh.fetch([(t, 0), (t, 1), (t, 2), (unique("other"), 0)]) == {(t, 0): 5, (t, 1): 0}
    # tools may store -1: "no offset"
    zk.set(partition_offset_path(g, t, 1), b"-1")
    assert fresh.fetch([(t, 1)]) == {}
    assert fresh.commit({(t, 1): 7}).ok and zk.get(partition_offset_path(g, t, 1))[0] == b"7"


def test_only_changed_partitions_are_written(zk, unique):
    g, t = unique("g"), unique("t")
    store = ZooKeeperOffsetStore(zk, g)
    store.commit({(t, p): 10 for p in range(3)}).raise_for_errors()
    before = {p: zk.exists(partition_offset_path(g, t, p)) for p in range(3)}
    r = store.commit({(t, 0): 10, (t, 1): 11, (t, 2): 10})
    assert r.ok and r.unchanged == {(t, 0), (t, 2)} and r.committed[(t, 1)] == 11
    after = {p: zk.exists(partition_offset_path(g, t, p)) for p in range(3)}
    for p in (0, 2):
        assert (after[p].mzxid, after[p].version) == (before[p].mzxid, before[p].version)
    assert after[1].version == before[1].version + 1
    # a store seeded by fetch skips unchanged values too (Scala seeds checkpointedZkOffsets at rebalance)
    other = ZooKeeperOffsetStore(zk, g)
    other.fetch([(t, 0)])
    assert other.commit({(t, 0): 10}).unchanged == {(t, 0)}
    assert zk.exists(partition_offset_path(g, t, 0)).version == after[0].version
    # force=True rewrites
    assert other.commit({(t, 0): 10}, force=True).unchanged == set()
    assert zk.exists(partition_offset_path(g, t, 0)).version == after[0].version + 1


def test_thousand_partitions_batched(zk, unique):
    g, t1, t2 = unique("g"), unique("t"), unique("t")
    offsets = {(t, p): p * 3 + 1 for t in (t1, t2) for p in range(500)}
    store = ZooKeeperOffsetStore(zk, g)
    t0 = time.perf_counter()
    r = store.commit(offsets)
    cold = (time.perf_counter() - t0) * 1000
    assert r.ok and len(r.committed) == 1000
    assert store.stats["transactions"] <= 3
    warm = []
    for _ in range(3):  # a freshly started ZooKeeper JVM is slow on the first rounds: report the best
        offsets = {tp: off + 1 for tp, off in offsets.items()}
        t0 = time.perf_counter()
        r = store.commit(offsets)
        warm.append((time.perf_counter() - t0) * 1000)
        assert r.ok and not r.unchanged
    warm = min(warm)
    assert store.stats["transactions"] <= 4 * 3 and store.stats["writes"] == 4000
    t0 = time.perf_counter()
    assert ZooKeeperOffsetStore(zk, g).fetch(list(offsets)) == offsets
    fetch_ms = (time.perf_counter() - t0) * 1000
    print("\n1000-partition commit: cold %.1f ms, warm %.1f ms; fetch %.1f ms; %d transactions"
          % (cold, warm, fetch_ms, store.stats["transactions"]))
    assert zk.get(partition_offset_path(g, t2, 499))[0] == str(offsets[(t2, 499)]).encode()


@pytest.fixture
def other_session(services):
    c = KazooClient(services.zookeeper_connect)
    c.start()
    yield c
    c.stop()
    c.close()


def test_fenced_commit(zk, other_session, unique):
    g, t = unique("g"), unique("t")
    owners = {(t, p): partition_owner_path(g, t, p) for p in range(4)}
    for p in (0, 2, 3):
        zk.create(owners[(t, p)], b"me-0", ephemeral=True, makepath=True)
    other_session.create(owners[(t, 1)], b"other-0", ephemeral=True, makepath=True)  # a successor's node
    store = ZooKeeperOffsetStore(zk, g)
    fence = OwnershipFence(zk.client_id[0], owners)
    assert set(fence.verify(zk)) == {(t, 1)}
    zk.delete(owners[(t, 2)])  # lost after verification: caught by check(owner, 0) inside the multi-op
    r = store.commit({(t, p): 100 + p for p in range(4)} | {(t, 9): 1}, fence=fence)
    assert r.committed == {(t, 0): 100, (t, 3): 103}
    assert set(r.failed) == {(t, 1), (t, 2), (t, 9)}
    assert all(isinstance(e, OwnershipLostError) for e in r.failed.values())
    assert "session" in str(r.failed[(t, 1)]) and "vanished" in str(r.failed[(t, 2)])
    for p in (1, 2, 9):
        assert zk.exists(partition_offset_path(g, t, p)) is None
    with pytest.raises(OwnershipLostError) as ei:
        r.raise_for_errors()
    assert ei.value.result is r
    # a successor's progress is not overwritten
    ZooKeeperOffsetStore(other_session, g).commit({(t, 1): 555}).raise_for_errors()
    assert not store.commit({(t, 1): 1}, fence=fence).ok
    assert zk.get(partition_offset_path(g, t, 1))[0] == b"555"
    # changed session id (kazoo re-opened a session after LOST): everything refused, nothing written
    stale = OwnershipFence(zk.client_id[0] + 1, owners)
    r = store.commit({(t, 0): 200, (t, 3): 103}, fence=stale)
    assert set(r.failed) == {(t, 0), (t, 3)} and not r.committed
    assert "session changed" in str(r.failed[(t, 0)])
    assert zk.get(partition_offset_path(g, t, 0))[0] == b"100"


def test_strict_and_tolerant_fetch_of_corrupt_node(zk, unique):
    g, t = unique("g"), unique("t")
    path = partition_offset_path(g, t, 0)
    zk.create(path, b"12x", makepath=True)
    zk.create(partition_offset_path(g, t, 1), b" 42\n")
    with pytest.raises(OffsetStoreError) as ei:
        ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)])
    assert path in str(ei.value)
    tolerant = ZooKeeperOffsetStore(zk, g, strict=False)
    assert tolerant.fetch([(t, 0), (t, 1)]) == {(t, 1): 42}
    assert tolerant.commit({(t, 0): 3}).ok and zk.get(path)[0] == b"3"  # repaired with set


def test_delete_offsets(zk, unique):
    g, t = unique("g"), unique("t")
    store = ZooKeeperOffsetStore(zk, g)
    store.commit({(t, 0): 1, (t, 1): 2}).raise_for_errors()
    r = store.delete_offsets([(t, 0), (t, 5)])
    assert r.ok and set(r.committed) == {(t, 0), (t, 5)}
    assert store.fetch([(t, 0), (t, 1)]) == {(t, 1): 2}
    assert store.commit({(t, 0): 1}).unchanged == set()  # the cache knows it is gone: re-created
    assert zk.get(partition_offset_path(g, t, 0))[0] == b"1"


def test_commit_result_errors():
    r = CommitResult()
    assert r.raise_for_errors() is r
    r.committed[("t", 0)] = 1
    r.fail(("t", 0), OffsetStoreError("boom"))
    with pytest.raises(OffsetStoreError, match="t-0"):
        r.raise_for_errors()
    with pytest.raises(ValueError):
        ZooKeeperOffsetStore(None, "g").commit({("t", 0): -1})


def test_factory(zk, services, unique):
    base = {"group.id": unique("g"), "zookeeper.connect": services.zookeeper_connect}
    s = make_offset_store(ConsumerConfig.from_properties(base), zk)
    assert s.name == "zookeeper" and not s.strict
    s = make_offset_store(ConsumerConfig.from_properties(base, {"offsets.storage": "kafka",
                                                               "dual.commit.enabled": "false"}),
                          zk, services.bootstrap_servers)
    assert s.name == "kafka"
    s.close()
    s = make_offset_store(ConsumerConfig.from_properties(base, {"offsets.storage": "kafka"}), zk,
                          services.bootstrap_servers)
    assert s.name == "dual" and s.zk_store.group == s.kafka_store.group == base["group.id"]
    s.close()


def test_chrooted_client_writes_sets_and_fenced_checks_under_its_chroot(zk, services, unique):
    # set_data and check are appended to kazoo's transaction as whole requests (no per-op normalization): the
    # chroot must still be applied to both, and a fence must still refuse.
    chroot = "/" + unique("chroot")
    zk.ensure_path(chroot)
    g, t = unique("g"), unique("t")
    client = KazooClient(hosts=services.zookeeper_connect + chroot)
    client.start(timeout=15)
    try:
        store = ZooKeeperOffsetStore(client, g)
        store.commit({(t, 0): 1, (t, 1): 1}).raise_for_errors()  # creates
        store.commit({(t, 0): 2, (t, 1): 3}).raise_for_errors()  # sets
        assert zk.get(chroot + partition_offset_path(g, t, 0))[0] == b"2"
        assert zk.get(chroot + partition_offset_path(g, t, 1))[0] == b"3"
        assert not zk.exists(partition_offset_path(g, t, 0))
        owner = partition_owner_path(g, t, 0)
        client.create(owner, b"me-0", ephemeral=True, makepath=True)
        fence = OwnershipFence(client.client_id[0], {(t, 0): owner})
        assert store.commit({(t, 0): 4}, fence=fence).ok
        assert zk.get(chroot + partition_offset_path(g, t, 0))[0] == b"4"
        zk.set(chroot + owner, b"someone-else-0")  # version 1: the fence's check(version 0) fails
        r = store.commit({(t, 0): 5}, fence=fence)
        assert not r.ok and isinstance(r.failed[(t, 0)], OwnershipLostError)
        assert zk.get(chroot + partition_offset_path(g, t, 0))[0] == b"4"
    finally:
        client.stop()
        client.close()


def test_sent_is_called_once_after_the_requests_leave_and_also_when_nothing_is_written(zk, unique):
    """``commit(sent=...)``: the dual store starts Kafka's OffsetCommit there, once ZooKeeper's multi-ops are on
    their way and before their answers; with nothing to write it is still called, once."""
    g, t = unique("g"), unique("t")
    store = ZooKeeperOffsetStore(zk, g)
    calls = []
    r = store.commit({(t, p): 1 for p in range(3)}, sent=lambda: calls.append(dict(store.stats)))
    assert r.ok and len(calls) == 1
    assert calls[0]["transactions"] >= 1 and calls[0]["writes"] == 0  # submitted, not yet answered
    r = store.commit({(t, p): 2 for p in range(3)}, sent=lambda: calls.append(dict(store.stats)))
    assert r.ok and len(calls) == 2 and calls[1]["writes"] == 3  # (the first commit's 3 writes; not this one's)
    r = store.commit({(t, p): 2 for p in range(3)}, sent=lambda: calls.append("unchanged"))
    assert r.unchanged == {(t, p) for p in range(3)} and calls[2:] == ["unchanged"]
    zk.delete(partition_offset_path(g, t, 0))  # a deleted node: the set fails, a create is sent again
    r = store.commit({(t, 0): 3}, sent=lambda: calls.append("retried"))
    assert r.ok and calls[3:] == ["retried"] and zk.get(partition_offset_path(g, t, 0))[0] == b"3"
