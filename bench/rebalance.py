"""rebalance latency: 8 consumers x 64 partitions, one joins and one leaves.

Measured from the change (the new member starts its subscription / a member starts its shutdown) until every
partition is owned under the new assignment — the range assignment of the current members, compared with each
member's claimed owner nodes — and every member is fetching. Baseline: kafka-python broker-coordinated group
(``KafkaConsumer(group_id=...)`` subscribed to the topic, defaults) doing the same join and leave, converged when the
members' assignments cover every partition exactly once.
"""
import threading
import time

from .common import Result, converged, median, unique

MEMBERS, PARTITIONS = 8, 64


def _zk_member(cluster, group, topic):
    from zkconsumer.config import ConsumerConfig
    from zkconsumer.consumer import ZookeeperConsumerConnector
    cfg = ConsumerConfig.from_properties({
        "group.id": group, "zookeeper.connect": cluster.zookeeper_connect, "auto.offset.reset": "smallest",
        "rebalance.backoff.ms": "200"})
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


def run(cluster, quick=False, log=print):
    ours_j, ours_l = zkconsumer_latencies(cluster, 5 if quick else 10, log)
    try:
        base_j, base_l = kafka_python_latencies(cluster, 1 if quick else 3, log)
        base = median(base_j + base_l) * 1000
        note = "kafka-python join %.0f ms, leave %.0f ms (medians)" % (median(base_j) * 1000, median(base_l) * 1000)
    except TimeoutError as e:
        base, note = None, "kafka-python baseline failed: %s" % e
    value = median(ours_j + ours_l) * 1000
    ratio = round(value / base, 4) if base else None
    return [Result("rebalance latency ms (8 consumers x 64 partitions, one joins, one leave; median)", round(value),
                   "ms", round(base) if base else None, ratio, "<= 0.05x and <= 300 ms median",
                   bool(value <= 300 and ratio is not None and ratio <= 0.05),
                   "zkconsumer join %.0f ms, leave %.0f ms (medians); %s" % (
                       median(ours_j) * 1000, median(ours_l) * 1000, note))]
