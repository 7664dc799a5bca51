"""Helpers shared by the Spark tests: source options, ZooKeeper reads of a group, and what was produced, as the exact
set of ``(partition, offset)`` every exactly-once / at-least-once check compares the rows read with."""
import os
import subprocess
import sys
import time
from importlib import metadata

from kazoo.exceptions import NoNodeError
from packaging.requirements import Requirement

from tests.support.migrate_support import delete_topic
from zkconsumer.core.layout import paths


def source_options(services, group, topic, **extra):
    """The ``zkconsumer`` source's options for one topic of the test cluster (``startingOffsets=earliest`` unless
    given: pass ``startingOffsets=None`` to leave Spark's default)."""
    o = {"zookeeper.connect": services.zookeeper_connect, "group.id": group, "subscribe": topic,
         "kafka.bootstrap.servers": services.bootstrap_servers, "startingOffsets": "earliest"}
    o.update({k: str(v) for k, v in extra.items()})
    return {k: v for k, v in o.items() if v != "None"}


def start_collecting(spark, opts, ckpt, rows, trigger="500 milliseconds", each=None):
    """A streaming query of the ``zkconsumer`` source collecting (topic, partition, offset) of every row into
    ``rows`` (it commits nothing itself); ``each(df, batch_id)`` runs after each batch's rows are collected;
    ``trigger``: a processing-time interval or ``"availableNow"``."""
    def collect(df, batch_id):
        rows.extend((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())
        if each is not None:
            each(df, batch_id)
    w = (spark.readStream.format("zkconsumer").options(**opts).load().writeStream.foreachBatch(collect)
         .option("checkpointLocation", ckpt))
    w = w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(processingTime=trigger)
    return w.start()


def owners(zk, group, topic):
    """{partition: owner thread id} now; a node released between the listing and its read counts as released."""
    base = "%s/%s" % (paths.group_owners_path(group), topic)
    try:
        children = zk.get_children(base)
    except NoNodeError:
        return {}
    out = {}
    for c in children:
        try:
            out[int(c)] = zk.get(base + "/" + c)[0].decode()
        except NoNodeError:
            pass
    return out


def member_ids(zk, group):
    try:
        return zk.get_children(paths.group_ids_path(group))
    except NoNodeError:
        return []


def zk_offsets(zk, group, topic):
    """{partition: committed offset} in ZooKeeper."""
    base = paths.topic_offsets_path(group, topic)
    try:
        children = zk.get_children(base)
    except NoNodeError:
        return {}
    return {int(p): int(zk.get(base + "/" + p)[0]) for p in children}


def set_zk_offsets(zk, group, topic, offsets):
    for p, off in offsets.items():
        path = "%s/%d" % (paths.topic_offsets_path(group, topic), p)
        zk.ensure_path(path)
        zk.set(path, str(off).encode())


def log_ends(services, topic, partitions):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, group_id=None)
    try:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: o for tp, o in ends.items()}
    finally:
        c.close()


def produced_set(services, topic, partitions, since=None):
    """Every ``(partition, offset)`` in the logs of a topic no one deleted records of (offsets are dense: a plain,
    non-transactional producer), from ``since`` ({partition: offset}, default 0) to the log end."""
    ends = log_ends(services, topic, partitions)
    since = since or {}
    return {(p, o) for p, e in ends.items() for o in range(since.get(p, 0), e)}


class Producer:
    """A producer that remembers the ``(partition, offset)`` of every acknowledged record: what was produced, for
    tests that write while a query runs."""

    def __init__(self, services):
        from kafka import KafkaProducer
        self.p = KafkaProducer(bootstrap_servers=services.bootstrap_servers, acks=1, linger_ms=5)
        self.acked = set()

    def send(self, topic, n, partition=None, key=b"k"):
        futures = [self.p.send(topic, key=key, value=b'{"key": "%s", "seq": %d}' % (key, i), partition=partition)
                   for i in range(n)]
        self.p.flush(60)
        for f in futures:
            md = f.get(30)
            self.acked.add((md.partition, md.offset))

    def partitions(self, topic, at_least=1):
        """The producer's view of the topic's partitions once it knows ``at_least`` of them (after partitions were
        added: its metadata is refreshed until it shows them; 30 s at most)."""
        deadline = time.monotonic() + 30
        while True:
            self.p._metadata.request_update()
            parts = self.p.partitions_for(topic) or ()
            if len(parts) >= at_least or time.monotonic() > deadline:
                return sorted(parts)
            time.sleep(0.2)

    def close(self):
        self.p.close()


def recreate_topic(services, zk, topic, partitions=1):
    """Delete ``topic`` and create it again (empty) with ``partitions``; returns when ZooKeeper shows the new one."""
    delete_topic(services, zk, topic)
    deadline = time.monotonic() + 60
    while True:
        try:
            return services.create_topic(topic, partitions)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def delete_records(services, topic, partition, before):
    """DeleteRecords: the partition's log then starts at ``before`` (as after retention)."""
    from kafka import KafkaAdminClient, TopicPartition
    admin = KafkaAdminClient(bootstrap_servers=services.bootstrap_servers)
    try:
        admin.delete_records({TopicPartition(topic, partition): before})
    finally:
        admin.close()


#: what docs/spark.md says every Spark node must have installed: pyspark with its ``sql`` extra, and regex
NODE_REQUIREMENTS = ("pyspark[sql]", "regex")


def node_python(directory):
    """A Python with only :data:`NODE_REQUIREMENTS` (and their dependencies) installed, as a Spark node that runs
    the job from the ``--py-files`` zip: a venv of this interpreter whose site-packages links the installed
    distributions. zkconsumer, kafka-python, kazoo, click and pure-sasl are not importable in it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", directory], check=True, timeout=120)
    python = os.path.join(directory, "bin", "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()
    todo, seen = [Requirement(r) for r in NODE_REQUIREMENTS], set()
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(req.name)
        for r in map(Requirement, dist.requires or ()):
            if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in req.extras or {""}):
                todo.append(r)
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__")}:
            link = os.path.join(site, top)
            if not os.path.lexists(link):
                os.symlink(os.path.join(str(dist.locate_file("")), top), link)
    return python
