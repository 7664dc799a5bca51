"""rebalance latency: 8 consumers x 64 partitions, one joins and one leaves, 15 times each (EVENTS); joins and
leaves are reported apart, p50 and p90, and each is judged at p50 against each peer's.

Measured from the change (the new member starts its subscription / a member starts its shutdown) until every
partition is owned under the new assignment — the range assignment of the current members, compared with each
member's claimed owner nodes — and every member is fetching. Baseline: kafka-python broker-coordinated group
(``KafkaConsumer(group_id=...)`` subscribed to the topic, defaults) doing the same join and leave, converged when the
members' assignments cover every partition exactly once.

Peers, the same join and leave of a ZooKeeper-coordinated group on a topic of their own, with their defaults
(6 s ZooKeeper session, 2 s rebalance backoff); ZooKeeper session set up before the clock starts, as for zkconsumer:

* pykafka 2.8 ``BalancedConsumer(managed=False)`` members (one KafkaClient and one kazoo session each, in this
  process): converged when no member has a rebalance in progress, each one's internal consumer runs, and their
  partitions cover the topic exactly once;
* Kafka 1.1.1's Scala consumer, one JVM per member (bench/jvm/ScalaConsumerMember.java, driven over stdin):
  converged when every member's latest rebalance reached ``beforeStartingFetchers`` (its listener; fetchers start
  next) with no release since, and their partitions cover the topic exactly once.
"""
import logging
import os
import tempfile
import threading
import time

from . import goals
from .common import converged, percentile, unique

MEMBERS, PARTITIONS = 8, 64


def _zk_member(cluster, group, topic):
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.consumer import ZookeeperConsumerConnector
    cfg = ConsumerConfig.from_properties({  # defaults, as the peers (rebalance.backoff.ms 2 s, session 6 s)
        "group.id": group, "zookeeper.connect": cluster.zookeeper_connect, "auto.offset.reset": "smallest"})
    return ZookeeperConsumerConnector(cfg)


def _zk_converged(members, topic):
    return converged(members, topic, PARTITIONS)


def _wait(pred, timeout):
    t0 = time.perf_counter()
    while not pred():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("did not converge within %.0f s" % timeout)
        time.sleep(0.002)
    return time.perf_counter()


def zkconsumer_latencies(cluster, events, log):
    topic = cluster.create_topic(unique("bench-rebalance"), PARTITIONS)
    group = unique("bench-rebalance")
    members = []
    try:
        for _ in range(MEMBERS):
            m = _zk_member(cluster, group, topic)
            m.create_message_streams({topic: 1})
            members.append(m)
        _wait(lambda: _zk_converged(members, topic), 60)
        joins, leaves = [], []
        for _ in range(events):
            m = _zk_member(cluster, group, topic)  # ZooKeeper session set up before the clock starts
            t0 = time.perf_counter()
            threading.Thread(target=m.create_message_streams, args=({topic: 1},), daemon=True).start()
            members.append(m)
            joins.append(_wait(lambda: _zk_converged(members, topic), 60) - t0)
            gone = members.pop(0)
            t0 = time.perf_counter()
            threading.Thread(target=gone.shutdown, daemon=True).start()
            leaves.append(_wait(lambda: _zk_converged(members, topic), 60) - t0)
            log("rebalance zkconsumer: join %.0f ms, leave %.0f ms" % (joins[-1] * 1000, leaves[-1] * 1000))
        return joins, leaves
    finally:
        for m in members:
            m.shutdown()


class _KafkaMember(threading.Thread):
    def __init__(self, bootstrap, group, topic, board):
        super().__init__(daemon=True)
        from kafka import KafkaConsumer
        self.c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                               auto_offset_reset="earliest")
        self.board, self.stop = board, threading.Event()

    def run(self):
        try:
            while not self.stop.is_set():
                self.c.poll(timeout_ms=50)
                self.board[id(self)] = frozenset(self.c.assignment())
        finally:
            self.board.pop(id(self), None)
            self.c.close()


def _kafka_converged(board, members):
    keys = [id(m) for m in members]
    if any(k not in board for k in keys):
        return False
    seen = set()
    for k in keys:
        a = board[k]
        if seen & a:
            return False
        seen |= a
    return len(seen) == PARTITIONS


def kafka_python_latencies(cluster, events, log):
    topic = cluster.create_topic(unique("bench-rebalance-kp"), PARTITIONS)
    group = unique("bench-rebalance-kp")
    board, members = {}, []
    try:
        for _ in range(MEMBERS):
            m = _KafkaMember(cluster.bootstrap_servers, group, topic, board)
            m.start()
            members.append(m)
        _wait(lambda: _kafka_converged(board, members), 120)
        joins, leaves = [], []
        for _ in range(events):
            m = _KafkaMember(cluster.bootstrap_servers, group, topic, board)
            t0 = time.perf_counter()
            m.start()
            members.append(m)
            joins.append(_wait(lambda: _kafka_converged(board, members) and board.get(id(m)), 120) - t0)
            gone = members.pop(0)
            t0 = time.perf_counter()
            gone.stop.set()
            gone.join(30)
            leaves.append(_wait(lambda: _kafka_converged(board, members), 120) - t0)
            log("rebalance kafka-python: join %.0f ms, leave %.0f ms" % (joins[-1] * 1000, leaves[-1] * 1000))
        return joins, leaves
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)


