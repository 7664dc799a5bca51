"""DualOffsetStore: Kafka first, then ZooKeeper for what Kafka acknowledged, both at once while Kafka is healthy;
read = max (as Kafka 1.1.1 ``ZookeeperConsumerConnector.fetchOffsets`` reads with dual commit)."""
import socket

import pytest

from zkconsumer.config import ConsumerConfig
from zkconsumer.errors import OffsetStoreError, OwnershipLostError
from zkconsumer.layout import partition_offset_path, partition_owner_path
from zkconsumer.offsets import OwnershipFence, ZooKeeperOffsetStore
from zkconsumer.offsets.dual import DualOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore


def _config(group, timeout_ms=3000):
    return ConsumerConfig.from_properties(
        {"group.id": group, "offsets.channel.backoff.ms": "100", "offsets.commit.max.retries": "1",
         "offsets.channel.socket.timeout.ms": str(timeout_ms)}, require_zookeeper=False)


@pytest.fixture
def dual(zk, services, unique):
    g = unique("g")
    store = DualOffsetStore(ZooKeeperOffsetStore(zk, g), KafkaOffsetStore(services.bootstrap_servers, g, _config(g)))
    yield store
    store.close()


def test_commit_goes_to_both_and_zookeeper_only_after_kafka_ack(dual, zk, services, unique):
    t, missing = services.create_topic(unique("dt"), 2), unique("missing")
    g = dual.group
    r = dual.commit({(t, 0): 10, (t, 1): 20, (missing, 0): 5})
    assert r.committed == {(t, 0): 10, (t, 1): 20}
    assert set(r.failed) == {(missing, 0)}  # Kafka refused it (unknown topic) ...
    assert zk.exists(partition_offset_path(g, missing, 0)) is None  # ... so ZooKeeper was not written
    assert zk.get(partition_offset_path(g, t, 0))[0] == b"10"
    with KafkaOffsetStore(services.bootstrap_servers, g, _config(g)) as k:
        assert k.fetch([(t, 0), (t, 1)]) == {(t, 0): 10, (t, 1): 20}
    # unchanged ZooKeeper values are not rewritten, Kafka always gets every partition (KAFKA-1510)
    v = zk.exists(partition_offset_path(g, t, 0)).version
    r = dual.commit({(t, 0): 10, (t, 1): 21})
    assert r.ok and (t, 0) in r.unchanged and zk.exists(partition_offset_path(g, t, 0)).version == v


def test_fetch_is_max_and_missing_never_wins(dual, zk, services, unique):
    t = services.create_topic(unique("dt"), 6)
    g = dual.group
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 50, (t, 1): 5, (t, 2): 7}).raise_for_errors()
    dual.kafka_store.commit({(t, 0): 40, (t, 1): 60, (t, 3): 9}).raise_for_errors()
    zk.create(partition_offset_path(g, t, 4), b"-1")  # "no offset" in ZooKeeper, nothing in Kafka
    parts = [(t, p) for p in range(6)]
    assert dual.fetch_both(parts) == {(t, 0): (50, 40), (t, 1): (5, 60), (t, 2): (7, None), (t, 3): (None, 9),
                                      (t, 4): (None, None), (t, 5): (None, None)}
    assert dual.fetch(parts) == {(t, 0): 50, (t, 1): 60, (t, 2): 7, (t, 3): 9}


def test_kafka_unreachable_leaves_zookeeper_untouched(zk, unique):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    g, t = unique("g"), unique("t")
    zk_store = ZooKeeperOffsetStore(zk, g)
    zk_store.commit({(t, 0): 1}).raise_for_errors()
    stat = zk.exists(partition_offset_path(g, t, 0))
    dual = DualOffsetStore(zk_store, KafkaOffsetStore("127.0.0.1:%d" % port, g, _config(g, 1000)))
    r = dual.commit({(t, 0): 2, (t, 1): 3})
    assert not r.committed and set(r.failed) == {(t, 0), (t, 1)}
    assert all(isinstance(e, OffsetStoreError) and "127.0.0.1:%d" % port in str(e) for e in r.failed.values())
    assert zk.exists(partition_offset_path(g, t, 0)).mzxid == stat.mzxid
    assert zk.exists(partition_offset_path(g, t, 1)) is None
    with pytest.raises(OffsetStoreError):
        dual.fetch([(t, 0)])
    dual.close()


def test_fence_checked_before_kafka(dual, zk, services, unique):
    t = services.create_topic(unique("dt"), 2)
    g = dual.group
    owners = {(t, p): partition_owner_path(g, t, p) for p in range(2)}
    zk.create(owners[(t, 0)], b"me-0", ephemeral=True, makepath=True)
    r = dual.commit({(t, 0): 4, (t, 1): 8}, fence=OwnershipFence(zk.client_id[0], owners))
    assert r.committed == {(t, 0): 4} and isinstance(r.failed[(t, 1)], OwnershipLostError)
    assert dual.fetch_both([(t, 0), (t, 1)]) == {(t, 0): (4, 4), (t, 1): (None, None)}


