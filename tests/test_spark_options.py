"""Options at parity with Spark's Kafka source: includeHeaders, minPartitions / maxRecordsPerPartition,
failOnDataLoss - on the shared local[2] session against the real ZooKeeper + Apache Kafka."""
import pytest

from zkconsumer.layout import paths
from zkconsumer.spark.offsets import split_ranges

pytestmark = pytest.mark.spark


def _covers(tasks, ranges):
    """Every offset of every range in exactly one task, pieces contiguous and in order."""
    got = {}
    for tp, s, e in tasks:
        assert e > s
        got.setdefault(tp, []).append((s, e))
    for tp, (s, e) in ranges.items():
        pieces = got.pop(tp, [])
        if e <= s:
            assert not pieces
            continue
        assert pieces[0][0] == s and pieces[-1][1] == e
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    assert not got


def test_split_ranges():
    a, b, c = ("t", 0), ("t", 1), ("u", 0)
    ranges = {a: (100, 200), b: (0, 10), c: (5, 5)}
    assert split_ranges(ranges) == [(a, 100, 200), (b, 0, 10)]                 # one task per partition
    t = split_ranges(ranges, max_records=30)
    _covers(t, ranges)
    assert [x[0] for x in t].count(a) == 4 and [x[0] for x in t].count(b) == 1
    assert all(e - s <= 30 for _, s, e in t)
    t = split_ranges(ranges, min_partitions=11)                                # in proportion to size: 10 + 1
    _covers(t, ranges)
    assert len(t) == 11 and [x[0] for x in t].count(b) == 1
    assert max(e - s for tp, s, e in t if tp == a) - min(e - s for tp, s, e in t if tp == a) <= 1
    t = split_ranges(ranges, min_partitions=6, max_records=30)                 # both: the larger count wins
    _covers(t, ranges)
    assert len(t) >= 6 and all(e - s <= 30 for _, s, e in t)
    t = split_ranges({a: (0, 3)}, min_partitions=10)                           # never more tasks than offsets
    assert t == [(a, 0, 1), (a, 1, 2), (a, 2, 3)]
    assert split_ranges({c: (5, 5)}, min_partitions=4) == []


def _opts(services, group, topic, **extra):
    o = {"zookeeper.connect": services.zookeeper_connect, "group.id": group, "subscribe": topic,
         "kafka.bootstrap.servers": services.bootstrap_servers, "startingOffsets": "earliest"}
    o.update({k: str(v) for k, v in extra.items()})
    return o


def _produce_with_headers(services, topic, n):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=services.bootstrap_servers)
    sent = {}
    try:
        for i in range(n):
            part = i % 2
            headers = [("trace", b"t%d" % i), ("n", str(i).encode())] if i % 3 else []
            md = p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=part, headers=headers).get(30)
            sent[(md.partition, md.offset)] = (b"v%d" % i, headers)
    finally:
        p.close()
    return sent


def test_headers_and_range_splitting(spark, services, unique, tmp_path):
    topic, group = services.create_topic(unique("oh"), 2), unique("g")
    sent = _produce_with_headers(services, topic, 40)
    opts = _opts(services, group, topic, includeHeaders="true", minPartitions=5, maxRecordsPerPartition=7)
    df = spark.read.format("zkconsumer").options(**opts).load()
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    assert df.rdd.getNumPartitions() == len(split_ranges({(topic, 0): (0, 20), (topic, 1): (0, 20)}, 5, 7)) == 6
    rows = df.select("partition", "offset", "value", "headers").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(sent)               # all, once each
    for r in rows:
        value, headers = sent[(r.partition, r.offset)]
        assert r.value == value
        if headers:
            assert [(h.key, bytes(h.value)) for h in r.headers] == headers
        else:  # Spark's Kafka source gives null, not an empty array, for a record without headers
            assert r.headers is None
    plain = spark.read.format("zkconsumer").options(**_opts(services, group, topic)).load()
    assert "headers" not in plain.columns and plain.rdd.getNumPartitions() == 2
    # streaming: the same split per micro-batch, every record once
    parts, seen = [], []

    def each(batch_df, batch_id):
        parts.append(batch_df.rdd.getNumPartitions())
        seen.extend((r.partition, r.offset, r.headers is None) for r in batch_df.collect())

    q = (spark.readStream.format("zkconsumer").options(**_opts(services, unique("g"), topic, includeHeaders="true",
                                                                 maxRecordsPerPartition=4)).load()
         .writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None, q.exception()
    assert sorted((p, o) for p, o, _ in seen) == sorted(sent)
    assert {(p, o): h for p, o, h in seen} == {k: not v[1] for k, v in sent.items()}
    assert max(parts) == 10                                                           # 2 x ceil(20 / 4)


def test_fail_on_data_loss(spark, services, zk, unique):
    from kafka import KafkaAdminClient, TopicPartition
    from zkconsumer.spark import plan_batch
    from zkconsumer.spark.kafka_io import DataLossError
    topic, group = services.create_topic(unique("ol"), 1), unique("g")
    services.produce(topic, 30)
    admin = KafkaAdminClient(bootstrap_servers=services.bootstrap_servers)
    try:
        admin.delete_records({TopicPartition(topic, 0): 10})        # offsets 0..9 are gone (as after retention)
    finally:
        admin.close()
    path = "%s/0" % paths.topic_offsets_path(group, topic)
    zk.ensure_path(path)
    zk.set(path, b"5")                                              # the group committed 5: 5..9 were lost
    opts = _opts(services, group, topic)
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        spark.read.format("zkconsumer").options(**opts).load().collect()
    rows = spark.read.format("zkconsumer").options(**dict(opts, failOnDataLoss="false")).load().collect()
    assert sorted(r.offset for r in rows) == list(range(10, 30))
    # a committed offset past the log end (topic recreated, log truncated)
    zk.set(path, b"100")
    with pytest.raises(DataLossError, match="past the log end"):
        plan_batch(opts)
    assert plan_batch(dict(opts, failOnDataLoss="false")).total == 0
    with pytest.raises(Exception, match="failOnDataLoss"):
        spark.read.format("zkconsumer").options(**opts).load().collect()
