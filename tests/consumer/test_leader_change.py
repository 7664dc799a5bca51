"""Leader changes on a three-broker Apache Kafka cluster (replication factor 3, min.insync.replicas 2).

Right after a leader election the new leader's high watermark can lag what the old leader had exposed (KIP-207,
KAFKA-2334). A consumer that is caught up then fetches at a position above the new leader's high watermark; a
consumer that reads that as "out of range" resets: with ``largest`` it skips what the old leader had not yet
replicated to the watermark, with ``smallest`` it replays the whole partition. We reset only on an
OFFSET_OUT_OF_RANGE error or a log range confirmed twice by ListOffsets.

Two groups read one topic while a producer (acks=all) keeps writing: one with ``largest``, one with ``smallest``.
The brokers leading the most partitions are stopped in turn (a controlled shutdown, then a SIGKILL), and started
again. No member of either group changes (no rebalance), so every acknowledged record must be delivered to each
group exactly once: nothing skipped, nothing replayed.
"""
import json
import threading
import time

import pytest

from tests.support.chaos_support import TimedConsumer, own_cluster_fixture
from tests.support.consumer_helpers import wait_for_assignment
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod

pytestmark = pytest.mark.live

PARTITIONS = 6
PROPS = {"auto.commit.interval.ms": "200", "rebalance.backoff.ms": "200", "refresh.leader.backoff.ms": "200",
         "socket.timeout.ms": "10000"}

own = own_cluster_fixture("leader-change", brokers=3,
                          broker_config={"zookeeper.session.timeout.ms": 6000, "min.insync.replicas": 2,
                                         "unclean.leader.election.enable": "false",
                                         "replica.lag.time.max.ms": 5000})


class AckedProducer(threading.Thread):
    """Writes small batches with acks=all until stopped; keeps (partition, offset) of what the brokers acknowledged.
    A batch that fails (no leader for a moment) is not counted: it may or may not be in the log."""

    def __init__(self, bootstrap, topic):
        super().__init__(daemon=True, name="acked-producer")
        self.bootstrap, self.topic = bootstrap, topic
        self.acked, self.failed = [], 0
        self._halt = threading.Event()

    def run(self):
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=2, retries=50,
                                 retry_backoff_ms=300, request_timeout_ms=15000, max_in_flight_requests_per_connection=1,
                                 enable_idempotence=False, metadata_max_age_ms=2000)
        n = 0
        try:
            while not self._halt.is_set():
                futures = []
                for p in range(PARTITIONS):
                    futures.append(producer.send(self.topic, value=b"lc-%d" % n, partition=p))
                    n += 1
                for fut in futures:
                    try:
                        md = fut.get(timeout=60)
                        self.acked.append((md.partition, md.offset))
                    except Exception:
                        self.failed += 1
                self._halt.wait(0.01)
        finally:
            producer.close(timeout=10)

    def stop(self):
        self._halt.set()
        self.join(90)
        assert not self.is_alive(), "producer did not stop"
        return list(self.acked)


def _leaders(zk, topic):
    out = {}
    for p in range(PARTITIONS):
        data, _ = zk.get("/brokers/topics/%s/partitions/%d/state" % (topic, p))
        out[p] = json.loads(data.decode())["leader"]
    return out


def _replicas(zk, topic):
    data, _ = zk.get("/brokers/topics/%s" % topic)
    return {int(p): r for p, r in json.loads(data.decode())["partitions"].items()}


def _in_sync(zk, topic):
    reps = _replicas(zk, topic)
    for p in range(PARTITIONS):
        data, _ = zk.get("/brokers/topics/%s/partitions/%d/state" % (topic, p))
        if sorted(json.loads(data.decode())["isr"]) != sorted(reps[p]):
            return False
    return True


def _describe_is_right(own, zk, groups, topic):
    """`zkconsumer groups describe` during the leader changes: every partition owned by the group's one member,
    offsets and lags that make sense."""
    from zkconsumer.tools.group_describe import describe
    for reset, g in groups.items():
        rows = [r for r in describe(zk, g, own.bootstrap_servers) if r.topic == topic]
        assert sorted(r.partition for r in rows) == list(range(PARTITIONS)), rows
        for r in rows:
            assert r.consumer_id and r.consumer_id.endswith("_" + reset[0]), r
            assert r.log_end_offset is not None and r.current_offset is not None and 0 <= r.lag, r