def test_kafka_outage_is_bounded_zookeeper_alone_after_the_limit(zk, services, unique):
    """Dual commit with Kafka's offset manager down: ZooKeeper is not written at first (Kafka first), but once the
    outage has lasted dual.commit.kafka.outage.ms, commits go to ZooKeeper alone (a crash then replays at most that
    long, not the whole outage); when Kafka is back, both again."""
    g = unique("outage")
    t = services.create_topic(unique("ot"), 1)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    now = [100.0]
    down = KafkaOffsetStore(dead, g, _config(g, timeout_ms=500))
    store = DualOffsetStore(ZooKeeperOffsetStore(zk, g), down, kafka_outage_ms=5000, clock=lambda: now[0])
    path = partition_offset_path(g, t, 0)
    try:
        r = store.commit({(t, 0): 10})
        assert not r.ok and not zk.exists(path) and not store.zookeeper_only
        now[0] += 4.0
        assert not store.commit({(t, 0): 11}).ok and not zk.exists(path)
        now[0] += 1.5  # 5.5 s of failures: past the limit
        r = store.commit({(t, 0): 12})
        assert r.ok and r.degraded and "ZooKeeper alone" in r.degraded and store.zookeeper_only
        assert zk.get(path)[0] == b"12"
        store.kafka_store = KafkaOffsetStore(services.bootstrap_servers, g, _config(g, timeout_ms=10000))
        r = store.commit({(t, 0): 13})
        assert r.ok and r.degraded is None and not store.zookeeper_only
        assert zk.get(path)[0] == b"13" and store.kafka_store.fetch([(t, 0)]) == {(t, 0): 13}
    finally:
        down.close()
        store.close()


def test_never_zookeeper_alone_with_minus_one(zk, unique):
    g = unique("outage-never")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    now = [0.0]
    store = DualOffsetStore(ZooKeeperOffsetStore(zk, g), KafkaOffsetStore(dead, g, _config(g, timeout_ms=300)),
                            kafka_outage_ms=-1, clock=lambda: now[0])
    try:
        for _ in range(3):
            assert not store.commit({("t", 0): 5}).ok
            now[0] += 3600
        assert not zk.exists(partition_offset_path(g, "t", 0)) and not store.zookeeper_only
    finally:
        store.close()


def test_both_stores_at_once_while_kafka_is_healthy(dual, zk, services, unique):
    """After Kafka acknowledged a whole commit, the two writes overlap; a partition Kafka then refuses is failed
    (ZooKeeper may hold it: reads take the maximum) and the next commit is sequential again."""
    t, missing = services.create_topic(unique("dt"), 2), unique("missing")
    g = dual.group
    assert dual.commit({(t, 0): 1, (t, 1): 2}).ok and dual.stats == {"overlapped": 0, "sequential": 1}
    r = dual.commit({(t, 0): 3, (t, 1): 4})
    assert r.ok and r.committed == {(t, 0): 3, (t, 1): 4} and dual.stats["overlapped"] == 1
    assert dual.fetch_both([(t, 0), (t, 1)]) == {(t, 0): (3, 3), (t, 1): (4, 4)}
    r = dual.commit({(t, 0): 5, (missing, 0): 6})
    assert r.committed == {(t, 0): 5} and set(r.failed) == {(missing, 0)} and dual.stats["overlapped"] == 2
    assert zk.get(partition_offset_path(g, missing, 0))[0] == b"6"  # ZooKeeper took it: ahead, never behind
    r = dual.commit({(t, 0): 7, (missing, 0): 8})  # Kafka failed last time: Kafka first, ZooKeeper what it acked
    assert dual.stats == {"overlapped": 2, "sequential": 2} and set(r.failed) == {(missing, 0)}
    assert zk.get(partition_offset_path(g, missing, 0))[0] == b"6" and zk.get(partition_offset_path(g, t, 0))[0] == b"7"
    assert dual.commit({(t, 0): 9}).ok and dual.commit({(t, 0): 10}).ok and dual.stats["overlapped"] == 3
    assert dual.fetch([(t, 0)]) == {(t, 0): 10}


def test_overlapped_commit_sends_zookeeper_first_then_kafka(dual, zk, services, unique, monkeypatch):
    """While Kafka is healthy, ZooKeeper's multi-op (the longer path: the client builds it, the server syncs its
    log) is handed to kazoo first and Kafka's OffsetCommit is sent before ZooKeeper answers."""
    t = services.create_topic(unique("dt"), 2)
    assert dual.commit({(t, 0): 1, (t, 1): 1}).ok  # Kafka acknowledged a whole commit: overlapped from now on
    order = []
    zk_store, kafka_store = dual.zk_store, dual.kafka_store
    begin = kafka_store.begin_commit

    def traced(offsets, fence=None):
        order.append(("kafka", dict(zk_store.stats)))
        return begin(offsets, fence=fence)
    monkeypatch.setattr(kafka_store, "begin_commit", traced)
    before = dict(zk_store.stats)
    r = dual.commit({(t, 0): 2, (t, 1): 3})
    assert r.ok and dual.stats["overlapped"] == 1
    [(name, stats)] = order
    assert stats["transactions"] == before["transactions"] + 1 and stats["writes"] == before["writes"]
    assert dual.fetch_both([(t, 0), (t, 1)]) == {(t, 0): (2, 2), (t, 1): (3, 3)}
