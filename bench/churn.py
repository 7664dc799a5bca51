"""churn: 4 members x 16 partitions, one is killed with kill -9; time until its partitions are consumed again.

A producer writes to every partition every 50 ms. Each member is a process of its own: ``zkconsumer consume``
(its CLI), ``python -m bench.pykafka_member`` (pykafka 2.8 ``BalancedConsumer(managed=False)``) or one JVM of
Kafka 1.1.1's Scala consumer (bench/jvm/ScalaConsumerMember.java); all with their defaults (6 s ZooKeeper
session, 2 s rebalance backoff, offsets from the latest). Once the group is settled — every partition consumed by
exactly one member for 1.5 s (the Scala members: their latest assignments cover the topic once) — one member is
killed with SIGKILL; measured from the kill until a survivor has consumed every partition the killed member held.
The ZooKeeper session timeout (6 s for all three) is the floor: nobody knows of the death before the session
expires. After each kill a new member joins, and the next kill waits for the group to settle again.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from . import goals
from .common import median, unique

MEMBERS, PARTITIONS = 4, 16


class _Proc:
    """A member process whose stdout says which partitions it consumed: .consumed = [(perf_counter, partition)]."""

    def __init__(self, cmd, parse, env=None):
        self.consumed, self.assigned = [], None
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)
        self._parse = parse
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            now = time.perf_counter()
            try:
                p = self._parse(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue
            if p is not None:
                self.consumed.append((now, p))

    def kill(self):
        self.proc.kill()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _zkconsumer(cluster, group, topic, _tmp):
    cmd = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", cluster.zookeeper_connect, "--group",
           group, "--topic", topic, "--format", "jsonl"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return _Proc(cmd, lambda r: r["partition"], env)


def _pykafka(cluster, group, topic, _tmp):
    cmd = [sys.executable, "-m", "bench.pykafka_member", cluster.bootstrap_servers, cluster.zookeeper_connect,
           group, topic]
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
                                          + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return _Proc(cmd, lambda r: r["partition"], env)


def _scala(cluster, group, topic, tmp):
    from . import jvm
    props = os.path.join(tmp, "%s.properties" % group)
    if not os.path.exists(props):
        jvm.write_props(props, {"group.id": group, "zookeeper.connect": cluster.zookeeper_connect})
    m = jvm.Member(props, unique("m"), topic)
    if not m.connected.wait(120):
        m.close()
        raise TimeoutError("a Scala consumer JVM did not connect within 120 s")
    m.go()
    return m


def _settled_owners(members, window=1.5):
    """{partition: member} when, in the last `window` seconds, every partition was consumed by exactly one member
    and every member consumed (Scala members: from their latest assignments), else None."""
    owners = {}
    if all(hasattr(m, "go") for m in members):
        for m in members:
            if m.assigned is None:
                return None
            for p in m.assigned:
                if p in owners:
                    return None
                owners[p] = m
        return owners if len(owners) == PARTITIONS else None
    since = time.perf_counter() - window
    for m in members:
        for t, p in list(m.consumed):
            if t >= since:
                if owners.get(p, m) is not m:
                    return None
                owners[p] = m
    if len(owners) != PARTITIONS or len(set(map(id, owners.values()))) != len(members):
        return None  # every member holds partitions (a member still starting holds none)
    return owners


def _wait(pred, timeout, what):
    deadline = time.perf_counter() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.perf_counter() > deadline:
            raise TimeoutError("%s within %.0f s" % (what, timeout))
        time.sleep(0.01)


def _producer(cluster, topic, stop):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5)
    try:
        while not stop.is_set():
            for i in range(PARTITIONS):
                p.send(topic, value=b"x" * 100, partition=i)
            stop.wait(0.05)
    finally:
        p.close(5)


def latencies(cluster, spawn, kills, log, name):
    topic = cluster.create_topic(unique("bench-churn"), PARTITIONS)
    group = unique("bench-churn")
    stop = threading.Event()
    prod = threading.Thread(target=_producer, args=(cluster, topic, stop), daemon=True)
    prod.start()
    out, spawned = [], []
    with tempfile.TemporaryDirectory(prefix="zkconsumer-bench-churn-") as tmp:
        try:
            for _ in range(MEMBERS):
                spawned.append(spawn(cluster, group, topic, tmp))
            members = list(spawned)
            for _ in range(kills):
                owners = _wait(lambda: _settled_owners(members), 120, "%s group did not settle" % name)
                victim = members[0]
                orphaned = {p for p, m in owners.items() if m is victim}
                survivors = members[1:]
                t0 = time.perf_counter()
                victim.kill()

                def resumed():
                    done = set()
                    for m in survivors:
                        done.update(p for t, p in list(m.consumed) if t > t0 and p in orphaned)
                    return done == orphaned
                _wait(resumed, 120, "%s survivors did not resume the killed member's partitions" % name)
                out.append(time.perf_counter() - t0)
                log("churn %s: %d partitions of the killed member consumed again after %.2f s" % (
                    name, len(orphaned), out[-1]))
                members = survivors + [spawn(cluster, group, topic, tmp)]
                spawned.append(members[-1])
            return out
        finally:
            stop.set()
            for m in spawned:
                m.close()
            prod.join(10)


def run(cluster, quick=False, log=print):
    kills = 2 if quick else 3
    ours = latencies(cluster, _zkconsumer, kills, log, "zkconsumer")
    value = median(ours)
    out = [goals.row("churn", "churn: kill -9 of 1 of %d members (%d partitions), its partitions consumed again, "
                     "zkconsumer" % (MEMBERS, PARTITIONS), round(value, 2), "s", None, None,
                     "zkconsumer CLI members, defaults (6 s session); %s" % ", ".join("%.2f" % x for x in ours))]
    for name, spawn in (("pykafka", _pykafka), ("scala: Kafka 1.1.1's ZookeeperConsumerConnector", _scala)):
        metric = "churn: kill -9 of 1 of %d members, its partitions consumed again, vs %s" % (MEMBERS, name)
        try:
            peer = latencies(cluster, spawn, kills, log, name)
        except Exception as e:  # noqa: BLE001 — reported in the row
            log("churn %s failed: %r" % (name, e))
            out.append(goals.row("churn", metric, round(value, 2), "s", None, None, "%s not measured: %r" % (name, e)))
            continue
        b = median(peer)
        out.append(goals.row("churn", metric, round(value, 2), "s", round(b, 2), round(value / b, 2),
                             "%s, defaults (6 s session): %s" % (name, ", ".join("%.2f" % x for x in peer))))
    return out


TIME_GOES = ("all three wait for the killed member's ZooKeeper session to expire (6 s, their default): its owner "
             "nodes live until then; the rebalance after it takes a fraction of a second.")
