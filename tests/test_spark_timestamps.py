"""Spark's timestamp options (startingTimestamp, startingOffsetsByTimestamp, endingTimestamp,
endingOffsetsByTimestamp, startingOffsetsByTimestampStrategy), minOffsetsPerTrigger / maxTriggerDelay and the
kafka.* passthrough - against the real ZooKeeper + Apache Kafka (batch plans without Spark where that suffices)."""
import json
import time

import pytest

from zkconsumer.errors import ConfigError
from zkconsumer.layout import paths

pytestmark = pytest.mark.spark

# records at offset i have timestamp T0 + i s; recent, or the broker's retention (7 days) would delete them
T0 = (int(time.time()) - 3600) * 1000


def _opts(services, group, topic, **extra):
    o = {"zookeeper.connect": services.zookeeper_connect, "group.id": group, "subscribe": topic,
         "kafka.bootstrap.servers": services.bootstrap_servers}
    o.update({k: str(v) for k, v in extra.items()})
    return o


@pytest.fixture(scope="module")
def stamped(services):
    """A 2-partition topic, 10 records per partition, record i stamped T0 + i s (CreateTime)."""
    from kafka import KafkaProducer
    import uuid
    topic = services.create_topic("ts-%s" % uuid.uuid4().hex[:8], 2)
    p = KafkaProducer(bootstrap_servers=services.bootstrap_servers)
    try:
        for i in range(10):
            for part in (0, 1):
                p.send(topic, value=b"v%d" % i, partition=part, timestamp_ms=T0 + i * 1000)
        p.flush(30)
    finally:
        p.close()
    return topic


def _commit(zk, group, topic, part, off):
    path = "%s/%d" % (paths.topic_offsets_path(group, topic), part)
    zk.ensure_path(path)
    zk.set(path, str(off).encode())


def test_timestamp_options_batch(spark, services, zk, unique, stamped):
    from zkconsumer.spark import plan_batch
    from zkconsumer.spark.cluster import NoOffsetForTimestampError
    topic, group = stamped, unique("g")
    t0, t1 = (topic, 0), (topic, 1)
    # startingTimestamp: first offset with a timestamp >= it, for partitions without a committed offset
    plan = plan_batch(_opts(services, group, topic, startingTimestamp=T0 + 4500))
    assert plan.start == {t0: 5, t1: 5} and plan.end == {t0: 10, t1: 10}
    _commit(zk, group, topic, 0, 8)
    plan = plan_batch(_opts(services, group, topic, startingTimestamp=T0 + 4500))
    assert plan.start == {t0: 8, t1: 5}                       # the committed offset wins, as for startingOffsets
    # Spark's precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    by_ts = json.dumps({topic: {"0": T0 + 2000, "1": T0 + 7000}})
    plan = plan_batch(_opts(services, group, topic, startingTimestamp=T0 + 1000, startingOffsetsByTimestamp=by_ts,
                            startingOffsets="latest"))
    assert plan.start == {t0: 8, t1: 1}
    plan = plan_batch(_opts(services, group, topic, startingOffsetsByTimestamp=by_ts, startingOffsets="latest"))
    assert plan.start == {t0: 2, t1: 7}                        # per-partition entries override committed offsets
    # ends by time; no record that new -> the log end
    plan = plan_batch(_opts(services, group, topic, startingOffsetsByTimestamp=by_ts, endingTimestamp=T0 + 8000,
                            endingOffsets="latest"))
    assert plan.end == {t0: 8, t1: 8}
    end_ts = json.dumps({topic: {"0": T0 + 3000, "1": T0 + 99000}})
    plan = plan_batch(_opts(services, group, topic, startingOffsetsByTimestamp=by_ts, endingOffsetsByTimestamp=end_ts))
    assert plan.end == {t0: 3, t1: 10} and plan.total == 1 + 3
    # a starting timestamp newer than every record: Spark's error, or the log end with strategy latest
    with pytest.raises(NoOffsetForTimestampError, match="No offset matched .*%s-1 and timestamp" % topic):
        plan_batch(_opts(services, group, topic, startingTimestamp=T0 + 60000))
    plan = plan_batch(_opts(services, group, topic, startingTimestamp=T0 + 60000,
                            startingOffsetsByTimestampStrategy="latest"))
    assert plan.start == {t0: 8, t1: 10}
    # by-timestamp JSON must name every partition read (Spark's rule)
    with pytest.raises(ConfigError, match=r"startingOffsetsByTimestamp.*missing: %s-1" % topic):
        plan_batch(_opts(services, group, topic, startingOffsetsByTimestamp=json.dumps({topic: {"0": T0}})))
    # and the Spark read uses the same ranges
    rows = (spark.read.format("zkconsumer")
            .options(**_opts(services, group, topic, startingOffsetsByTimestamp=by_ts, endingTimestamp=T0 + 8000))
            .load().select("partition", "offset", "timestamp").collect())
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(2, 8)] + [(1, 7)]
    assert all(int(r.timestamp.timestamp() * 1000) == T0 + r.offset * 1000 for r in rows)