def _busiest_leader(zk, topic):
    leaders = [b for b in _leaders(zk, topic).values() if b >= 0]
    return max(set(leaders), key=leaders.count)


def test_leader_changes_neither_skip_nor_replay(own, unique, procs):
    t = unique("lc")
    own.create_topic(t, PARTITIONS)
    zk = zkmod.connect(own.zookeeper_connect)
    try:
        groups = {"largest": unique("lcl"), "smallest": unique("lcs")}
        members = {reset: TimedConsumer(own, g, [t], consumer_id=reset[0],
                                        props=dict(PROPS, **{"auto.offset.reset": reset}))
                   for reset, g in groups.items()}
        procs.extend(members.values())
        for g in groups.values():
            wait_for_assignment(zk, g, [t], 1, timeout=40)
        producer = AckedProducer(own.bootstrap_servers, t)
        producer.start()
        try:
            wait_until(lambda: all(len(c.seen(t)) > 200 for c in members.values()), 40,
                       message="both groups to consume while the producer runs")
            moves, resumed = [], []
            for kill in (False, True):
                victim = _busiest_leader(zk, t)
                before = _leaders(zk, t)
                moved = [p for p, b in before.items() if b == victim]
                stopped_at = time.monotonic()
                own.stop("broker-%d" % victim, kill=kill)
                wait_until(lambda: all(b != victim and b >= 0 for b in _leaders(zk, t).values()), 40,
                           message="every partition led by another broker than %d" % victim)
                moves.append(len(moved))

                def first_after(c, p):
                    return min((tt for pp, _, tt in c.timed_records(t) if pp == p and tt > stopped_at),
                               default=None)
                wait_until(lambda: all(first_after(c, p) for c in members.values() for p in moved), 60,
                           message="both groups to consume the moved partitions from their new leaders")
                resumed.append(max(first_after(c, p) for c in members.values() for p in moved) - stopped_at)
                _describe_is_right(own, zk, groups, t)
                own.start("broker-%d" % victim)
                time.sleep(3.0)
            # a preferred-replica election moves the leaders back
            from kafka.admin import KafkaAdminClient
            admin = KafkaAdminClient(bootstrap_servers=own.bootstrap_servers)
            try:
                wait_until(lambda: _in_sync(zk, t), 60, message="every replica in sync again")
                elect_at = time.monotonic()
                admin.elect_leaders(0, {t: list(range(PARTITIONS))})
            finally:
                admin.close()
            wait_until(lambda: all(_leaders(zk, t)[p] == _replicas(zk, t)[p][0] for p in range(PARTITIONS)), 40,
                       message="the preferred replicas to lead again")
            mark = {name: len(c.seen(t)) for name, c in members.items()}
            wait_until(lambda: all(len(c.seen(t)) > mark[n] + 100 for n, c in members.items()), 60,
                       message="both groups to consume after the preferred-replica election")
            elected_for = time.monotonic() - elect_at
            _describe_is_right(own, zk, groups, t)
        finally:
            acked = producer.stop()
        want = set(acked)
        assert len(want) > 1000 and all(moves), (len(want), moves)

        for name, c in members.items():
            def delivered(c=c):
                return want <= set(c.seen(t))
            try:
                wait_until(delivered, 60, interval=0.5, message="every acknowledged record to reach %s" % name)
            except AssertionError:
                missing = sorted(want - set(c.seen(t)))
                raise AssertionError("group with %s skipped %d acknowledged records, e.g. %s\n%s"
                                     % (name, len(missing), missing[:10], c.describe()))
        time.sleep(1.0)
        for name, c in members.items():
            seen = c.seen(t)
            twice = len(seen) - len(set(seen))
            assert twice == 0, "group with %s delivered %d records twice (a replay after a leader change)\n%s" % (
                name, twice, c.describe())
            assert c.alive() and not c.stderr_problems(), c.describe()
            assert not any(e["event"] in ("revoke", "lost") for e in c.timed_events()), c.describe()
        print("\nleader changes: %d acknowledged records (%d failed sends), leaders moved for %s partitions "
              "(controlled stop, SIGKILL); both groups consumed the moved partitions again %.1f s / %.1f s after the "
              "broker stopped; a preferred-replica election took %.1f s to settle; each group got every record once, "
              "0 lost, 0 twice" % (len(want), producer.failed, moves, resumed[0], resumed[1], elected_for))
    finally:
        zkmod.close(zk)