def _covers_once(assignments):
    seen = set()
    for a in assignments:
        if a is None or seen & a:
            return False
        seen |= a
    return len(seen) == PARTITIONS


def _peer_events(name, members, new_member, start, stop, is_converged, events, log, timeout=120):
    """The join/leave loop shared by the peers: start(m) subscribes m, stop(m) makes it leave (both return at
    once); is_converged(members) is the peer's own criterion."""
    for m in members:
        start(m)
    _wait(lambda: is_converged(members), timeout)
    joins, leaves = [], []
    for _ in range(events):
        m = new_member()  # connected to ZooKeeper before the clock starts
        t0 = time.perf_counter()
        start(m)
        members.append(m)
        joins.append(_wait(lambda: is_converged(members), timeout) - t0)
        gone = members.pop(0)
        t0 = time.perf_counter()
        stop(gone)
        leaves.append(_wait(lambda: is_converged(members), timeout) - t0)
        log("rebalance %s: join %.0f ms, leave %.0f ms" % (name, joins[-1] * 1000, leaves[-1] * 1000))
    return joins, leaves


class _PykafkaMember:
    def __init__(self, cluster, group, topic):
        from kazoo.client import KazooClient
        from pykafka import KafkaClient
        self.zk = KazooClient(cluster.zookeeper_connect, timeout=6.0)  # pykafka's default session timeout
        self.zk.start()
        client = KafkaClient(hosts=cluster.bootstrap_servers, broker_version="1.0.0")
        self.c = client.topics[topic].get_balanced_consumer(
            consumer_group=group.encode(), managed=False, zookeeper=self.zk, auto_start=False,
            auto_offset_reset=-2)  # OffsetType.EARLIEST, as auto.offset.reset=smallest for the others

    def start(self):
        threading.Thread(target=self.c.start, daemon=True).start()

    def stop(self):
        def leave():
            self.c.stop()  # releases its owner nodes and registration (the session is ours)
            self.zk.stop()
            self.zk.close()
        self.leaving = threading.Thread(target=leave, daemon=True)
        self.leaving.start()

    def assignment(self):
        c = self.c
        if c._rebalancing_in_progress.is_set() or c._consumer is None or not c._internal_consumer_running.is_set():
            return None
        return frozenset(c._consumer.partitions)


def pykafka_latencies(cluster, events, log):
    import pykafka  # noqa: F401  (ImportError: the row says it was not measured)
    logging.getLogger("pykafka").setLevel(logging.CRITICAL)
    topic = cluster.create_topic(unique("bench-rebalance-pk"), PARTITIONS)
    group = unique("bench-rebalance-pk")
    members = [_PykafkaMember(cluster, group, topic) for _ in range(MEMBERS)]
    try:
        return _peer_events("pykafka", members, lambda: _PykafkaMember(cluster, group, topic),
                            lambda m: m.start(), lambda m: m.stop(),
                            lambda ms: _covers_once([m.assignment() for m in ms]), events, log)
    finally:
        for m in members:
            m.stop()
        for m in members:
            m.leaving.join(30)


SCALA_MEMBERS = MEMBERS


def scala_latencies(cluster, events, log):
    from . import jvm
    jvm.classpath()  # jvm.Unavailable: the row says why it was not measured
    topic = cluster.create_topic(unique("bench-rebalance-scala"), PARTITIONS)
    group = unique("bench-rebalance-scala")
    with tempfile.TemporaryDirectory(prefix="zkconsumer-bench-scala-") as tmp:
        props = jvm.write_props(os.path.join(tmp, "consumer.properties"), {
            "group.id": group, "zookeeper.connect": cluster.zookeeper_connect, "auto.offset.reset": "smallest"})
        spawned = []

        def new_member():
            m = jvm.Member(props, "m%d" % len(spawned), topic)
            spawned.append(m)
            if not m.connected.wait(120):
                raise TimeoutError("a Scala consumer JVM did not connect within 120 s")
            return m

        try:
            members = [jvm.Member(props, "m%d" % i, topic) for i in range(SCALA_MEMBERS)]
            spawned.extend(members)
            for m in members:
                if not m.connected.wait(120):
                    raise TimeoutError("a Scala consumer JVM did not connect within 120 s")

            def is_converged(ms):
                return _covers_once([m.assigned for m in ms])
            return _peer_events("Scala consumer", members, new_member, lambda m: m.go(), lambda m: m.stop(),
                                is_converged, events, log)
        finally:
            for m in spawned:
                m.close()


