"""The example pipeline (zkconsumer.spark.job) and the throughput helper, on the shared local[2] session."""
import glob

import pytest

pytestmark = pytest.mark.spark


def test_job_available_now_writes_parquet_and_commits_exactly(spark, services, zk, unique, tmp_path):
    """The job with --output-format records: exactly the records produced, each once; the group's offsets committed to
    the log ends (commit-after-output), then the member released (finish_query); the counts of the default output
    format are those records counted per key and minute."""
    from zkconsumer.spark import job
    from spark_support import member_ids, owners, produced_set, zk_offsets
    topic, group = services.create_topic(unique("job"), 3), unique("g")
    services.produce(topic, 50)
    opts = {"zookeeper.connect": services.zookeeper_connect, "group.id": group, "subscribe": topic,
            "startingOffsets": "earliest", "maxOffsetsPerTrigger": "20"}
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    job.run(spark, opts, out, ckpt, available_now=True, timeout=120, output_format="records")
    assert len(glob.glob(out + "/batch_id=*")) >= 3
    df = spark.read.parquet(out)
    assert set(df.columns) >= {"topic", "partition", "offset", "key", "value", "timestamp", "batch_id"}
    rows = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert rows == sorted(produced_set(services, topic, 3))
    ends = {p: len([o for q, o in rows if q == p]) for p in range(3)}
    assert zk_offsets(zk, group, topic) == ends                                   # committed after output
    assert not owners(zk, group, topic) and not member_ids(zk, group)           # released after the last commit
    counts = job.counts_per_key_per_minute(df).groupBy("key").sum("count").collect()
    assert {r.key: r["sum(count)"] for r in counts} == {"k%d" % i: 5 for i in range(10)}
    # nothing new: a second run writes nothing and commits nothing backwards
    job.run(spark, opts, out, ckpt, available_now=True, timeout=120, output_format="records")
    assert zk_offsets(zk, group, topic) == ends


def test_throughput_helper(spark, services, unique):
    from zkconsumer.spark.throughput import measure
    topic = services.create_topic(unique("tp"), 2)
    services.produce(topic, 20000)
    res = measure(spark, {"zookeeper.connect": services.zookeeper_connect, "group.id": unique("g"),
                          "subscribe": topic, "startingOffsets": "earliest"}, repeat=1)
    print(res)
    assert res["rows"] == res["raw_rows"] == 20000
