"""Members and producers for the tests: real ZooKeeper and broker, never mocks.

* :func:`produce_tracked` — produce and return the broker-acknowledged (partition, offset) of every record
  (tansu's produce responses carry the right offsets even for multi-record batches, while its
  ListOffsets(latest) does not);
* :func:`expected_range` — what Scala's range assignor decides for the group's *registered* members;
* :class:`CliConsumer` — one ``zkconsumer consume`` process, its stdout/stderr read by threads;
* :class:`StreamCollector` — a thread draining one in-process :class:`KafkaStream`;
* :func:`expire_session` — a member's ZooKeeper session expired from the server side;
* :class:`BrokerMember` — a broker-coordinated ``KafkaConsumer`` of a group, polling on a thread.

Members get :data:`FAST_PROPS` (``smallest``, 200 ms commits, 4 s sessions) unless started with
``defaults=True``: then they run on :data:`PRODUCTION_PROPS`, i.e. the settings users run (``largest``, a 60 s
auto-commit interval, 6 s sessions, the default rebalance back-off), for tests whose claim is about the defaults.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from kafka import KafkaConsumer
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from tests.support.waiting import wait_until
from zkconsumer.core.assignors import range_assign
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.consumer import ZookeeperConsumerConnector
from zkconsumer.consumer.ownership import read_owners
from zkconsumer.consumer.partition_info import PartitionTopicInfo
from zkconsumer.errors import ConsumerTimeoutError
from zkconsumer.core.layout import codecs, paths
from zkconsumer.core.subscription.topic_count import consumers_per_topic

# short timeouts so that failover and rebalances happen within seconds (ZooKeeper runs with tickTime=500,
# minSessionTimeout=1000, so a 4 s session timeout is granted as asked)
FAST_PROPS = {
    "zookeeper.session.timeout.ms": "4000",
    "auto.commit.interval.ms": "200",
    "rebalance.backoff.ms": "200",
    "rebalance.max.retries": "20",
    "auto.offset.reset": "smallest",
}
# nothing but the documented defaults of ConsumerConfig (a test may add what its claim does not depend on)
PRODUCTION_PROPS = {}
# ZKCONSUMER_TEST_FETCH_ENGINE=librdkafka runs every member the tests start on the librdkafka fetch engine
# (tests/consumer/test_fetch_engine.py runs the core scenarios on it in every run)
if os.environ.get("ZKCONSUMER_TEST_FETCH_ENGINE"):
    FAST_PROPS["fetch.engine"] = os.environ["ZKCONSUMER_TEST_FETCH_ENGINE"]
    PRODUCTION_PROPS["fetch.engine"] = os.environ["ZKCONSUMER_TEST_FETCH_ENGINE"]


def base_props(defaults=False):
    """A copy of the settings a helper-started member starts from: PRODUCTION_PROPS or FAST_PROPS."""
    return dict(PRODUCTION_PROPS if defaults else FAST_PROPS)


def deliver_from_the_log_end(member, bootstrap, topic, partitions, count, timeout=60):
    """Wait for *member* (a :class:`CliConsumer` at ``auto.offset.reset=largest``) to join, then have it deliver
    *count* records produced round robin over the topic's *partitions*. Such a member starts each partition at the
    log end its fetcher finds when it first asks, which can be after its "assign" event: what is produced before
    then is never delivered. So first one record per partition at a time, until the member has printed one of
    each, then the *count* records, waiting until it has printed them."""
    wait_until(lambda: any(e["event"] == "assign" for e in member.events), timeout, message="%s's join" % member.name)
    deadline = time.monotonic() + timeout
    while {p for p, _ in member.seen(topic)} != set(range(partitions)):
        if time.monotonic() >= deadline:
            raise AssertionError("%s delivered nothing of %s within %.0f s" % (member.name, topic, timeout))
        for p in range(partitions):
            produce_tracked(bootstrap, topic, 1, partition=p, tag="probe")
        probe_deadline = min(deadline, time.monotonic() + 3)
        while time.monotonic() < probe_deadline and {p for p, _ in member.seen(topic)} != set(range(partitions)):
            time.sleep(0.1)
    before = len(member.seen(topic))
    produce_tracked(bootstrap, topic, count, partitions=partitions)
    wait_until(lambda: len(member.seen(topic)) == before + count, timeout,
               message="%s to deliver %d records" % (member.name, count))


#: how far back a record's timestamp may be and still outlive the test: the broker deletes a segment whose newest
#: timestamp is older than log.retention.hours (168, Kafka's default) at its next retention check (every minute on the
#: test cluster), and a reader that expects the record then waits for ever
RETENTION_S = 168 * 3600


def recent_timestamp_ms():
    """A record timestamp (ms) an hour ago, in whole seconds: well inside the broker's retention."""
    return (int(time.time()) - 3600) * 1000


