"""Real data formats: topics written by Apache Kafka's own producer (``kafka.tools.ConsoleProducer`` from the 3.9
jars) with every ``compression.type`` — none, gzip, snappy, lz4, zstd — and records with headers.

* a zkconsumer group delivers every record with its key, value and headers intact;
* the fast v2 decoder (``zkconsumer.kafka.fast_records``) handles each codec itself (the batch is decompressed
  with kafka-python's codecs, then decoded by our decoder) and gives exactly the records kafka-python's stock
  decoder gives.
"""
import subprocess

import pytest

from tests.support.consumer_helpers import FAST_PROPS, StreamCollector
from tests.support.waiting import wait_until
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.kafka import internals as client_internals
from zkconsumer.consumer import ZookeeperConsumerConnector
from zkconsumer.kafka import fast_records
from zkconsumer.local import discovery, maven

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 300


def console_produce(bootstrap, topic, codec, lines):
    """Kafka 3.9's ConsoleProducer, lines "h1:..,h2:..<TAB>key<TAB>value", one compressed batch per ~100 lines."""
    argv = [discovery.find_java(), "-Xmx256m", "-cp", maven.classpath("kafka"), "kafka.tools.ConsoleProducer",
            "--bootstrap-server", bootstrap, "--topic", topic, "--compression-codec", codec,
            "--producer-property", "linger.ms=200", "--producer-property", "batch.size=65536",
            "--property", "parse.key=true", "--property", "parse.headers=true"]
    p = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def topics(services):
    out = {}
    for codec in CODECS:
        import uuid
        t = services.create_topic("codec-%s-%s" % (codec, uuid.uuid4().hex[:6]), 2)
        lines = ["h1:one-%d,h2:two\tk%d\tvalue-%s-%d" % (i, i, codec, i) for i in range(N)]
        console_produce(services.bootstrap_servers, t, codec, lines)
        out[codec] = t
    return out


def expected(codec):
    return {("k%d" % i, "value-%s-%d" % (codec, i), (("h1", "one-%d" % i), ("h2", "two"))) for i in range(N)}


def as_tuple(rec):
    return (rec.key.decode(), rec.value.decode(), tuple((k, v.decode()) for k, v in rec.headers))


@pytest.mark.parametrize("codec", CODECS)
def test_group_consumes_what_kafkas_producer_wrote(services, topics, unique, conns, codec):
    t = topics[codec]
    conn = ZookeeperConsumerConnector(ConsumerConfig.from_properties(dict(FAST_PROPS, **{
        "group.id": unique("codec"), "zookeeper.connect": services.zookeeper_connect})))
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    wait_until(lambda: len(col.seen(t)) >= N, 30, message="%d records of %s" % (N, codec))
    with col.lock:
        got = {as_tuple(r) for r in col.records}
    assert got == expected(codec)
    assert len(col.seen(t)) == N
    client = conn.fetchers.fetchers[0]._consumer
    if conn.config.fetch_engine == "kafka-python":  # (ZKCONSUMER_TEST_FETCH_ENGINE=librdkafka: librdkafka decodes)
        # the fast decoder (its records built as the stream hands them out, where the C extension is built)
        assert issubclass(client_internals.consumer_fetcher(client).PartitionRecords,
                          fast_records.fast_partition_records_class()), \
            "the fast decoder is not in use"
    else:
        assert type(client).__name__ == "RdKafkaFetchClient"


@pytest.mark.parametrize("codec", CODECS)
def test_fast_decoder_handles_each_codec_like_the_stock_one(services, topics, monkeypatch, codec):
    from kafka import KafkaConsumer, TopicPartition
    t = topics[codec]
    # the decoder's one-time self-test (run by its first install in this process) decompresses a batch of its own
    assert fast_records.fast_partition_records_class() is not None
    calls = []
    real = fast_records._decompressed
    monkeypatch.setattr(fast_records, "_decompressed", lambda b: calls.append(1) or real(b))

    def read(fast):
        c = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, enable_auto_commit=False, group_id=None)
        try:
            if fast:
                assert fast_records.install(c)
            tps = [TopicPartition(t, p) for p in (0, 1)]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            out = []
            while len(out) < N:
                recs = c.poll(1000)
                assert recs or len(out) < N, "no more records after %d" % len(out)
                for rs in recs.values():
                    out.extend((r.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in rs)
            return sorted(out)
        finally:
            c.close()
    stock = read(False)
    assert calls == []
    fast = read(True)
    assert fast == stock and len(fast) == N
    if codec == "none":
        assert calls == []
    else:
        assert calls, "compressed %s batches were not decoded by the fast decoder" % codec


def test_cli_prints_headers(services, topics, unique):
    import json
    import sys
    t = topics["gzip"]
    p = subprocess.run([sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", services.zookeeper_connect,
                        "--group", unique("codec-cli"), "--topic", t, "--max-messages", "5",
                        "--property", "auto.offset.reset=smallest"], capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    for line in p.stdout.splitlines():
        rec = json.loads(line)
        i = int(rec["key"][1:])
        assert rec["headers"] == [["h1", "one-%d" % i], ["h2", "two"]] and rec["value"] == "value-gzip-%d" % i
