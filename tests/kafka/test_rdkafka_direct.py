"""The librdkafka engine's direct reader (zkconsumer/_rdkafka_direct.c): a confluent-kafka Consumer's partitions
routed to a queue of the engine's own and read from librdkafka's messages, on the session's Apache Kafka."""
import logging
import os
import subprocess
import sys
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
    librdkafka drops their forward to the reader when it stops them: the engine forwards them again (REROUTE_S), so
    records produced after such an assign still come, no offset is skipped or repeated, and nothing comes through
    the consumer's own queue."""
    t = unique("rd-route")
    services.create_topic(t, 4)
    p = KafkaProducer(bootstrap_servers=services.bootstrap_servers, linger_ms=5)

    def produce(count):
        for i in range(count):
            p.send(t, value=b"x" * 100, partition=i % 4)
        p.flush()

    def poll_until(total, timeout):
        deadline = time.monotonic() + timeout
        while sum(map(len, seen.values())) < total and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=100).items():
                seen[tp].extend(r.offset for r in recs)

    produce(8000)
    tps = [TopicPartition(t, i) for i in range(4)]
    c = _client(services, **{"fetch.message.max.bytes": "4096"})  # small fetches: many rounds in flight
    seen = {tp: [] for tp in tps}
    try:
        with caplog.at_level(logging.WARNING, logger=librdkafka.__name__):
            for assignment in [tps[:2], tps[1:3], tps[1:], tps, tps[2:], tps]:
                c.assign(assignment)
                for tp in assignment:
                    c.seek(tp, len(seen[tp]))  # every partition resumes where it stopped
                poll_until(8000, 0.6)
            poll_until(8000, 60)
            c.assign(tps)  # the same partitions again: librdkafka stops and restarts them all
            for tp in tps:
                c.seek(tp, len(seen[tp]))
            poll_until(8000, 1)
            produce(400)  # fetched only once the partitions are routed to the reader again
            poll_until(8400, 30)
    finally:
        c.close()
        p.close()
    for tp in tps:
        assert seen[tp] == list(range(2100)), "%s: %d offsets, first gap or repeat at index %s" % (
            tp, len(seen[tp]), next((i for i, o in enumerate(seen[tp]) if o != i), None))
    assert not [r for r in caplog.records if "consumer's own queue" in r.getMessage()]


_DELETED = """
import logging, sys, time
from kafka import KafkaAdminClient, TopicPartition
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.kafka import librdkafka
servers, topic = sys.argv[1:3]
logged = []
handler = logging.Handler()
handler.emit = lambda record: logged.append(record.getMessage())
logging.getLogger(librdkafka.__name__).addHandler(handler)
logging.getLogger(librdkafka.__name__).setLevel(logging.INFO)
cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:1", "fetch.engine": "librdkafka",
                                      "auto.offset.reset": "smallest"})
c = librdkafka.RdKafkaFetchClient(cfg, servers)
assert c._reader is not None
c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
n, end = 0, time.monotonic() + 30
while n < 100 and time.monotonic() < end:
    n += sum(len(v) for v in c.poll(timeout_ms=200).values())
print("read", n, flush=True)
admin = KafkaAdminClient(bootstrap_servers=servers)
admin.delete_topics([topic])
admin.close()
end, errors = time.monotonic() + 60, []
while time.monotonic() < end and not errors and not [m for m in logged if topic in m]:
    try:
        c.poll(timeout_ms=200)
    except Exception as e:
        errors.append(e)
print("error", errors[0] if errors else None, flush=True)
print("logged", [m for m in logged if topic in m][:1], flush=True)
c.close()
print("closed", flush=True)
"""


def test_a_deleted_topic_is_an_error_not_a_crash(services, unique, tmp_path):
    """A partition's own queue also carries librdkafka's errors for it (a deleted topic, a partition gone). Read with
    rd_kafka_consume_batch_queue they went to confluent-kafka's error_cb, which aborts the process outside
    confluent-kafka's own calls; read as events they are logged (the Message path's error_cb drops them), and nothing
    is raised. In a child process, since the failure is an abort."""
    t = unique("rd-deleted")
    services.create_topic(t, 2)
    p = KafkaProducer(bootstrap_servers=services.bootstrap_servers)
    for i in range(100):
        p.send(t, value=b"x", partition=i % 2)
    p.flush()
    p.close()
    script = tmp_path / "deleted.py"
    script.write_text(_DELETED)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this zkconsumer's
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [x for x in [os.environ.get("PYTHONPATH")] if x]))
    r = subprocess.run([sys.executable, str(script), services.bootstrap_servers, t], capture_output=True, text=True,
                       timeout=150, cwd=root, env=env)
    assert r.returncode == 0, "exit %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr[-3000:])
    assert "read 100" in r.stdout and "closed" in r.stdout
    assert "error None" in r.stdout and "logged ['" in r.stdout and t in r.stdout.split("logged")[1], r.stdout