def kafka_commit(bootstrap, group, offsets):
    """Commit ``{(topic, partition): offset}`` for *group* to Kafka's offset manager (as a Kafka-phase member does)."""
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    store = KafkaOffsetStore(bootstrap, group)
    try:
        store.commit(offsets).raise_for_errors()
    finally:
        store.close()


def produce_tracked(bootstrap, topic, count, partitions=None, partition=None, tag="m"):
    """Produce ``count`` records; returns [(partition, offset, value_str)] as acknowledged by the broker.

    Records go round-robin over ``range(partitions)`` when given, to ``partition`` when given, else by key.
    Values are unique: ``"<tag>-<i>"``.
    """
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1, enable_idempotence=False)
    try:
        futures = []
        for i in range(count):
            value = "%s-%d" % (tag, i)
            p = (i % partitions) if partitions else partition
            futures.append((value, producer.send(topic, key=("k%d" % i).encode(), value=value.encode(),
                                                 partition=p)))
        producer.flush(timeout=60)
        out = []
        for value, fut in futures:
            md = fut.get(timeout=30)
            out.append((md.partition, md.offset, value))
        return out
    finally:
        producer.close(timeout=10)


class BackgroundProducer(threading.Thread):
    """Produces small batches round-robin over the partitions until stop(); .produced holds the acks."""

    def __init__(self, bootstrap, topic, partitions, batch=12, pause=0.1, tag="bg"):
        super().__init__(daemon=True, name="test-producer")
        self.args = (bootstrap, topic, partitions, batch, pause, tag)
        self.produced = []
        self.error = None
        self._halt = threading.Event()

    def run(self):
        bootstrap, topic, partitions, batch, pause, tag = self.args
        n = 0
        try:
            while not self._halt.is_set():
                self.produced.extend(produce_tracked(bootstrap, topic, batch, partitions=partitions,
                                                     tag="%s%d" % (tag, n)))
                n += 1
                self._halt.wait(pause)
        except Exception as e:  # surfaced by stop()
            self.error = e

    def stop(self, timeout=60):
        self._halt.set()
        self.join(timeout)
        assert not self.is_alive(), "background producer did not stop"
        if self.error is not None:
            raise AssertionError("background producer failed: %r" % (self.error,))
        return list(self.produced)


class SteadyProducer(threading.Thread):
    """One producer (acks=1) writing one record to every partition per round, ``pause`` s apart, until stop();
    .produced holds the acknowledged (partition, offset, value). Its steady cadence makes a gap in delivery
    measurable to a few tens of milliseconds (BackgroundProducer opens a producer per batch)."""

    def __init__(self, bootstrap, topic, partitions, pause=0.02, tag="steady"):
        super().__init__(daemon=True, name="test-steady-producer")
        self.args = (bootstrap, topic, partitions, pause, tag)
        self.produced = []
        self.error = None
        self._halt = threading.Event()

    def run(self):
        from kafka import KafkaProducer
        bootstrap, topic, partitions, pause, tag = self.args
        try:
            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks=1, enable_idempotence=False)
        except Exception as e:
            self.error = e
            return
        n = 0
        try:
            while not self._halt.is_set():
                sent = []
                for p in range(partitions):
                    value = "%s-%d" % (tag, n)
                    n += 1
                    sent.append((value, producer.send(topic, key=value.encode(), value=value.encode(), partition=p)))
                for value, fut in sent:
                    md = fut.get(timeout=30)
                    self.produced.append((md.partition, md.offset, value))
                self._halt.wait(pause)
        except Exception as e:  # surfaced by stop()
            self.error = e
        finally:
            producer.close(timeout=10)

    stop = BackgroundProducer.stop


def group_members(zk, group):
    """{consumer id: ConsumerRegistration} of the registered members."""
    base = paths.group_ids_path(group)
    if not zk.exists(base):
        return {}
    out = {}
    for cid in zk.get_children(base):
        try:
            data, _ = zk.get(base + "/" + cid)
        except Exception:
            continue
        out[cid] = codecs.decode_consumer_registration(data, base + "/" + cid)
    return out


