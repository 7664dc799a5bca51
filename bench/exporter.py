"""The group lag exporter's cost for 1,000 groups (``zkconsumer exporter``, :mod:`zkconsumer.tools.lag_exporter`).

1,000 groups (200 in ``--quick``) of one 12-partition topic, each with a committed ZooKeeper offset per partition
and no live member (so, without a phase record, the exporter reads the greater of ZooKeeper and Kafka: every group
is also asked of Kafka). Measured in this process: the cache's first fill (every node read once, a watch set on
each), one Kafka refresh (ListOffsets of the 12 partitions, one batched OffsetFetch of every group), a scrape (the
page rendered from the cache: CPU per scrape, and the ZooKeeper reads it made, which must be none), and 100
offsets changed in ZooKeeper (reads until the page shows them). The baseline of the scrape is what an exporter
without the cache would do per scrape: read every group's offsets from ZooKeeper (children lists and values,
pipelined with kazoo's async calls).
"""
import time

from . import goals
from .common import median, unique

TIME_GOES = ("ZooKeeper is read once per node (a watch on each) and again only when the node "
             "changes; a scrape renders the cache (~12 series per group) with prometheus_client's encoder, which is "
             "most of its CPU; Kafka is asked every --interval: one ListOffsets pass and one batched OffsetFetch "
             "(v8) for every group that uses Kafka.")


def _full_read(zk, groups, topic, partitions):
    """Every group's offsets read from ZooKeeper now (what a cache-less exporter does per scrape)."""
    t0 = time.perf_counter()
    lists = [zk.get_children_async("/consumers/%s/offsets/%s" % (g, topic)) for g in groups]
    for r in lists:
        r.get()
    gets = [zk.get_async("/consumers/%s/offsets/%s/%d" % (g, topic, p)) for g in groups for p in range(partitions)]
    for r in gets:
        r.get()
    return time.perf_counter() - t0


def run(cluster, quick=False, log=print):
    from prometheus_client import CollectorRegistry, generate_latest
    from zkconsumer.zookeeper import client as zkmod
    from zkconsumer.tools.lag_exporter import LagCache, LagCollector
    n_groups, partitions = (200 if quick else 1000), 12
    prefix = unique("lagx")
    topic = cluster.create_topic(prefix + "-t", partitions)
    zk = zkmod.connect(cluster.zookeeper_connect)
    cache = None
    try:
        groups = ["%s-%04d" % (prefix, i) for i in range(n_groups)]
        pending = []
        for g in groups:
            zk.ensure_path("/consumers/%s/offsets/%s" % (g, topic))
            pending += [zk.create_async("/consumers/%s/offsets/%s/%d" % (g, topic, p), b"0") for p in range(partitions)]
        for r in pending:
            r.get()
        log("exporter: %d groups x %d partitions written" % (n_groups, partitions))
        t0 = time.perf_counter()
        cache = LagCache(zk, lambda g: g.startswith(prefix + "-"), cluster.bootstrap_servers).start(refresh_loop=False)
        if not cache.wait_idle(600):
            raise RuntimeError("the cache did not fill within 600 s")
        fill, fill_reads = time.perf_counter() - t0, cache.zk_reads
        t0 = time.perf_counter()
        cache.refresh()
        refresh = time.perf_counter() - t0
        if cache.last_refresh_error:
            raise RuntimeError("the Kafka refresh failed: %s" % cache.last_refresh_error)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(LagCollector(cache, "bench"))
        reads, cpu, wall, sizes = cache.zk_reads, [], [], []
        for _ in range(5 if quick else 10):
            c0, w0 = time.process_time(), time.perf_counter()
            sizes.append(len(generate_latest(registry)))
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        scrape_reads = cache.zk_reads - reads
        baseline = median([_full_read(zk, groups, topic, partitions) for _ in range(3)])
        reads = cache.zk_reads
        t0 = time.perf_counter()
        for g in groups[:100]:
            zk.set("/consumers/%s/offsets/%s/0" % (g, topic), b"7")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with cache.lock:
                if all(cache.groups[g].zk_offsets.get((topic, 0)) == 7 for g in groups[:100]):
                    break
            time.sleep(0.01)
        change, change_reads = time.perf_counter() - t0, cache.zk_reads - reads
        scrape, scrape_cpu = median(wall) * 1000, median(cpu) * 1000
        log("exporter: fill %.1f s (%d reads), refresh %.2f s, scrape %.1f ms (%d bytes, %d ZooKeeper reads), "
            "full read %.0f ms, 100 changes %.2f s (%d reads)" % (fill, fill_reads, refresh, scrape, sizes[0],
                                                                 scrape_reads, baseline * 1000, change, change_reads))
        what = "%s groups x %d partitions" % ("{:,}".format(n_groups), partitions)
        return [
            goals.row("exporter.reported", "exporter: time per scrape, %s (the page rendered from the cache)" % what,
                      round(scrape, 1), "ms", round(baseline * 1000, 1), round(scrape / (baseline * 1000), 3),
                      "baseline: one full read of the same offsets from ZooKeeper (children lists and values, "
                   "pipelined), what an exporter without the cache does per scrape before rendering the same page; "
                      "%.1f ms of CPU per scrape, %d bytes per page (%d lag and offset series each), median of %d "
                      "scrapes" % (scrape_cpu, sizes[0], n_groups * partitions, len(cpu))),
            goals.row("exporter.scrape-reads", "exporter: ZooKeeper reads per scrape, %s" % what, scrape_reads,
                      "reads", None, None, "%d scrapes" % len(cpu)),
            goals.row("exporter.reported", "exporter: first fill of the cache, %s" % what, round(fill, 2), "s", None,
                      None, "%d ZooKeeper reads (each sets a watch)" % fill_reads),
            goals.row("exporter.refresh", "exporter: one Kafka refresh, %s" % what, round(refresh, 2), "s", None, None,
                      "ListOffsets of the partitions, one batched OffsetFetch for every group"),
            goals.row("exporter.reported", "exporter: 100 committed offsets changed in ZooKeeper, until the cache has "
                      "them", round(change, 2), "s", None, None, "%d ZooKeeper reads (the changed nodes, each "
                      "re-watched)" % change_reads),
        ]
    finally:
        if cache is not None:
            cache.close()
        try:
            for g in [c for c in zk.get_children("/consumers") if c.startswith(prefix + "-")]:
                zk.delete("/consumers/" + g, recursive=True)
        finally:
            zkmod.close(zk)
