"""The example pipeline (zkconsumer.spark.job) and the throughput helper, on the shared local[2] session."""
import glob

import pytest

from zkconsumer.layout import paths

pytestmark = pytest.mark.spark


def test_job_available_now_writes_parquet_and_commits_exactly(spark, services, zk, unique, tmp_path):
    from zkconsumer.spark import job
    topic, group = services.create_topic(unique("job"), 3), unique("g")
    services.produce(topic, 50)
    opts = {"zookeeper.connect": services.zookeeper_connect, "group.id": group, "subscribe": topic,
            "startingOffsets": "earliest", "maxOffsetsPerTrigger": "20"}
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    job.run(spark, opts, out, ckpt, available_now=True, timeout=120)
    assert len(glob.glob(out + "/batch_id=*")) >= 3
    df = spark.read.parquet(out)
    assert set(df.columns) >= {"key", "minute", "count", "batch_id"}
    assert df.groupBy().sum("count").collect()[0][0] == 50
    assert {r.key for r in df.select("key").distinct().collect()} == {"k%d" % i for i in range(10)}
    base = paths.topic_offsets_path(group, topic)
    assert sum(int(zk.get(base + "/" + p)[0]) for p in zk.get_children(base)) == 50   # committed after output
    # nothing new: a second run writes nothing and commits nothing backwards
    job.run(spark, opts, out, ckpt, available_now=True, timeout=120)
    assert sum(int(zk.get(base + "/" + p)[0]) for p in zk.get_children(base)) == 50


def test_throughput_helper(spark, services, unique):
    from zkconsumer.spark.throughput import measure
    topic = services.create_topic(unique("tp"), 2)
    services.produce(topic, 20000)
    res = measure(spark, {"zookeeper.connect": services.zookeeper_connect, "group.id": unique("g"),
                          "subscribe": topic, "startingOffsets": "earliest"}, repeat=1)
    print(res)
    assert res["rows"] == res["raw_rows"] == 20000