def topic_partitions(zk, topic):
    data, _ = zk.get(paths.topic_path(topic))
    return codecs.decode_topic_assignment(data, paths.topic_path(topic)).partition_ids()


def expected_range(zk, group, topics):
    """The global range assignment (thread id per (t, p)) computed from the registered members' subscriptions
    and the partition maps in /brokers/topics — what every member must converge to."""
    members = group_members(zk, group)
    cft = consumers_per_topic({cid: (r.subscription, r.pattern) for cid, r in members.items()}, topics)
    return range_assign(cft, {t: topic_partitions(zk, t) for t in topics})


def owners(zk, group, topics):
    """{(t, p): owner znode data} as found in /consumers/[g]/owners."""
    return read_owners(zk, group, topics)


def wait_for_assignment(zk, group, topics, n_members, timeout, extra=None):
    """Wait until n_members are registered and the owner znodes equal the range assignment of those members;
    returns the assignment."""
    def check():
        if len(group_members(zk, group)) != n_members:
            return None
        want = expected_range(zk, group, topics)
        have = owners(zk, group, topics)
        if want and want == have and (extra is None or extra(want)):
            return want
        return None
    return wait_until(check, timeout, interval=0.1,
                      message="%d members of %s to own %s per range" % (n_members, group, topics))


def duplicates(seen):
    """[(partition, offset)] -> the set of pairs that appear more than once."""
    counts = {}
    for x in seen:
        counts[x] = counts.get(x, 0) + 1
    return {x for x, c in counts.items() if c > 1}


class CliConsumer:
    """A ``zkconsumer consume --format jsonl --events`` process. stdout lines -> .records, stderr event lines ->
    .events (other stderr lines -> .log). Always call .kill() (idempotent) in a finally/fixture.

    ``props`` go on top of FAST_PROPS, or of PRODUCTION_PROPS with ``defaults=True``."""

    def __init__(self, services, group, topics, consumer_id=None, props=None, streams=1, extra_args=(),
                 defaults=False):
        self.name = consumer_id or "anon"
        cmd = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", services.zookeeper_connect,
               "--group", group, "--format", "jsonl", "--events", "--streams", str(streams)]
        for t in topics:
            cmd += ["--topic", t]
        merged = base_props(defaults)
        merged.update(props or {})
        self.props = dict(merged)
        if consumer_id:
            merged["consumer.id"] = consumer_id
        for k, v in merged.items():
            cmd += ["--property", "%s=%s" % (k, v)]
        cmd += list(extra_args)
        self.consumer_id = "%s_%s" % (group, consumer_id) if consumer_id else None
        self.records = []   # dicts {"topic","partition","offset","key","value"}
        self.events = []    # dicts {"event","partitions"}
        self.log = []
        self.lock = threading.Lock()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    def _read_stdout(self):
        for raw in self.proc.stdout:
            now = time.monotonic()
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                with self.lock:
                    self.log.append("stdout: " + line)
                continue
            self._stamp(rec, now)
            with self.lock:
                self.records.append(rec)

    def _stamp(self, rec, now):
        """Hook: subclasses may record when a record or an event was read (TimedConsumer)."""

    def _read_stderr(self):
        for raw in self.proc.stderr:
            now = time.monotonic()
            line = raw.decode("utf-8", "replace").rstrip()
            ev = None
            if line.startswith("{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    ev = None
            with self.lock:
                if isinstance(ev, dict) and "event" in ev:
                    self._stamp(ev, now)
                    self.events.append(ev)
                else:
                    self.log.append(line)

    def seen(self, topic=None):
        """[(partition, offset)] printed so far (in print order)."""
        with self.lock:
            return [(r["partition"], r["offset"]) for r in self.records if topic is None or r["topic"] == topic]

    def values(self):
        with self.lock:
            return [r["value"] for r in self.records]

    def last_offsets(self, topic):
        """{partition: offset of the last record printed for it}."""
        out = {}
        with self.lock:
            for r in self.records:
                if r["topic"] == topic:
                    out[r["partition"]] = max(out.get(r["partition"], -1), r["offset"])
        return out

    def alive(self):
        return self.proc.poll() is None

    def terminate(self, timeout=30):
        """SIGTERM and wait; returns the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("%s did not exit within %.0f s of SIGTERM; stderr tail:\n%s"
                                 % (self.name, timeout, "\n".join(self.log[-30:])))
        self.join_readers()
        return rc

    def kill(self):
        """SIGKILL (no cleanup at all, like kill -9); idempotent."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.join_readers()

    def join_readers(self):
        for t in self._threads:
            t.join(5)

    def describe(self):
        """The member's exit code, last events, every traceback it printed (in full) and its stderr's tail."""
        with self.lock:
            tracebacks = []
            for i, line in enumerate(self.log):
                if "Traceback" in line:
                    end = i + 1
                    while end < len(self.log) and end < i + 60 and self.log[end][:1] in (" ", "\t"):
                        end += 1
                    tracebacks.extend(self.log[max(0, i - 1):end + 1])
            return "%s rc=%s events=%s\ntracebacks:\n%s\nstderr tail:\n%s" % (
                self.name, self.proc.poll(), self.events[-5:], "\n".join(tracebacks), "\n".join(self.log[-20:]))


def connector(services, group, listener=None, defaults=False, **props):
    """An in-process ZookeeperConsumerConnector with FAST_PROPS, or PRODUCTION_PROPS with ``defaults=True``
    (+ props, '_' in keys stays as given)."""
    merged = base_props(defaults)
    merged.update({"group.id": group, "zookeeper.connect": services.zookeeper_connect})
    merged.update(props)
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties(merged), listener=listener)


