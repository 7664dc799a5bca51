"""The librdkafka fetch engine (``fetch.engine=librdkafka``, zkconsumer/kafka/librdkafka.py) on the session's
Apache Kafka: the core consumer scenarios, with the same assertions as for the default engine. The whole suite runs
on it with ZKCONSUMER_TEST_FETCH_ENGINE=librdkafka (consumer_helpers.FAST_PROPS)."""
import time

import pytest
from kafka import KafkaProducer

from tests.support.consumer_helpers import BackgroundProducer, StreamCollector, connector, owners, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.kafka import librdkafka
from zkconsumer.errors import ConfigError
from zkconsumer.core.layout import paths

RD = {"fetch.engine": "librdkafka"}


def _in_order_from(col, topic, partitions, start=0):
    """Per partition, the offsets handed out are start, start+1, ... (no gap, no repeat)."""
    for p in range(partitions):
        offs = [o for t, q, o in col.seen(topic) if q == p]
        assert offs == list(range(start, start + len(offs))), "partition %d: %s..." % (p, offs[:10])


def test_consumes_in_order_commits_and_a_successor_resumes_exactly(services, zk, unique, conns):
    g, t = unique("rd"), unique("rd")
    services.create_topic(t, 4)
    first = produce_tracked(services.bootstrap_servers, t, 200, partitions=4, tag="a")
    a = connector(services, g, **RD, **{"auto.commit.enable": "false"})
    conns.append(a)
    [s] = a.create_message_streams({t: 1})[t]
    col = StreamCollector(s)
    col.start()
    want = {(t, p, o) for p, o, _ in first}
    wait_until(lambda: set(col.seen(t)) == want, 30, message="all 200 records through librdkafka")
    _in_order_from(col, t, 4)
    assert sorted(col.values()) == sorted(v for _, _, v in first)
    assert a.metrics()["MessagesPerSec"] == 200 and a.metrics()["MaxLag"] == 0
    a.commit_offsets(raise_errors=True)
    assert {p: int(zk.get(paths.partition_offset_path(g, t, p))[0]) for p in range(4)} == {p: 50 for p in range(4)}
    a.shutdown()
    col.stop()
    second = produce_tracked(services.bootstrap_servers, t, 40, partitions=4, tag="b")
    b = connector(services, g, **RD)
    conns.append(b)
    [s2] = b.create_message_streams({t: 1})[t]
    col2 = StreamCollector(s2)
    col2.start()
    wait_until(lambda: len(col2.seen(t)) >= 40, 30, message="the 40 new records")
    time.sleep(0.5)
    assert sorted(col2.seen(t)) == sorted((t, p, o) for p, o, _ in second)  # nothing again, nothing lost
    _in_order_from(col2, t, 4, start=50)


def test_a_member_joining_midstream_loses_nothing(services, zk, unique, conns):
    g, t = unique("rd"), unique("rd")
    services.create_topic(t, 6)
    a = connector(services, g, **RD)
    conns.append(a)
    [sa] = a.create_message_streams({t: 1})[t]
    ca = StreamCollector(sa)
    ca.start()
    wait_until(lambda: len(owners(zk, g, [t])) == 6, 20, message="a owns all 6")
    producer = BackgroundProducer(services.bootstrap_servers, t, 6, tag="live")
    producer.start()
    time.sleep(1.0)
    b = connector(services, g, **RD)
    conns.append(b)
    [sb] = b.create_message_streams({t: 1})[t]
    cb = StreamCollector(sb)
    cb.start()
    wait_until(lambda: set(owners(zk, g, [t]).values()) == {a.consumer_id + "-0", b.consumer_id + "-0"}, 20,
               message="the partitions split between a and b")
    time.sleep(1.0)
    produced = producer.stop()
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(ca.seen(t)) | set(cb.seen(t)), 30, message="every acknowledged record")
    # what each member handed out per partition is contiguous (a hand-over resumes from the committed offset)
    for col in (ca, cb):
        for p in range(6):
            offs = sorted(set(o for _, q, o in col.seen(t) if q == p))
            assert offs == list(range(offs[0], offs[0] + len(offs))) if offs else True


