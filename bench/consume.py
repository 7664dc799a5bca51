"""consume messages/s: 1 consumer, 1 stream, 8 partitions, 100-byte messages, against raw kafka-python and the peers.

Every consumer reads the same partitions from offset 0 and touches every record once; the clock starts when the
consumer is ready to read (after its start-up: group registration and rebalance for zkconsumer and pykafka,
construction and assignment for kafka-python and confluent-kafka) and stops at the last record. Peers, in the same
run on the same topic, runs alternating:

* pykafka 2.8 ``BalancedConsumer(managed=False)`` — the other ZooKeeper-coordinated Python consumer (pure-Python
  protocol, Fetch v2 at most, so the broker down-converts the v2 batches to message format v1 for it);
* Kafka 1.1.1's Scala consumer (``kafka.consumer.ZookeeperConsumerConnector``, bench/jvm/ScalaConsumerCount.java,
  its defaults, one JVM per run): the clock runs from the first message to the Nth, so JVM start-up and the first
  fetch are excluded (its row compares zkconsumer timed the same way, first message to Nth; its class loading and
  JIT warm-up on the first messages are not excluded); it also fetches with an old Fetch version, down-converted by
  the broker;
* raw confluent-kafka (librdkafka, assign + consume in batches, its defaults): informational.

The librdkafka engine: zkconsumer again with ``fetch.engine=librdkafka``, against raw confluent-kafka at its defaults
(the goal), and against raw confluent-kafka given the one setting the engine changes for speed,
``fetch.queue.backoff.ms`` (reported): at librdkafka's default of 1000 ms a consumer reading a backlog faster than
the queue refills sits idle most of the run (raw confluent-kafka here: ~150-215k msg/s at the default, ~1M msg/s at
10-100 ms).

The cost of metrics: zkconsumer again with its Prometheus endpoint (``zkconsumer.metrics.start_metrics_server``)
scraped over HTTP every 100 ms during the run, against the same consumer without the endpoint while the same
scraping client scrapes a stand-in copy of its page at the same rate (the client shares the machine's 2 cores here,
as a Prometheus on its own host would not), in triples of runs back to back with a run that has no scraping at all
(reported: the median of the triples' ratios, each from the first to the last message). Single runs vary by +-15 %
here, so twelve triples' median moves by several percent between runs of the same code (0.95-1.02 seen): it cannot
resolve a 3 % cost. The goal is therefore measured directly: the endpoint's thread counts the CPU time it spends
answering (``MetricsServer.cpu_seconds``: collecting, encoding and the HTTP exchange), and its share of the member
process's CPU time over the same span must stay under 3 %.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

from .common import Result, median, unique

PARTITIONS = 8


_SCRAPE_LOOP = """
import socket, sys, threading, time, urllib.request
url, every = sys.argv[1], float(sys.argv[2])
if url.startswith("stand-in:"):  # serve a copy of the member's page from this process, and scrape that
    body = open(url[len("stand-in:"):], "rb").read()
    page = b"HTTP/1.0 200 OK\\r\\nContent-Type: text/plain; version=0.0.4; charset=utf-8\\r\\n" \\
        b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body
    server = socket.create_server(("127.0.0.1", 0))
    def serve():
        while True:
            c, _ = server.accept()
            with c:
                c.recv(65536)
                c.sendall(page)
    threading.Thread(target=serve, daemon=True).start()
    url = "http://127.0.0.1:%d/metrics" % server.getsockname()[1]
print("ready", flush=True)  # started (interpreter and imports: ~30-40 ms of CPU) before the timed run
sys.stdin.readline()  # scrape from "go" on
while True:
    time.sleep(every)
    with urllib.request.urlopen(url, timeout=5) as r:
        if b"zkconsumer_messages_total" in r.read():
            print("ok", flush=True)
