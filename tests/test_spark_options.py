"""Options at parity with Spark's Kafka source: includeHeaders, minPartitions / maxRecordsPerPartition,
failOnDataLoss - on the shared local[2] session against the real ZooKeeper + Apache Kafka."""
import pytest

from spark_support import delete_records, source_options as _opts
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
    from zkconsumer.spark import plan_batch
    from zkconsumer.spark.kafka_io import DataLossError
    topic, group = services.create_topic(unique("ol"), 1), unique("g")
    services.produce(topic, 30)
    delete_records(services, topic, 0, 10)                          # offsets 0..9 are gone (as after retention)
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


def test_spark_option_parity(services, tmp_path, caplog):
    """What Spark's Kafka source accepts, accepted: assign, groupIdPrefix, fetchOffset.*, kafka.group.id (with
    Spark's warning), unknown kafka.* names (passed through where kafka-python has them, else a warning), Java key
    and trust stores (JKS, PKCS12) as Spark users give them, and Spark's rules for the ending options."""
    import logging
    from zkconsumer.errors import ConfigError
    from zkconsumer.spark.kafka_options import GROUP_ID_WARNING
    from zkconsumer.spark.options import parse_options
    from tls_support import make_java_stores, make_pki
    base = {"zookeeper.connect": services.zookeeper_connect, "group.id": "g"}
    o = parse_options(dict(base, assign='{"b": [2, 0], "a": [1]}'))
    assert o.assign == (("a", 1), ("b", 0), ("b", 2)) and o.topics == ("a", "b") and o.pattern is None
    for value, m in [("t", "JSON like"), ('{"t": 1}', "list of partitions"), ('{"t": [-1]}', "bad partition"),
                     ('{"bad/name": [0]}', "topic"), ("{}", "JSON like")]:
        with pytest.raises(ConfigError, match="assign.*" + m):
            parse_options(dict(base, assign=value))
    with pytest.raises(ConfigError, match="assign/subscribe.*exactly one"):
        parse_options(dict(base, assign='{"t": [0]}', subscribe="t"))
    # fetchOffset.* (Spark's defaults: 3 attempts, 10 ms apart), groupIdPrefix names the clients
    o = parse_options(dict(base, subscribe="t"))
    assert (o.fetch_offset_retries, o.fetch_offset_retry_interval_ms, o.client_id) == (3, 10, "zkconsumer-spark")
    o = parse_options(dict(base, subscribe="t", **{"fetchOffset.numRetries": "5", "fetchOffset.retryIntervalMs": "0",
                                                   "groupIdPrefix": "etl"}))
    assert (o.fetch_offset_retries, o.fetch_offset_retry_interval_ms, o.client_id) == (5, 0, "etl")
    for key, value in (("fetchOffset.numRetries", "0"), ("fetchOffset.retryIntervalMs", "-1"),
                       ("groupIdPrefix", " ")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            parse_options(dict(base, subscribe="t", **{key: value}))
    # kafka.group.id: accepted with Spark's warning (groupIdPrefix then ignored, as Spark says); unknown kafka.*
    # names are ignored with a warning, known ones passed through
    with caplog.at_level(logging.WARNING, logger="zkconsumer.spark"):
        o = parse_options(dict(base, subscribe="t", groupIdPrefix="etl", **{
            "kafka.group.id": "spark-side", "kafka.fetch.bogus.ms": "1", "kafka.max.poll.records": "7"}))
    assert dict(o.kafka_params) == {"group_id": "spark-side", "max_poll_records": 7} and o.client_id == \
        "zkconsumer-spark"
    text = caplog.text
    assert GROUP_ID_WARNING in text and "groupIdPrefix will be ignored" in text
    assert "kafka.fetch.bogus.ms is not a setting of kafka-python" in text
    # endingTimestamp: Spark checks no order between the global timestamps (a later start reads nothing)
    o = parse_options(dict(base, subscribe="t", startingTimestamp="9", endingTimestamp="5"))
    assert (o.starting_timestamp, o.ending_timestamp, o.ending_given) == (9, 5, ())
    # the Java stores, as a Spark user writes them (kafka.ssl.*); a wrong password names the option, never the value
    stores = make_java_stores(make_pki(tmp_path), tmp_path)
    tls = {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": stores.truststore_jks,
           "kafka.ssl.truststore.password": stores.store_password}
    for keystore in ({"kafka.ssl.keystore.location": stores.keystore_jks, "kafka.ssl.keystore.password":
                      stores.store_password, "kafka.ssl.key.password": stores.key_password},
                     {"kafka.ssl.keystore.location": stores.keystore_p12, "kafka.ssl.keystore.type": "PKCS12",
                      "kafka.ssl.keystore.password": stores.store_password}):
        sec = parse_options(dict(base, subscribe="t", **tls, **keystore)).kafka_security
        assert sec.truststore == stores.truststore_jks and sec.keystore == keystore["kafka.ssl.keystore.location"]
        assert stores.store_password not in repr(sec) and "ssl_context" in sec.client_kwargs()
    for key, wrong in (("kafka.ssl.truststore.password", "nope"), ("kafka.ssl.key.password", "nope")):
        opts = dict(base, subscribe="t", **tls, **{"kafka.ssl.keystore.location": stores.keystore_jks,
                                                   "kafka.ssl.keystore.password": stores.store_password,
                                                   "kafka.ssl.key.password": stores.key_password})
        opts[key] = wrong
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as e:
            parse_options(opts)
        assert "nope" not in str(e.value) and stores.store_password not in str(e.value)
