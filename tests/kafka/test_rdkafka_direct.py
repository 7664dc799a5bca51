"""The librdkafka engine's direct reader (zkconsumer/_rdkafka_direct.c): a confluent-kafka Consumer's partitions
routed to a queue of the engine's own and read from librdkafka's messages, on the session's Apache Kafka."""
import logging
import time

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from zkconsumer.core.config import ConsumerConfig
from zkconsumer.kafka import librdkafka

pytestmark = pytest.mark.skipif(librdkafka.available() is not None or librdkafka._rdkafka_direct is None,
                                reason="confluent-kafka or the C extension is not installed")


def _client(services, **props):
    cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:1",
                                          "fetch.engine": "librdkafka", "auto.offset.reset": "smallest", **props})
    return librdkafka.RdKafkaFetchClient(cfg, services.bootstrap_servers)


def _read(client, want, timeout=30.0):
    """{tp: [records]} polled until *want* records came (or the timeout)."""
    got, n, deadline = {}, 0, time.monotonic() + timeout
    while n < want and time.monotonic() < deadline:
        for tp, recs in client.poll(timeout_ms=200).items():
            got.setdefault(tp, []).extend(recs)
            n += len(recs)
    return got


def test_the_direct_reader_builds_the_records_consume_s_messages_give(services, unique, monkeypatch):
    """Keys, values, tombstones, headers (a None value among them), create and log-append timestamps: the records read
    from librdkafka's messages are the ones the Message path builds from the same data."""
    t, la = unique("rd-direct"), unique("rd-direct-la")
    services.create_topic(t, 2)
    admin = KafkaAdminClient(bootstrap_servers=services.bootstrap_servers)
    admin.create_topics([NewTopic(la, 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})])
    admin.close()
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": services.bootstrap_servers})  # it sends a header without a value
    for i in range(50):
        p.produce(t, key=b"k%d" % i if i % 3 else None, value=None if i % 7 == 2 else b"v%d" % i, partition=i % 2,
                  headers=[("h", b"x"), ("é", None)] if i % 5 == 0 else None, timestamp=1_700_000_000_000 + i)
    for i in range(5):
        p.produce(la, value=b"la%d" % i, partition=0)
    assert p.flush(30) == 0
    del p
    tps = [TopicPartition(t, 0), TopicPartition(t, 1), TopicPartition(la, 0)]
    runs = {}
    for direct in ("1", "0"):
        monkeypatch.setenv("ZKCONSUMER_RDKAFKA_DIRECT", direct)
        c = _client(services)
        try:
            assert (c._reader is not None) == (direct == "1")
            c.assign(tps)
            runs[direct] = _read(c, 55)
        finally:
            c.close()
    assert runs["1"] == runs["0"]
    assert sum(len(v) for v in runs["1"].values()) == 55
    recs = runs["1"][TopicPartition(t, 0)]
    assert recs[0].headers == [("h", b"x"), ("é", None)] and recs[0].serialized_header_size == 4  # h, x, é (2 bytes)
    assert (recs[0].key, recs[0].value, recs[0].timestamp) == (None, b"v0", 1_700_000_000_000)
    assert (recs[1].key, recs[1].value, recs[1].serialized_value_size) == (b"k2", None, -1)
    assert all(r.timestamp_type == 1 and r.timestamp > 1_700_000_000_000 for r in runs["1"][TopicPartition(la, 0)])


def test_reassigning_keeps_every_offset_once_and_in_order(services, unique, caplog):
    """An assign that replaces the assignment stops and restarts the partitions it keeps, after the call returns, and
    librdkafka drops their forward to the reader when it stops them: the engine routes them again (REROUTE_S), so a
    kept partition goes on, no offset is skipped or repeated, and nothing comes through the consumer's own queue."""
    t = unique("rd-route")
    services.create_topic(t, 4)
    p = KafkaProducer(bootstrap_servers=services.bootstrap_servers, linger_ms=5)
    for i in range(8000):
        p.send(t, value=b"x" * 100, partition=i % 4)
    p.flush()
    p.close()
    tps = [TopicPartition(t, i) for i in range(4)]
    c = _client(services, **{"fetch.message.max.bytes": "4096"})  # small fetches: many rounds in flight
    seen = {tp: [] for tp in tps}
    try:
        with caplog.at_level(logging.WARNING, logger=librdkafka.__name__):
            plan = [tps[:2], tps[1:3], tps[1:], tps, tps[2:], tps]
            for assignment in plan:
                c.assign(assignment)
                for tp in assignment:
                    c.seek(tp, len(seen[tp]))  # every partition resumes where it stopped
                for _ in range(6):
                    for tp, recs in c.poll(timeout_ms=100).items():
                        seen[tp].extend(r.offset for r in recs)
            deadline = time.monotonic() + 60
            while sum(map(len, seen.values())) < 8000 and time.monotonic() < deadline:
                for tp, recs in c.poll(timeout_ms=200).items():
                    seen[tp].extend(r.offset for r in recs)
    finally:
        c.close()
    for tp in tps:
        assert seen[tp] == list(range(2000)), "%s: %d offsets, first gap or repeat near %s" % (
            tp, len(seen[tp]), next((i for i, o in enumerate(seen[tp]) if o != i), None))
    assert not [r for r in caplog.records if "consumer's own queue" in r.getMessage()]