class StreamCollector(threading.Thread):
    """Drains one KafkaStream on a thread: .records gets every ConsumerRecord; ConsumerTimeoutError is counted
    and iteration continues; ends when the stream ends (connector shutdown) or stop()."""

    def __init__(self, stream, name="collector", delay=0.0):
        super().__init__(daemon=True, name=name)
        self.stream = stream
        self.delay = delay      # seconds to "process" each record (a slow application)
        self.records = []
        self.times = []         # time.monotonic() when each record was handed out
        self.timeouts = 0
        self.error = None
        self._halt = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        while not self._halt.is_set():
            try:
                for rec in self.stream:
                    now = time.monotonic()
                    with self.lock:
                        self.records.append(rec)
                        self.times.append(now)
                    if self.delay:
                        time.sleep(self.delay)
                    if self._halt.is_set():
                        return
                return
            except ConsumerTimeoutError:
                self.timeouts += 1
            except Exception as e:
                self.error = e
                return

    def stop(self):
        self._halt.set()

    def seen(self, topic=None):
        with self.lock:
            return [(r.topic, r.partition, r.offset) for r in self.records if topic is None or r.topic == topic]

    def values(self):
        with self.lock:
            return [r.value.decode() for r in self.records]

    def seen_between(self, start, end):
        """(t, p, o) handed out with start < time < end."""
        with self.lock:
            return [(r.topic, r.partition, r.offset) for r, ts in zip(self.records, self.times) if start < ts < end]


def expire_session(services, client, timeout=15):
    """Expire `client`'s ZooKeeper session from the server side; returns the old session id."""
    session_id, password = client.client_id
    lost = threading.Event()

    def watch_state(state):
        if state == KazooState.LOST:
            lost.set()
    client.add_listener(watch_state)
    other = KazooClient(hosts=services.zookeeper_connect, client_id=(session_id, password), timeout=4.0)
    other.start(timeout=10)
    assert other.client_id[0] == session_id, "could not attach to the session"
    other.stop()   # CloseSession: the server ends the session now
    other.close()
    # the consumer's own client notices on its next ping / reconnect
    assert lost.wait(timeout), "the consumer's client never saw its session expire"
    client.remove_listener(watch_state)
    return session_id


class BrokerMember:
    """A broker-coordinated KafkaConsumer of the group, polling on a thread until close() (which leaves the group)."""

    def __init__(self, bootstrap, group, topic):
        self.stop = threading.Event()
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=6000,
                                      heartbeat_interval_ms=1000, enable_auto_commit=False)
        self.poller = threading.Thread(target=self._poll, daemon=True)
        self.poller.start()

    def _poll(self):
        while not self.stop.is_set():
            self.consumer.poll(200)

    def close(self):
        self.stop.set()
        self.poller.join(10)
        self.consumer.close()


def fetcher_part(topic, partition, consumed):
    """A PartitionTopicInfo of thread "m-0" consumed up to *consumed*, with a queue of 1,000 chunks: the work a test
    hands a FetcherThread directly (``assign``)."""
    part = PartitionTopicInfo((topic, partition), "m-0")
    part.consumed = consumed
    part.queue = queue.Queue(1000)
    return part