def test_timestamp_and_trigger_option_errors(services):
    from zkconsumer.spark.options import parse_options
    base = {"zookeeper.connect": services.zookeeper_connect, "group.id": "g", "subscribe": "t"}
    for k, v, m in [("startingTimestamp", "yesterday", "single long value"),
                    ("endingTimestamp", "-5", "single long value"),
                    ("startingOffsetsByTimestamp", '{"t": {"0": "x"}}', "bad timestamp"),
                    # nested too deep for json's recursive scanner (found by test_bad_input_hypothesis)
                    ("endingOffsetsByTimestamp", "[" * 100_000, r"JSON like \{"),
                    ("startingOffsetsByTimestampStrategy", "earliest", "error .* or latest"),
                    ("maxTriggerDelay", "soon", "duration"),
                    ("minOffsetsPerTrigger", "0", "integer >= 1")]:
        with pytest.raises(ConfigError, match=k + ".*" + m):
            parse_options(dict(base, **{k: v}))
    with pytest.raises(ConfigError, match="the same topic-partitions"):
        parse_options(dict(base, startingOffsetsByTimestamp='{"t": {"0": 5, "1": 5}}',
                           endingOffsetsByTimestamp='{"t": {"0": 9}}'))
    with pytest.raises(ConfigError, match="ending timestamp"):
        parse_options(dict(base, startingOffsetsByTimestamp='{"t": {"0": 9}}', endingOffsetsByTimestamp='{"t": {"0": 5}}'))
    with pytest.raises(ConfigError, match="higher than maxOffsetsPerTrigger"):
        parse_options(dict(base, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="5"))
    o = parse_options(dict(base, maxTriggerDelay="2s", minOffsetsPerTrigger="3", startingTimestamp="7",
                           startingOffsets="earliest"))
    assert (o.max_trigger_delay_ms, o.min_offsets_per_trigger, o.starting_timestamp, o.starting) == (2000, 3, 7, None)
    assert parse_options(base).max_trigger_delay_ms == 15 * 60 * 1000


def test_kafka_passthrough_options(services):
    from zkconsumer.spark.options import parse_options
    base = {"zookeeper.connect": services.zookeeper_connect, "group.id": "g", "subscribe": "t"}
    o = parse_options(dict(base, **{"kafka.security.protocol": "sasl_ssl", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                                    "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.'
                                    'ScramLoginModule required username="etl" password="s3cret";',
                                    "kafka.ssl.endpoint.identification.algorithm": "",
                                    "kafka.request.timeout.ms": "30000", "kafka.ssl_cafile": "/ca.pem"}))
    # the security keys are the source's security settings (every connection, the offset store too: see
    # test_kafka_security.py), the rest passes through to the source's kafka-python clients after them
    sec = o.kafka_security
    assert (sec.protocol, sec.mechanism, sec.username, sec.password, sec.check_hostname) == \
        ("SASL_SSL", "SCRAM-SHA-512", "etl", "s3cret", False)
    assert dict(o.kafka_params) == {"request_timeout_ms": 30000, "ssl_cafile": "/ca.pem"}
    assert "s3cret" not in repr(o)
    # refused as by Spark's Kafka source
    for key, m in [("kafka.auto.offset.reset", "startingOffsets"),
                   ("kafka.key.deserializer", "bytes"), ("kafka.value.deserializer", "bytes"),
                   ("kafka.enable.auto.commit", "commits"), ("kafka.interceptor.classes", "not safe"),
                   ("kafka.max.poll.records", "type")]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.") + ".*" + m):
            parse_options(dict(base, **{key: "x"}))
    with pytest.raises(ConfigError) as e:
        parse_options(dict(base, **{"kafka.ssl.key.password": "1", "kafka.sasl.jaas.config": "Krb5LoginModule x"}))
    assert "Krb5" not in str(e.value)                        # a secret is never echoed


def test_kafka_passthrough_reaches_the_clients(spark, services, unique):
    """A passthrough setting is applied by the executors' and the driver's kafka-python clients: a wrong
    security.protocol makes the read fail, a right one (plaintext, the test broker's) reads."""
    topic = services.create_topic(unique("kp"), 1)
    services.produce(topic, 5)
    opts = _opts(services, unique("g"), topic, startingOffsets="earliest")
    ok = spark.read.format("zkconsumer").options(**dict(opts, **{"kafka.security.protocol": "PLAINTEXT",
                                                               "kafka.client.id": "passthrough-ok"})).load()
    assert ok.count() == 5
    from zkconsumer.spark.kafka_io import LogEndProbe
    from zkconsumer.spark.options import parse_options
    bad = parse_options(dict(opts, **{"kafka.security.protocol": "SSL", "kafka.request.timeout.ms": "3000",
                                      "kafka.api.version": "2.8"}))
    probe = LogEndProbe(services.bootstrap_servers, security=bad.kafka_security, kafka_params=bad.kafka_params)
    with pytest.raises(Exception):
        probe.log_ends([(topic, 0)])                           # TLS against a plaintext listener
    probe.close()


