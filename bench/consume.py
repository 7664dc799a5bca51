"""consume messages/s: one consumer, one stream, 8 partitions, against every peer tuned as its own documentation
tells users to tune it for throughput, and against the Java KafkaConsumer as the limit.

Method (docs/contributors.md has the settings of every client and where each comes from):

* every client reads the same topic from offset 0 and touches the partition, offset and value of every record
  (the same few lines inlined in each client's loop, so that no client pays a function call per record);
  the clock runs from its first record to its Nth (connecting, the group join or assignment, positions and the
  first fetch are outside it), the same window for every client. The JVM clients run in one long-lived JVM each
  (``bench/jvm``) so that their JIT is warm; Kafka's ConsumerPerformance reports its own ``fetch.nMsg.sec``
  (from the end of its group join to its last record, in ms);
* rounds: one warm-up round whose samples are discarded, then ROUNDS rounds in which every client reads once, the
  order rotated by one client each round (zkconsumer's reads with and without the metrics endpoint back to back,
  their order alternating); every client has the same number of samples, reported as min / median /
  max; the ratios compare medians;
* after every read, a check of what was read: the count, each partition's last offset (the log end - 1) and no
  duplicate (each record's offset is the one after the previous record of its partition; the topic's offsets are
  contiguous from 0). ConsumerPerformance cannot be asked: its count is checked, and its group's committed offsets
  (the tool commits when it closes) must equal the log ends. A client whose read fails the check (or fails, or
  waits READ_TIMEOUT_MS for a record) reads no more: its rows are void, saying why, whatever its earlier reads;
* data variants: uncompressed 100 B values (the goal rows), lz4, zstd, and 100 B values with 16 B keys and two
  headers (zkconsumer against tuned confluent-kafka and the Java consumer).

Metrics: the same zkconsumer read with its Prometheus endpoint open and scraped over HTTP from another process,
every 15 s from a random phase (the realistic interval: the goal row), and every 100 ms (the stress row); each
compared, round by round, with the unscraped read of the same round.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from . import goals
from .common import median, spread, unique

PARTITIONS = 8
ROUNDS = 5  # measured rounds after the warm-up round (each client: one sample per round)
# how long any client waits for its next record before its read ends short (the read check then voids the read)
READ_TIMEOUT_MS = 30_000

# librdkafka CONFIGURATION.md (confluent-kafka 2.x): raise the prefetch queue thresholds, cut the 1 s backoff that
# follows a full queue, allow larger fetches; confluent-kafka's Consumer.consume(num_messages) for batches
CONFLUENT_TUNED = {"fetch.queue.backoff.ms": 10, "queued.min.messages": 1_000_000,
                   "queued.max.messages.kbytes": 1_048_576, "fetch.max.bytes": 104_857_600,
                   "max.partition.fetch.bytes": 4_194_304}
CONFLUENT_BATCH = 10_000
# kafka-python's KafkaConsumer docs: the fetch and poll sizes, set as zkconsumer's own kafka-python client sets them
# (zkconsumer.consumer.fetcher.consumer_settings at zkconsumer's defaults)
KAFKA_PYTHON_TUNED = {"max_poll_records": 100_000, "fetch_max_bytes": 52_428_800,
                      "max_partition_fetch_bytes": 1_048_576, "fetch_max_wait_ms": 100}
# pykafka 2.8's README ("use_rdkafka=True" for speed) and BalancedConsumer's docs (queued_max_messages, the
# prefetch its rdkafka consumer hands librdkafka as queued.min.messages; fetch_message_max_bytes). That consumer sets
# receive.message.max.bytes to fetch_message_max_bytes x (partitions + 1) and leaves librdkafka's fetch.max.bytes
# (50 MiB) alone; librdkafka refuses a receive.message.max.bytes under fetch.max.bytes + 512, and caps
# queued.max.messages.kbytes (pykafka: queued_max_messages x fetch_message_max_bytes / 1024) at 2,097,151. So the
# smallest fetch_message_max_bytes that starts, and the most queued_max_messages it allows (5,825,480 B and 368 on
# 8 partitions; one byte less, or one message more, and the consumer does not start)
PYKAFKA_FETCH_BYTES = -(-(50 * 1024 * 1024 + 512) // (PARTITIONS + 1))
PYKAFKA_TUNED = {"use_rdkafka": True, "fetch_message_max_bytes": PYKAFKA_FETCH_BYTES,
                 "queued_max_messages": 2_097_151 * 1024 // PYKAFKA_FETCH_BYTES}
# Kafka 1.1.1's ConsumerConfig: each fetch up to fetch.message.max.bytes per partition (default 1 MiB), up to
# queued.max.message.chunks fetched chunks queued per stream (default 2)
SCALA_TUNED = {"fetch.message.max.bytes": 4 * 1024 * 1024, "queued.max.message.chunks": 10}


@dataclass(frozen=True)
class Variant:
    name: str
    compression: object = None
    key_size: int = 0
    headers: int = 0


VARIANTS = [Variant("uncompressed 100 B"), Variant("lz4", compression="lz4"), Variant("zstd", compression="zstd"),
            Variant("16 B keys + two headers", key_size=16, headers=2)]


class ReadCheckFailed(AssertionError):
    """A read that did not read exactly the topic: the run is void."""


def check_read(client, count, total, next_offsets, ends, bad):
    """Raise ReadCheckFailed unless *count* == *total*, no record was out of sequence (*bad*: records whose offset
    was not the one after the previous record of their partition) and each partition's next offset is its log
    end (*ends*)."""
    problems = []
    if count != total:
        problems.append("read %d records, expected %d" % (count, total))
    if bad:
        problems.append("%d records out of sequence (a duplicate, a gap or a reordering)" % bad)
    short = {p: (next_offsets[p] - 1, ends[p] - 1) for p in range(len(ends)) if next_offsets[p] != ends[p]}
    if short:
        problems.append("last offsets (read, log end - 1) differ: %s" % short)
    if problems:
        raise ReadCheckFailed("%s: %s" % (client, "; ".join(problems)))


def _first_to_last(count, t_first, t_last):
    return (count - 1) / (t_last - t_first) if t_last > t_first else float("nan")


# ---------------------------------------------------------------------------------------------------- zkconsumer

_SCRAPE_LOOP = """
import sys, time, urllib.request
url, every, first = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
print("ready", flush=True)  # started (interpreter and imports) before the timed run
sys.stdin.readline()  # scrape from "go" on
time.sleep(first)
while True:
    with urllib.request.urlopen(url, timeout=5) as r:
        if b"zkconsumer_messages_total" in r.read():
            print("ok", flush=True)
    time.sleep(every)
