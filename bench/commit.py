"""commit 1,000 partition offsets: zkconsumer's ZooKeeper store (batched multi-ops, only changed values) and the
dual store (Kafka offset manager, then ZooKeeper) against sequential kazoo ``set`` calls of the same nodes."""
import time

from .common import Result, median, unique

PARTITIONS = 1000


def run(cluster, quick=False, log=print):
    from zkconsumer import zk as zkmod
    from zkconsumer.config import ConsumerConfig
    from zkconsumer.layout import paths
    from zkconsumer.offsets import ZooKeeperOffsetStore, make_offset_store
    rounds = 5 if quick else 15
    topic = cluster.create_topic(unique("bench-commit"), PARTITIONS)
    group = unique("bench-commit")
    zk = zkmod.connect(cluster.zookeeper_connect)
    try:
        store = ZooKeeperOffsetStore(zk, group)
        tps = [(topic, p) for p in range(PARTITIONS)]
        store.commit({tp: 1 for tp in tps})  # create the nodes once: the rounds below all rewrite values
        node_paths = [paths.partition_offset_path(group, t, p) for t, p in tps]
        base, ours, dual = [], [], []
        cfg = ConsumerConfig.from_properties({"group.id": group, "zookeeper.connect": cluster.zookeeper_connect,
                                              "offsets.storage": "kafka", "dual.commit.enabled": "true"})
        dual_store = make_offset_store(cfg, zk, bootstrap_servers=cluster.bootstrap_servers)
        dual_store.commit({tp: 1 for tp in tps})  # warm: coordinator found, connection open
        for r in range(rounds):
            value = str(1000 + r).encode()
            t0 = time.perf_counter()
            for path in node_paths:
                zk.set(path, value)
            base.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            store.commit({tp: 2000 + r for tp in tps}).raise_for_errors()
            ours.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            dual_store.commit({tp: 3000 + r for tp in tps}).raise_for_errors()
            dual.append((time.perf_counter() - t0) * 1000)
        check = store.fetch(tps[:3])
        assert all(v == 3000 + rounds - 1 for v in check.values()), check  # the dual store wrote ZooKeeper last
        dual_store.close()
    finally:
        zkmod.close(zk)
    b, o, d = median(base), median(ours), median(dual)
    log("commit: sequential set %.1f ms, zookeeper store %.1f ms, dual %.1f ms (medians of %d)" % (b, o, d, rounds))
    return [
        Result("commit 1,000 partition offsets, ZooKeeper store", round(o, 1), "ms", round(b, 1), round(o / b, 3),
               "<= 100 ms", o <= 100, "baseline: sequential kazoo set of the same 1,000 nodes"),
        Result("commit 1,000 partition offsets, dual (Kafka then ZooKeeper)", round(d, 1), "ms", round(o, 1),
               round(d / o, 2), "<= 2x ZooKeeper-only", d <= 2 * o, "baseline: the ZooKeeper store above"),
    ]
