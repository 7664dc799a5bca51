"""zkconsumer.spark: the PySpark data source against real ZooKeeper + broker, in one local[2] SparkSession."""
import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.spark

from zkconsumer import zk as zkmod  # noqa: E402
from zkconsumer.layout import paths  # noqa: E402


def _opts(services, group, topic, **extra):
    o = {"zookeeper.connect": services.zookeeper_connect, "group.id": group, "subscribe": topic,
         "kafka.bootstrap.servers": services.bootstrap_servers, "startingOffsets": "earliest"}
    o.update({k: str(v) for k, v in extra.items()})
    return o


def _set_zk_offsets(zk, group, topic, offsets):
    for p, off in offsets.items():
        path = "%s/%d" % (paths.topic_offsets_path(group, topic), p)
        zk.ensure_path(path)
        zk.set(path, str(off).encode())


def _zk_offsets(zk, group, topic, n):
    out = {}
    for p in range(n):
        path = "%s/%d" % (paths.topic_offsets_path(group, topic), p)
        if zk.exists(path):
            out[p] = int(zk.get(path)[0])
    return out


def test_batch_reads_committed_to_log_end(spark, services, zk, unique):
    topic, group = services.create_topic(unique("sb"), 2), unique("g")
    services.produce(topic, 40)
    _set_zk_offsets(zk, group, topic, {0: 3})        # partition 1: nothing committed -> earliest
    from zkconsumer.spark import plan_batch, commit_batch
    opts = _opts(services, group, topic)
    plan = plan_batch(opts)
    assert plan.total == 37
    df = (spark.read.format("zkconsumer").options(**opts).load())
    rows = df.select("partition", "offset", "value", "topic", "key").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    want = sorted([(0, o) for o in range(3, plan.end[(topic, 0)])] + [(1, o) for o in range(plan.end[(topic, 1)])])
    assert got == want
    assert all(json.loads(r.value)["key"] == r.key.decode() for r in rows)
    assert _zk_offsets(zk, group, topic, 2) == {0: 3}  # batch read commits nothing
    rep = commit_batch(opts, plan.end)
    assert _zk_offsets(zk, group, topic, 2) == {0: plan.end[(topic, 0)], 1: plan.end[(topic, 1)]}
    assert not rep["failed"]
    assert spark.read.format("zkconsumer").options(**opts).load().count() == 0
    commit_batch(opts, {(topic, 0): 1})                # never backwards
    assert _zk_offsets(zk, group, topic, 2)[0] == plan.end[(topic, 0)]


def test_bad_options_are_clear(services, unique):
    from zkconsumer.errors import ConfigError
    from zkconsumer.spark.options import parse_options
    base = {"zookeeper.connect": services.zookeeper_connect, "group.id": "g"}
    with pytest.raises(ConfigError, match="subscribe"):
        parse_options(base)
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger"):
        parse_options(dict(base, subscribe="t", maxOffsetsPerTrigger="0"))
    with pytest.raises(ConfigError, match="startingOffsets"):
        parse_options(dict(base, subscribe="t", startingOffsets="yesterday"))
    with pytest.raises(ConfigError, match="offsets.storage"):
        parse_options(dict(base, subscribe="t", **{"offsets.storage": "redis"}))
    with pytest.raises(ConfigError, match="bogus"):
        parse_options(dict(base, subscribe="t", bogus="1"))