"""


TRIPLES = 4  # metrics triples per run: the metrics row's ratio is the median of the triples' ratios


class _Scraper:
    """Scrapes a member's Prometheus endpoint every `every` s over HTTP from another process, as a Prometheus
    server would (every 100 ms: 100x more often than a usual 10-15 s scrape interval, to make the cost visible).

    The endpoint (collection and HTTP serving) runs in the member's process. A real Prometheus scrapes from its
    own host; here the scraping client shares the member's 2 cores, and alone it slows the member by ~2 % (a
    session-10 measurement). So the member's cost is measured against a *stand-in*: ``stand_in=True`` makes the
    same client, at the same rate, scrape a copy of the member's page served by the scraping process itself (a
    plain socket: ~0.1 ms per scrape, against the member's ~0.6-0.8 ms), and the member serves nothing."""

    def __init__(self, conn, every=0.1, stand_in=False):
        from prometheus_client import CollectorRegistry, generate_latest
        from zkconsumer.metrics import MetricsCollector, start_metrics_server
        self.server, self.every, self.scrapes, self._page = None, every, 0, None
        if stand_in:
            registry = CollectorRegistry(auto_describe=False)
            registry.register(MetricsCollector(conn))
            fd, self._page = tempfile.mkstemp(suffix=".prom")
            with os.fdopen(fd, "wb") as f:
                f.write(generate_latest(registry))  # rendered once, before the timed run
            self.url = "stand-in:" + self._page
        else:  # what `zkconsumer consume --metrics-port` serves
            self.server = start_metrics_server(conn, 0, addr="127.0.0.1")
            self.url = "http://127.0.0.1:%d/metrics" % self.server.port
        self.proc = self._spawn()

    def _spawn(self):
        proc = subprocess.Popen([sys.executable, "-c", _SCRAPE_LOOP, self.url, str(self.every)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if proc.stdout.readline() != b"ready\n":
            proc.kill()
            raise RuntimeError("the scraping process did not start: %s" % proc.communicate()[0][-200:])
        return proc

    def start(self):
        """Start scraping. The scraping process was started with the scraper, so its interpreter's start-up
        (~30-40 ms of CPU) is not counted in the timed run."""
        if self.proc is None:
            self.proc = self._spawn()
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def finish(self):
        """Stop the scraping process; the number of scrapes it made."""
        if self.proc is not None:
            self.proc.terminate()
            out, _ = self.proc.communicate(timeout=30)
            self.scrapes += out.count(b"ok")
            self.proc = None
        return self.scrapes

    def close(self):
        self.finish()
        if self.server is not None:
            self.server.close()
        if self._page is not None:
            os.unlink(self._page)


def _zkconsumer_rate(cluster, topic, total, scrape=None, engine="kafka-python"):
    """(msg/s from ready to the last message, msg/s from the first to the last, and for a scraped member (the
    endpoint's share of the process's CPU, the scrapes it answered, its CPU seconds) from the first to the last
    message, else None). ``scrape``: None, "member" (the member's endpoint scraped) or "stand-in" (the same
    scraping, of a stand-in page: see :class:`_Scraper`)."""
    from zkconsumer.config import ConsumerConfig
    from zkconsumer.consumer import ZookeeperConsumerConnector
    cfg = ConsumerConfig.from_properties({
        "group.id": unique("bench-consume"), "zookeeper.connect": cluster.zookeeper_connect,
        "auto.offset.reset": "smallest", "auto.commit.enable": "false", "consumer.timeout.ms": "30000",
        "fetch.engine": engine})
    conn = ZookeeperConsumerConnector(cfg)
    scraper = _Scraper(conn, stand_in=scrape == "stand-in") if scrape else None
    try:
        [stream] = conn.create_message_streams({topic: 1})[topic]
        if scraper is not None:
            scraper.start()
        n = 0
        t0 = time.perf_counter()
        t_first = None
        for _ in stream:
            n += 1
            if n == 1:
                t_first = time.perf_counter()
                cpu_first, (served_first, scrapes_first) = time.process_time(), _served(scraper)
            if n >= total:
                break
        t_last = time.perf_counter()
        cpu, (served, scrapes) = time.process_time() - cpu_first, _served(scraper)
        if scraper is not None and scraper.finish() == 0:
            raise RuntimeError("the metrics endpoint was never scraped during the run")
        # (ready to last: the main row; first to last, as the Scala consumer's clock runs: its row)
        cost = ((served - served_first) / cpu, scrapes - scrapes_first, served - served_first) \
            if scrape == "member" else None
        return n / (t_last - t0), (n - 1) / (t_last - t_first), cost
    finally:
        if scraper is not None:
            scraper.close()
        conn.shutdown()


def _served(scraper):
    """(CPU seconds the member's endpoint has spent answering, scrapes it answered) so far; (0, 0) without one."""
    server = scraper.server if scraper is not None else None
    return (server.cpu_seconds, server.scrapes) if server is not None else (0.0, 0)


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


def _confluent_rate(cluster, topic, total, settings=None):
    try:
        from confluent_kafka import Consumer, TopicPartition
    except ImportError:
        return None
    c = Consumer(dict({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("bench-ck"),
                       "enable.auto.commit": False}, **(settings or {})))
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


def _pykafka_version():
    import pykafka
    return pykafka.__version__


def _pykafka_rate(cluster, topic, total):
    try:
        from pykafka import KafkaClient
    except ImportError:
        return None
    client = KafkaClient(hosts=cluster.bootstrap_servers, broker_version="1.0.0")  # >= 0.10: ApiVersions discovery
    c = client.topics[topic].get_balanced_consumer(
        consumer_group=unique("bench-pykafka").encode(), managed=False, zookeeper_connect=cluster.zookeeper_connect,
        auto_commit_enable=False, auto_offset_reset=-2, consumer_timeout_ms=30000)  # -2: OffsetType.EARLIEST
    try:
        n = 0
        t0 = time.perf_counter()
        for m in c:
            if m.value is not None:
                n += 1
            if n >= total:
                break
        return n / (time.perf_counter() - t0)
    finally:
        c.stop()


def _scala_rate(cluster, topic, total):
    """(rate, note) from one ScalaConsumerCount JVM; (None, why) when no JDK or no Kafka 1.1.1 jars."""
    from . import jvm
    try:
        jvm.classpath()
    except jvm.Unavailable as e:
        return None, str(e)
    with tempfile.TemporaryDirectory(prefix="zkconsumer-bench-scala-") as tmp:
        props = jvm.write_props(os.path.join(tmp, "consumer.properties"), {
            "group.id": unique("bench-scala"), "zookeeper.connect": cluster.zookeeper_connect,
            "auto.offset.reset": "smallest", "auto.commit.enable": "false", "consumer.timeout.ms": "30000"})
        p = subprocess.run(jvm.command("ScalaConsumerCount", [props, topic, str(total)], ("-Xmx512m",)),
                           capture_output=True, text=True, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError("ScalaConsumerCount exited %s: %s" % (p.returncode, p.stderr[-2000:]))
    r = json.loads(lines[-1])
    if r["count"] < total:
        raise RuntimeError("ScalaConsumerCount read %d of %d messages" % (r["count"], total))
    return (r["count"] - 1) / (r["first_to_last_ms"] / 1000.0), r["ready_to_first_ms"]


def run(cluster, quick=False, log=print):
    total = 500_000 if quick else 1_000_000
    runs = 3  # alternating runs, medians: single runs vary by +-15% on a shared 2-core machine
    topic = cluster.create_topic(unique("bench-consume"), PARTITIONS)
    log("consume: producing %d messages of 100 B to %d partitions" % (total, PARTITIONS))
    cluster.produce_fast(topic, PARTITIONS, total)
    # pykafka reads a prefix of the topic in --quick (pure Python, ~10x slower: 3 full reads would take minutes)
    pk_total = min(total, 150_000) if quick else total
    ours, ours_first, scraped, rd, base, ceiling, tuned, pk, scala, scala_first, scala_why = \
        [], [], [], [], [], [], [], [], [], [], None
    pair_ratios, plain_ratios, harness_ratios, stand_in = [], [], [], []
    cpu_shares, scrape_counts, served_per_scrape = [], [], []
    backoff = _engine_backoff()
    pk_why = "pykafka is not installed (pip install --no-deps pykafka==2.8.0)"
    for i in range(runs):
        base.append(_kafka_python_rate(cluster, topic, total))
        for t in range(TRIPLES):  # plain, stand-in scraped, member scraped back to back, in turns: ratios per triple
            got = {}
            kinds = [None, "stand-in", "member"]
            k = (i * TRIPLES + t) % 3
            for scrape in kinds[k:] + kinds[:k]:
                ready_rate, got[scrape], cost = _zkconsumer_rate(cluster, topic, total, scrape=scrape)
                if scrape == "member":
                    scraped.append(ready_rate)
                    cpu_shares.append(cost[0])
                    scrape_counts.append(cost[1])
                    if cost[1]:
                        served_per_scrape.append(cost[2] / cost[1])
                elif scrape == "stand-in":
                    stand_in.append(ready_rate)
                elif scrape is None:
                    ours.append(ready_rate)
                    ours_first.append(got[None])
            # first to last message: the scrapes run all along, the fetchers' start (~0.1 s of a 0.7 s run) is noise
            pair_ratios.append(got["member"] / got["stand-in"])
            plain_ratios.append(got["member"] / got[None])
            harness_ratios.append(got["stand-in"] / got[None])
        try:
            rd.append(_zkconsumer_rate(cluster, topic, total, engine="librdkafka")[0])
        except Exception as e:  # noqa: BLE001  (confluent-kafka missing: the row says so)
            log("zkconsumer with fetch.engine=librdkafka failed: %r" % (e,))
        c = _confluent_rate(cluster, topic, total)
        if c:
            ceiling.append(c)
        if backoff:  # raw confluent-kafka with the one setting the engine changes for speed
            tuned.append(_confluent_rate(cluster, topic, total, backoff))
        try:  # a peer failing must not cost the other rows
            k = _pykafka_rate(cluster, topic, pk_total)
        except Exception as e:  # noqa: BLE001
            k, pk_why = None, "pykafka failed: %r" % (e,)
            log(pk_why)
        if k:
            pk.append(k)
        try:
            s, extra = _scala_rate(cluster, topic, total)
        except Exception as e:  # noqa: BLE001
            s, extra = None, "the Scala consumer failed: %r" % (e,)
            log(extra)
        if s:
            scala.append(s)
            scala_first.append(extra)
        else:
            scala_why = extra
        log("consume run %d: zkconsumer %.0f msg/s, kafka-python %.0f msg/s%s%s%s" % (
            i + 1, ours[-1], base[-1], (", confluent-kafka %.0f msg/s" % c) if c else "",
            (", pykafka %.0f msg/s" % k) if k else "", (", Scala consumer %.0f msg/s" % s) if s else ""))
    value, baseline = median(ours), median(base)
    out = [Result("consume messages/s (1 consumer, 1 stream, 8 partitions, %dk x 100 B)" % (total // 1000),
                  round(value), "msg/s", round(baseline), round(value / baseline, 2), ">= 1.0x kafka-python",
                  value / baseline >= 1.0, "baseline: raw kafka-python KafkaConsumer assign + poll, defaults")]
    m, pr, share = median(scraped), median(pair_ratios), median(cpu_shares) * 100
    served_ms = median(served_per_scrape) * 1000
    out.append(Result("metrics: the Prometheus endpoint's share of a consuming member's CPU, scraped every 100 ms "
                      "(same data)", round(share, 2), "%", None, None, "<= 3 % (metrics cost < 3 %)", share <= 3.0,
                      "zkconsumer's endpoint (start_metrics_server: one thread in the member's process, collecting "
                      "and encoding included) scraped over loopback from another process, 100x as often as a usual "
                      "10-15 s interval; the thread's CPU time answering, over the member process's CPU time, from "
                      "the first to the last message; median of %d runs (%s; %.0f scrapes answered per run on "
                      "average), %.2f ms of CPU per scrape"
                      % (len(cpu_shares), ", ".join("%.2f" % (x * 100) for x in cpu_shares),
                         sum(scrape_counts) / max(1, len(scrape_counts)), served_ms)))
    out.append(Result("consume messages/s with the Prometheus endpoint scraped every 100 ms (same data)", round(m),
                      "msg/s", round(median(stand_in)), round(pr, 3),
                      "reported (the row above is the goal: single runs vary by +-15 % here)", None,
                      "baseline: the same consumer without the endpoint (its counters are always kept), the same "
                      "scraping client scraping a stand-in copy of its page at the same rate (the client shares the "
                      "2 cores, as a real Prometheus on its own host would not); ratio: the median of %d "
                      "triples of runs back to back, in turns (%s), each a rate from the first to the last message; "
                      "against the consumer with no scraping at all the median is %.3f (the scraping client alone: "
                      "%.3f). Twelve triples cannot resolve a 3 %% cost under this noise (medians of 0.95-1.02 in "
                      "runs of the same code), hence the CPU share above"
                      % (len(pair_ratios), ", ".join("%.3f" % r for r in pair_ratios), median(plain_ratios),
                         median(harness_ratios))))
    if pk:
        b = median(pk)
        out.append(Result("consume messages/s vs pykafka BalancedConsumer(managed=False) (same data)", round(value),
                          "msg/s", round(b), round(value / b, 2), ">= 1.0x pykafka", value / b >= 1.0,
                          "baseline: pykafka %s pure Python, defaults (auto commit off), %s messages per run" % (
                              _pykafka_version(), "first %dk" % (pk_total // 1000) if pk_total < total else "all")))
    else:
        out.append(Result("consume messages/s vs pykafka (not measured)", float("nan"), "msg/s", None, None,
                          ">= 1.0x pykafka", None, pk_why))
    if scala:
        b, v = median(scala), median(ours_first)
        out.append(Result("consume messages/s vs scala: Kafka 1.1.1's ZookeeperConsumerConnector (same data)", round(v),
                          "msg/s", round(b), round(v / b, 2), ">= 1.0x Scala consumer", v / b >= 1.0,
                          "both clocks run from the first to the %dth message (zkconsumer ready to last: %.0f msg/s); "
                          "baseline: ZookeeperConsumerConnector (1 stream, defaults, Java 17; JVM start-up excluded; "
                          "group join to first message %.0f ms median)" % (total, value, median(scala_first))))
    else:
        out.append(Result("consume messages/s vs scala: Kafka 1.1.1's ZookeeperConsumerConnector (not measured)", float("nan"), "msg/s", None,
                          None, ">= 1.0x Scala consumer", None, scala_why or "-"))
    if ceiling and rd:
        b, r = median(ceiling), median(rd)
        out.append(Result("consume messages/s, fetch.engine=librdkafka vs raw confluent-kafka (same data)", round(r),
                          "msg/s", round(b), round(r / b, 2), ">= 0.9x confluent-kafka", r / b >= 0.9,
                          "baseline: raw confluent-kafka at its defaults, as the other peers run; zkconsumer on "
                          "librdkafka: assign mode, %s, records converted to ConsumerRecords in %s; the default engine "
                          "did %.0f msg/s" % (_backoff_text(backoff), _converter(), value)))
    if tuned and rd:
        b, r = median(tuned), median(rd)
        out.append(Result("consume messages/s, fetch.engine=librdkafka vs raw confluent-kafka with the engine's "
                          "fetch.queue.backoff.ms (same data)", round(r), "msg/s", round(b), round(r / b, 2),
                          "reported (the per-record cost of Python objects and the streams)", None,
                          "baseline: raw confluent-kafka assign + consume(10000) with %s, counting Messages without "
                          "touching them; zkconsumer builds a ConsumerRecord per Message and hands it through a "
                          "stream (another thread)" % _backoff_text(backoff)))
    if ceiling:
        b = median(ceiling)
        out.append(Result("consume messages/s vs raw confluent-kafka (same data)", round(value), "msg/s", round(b),
                          round(value / b, 2), ">= 0.9x confluent-kafka (informational)", None,
                          "baseline: confluent-kafka Consumer assign + consume(10000); 0.9x %s" % (
                              "reached" if value / b >= 0.9 else "not reached")))
    return out


def _engine_backoff():
    """The fetch.queue.backoff.ms the librdkafka engine sets at the bench's defaults, as a settings dict ({} when
    confluent-kafka is missing or too old for the key)."""
    try:
        from zkconsumer.config import ConsumerConfig
        from zkconsumer.consumer import librdkafka
        cfg = ConsumerConfig.from_properties({"group.id": "bench", "zookeeper.connect": "127.0.0.1:1"})
        return librdkafka._queue_backoff(cfg)
    except ImportError:
        return {}


def _backoff_text(backoff):
    return ("fetch.queue.backoff.ms=%d (librdkafka's default: 1000)" % backoff["fetch.queue.backoff.ms"]
            if backoff else "librdkafka's default fetch.queue.backoff.ms")


def _converter():
    from zkconsumer.consumer import librdkafka  # (imports confluent-kafka only when a client is made)
    return "C" if librdkafka.CONVERTER == "c" else "Python"


TIME_GOES = ("the fetcher thread decodes batches in C (no record is tracked by the garbage collector) and queues "
             "them; the rest is the stream handing records out (about half of the interpreter's time), "
             "kafka-python's Fetch parsing and socket reads. The Scala consumer decodes on one thread while "
             "another iterates; zkconsumer's threads share the interpreter lock. pykafka decodes in pure Python "
             "and fetches with v2 (the broker down-converts). Raw confluent-kafka at its defaults is held back by "
             "librdkafka's fetch.queue.backoff.ms (1000 ms: once its prefetch queue is full it waits a second "
             "before fetching again, and sits idle most of the run); the librdkafka engine sets it to "
             "fetch.wait.max.ms (100 ms). With that setting raw confluent-kafka, which only counts its Messages, "
             "reads ~1M msg/s here; the engine builds a ConsumerRecord from each Message (8 method calls, ~0.8 µs "
             "in C) and hands it through a stream on another thread: about 0.35x of that raw figure, and under the "
             "default engine, which decodes Fetch responses straight into records. Metrics: one scrape costs the "
             "member ~0.6 ms of CPU on the endpoint's own thread (collecting, encoding the page, the HTTP "
             "exchange), ~0.6 % of its CPU at 10 scrapes/s.")