def test_largest_starts_at_the_end_and_headers_arrive(services, unique, conns):
    g, t = unique("rd"), unique("rd")
    services.create_topic(t, 1)
    produce_tracked(services.bootstrap_servers, t, 10, partitions=1, tag="old")
    c = connector(services, g, **RD, **{"auto.offset.reset": "largest"})
    conns.append(c)
    [s] = c.create_message_streams({t: 1})[t]
    col = StreamCollector(s)
    col.start()
    wait_until(lambda: c.rebalancer.parts[(t, 0)].consumed == 10, 20, message="the reset point: the log end")
    p = KafkaProducer(bootstrap_servers=services.bootstrap_servers)
    p.send(t, key=b"k", value=b"v", headers=[("h1", b"x"), ("h2", b"")], partition=0).get(30)
    p.send(t, key=b"n", value=None, partition=0).get(30)  # a tombstone
    p.close()
    wait_until(lambda: len(col.records) == 2, 20, message="the two new records")
    r1, r2 = col.records
    assert (r1.offset, r1.key, r1.value, r1.headers) == (10, b"k", b"v", [("h1", b"x"), ("h2", b"")])
    assert (r1.serialized_key_size, r1.serialized_value_size, r1.serialized_header_size) == (1, 1, 5)
    assert (r2.offset, r2.value, r2.headers, r2.serialized_value_size) == (11, None, [], -1)
    assert r1.timestamp > 0 and r1.timestamp_type == 0


def test_without_confluent_kafka_the_error_names_the_key(monkeypatch):
    from zkconsumer.core.config import ConsumerConfig
    monkeypatch.setattr(librdkafka, "available", lambda: "No module named 'confluent_kafka'")
    cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:1", **RD})
    with pytest.raises(ConfigError) as e:
        librdkafka.RdKafkaFetchClient(cfg, "127.0.0.1:9")
    assert "fetch.engine" in str(e.value) and "confluent-kafka" in str(e.value)


def test_unreachable_brokers_fail_the_client_within_the_socket_timeout(services):
    """librdkafka connects lazily and retries forever; the engine asks a broker for metadata when it builds its
    client, so an assignment (and the rebalance attempt) fails within socket.timeout.ms as with kafka-python, and
    the next attempt builds a client from the brokers registered then (tests/consumer/test_consumer_states.py's DEGRADED
    scenario, which the ZKCONSUMER_TEST_FETCH_ENGINE=librdkafka run covers)."""
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.consumer.fetcher import RdKafkaFetcherThread
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.local.processes import free_port
    cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:1",
                                          "socket.timeout.ms": "1500", **RD})
    dead = "127.0.0.1:%d" % free_port()
    thread = RdKafkaFetcherThread(0, dead, cfg)  # not started: its client is built on demand
    t0 = time.monotonic()
    with pytest.raises(ClusterUnavailableError) as e:
        thread._ensure_consumer()
    assert time.monotonic() - t0 < 10
    assert "reach brokers" in str(e.value) and dead in str(e.value)
    assert thread._consumer is None  # no client kept: the next attempt builds one
    thread.bootstrap_servers = services.bootstrap_servers
    client = thread._ensure_consumer()  # the brokers are back (here: the real ones)
    try:
        assert type(client).__name__ == "RdKafkaFetchClient"
    finally:
        client.close()


@pytest.mark.parametrize("direct", ["1", "0"], ids=["direct-reader", "messages"])
def test_a_backlog_leaves_the_garbage_collector_nearly_idle(services, unique, conns, monkeypatch, direct):
    """librdkafka's Messages are objects the cyclic collector tracks: taken 10,000 at a time they outlived young
    collections (~3.6 per 1,000 records read from a backlog, and full collections walking them); in batches of
    librdkafka.CONSUME_BATCH they die young (~0.5-1.5 per 1,000 here). The direct reader builds no Message and its
    records are untracked from the start, so a young collection finds none of them to walk; its collections come
    from allocation counts alone (a record and its headers list count two until freed, in bursts of up to
    librdkafka.DIRECT_BATCH records: ~2.2 per 1,000 here). Counted, not timed."""
    import gc
    monkeypatch.setenv("ZKCONSUMER_RDKAFKA_DIRECT", direct)
    g, t = unique("rd-gc"), unique("rd-gc")
    services.create_topic(t, 4)
    total = 40_000
    producer = KafkaProducer(bootstrap_servers=services.bootstrap_servers, linger_ms=20, batch_size=256 * 1024)
    for i in range(total):
        producer.send(t, value=b"x" * 100, partition=i % 4)
    producer.flush()
    producer.close()
    c = connector(services, g, **RD, **{"auto.offset.reset": "smallest", "consumer.timeout.ms": "30000"})
    conns.append(c)
    [s] = c.create_message_streams({t: 1})[t]
    n, before, tracked = 0, None, 0
    for rec in s:
        n += 1
        tracked += gc.is_tracked(rec)
        if n == 1:
            before = gc.get_stats()[0]["collections"]
        if n == total:
            break
    young = gc.get_stats()[0]["collections"] - before
    readers = [f._consumer._reader for f in c.fetchers.fetchers if f._consumer is not None]
    assert readers and all((r is not None) == (direct == "1") for r in readers)
    if direct == "1":
        assert tracked == 0, "%d of %d records tracked by the collector" % (tracked, total)
        assert young < 3 * total / 1000, "%d young collections while reading %d records" % (young, total)
    else:
        assert young < 2 * total / 1000, "%d young collections while reading %d records" % (young, total)