EVENTS = 15  # joins and leaves of each group (zkconsumer, pykafka, the Scala consumer), in --quick too


def _ms(xs, q):
    return percentile(xs, q) * 1000


def _kind_rows(peer, goal_key, ours, theirs):
    """Two rows against one peer, join and leave apart: p50 against p50 (the goal), p90 and the samples in the
    note. ``ours``/``theirs``: (joins, leaves) in seconds."""
    rows = []
    for kind, a, b in (("join", ours[0], theirs[0]), ("leave", ours[1], theirs[1])):
        v, base = _ms(a, 50), _ms(b, 50)
        rows.append(goals.row(
            goal_key, "rebalance %s ms vs %s (%d members x %d partitions, one %s; p50)" % (
                kind, peer, MEMBERS, PARTITIONS, "joins" if kind == "join" else "leaves"),
            round(v), "ms", round(base), round(v / base, 3),
            "p90: zkconsumer %.0f ms, %s %.0f ms (ratio %.3f); %d events each; zkconsumer %s ms; %s %s ms; "
            "every member at its defaults" % (
                _ms(a, 90), peer, _ms(b, 90), _ms(a, 90) / _ms(b, 90), min(len(a), len(b)),
                ", ".join("%.0f" % (x * 1000) for x in a), peer, ", ".join("%.0f" % (x * 1000) for x in b))))
        rows.append(goals.row(
            "rebalance.reported", "rebalance %s ms vs %s (%d members x %d partitions, one %s; p90)" % (
                kind, peer, MEMBERS, PARTITIONS, "joins" if kind == "join" else "leaves"),
            round(_ms(a, 90)), "ms", round(_ms(b, 90)), round(_ms(a, 90) / _ms(b, 90), 3),
            "the same events as the p50 row"))
    return rows


def _peer_rows(peer, goal_key, ours, measure, log):
    try:
        theirs = measure()
    except Exception as e:  # noqa: BLE001 — a peer that cannot run or never converges is reported, not fatal
        log("rebalance %s failed: %r" % (peer, e))
        return [goals.row(goal_key, "rebalance %s ms vs %s (not measured)" % (kind, peer), float("nan"), "ms",
                          None, None, "%s not measured: %r" % (peer, e)) for kind in ("join", "leave")]
    return _kind_rows(peer, goal_key, ours, theirs)


def run(cluster, quick=False, log=print):
    ours = zkconsumer_latencies(cluster, EVENTS, log)
    rows = [goals.row("rebalance.reported", "rebalance %s ms, zkconsumer (%d members x %d partitions; p50)" % (
        kind, MEMBERS, PARTITIONS), round(_ms(xs, 50)), "ms", None, None, "p90 %.0f ms; %d events; %s ms" % (
        _ms(xs, 90), len(xs), ", ".join("%.0f" % (x * 1000) for x in xs))) for kind, xs in zip(("join", "leave"), ours)]
    rows += _peer_rows("pykafka BalancedConsumer", "rebalance.pykafka", ours,
                       lambda: pykafka_latencies(cluster, EVENTS, log), log)
    rows += _peer_rows("Kafka 1.1.1's Scala consumer", "rebalance.scala", ours,
                       lambda: scala_latencies(cluster, EVENTS, log), log)
    try:  # reference only: a broker-coordinated group joins in ~3 s (its own protocol), a different kind of group
        kj, kl = kafka_python_latencies(cluster, 1 if quick else 3, log)
        rows.append(goals.row("rebalance.reported", "rebalance ms, kafka-python broker-coordinated group (reference "
                              "only; p50)", round(_ms(kj + kl, 50)), "ms", None, None,
                              "join %.0f ms, leave %.0f ms (p50 of %d each)" % (_ms(kj, 50), _ms(kl, 50), len(kj))))
    except TimeoutError as e:
        log("rebalance kafka-python failed: %s" % e)
    return rows


TIME_GOES = ("a join: the newcomer's start checks (split-brain guard and storage check, each one or two broker round "
             "trips, side by side), its registration, then in every member a 20 ms settle window, the group read "
             "from its watched cache, the range assignment, the releases and one multi-op claim; a claim that "
             "meets a predecessor's owner node waits on a watch and resumes without reading the group again. A "
             "leave: the leaver deletes its registration first (all-zkconsumer groups) and its owner nodes after "
             "its last commit, so the others rebalance meanwhile. The Scala consumer releases and re-claims every "
             "partition and backs off 2 s after a conflict; pykafka moves only the partitions that change, retries a "
             "conflict at once, then after 2 s, 4 s..., and builds a new internal consumer at every rebalance.")