"""


class _Scraper:
    """zkconsumer's Prometheus endpoint (what ``zkconsumer consume --metrics-port`` serves) scraped over HTTP from
    another process every *every* s, the first scrape *first* s after :meth:`start`, as a Prometheus server does
    (here on the same 2 cores: its client's CPU is part of the interference measured)."""

    def __init__(self, conn, every, first):
        from zkconsumer.metrics.member import start_metrics_server
        self.server = start_metrics_server(conn, 0, addr="127.0.0.1")
        self.proc = subprocess.Popen([sys.executable, "-c", _SCRAPE_LOOP,
                                      "http://127.0.0.1:%d/metrics" % self.server.port, str(every), str(first)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if self.proc.stdout.readline() != b"ready\n":
            self.close()
            raise RuntimeError("the scraping process did not start")

    def start(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def served(self):
        """(CPU seconds the endpoint's thread has spent answering, scrapes answered) so far."""
        return self.server.cpu_seconds, self.server.scrapes

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.communicate(timeout=30)
        self.server.close()


def _zkconsumer(cluster, topic, total, ends, engine="kafka-python", scrape=None, window=None):
    """One read by a zkconsumer member (its defaults but the first offset); ``scrape``: None or (every, first) s
    for a scraper of its endpoint. Returns (msg/s, extra) with extra {"cpu_share", "scrapes"} when scraped.
    ``window``: None or an object whose start() is called at the first record and stop(n) after the Nth (bench.cpu
    measures CPU in that window)."""
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.consumer import ZookeeperConsumerConnector
    from zkconsumer.errors import ConsumerTimeoutError
    cfg = ConsumerConfig.from_properties({
        "group.id": unique("bench-consume"), "zookeeper.connect": cluster.zookeeper_connect,
        "auto.offset.reset": "smallest", "consumer.timeout.ms": str(READ_TIMEOUT_MS), "fetch.engine": engine})
    conn = ZookeeperConsumerConnector(cfg)
    scraper = None
    try:
        [stream] = conn.create_message_streams({topic: 1})[topic]
        t_ready = time.perf_counter()  # group joined, fetchers assigned from the reset positions
        if scrape is not None:
            scraper = _Scraper(conn, *scrape)
            scraper.start()
        nxt, bad, n, nbytes = [0] * PARTITIONS, 0, 0, 0
        t_first = cpu_first = None
        served_first = (0.0, 0)
        try:
            for m in stream:
                p = m.partition
                o = m.offset
                if o != nxt[p]:
                    bad += 1
                nxt[p] = o + 1
                nbytes += len(m.value)
                n += 1
                if n == 1:
                    t_first, cpu_first = time.perf_counter(), time.process_time()
                    served_first = scraper.served() if scraper else served_first
                    if window is not None:
                        window.start()
                if n >= total:
                    break
        except ConsumerTimeoutError:
            pass  # a short read: the check below says so
        t_last = time.perf_counter()
        if window is not None and n:
            window.stop(n)
        # ConsumerPerformance's window: from its partitions' assignment (its group join's end) to its last record
        extra = {"ready_rate": n / (t_last - t_ready)}
        if scraper is not None and n:
            cpu, (served, scrapes) = time.process_time() - cpu_first, scraper.served()
            extra.update(cpu_share=(served - served_first[0]) / cpu if cpu > 0 else 0.0,
                         scrapes=scrapes - served_first[1])
        check_read("zkconsumer", n, total, nxt, ends, bad)
        return _first_to_last(n, t_first, t_last), extra
    finally:
        if scraper is not None:
            scraper.close()
        conn.shutdown()


# ---------------------------------------------------------------------------------------------------- Python peers

def _confluent(cluster, topic, total, ends, window=None):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(dict({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("bench-ck"),
                       "enable.auto.commit": False}, **CONFLUENT_TUNED))
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        nxt, bad, n, nbytes, t_first = [0] * PARTITIONS, 0, 0, 0, None
        idle_until = time.monotonic() + READ_TIMEOUT_MS / 1000.0
        while n < total and time.monotonic() < idle_until:
            batch = c.consume(num_messages=CONFLUENT_BATCH, timeout=1.0)
            if batch:
                idle_until = time.monotonic() + READ_TIMEOUT_MS / 1000.0
            for m in batch:
                if m.error() is not None:
                    continue
                p = m.partition()
                o = m.offset()
                if o != nxt[p]:
                    bad += 1
                nxt[p] = o + 1
                nbytes += len(m.value())
                n += 1
                if n == 1:
                    t_first = time.perf_counter()
                    if window is not None:
                        window.start()
        t_last = time.perf_counter()
        if window is not None and n:
            window.stop(n)
        check_read("confluent-kafka", n, total, nxt, ends, bad)
        return _first_to_last(n, t_first, t_last), {}
    finally:
        c.close()


def _kafka_python(cluster, topic, total, ends):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None, enable_auto_commit=False,
                      **KAFKA_PYTHON_TUNED)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        for tp in tps:
            c.position(tp)  # resolved before the clock, as zkconsumer's are
        nxt, bad, n, nbytes, t_first = [0] * PARTITIONS, 0, 0, 0, None
        idle_until = time.monotonic() + READ_TIMEOUT_MS / 1000.0
        while n < total and time.monotonic() < idle_until:
            polled = c.poll(timeout_ms=1000)
            if polled:
                idle_until = time.monotonic() + READ_TIMEOUT_MS / 1000.0
            for records in polled.values():
                for m in records:
                    p = m.partition
                    o = m.offset
                    if o != nxt[p]:
                        bad += 1
                    nxt[p] = o + 1
                    nbytes += len(m.value)
                    n += 1
                    if n == 1:
                        t_first = time.perf_counter()
        t_last = time.perf_counter()
        check_read("kafka-python", n, total, nxt, ends, bad)
        return _first_to_last(n, t_first, t_last), {}
    finally:
        c.close()


def _pykafka(cluster, topic, total, ends, tuned=True, window=None):
    import logging
    from pykafka import KafkaClient
    logging.getLogger("pykafka").setLevel(logging.CRITICAL)
    client = KafkaClient(hosts=cluster.bootstrap_servers, broker_version="1.0.0")  # >= 0.10: ApiVersions discovery
    c = client.topics[topic].get_balanced_consumer(
        consumer_group=unique("bench-pykafka").encode(), managed=False, zookeeper_connect=cluster.zookeeper_connect,
        auto_commit_enable=False, auto_offset_reset=-2, consumer_timeout_ms=READ_TIMEOUT_MS,  # -2: EARLIEST
        **(PYKAFKA_TUNED if tuned else {}))
    try:
        nxt, bad, n, nbytes, t_first = [0] * PARTITIONS, 0, 0, 0, None
        for m in c:
            p = m.partition_id
            o = m.offset
            if o != nxt[p]:
                bad += 1
            nxt[p] = o + 1
            nbytes += len(m.value)
            n += 1
            if n == 1:
                t_first = time.perf_counter()
                if window is not None:
                    window.start()
            if n >= total:
                break
        t_last = time.perf_counter()
        if window is not None and n:
            window.stop(n)
        check_read("pykafka", n, total, nxt, ends, bad)
        return _first_to_last(n, t_first, t_last), {}
    finally:
        c.stop()


# ---------------------------------------------------------------------------------------------------- JVM peers

class _Jvms:
    """The long-lived JVMs of the JVM clients, started on first use (jvm.Unavailable: the rows say why)."""

    def __init__(self):
        self.scala = self.java = None
        self.tmp = tempfile.mkdtemp(prefix="zkconsumer-bench-jvm-")

    def close(self):
        for d in (self.scala, self.java):
            if d is not None:
                d.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _scala(jvms, cluster, topic, total, ends, tuned=False):
    from . import jvm
    if jvms.scala is None:
        jvms.scala = jvm.Driver("ScalaConsumerCount", ("-Xmx1g",))
    props = dict({"group.id": unique("bench-scala"), "zookeeper.connect": cluster.zookeeper_connect,
                  "auto.offset.reset": "smallest", "auto.commit.enable": "false",
                  "consumer.timeout.ms": str(READ_TIMEOUT_MS)},
                 **(SCALA_TUNED if tuned else {}))
    path = jvm.write_props(os.path.join(jvms.tmp, props["group.id"] + ".properties"), props)
    r = json.loads(jvms.scala.ask("run %s %s %d %d" % (path, topic, total, PARTITIONS))[-1])
    if "error" in r:
        raise RuntimeError("ScalaConsumerCount: %s" % r["error"])
    check_read("the Scala consumer", r["count"], total, [x + 1 for x in r["last"]], ends, r["bad"])
    return (r["count"] - 1) / (r["first_to_last_ms"] / 1000.0), {}


def _java(jvms, cluster, topic, total, ends):
    from . import jvm
    if jvms.java is None:
        jvms.java = jvm.Driver("JavaConsumerPerf", ("-Xmx1g",), jars="kafka")
    group = unique("bench-java")
    lines = jvms.java.ask("--bootstrap-server %s --topic %s --messages %d --group %s --timeout %d --hide-header"
                          % (cluster.bootstrap_servers, topic, total, group, READ_TIMEOUT_MS), until="done")
    rows = [ln.split(", ") for ln in lines if ln.count(", ") == 9]
    if not rows:
        raise RuntimeError("ConsumerPerformance printed no figures: %s" % " | ".join(lines)[-1000:])
    f = rows[-1]
    count, fetch_rate = int(f[4]), float(f[9])
    committed = _committed(cluster, group, topic)
    check_read("ConsumerPerformance", count, total, [committed.get(p, 0) for p in range(PARTITIONS)], ends, 0)
    return fetch_rate, {"rebalance_ms": float(f[6])}


def _committed(cluster, group, topic):
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        return {tp.partition: om.offset for tp, om in admin.list_group_offsets({group: None})[group].items()
                if tp.topic == topic}
    finally:
        admin.close()


# ---------------------------------------------------------------------------------------------------- the rounds

@dataclass
class Client:
    key: str
    label: str
    read: object  # (cluster, topic, total, ends) -> (msg/s, extra)
    samples: list = field(default_factory=list)
    extras: list = field(default_factory=list)
    failure: str = ""
    block: str = ""  # clients of one block read back to back, their order alternating (compared round by round)


def _order(clients, r):
    """Round *r*'s order: the blocks (a client alone is a block of its own) rotated by r, each block's clients
    reversed in odd rounds."""
    blocks = {}
    for c in clients:
        blocks.setdefault(c.block or c.key, []).append(c)
    seq = list(blocks.values())
    k = r % len(seq)
    return [c for b in seq[k:] + seq[:k] for c in (b[::-1] if r % 2 else b)]


def _rounds(clients, cluster, topic, total, ends, rounds, log, what):
    """A warm-up round, then *rounds* rounds, the order rotated by one client (or block) per round; a client whose
    read fails (its check, or an error) reads no more and its rows are void (they say why)."""
    for r in range(rounds + 1):
        for c in _order(clients, r):
            if c.failure:
                continue
            try:
                rate, extra = c.read(cluster, topic, total, ends)
            except Exception as e:  # noqa: BLE001 — a peer failing must not cost the other rows
                c.failure = "%s failed: %r" % (c.label, e)
                log("consume %s: %s" % (what, c.failure))
                continue
            if r > 0:
                c.samples.append(rate)
                c.extras.append(extra)
        log("consume %s round %d%s: %s" % (what, r, " (warm-up, discarded)" if r == 0 else "", ", ".join(
            "%s %.0f" % (c.key, c.samples[-1]) for c in clients if c.samples and not c.failure)))


def _produce(cluster, variant, total, log):
    topic = cluster.create_topic(unique("bench-consume"), PARTITIONS)
    log("consume: producing %d messages (%s) to %d partitions" % (total, variant.name, PARTITIONS))
    cluster.produce_fast(topic, PARTITIONS, total, compression=variant.compression, key_size=variant.key_size,
                         headers=variant.headers)
    ends = [total // PARTITIONS + (1 if p < total % PARTITIONS else 0) for p in range(PARTITIONS)]
    return topic, ends


def _pykafka_available():
    try:
        from pykafka.rdkafka import _rd_kafka  # noqa: F401
        return ""
    except ImportError as e:
        try:
            import pykafka  # noqa: F401
        except ImportError:
            return "pykafka is not installed (.ci/bootstrap installs it)"
        return ("pykafka's rdkafka extension is not built (%s): .ci/bootstrap builds it against librdkafka-dev" % e)


def clients(jvms, main, quick, pykafka_why):
    """The clients of one data variant: zkconsumer, tuned confluent-kafka and the Java consumer for every variant;
    for the main one (*main*) also the librdkafka engine, the scraped reads, kafka-python, the Scala consumer
    (defaults and tuned) and pykafka: with its rdkafka extension unless *pykafka_why* says why not, and pure Python
    in full runs or beside a missing rdkafka figure."""
    out = [Client("zk", "zkconsumer", lambda *a: _zkconsumer(*a), block="zk"),
           Client("ck", "confluent-kafka (tuned)", _confluent),
           Client("java", "Kafka 3.9 ConsumerPerformance", lambda *a: _java(jvms, *a))]
    if not main:
        return out
    out += [Client("zk-rd", "zkconsumer, fetch.engine=librdkafka", lambda *a: _zkconsumer(*a, engine="librdkafka")),
            Client("zk-m15", "zkconsumer, endpoint scraped every 15 s",
                   lambda *a: _zkconsumer(*a, scrape=(15.0, random.uniform(0, 15.0))), block="zk"),
            Client("zk-m100", "zkconsumer, endpoint scraped every 100 ms",
                   lambda *a: _zkconsumer(*a, scrape=(0.1, 0.0)), block="zk"),
            Client("kp", "kafka-python (tuned)", _kafka_python),
            Client("scala", "the Scala consumer (defaults)", lambda *a: _scala(jvms, *a)),
            Client("scala-t", "the Scala consumer (tuned)", lambda *a: _scala(jvms, *a, tuned=True))]
    if not pykafka_why:
        out.append(Client("pk", "pykafka (use_rdkafka=True, tuned)", _pykafka))
    if not quick or pykafka_why:  # pure Python: ~50-65 s a read of 500k
        out.append(Client("pk-py", "pykafka (pure Python)", lambda *a: _pykafka(*a, tuned=False)))
    return out


def run(cluster, quick=False, log=print):
    total = 500_000 if quick else 1_000_000
    rounds = ROUNDS if quick else ROUNDS + 2
    why = _pykafka_available()
    jvms = _Jvms()
    out = []
    try:
        for i, variant in enumerate(VARIANTS):
            topic, ends = _produce(cluster, variant, total, log)
            main = i == 0
            cs = clients(jvms, main, quick, why)
            _rounds(cs, cluster, topic, total, ends, rounds, log, variant.name)
            by = {c.key: c for c in cs}
            if main:
                out += _main_rows(by, total, quick, why)
            else:
                out += _variant_rows(variant, by, total)
    finally:
        jvms.close()
    return out


def _void(by, *keys):
    """Why the rows of these clients are void ("" when they are not): a client that failed a read (its check, or an
    error) has no row from its other reads, nor does one with no samples."""
    for k in keys:
        if by[k].failure:
            return by[k].failure
    for k in keys:
        if not by[k].samples:
            return "%s: no samples" % by[k].label
    return ""


def _against(by, ours, theirs):
    """(our median, their median, ratio of medians, note) or None when either client's reads are void."""
    a, b = by[ours], by[theirs]
    if _void(by, ours, theirs):
        return None
    m, bm = median(a.samples), median(b.samples)
    return m, bm, m / bm, "%s: %s msg/s; %s: %s msg/s" % (a.label, spread(a.samples), b.label, spread(b.samples))


def _peer_row(key, metric, by, ours, theirs, extra_note=""):
    got = _against(by, ours, theirs)
    if got is None:
        return goals.row(key, metric + " (void: not measured)", float("nan"), "msg/s", None, None,
                         _void(by, ours, theirs))
    m, bm, ratio, note = got
    return goals.row(key, metric, round(m), "msg/s", round(bm), round(ratio, 2),
                     note + ("; " + extra_note if extra_note else ""))


def _main_rows(by, total, quick, pykafka_why):
    what = "(1 consumer, 1 stream, 8 partitions, %dk x 100 B, first to last record)" % (total // 1000)
    rows = [
        _peer_row("consume.confluent", "consume msg/s vs confluent-kafka, tuned %s" % what, by, "zk", "ck",
                  "confluent-kafka %s, consume(num_messages=%d)" % (CONFLUENT_TUNED, CONFLUENT_BATCH)),
    ]
    if "pk" in by:
        rows.append(_peer_row("consume.pykafka", "consume msg/s vs pykafka BalancedConsumer with rdkafka", by, "zk",
                              "pk", "pykafka %s, %s" % (_pykafka_version(), PYKAFKA_TUNED)))
    else:
        rows.append(goals.row("consume.pykafka", "consume msg/s vs pykafka BalancedConsumer with rdkafka (not "
                              "measured)", float("nan"), "msg/s", None, None, pykafka_why))
    if "pk-py" in by:
        rows.append(_peer_row("consume.reported", "consume msg/s vs pykafka BalancedConsumer, pure Python", by, "zk",
                              "pk-py", "pykafka %s at its defaults" % _pykafka_version()))
    else:
        rows.append(goals.row("consume.reported", "consume msg/s vs pykafka BalancedConsumer, pure Python (not "
                              "measured)", float("nan"), "msg/s", None, None,
                              "full runs only (python -m bench), and --quick runs without the rdkafka "
                              "extension: ~50-65 s a read of 500k at ~8-25k msg/s"))
    rows += [
        _peer_row("consume.scala", "consume msg/s vs Kafka 1.1.1's Scala consumer, warmed JVM, defaults", by, "zk",
                  "scala", "ZookeeperConsumerConnector in one JVM for every run, its defaults"),
        _peer_row("consume.scala", "consume msg/s vs Kafka 1.1.1's Scala consumer, warmed JVM, tuned", by, "zk",
                  "scala-t", "ZookeeperConsumerConnector in one JVM for every run, %s" % SCALA_TUNED),
        _java_row("consume msg/s vs the Java KafkaConsumer (Kafka 3.9 ConsumerPerformance)", by),
        _peer_row("consume.kafka-python", "consume msg/s vs kafka-python, tuned", by, "zk", "kp",
                  "KafkaConsumer assign + poll, %s, positions resolved before the clock" % KAFKA_PYTHON_TUNED),
        _peer_row("librdkafka.confluent", "consume msg/s, fetch.engine=librdkafka vs confluent-kafka, tuned", by,
                  "zk-rd", "ck", "confluent-kafka %s" % CONFLUENT_TUNED),
    ]
    rows += _metrics_rows(by)
    return rows


def _paired(by, scraped, plain="zk"):
    """Round-by-round ratios scraped / unscraped (the same round's reads)."""
    return [s / p for s, p in zip(by[scraped].samples, by[plain].samples)]


def _metrics_rows(by):
    rows = []
    for key, which, every in (("metrics.15s", "zk-m15", "15 s"), ("metrics.stress", "zk-m100", "100 ms")):
        c = by[which]
        metric = "consume msg/s with the Prometheus endpoint scraped every %s vs unscraped" % every
        why = _void(by, which, "zk")
        if why:
            rows.append(goals.row(key, metric + " (void: not measured)", float("nan"), "msg/s", None, None, why))
            continue
        ratios = _paired(by, which)
        scrapes = sum(e["scrapes"] for e in c.extras)
        shares = [e["cpu_share"] * 100 for e in c.extras]
        r = median(ratios)
        note = ("ratio: the median of the %d rounds' ratios (%s); %s; %d scrapes answered during the timed "
                "windows in all; the endpoint thread's own CPU time %.2f %% of the member's (median); interference "
                "(throughput lost, the scraping client on the same 2 cores included): %.1f %%"
                % (len(ratios), ", ".join("%.3f" % x for x in ratios), spread(c.samples), scrapes, median(shares),
                   (1 - r) * 100))
        rows.append(goals.row(key, metric, round(median(c.samples)), "msg/s", round(median(by["zk"].samples)),
                              round(r, 3), note))
    return rows


def _variant_rows(variant, by, total):
    what = "%s, %dk records" % (variant.name, total // 1000)
    return [_peer_row("consume.reported", "consume msg/s vs confluent-kafka, tuned (%s)" % what, by, "zk", "ck"),
            _java_row("consume msg/s vs the Java KafkaConsumer (%s)" % what, by, "consume.reported")]


def _java_row(metric, by, key="consume.java"):
    """zkconsumer against ConsumerPerformance's ``fetch.nMsg.sec``, both over the tool's window: from the end of the
    group join (zkconsumer: its streams' creation returning) to the last record, so that both windows hold the
    first fetch; zkconsumer's first-to-last figure is in the note."""
    why = _void(by, "zk", "java")
    if why:
        return goals.row(key, metric + " (void: not measured)", float("nan"), "msg/s", None, None, why)
    ours, theirs = [e["ready_rate"] for e in by["zk"].extras], by["java"].samples
    m, bm = median(ours), median(theirs)
    return goals.row(key, metric, round(m), "msg/s", round(bm), round(m / bm, 2), (
        "both from the end of the group join to the last record (the tool's fetch.nMsg.sec, in whole ms; "
        "zkconsumer's from its streams' creation returning), its defaults: zkconsumer %s msg/s (first to last "
        "record: median %.0f), ConsumerPerformance %s msg/s; its group join median %.0f ms"
        % (spread(ours), median(by["zk"].samples), spread(theirs),
           median([e["rebalance_ms"] for e in by["java"].extras]))))


def _pykafka_version():
    try:
        import pykafka
    except ImportError:
        return "(not installed)"
    return pykafka.__version__


TIME_GOES = ("the default engine's fetcher thread checks each fetched batch (CRC, every record's structure) in C "
             "and queues it undecoded (~0.1 us); the consuming thread builds each record as it hands it out (C) "
             "beside the application's own loop (~0.49 us together); kafka-python's IO thread reads the sockets "
             "(~0.22 us, most of it copies and the kernel mapping pages for its buffers): ~0.83 us of CPU per 100 B "
             "record in all (python -m bench.cpu, 3 rounds, this VM), all on one interpreter lock, against ~1.29 us "
             "for tuned confluent-kafka, ~0.95 us of it its one Python thread (it fetches and decodes on "
             "librdkafka's own threads in C). The Java consumers decode on one thread while the caller iterates, JIT-compiled. The "
             "librdkafka engine routes its partitions to a queue of its own and builds each record on the fetcher "
             "thread in C from librdkafka's messages (no confluent-kafka Message; up to 2,000 per poll, untracked by "
             "the garbage collector): ~0.88 us on that thread, with librdkafka's own handing out of each message, "
             "then hands records out as the default engine does (~0.48 us): ~1.64 us of process CPU per record. "
             "Metrics: one scrape costs the member ~0.6 ms of CPU on the endpoint's own thread (collecting, encoding "
             "the page, the HTTP exchange).")