def test_streaming_refuses_ending_options_and_starts_by_timestamp(spark, services, unique, tmp_path, stamped):
    """As Spark's Kafka source (KafkaSourceProvider.validateStreamOptions): endingOffsetsByTimestamp and endingOffsets
    fail a streaming query; endingTimestamp is ignored there (the query below reads past it)."""
    topic, group = stamped, unique("g")
    q = (spark.readStream.format("zkconsumer").options(**_opts(services, group, topic, endingOffsetsByTimestamp=(
        json.dumps({topic: {"0": T0, "1": T0}})))).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c1")).start())
    with pytest.raises(Exception, match="endingOffsetsByTimestamp.*ending timestamp not valid in streaming queries"):
        q.awaitTermination(60)
    rows = []
    q = (spark.readStream.format("zkconsumer").options(**_opts(services, group, topic, startingTimestamp=T0 + 6500,
                                                              endingTimestamp=T0 + 7500))
         .load().writeStream.foreachBatch(lambda df, b: rows.extend((r.partition, r.offset) for r in df.collect()))
         .option("checkpointLocation", str(tmp_path / "c2")).trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None, q.exception()
    assert sorted(rows) == [(p, o) for p in (0, 1) for o in range(7, 10)]


def _min_offsets_query(spark, services, tmp_path, name, delay):
    """A query with minOffsetsPerTrigger=10, maxOffsetsPerTrigger=12 and ``maxTriggerDelay=delay`` on a new
    one-partition topic, started and past its first trigger; returns (topic, query, [(wall time, rows) of each
    non-empty batch], wall time at which its first trigger started)."""
    import uuid
    topic = services.create_topic("mt-%s" % uuid.uuid4().hex[:8], 1)
    batches = []

    def each(df, b):
        n = df.count()
        if n:
            batches.append((time.time(), n))

    q = (spark.readStream.format("zkconsumer")
         .options(**_opts(services, "g-" + uuid.uuid4().hex[:8], topic, startingOffsets="earliest",
                          minOffsetsPerTrigger=10, maxTriggerDelay=delay, maxOffsetsPerTrigger=12)).load()
         .writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / name))
         .trigger(processingTime="200 milliseconds").start())
    deadline = time.monotonic() + 120
    while not q.recentProgress and time.monotonic() < deadline:
        time.sleep(0.2)
    assert q.recentProgress, q.exception()
    first = q.recentProgress[0]["timestamp"]              # ISO, UTC: when the first trigger started
    from datetime import datetime
    return topic, q, batches, datetime.fromisoformat(first.replace("Z", "+00:00")).timestamp()


def _send_at_once(services, topic, n):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=services.bootstrap_servers, linger_ms=2000)
    for i in range(n):                                       # one produce request: visible all at once
        producer.send(topic, b"m%d" % i, partition=0)
    producer.flush(30)
    producer.close()


def _wait_rows(batches, n, timeout=120):
    deadline = time.monotonic() + timeout
    while sum(r for _, r in batches) < n and time.monotonic() < deadline:
        time.sleep(0.1)


def test_min_offsets_per_trigger_waits_for_offsets_or_the_delay(spark, services, tmp_path):
    """minOffsetsPerTrigger=10, maxOffsetsPerTrigger=12. With maxTriggerDelay=1h, of 15 new offsets a batch of 12 is
    read (at least the minimum: no waiting for the delay; the cap wins over the minimum) and the 3 left are not read
    (fewer than the minimum, the delay far off). With maxTriggerDelay=4s, 3 new offsets are read once 4 s passed
    since the last batch let through (at the latest the query's first trigger). Only what load cannot break is
    checked: which batches come, and a lower bound on when."""
    topic, q, batches, _first = _min_offsets_query(spark, services, tmp_path, "hour", "1h")
    try:
        _send_at_once(services, topic, 15)
        _wait_rows(batches, 12)
        time.sleep(5)                                          # a trigger every 200 ms: the 3 would be read by now
        assert [n for _, n in batches] == [12], (batches, q.exception())
    finally:
        q.stop()
    topic, q, batches, first = _min_offsets_query(spark, services, tmp_path, "short", "4s")
    try:
        _send_at_once(services, topic, 3)
        _wait_rows(batches, 3)
        assert [n for _, n in batches] == [3], (batches, q.exception())
        assert batches[0][0] - first >= 4.0, (batches, first)  # 3 < 10: read only once the delay passed
    finally:
        q.stop()
