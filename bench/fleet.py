"""zkmigrate over a fleet: ``verify --groups-matching`` of 500 groups x 12 partitions (dual phase: both stores,
log ends, split-brain and expiry checks) with --parallel 8, against the same verify run group by group
(--parallel 1, the baseline: what a script looping over groups gets)."""
import time

from . import goals
from .common import unique

GROUPS, PARTITIONS = 500, 12


def _verify(cluster, prefix, parallel):
    from click.testing import CliRunner
    from zkconsumer_migrate.cli import cli
    t0 = time.perf_counter()
    res = CliRunner().invoke(cli, ["verify", "--groups-matching", prefix + "-[0-9]+", "--phase", "dual", "--to",
                                   "kafka", "--settle", "0", "--parallel", str(parallel), "--json",
                                   "--zookeeper", cluster.zookeeper_connect,
                                   "--bootstrap-server", cluster.bootstrap_servers])
    took = time.perf_counter() - t0
    if res.exit_code != 0:
        raise RuntimeError("verify failed (exit %d): %s" % (res.exit_code, res.output[-2000:]))
    return took


def run(cluster, quick=False, log=print):
    from zkconsumer.zookeeper import client as zkmod
    from zkconsumer.offsets import ZooKeeperOffsetStore
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    groups = 100 if quick else GROUPS
    topic = cluster.create_topic(unique("bench-fleet"), PARTITIONS)
    cluster.produce_fast(topic, PARTITIONS, PARTITIONS * 20)
    prefix = unique("fleet")
    zk = zkmod.connect(cluster.zookeeper_connect)
    try:
        log("fleet: writing %d groups x %d partitions to both stores" % (groups, PARTITIONS))
        for i in range(groups):
            g = "%s-%d" % (prefix, i)
            offs = {(topic, p): 10 + (i % 5) for p in range(PARTITIONS)}
            ZooKeeperOffsetStore(zk, g).commit(offs).raise_for_errors()
            store = KafkaOffsetStore(cluster.bootstrap_servers, g)
            try:
                store.commit(offs).raise_for_errors()
            finally:
                store.close()
        log("fleet: verify, one group at a time")
        base = _verify(cluster, prefix, 1)
        log("fleet: verify, --parallel 8")
        ours = _verify(cluster, prefix, 8)
    finally:
        zkmod.close(zk)
    return [goals.row("fleet", "zkmigrate verify of %d groups x %d partitions (dual phase), --parallel 8"
                      % (groups, PARTITIONS), round(ours, 1), "s", round(base, 1), round(base / ours, 2),
                      "baseline = the same verify with --parallel 1; ratio = baseline / --parallel 8 (a speed-up)")]


TIME_GOES = ("verify reads each group's registrations, owners and offsets in ZooKeeper and its Kafka offsets, log "
             "ends and broker-side state (FindCoordinator, OffsetFetch, ListOffsets, DescribeGroups): round trips "
             "that --parallel overlaps.")
