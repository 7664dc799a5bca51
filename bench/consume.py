"""consume messages/s: 1 consumer, 1 stream, 8 partitions, 100-byte messages, against raw kafka-python.

Both sides read the same partitions from offset 0 to the end and touch every record once; the clock starts when
the consumer is ready to read (after its start-up: group registration and rebalance for zkconsumer, construction
and assignment for kafka-python) and stops at the last record.
"""
import time

from .common import Result, median, unique

PARTITIONS = 8


def _zkconsumer_rate(cluster, topic, total):
    from zkconsumer.config import ConsumerConfig
    from zkconsumer.consumer import ZookeeperConsumerConnector
    cfg = ConsumerConfig.from_properties({
        "group.id": unique("bench-consume"), "zookeeper.connect": cluster.zookeeper_connect,
        "auto.offset.reset": "smallest", "auto.commit.enable": "false", "consumer.timeout.ms": "30000"})
    conn = ZookeeperConsumerConnector(cfg)
    try:
        [stream] = conn.create_message_streams({topic: 1})[topic]
        n = 0
        t0 = time.perf_counter()
        for _ in stream:
            n += 1
            if n >= total:
                break
        return n / (time.perf_counter() - t0)
    finally:
        conn.shutdown()


def _kafka_python_rate(cluster, topic, total):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        n = 0
        t0 = time.perf_counter()
        while n < total:
            for records in c.poll(timeout_ms=1000).values():
                for _ in records:
                    n += 1
        return n / (time.perf_counter() - t0)
    finally:
        c.close()


def _confluent_rate(cluster, topic, total):
    try:
        from confluent_kafka import Consumer, TopicPartition
    except ImportError:
        return None
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("bench-ck"),
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        n = 0
        t0 = time.perf_counter()
        while n < total:
            for m in c.consume(num_messages=10000, timeout=1.0):
                if m.error() is None:
                    n += 1
        return n / (time.perf_counter() - t0)
    finally:
        c.close()


def run(cluster, quick=False, log=print):
    total = 500_000 if quick else 1_000_000
    runs = 3  # alternating runs, medians: single runs vary by +-15% on a shared 2-core machine
    topic = cluster.create_topic(unique("bench-consume"), PARTITIONS)
    log("consume: producing %d messages of 100 B to %d partitions" % (total, PARTITIONS))
    cluster.produce_fast(topic, PARTITIONS, total)
    ours, base, ceiling = [], [], []
    for i in range(runs):
        base.append(_kafka_python_rate(cluster, topic, total))
        ours.append(_zkconsumer_rate(cluster, topic, total))
        c = _confluent_rate(cluster, topic, total)
        if c:
            ceiling.append(c)
        log("consume run %d: zkconsumer %.0f msg/s, kafka-python %.0f msg/s%s" % (
            i + 1, ours[-1], base[-1], (", confluent-kafka %.0f msg/s" % c) if c else ""))
    value, baseline = median(ours), median(base)
    out = [Result("consume messages/s (1 consumer, 1 stream, 8 partitions, %dk x 100 B)" % (total // 1000),
                  round(value), "msg/s", round(baseline), round(value / baseline, 2), ">= 1.0x kafka-python",
                  value / baseline >= 1.0, "baseline: raw kafka-python KafkaConsumer assign + poll, defaults")]
    if ceiling:
        out.append(Result("consume messages/s ceiling: confluent-kafka (same data)", round(median(ceiling)),
                          "msg/s", round(value), round(value / median(ceiling), 2), "reference only", None,
                          "ratio = zkconsumer / confluent-kafka"))
    return out
