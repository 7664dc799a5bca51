"""Helpers the local-cluster commands and tests use: create topics, produce test data, wait for the mirror."""
import json
import time

from ..errors import ClusterUnavailableError, LocalClusterError
from ..kafka.metadata import admin_client, fetch_cluster_metadata
from ..kafka import internals


def partition_count(bootstrap, name):
    """The number of partitions topic `name` has (an error naming the topic if it does not exist)."""
    admin = admin_client(bootstrap)
    try:
        existing = fetch_cluster_metadata(admin).topics.get(name)
    finally:
        internals.close_quietly(admin)
    if existing is None:
        raise LocalClusterError("topic %s does not exist (create it with --partitions N)" % name)
    return len(existing)


def create_or_grow_topic(bootstrap, name, partitions, timeout=30.0, replication_factor=1):
    """Create topic name with the given partitions, or add partitions if it has fewer. Returns what was done."""
    from kafka.admin import NewPartitions, NewTopic
    from kafka.errors import IncompatibleBrokerVersion, RequestTimedOutError, TopicAlreadyExistsError
    admin = admin_client(bootstrap)
    try:
        existing = fetch_cluster_metadata(admin).topics.get(name)
        if existing is None:
            try:
                admin.create_topics([NewTopic(name, partitions, replication_factor)])
                action = "created"
            except TopicAlreadyExistsError:
                existing = fetch_cluster_metadata(admin).topics.get(name, {})
            except RequestTimedOutError:
                # the broker answers REQUEST_TIMED_OUT when creating the partitions outlasts the request (1,000
                # partitions on a busy 2-core machine) but goes on creating them: wait for them below
                action = "created (slowly)"
        if existing is not None:
            if len(existing) > partitions:
                raise LocalClusterError("topic %s already has %d partitions; partitions can only be added, not "
                                        "removed (asked for %d)" % (name, len(existing), partitions))
            if len(existing) < partitions:
                try:
                    admin.create_partitions({name: NewPartitions(partitions)})
                except IncompatibleBrokerVersion as e:
                    raise LocalClusterError("cannot add partitions to %s: the broker does not support "
                                            "CreatePartitions (tansu 0.6 does not)" % name) from e
                action = "grown from %d" % len(existing)
            else:
                action = "already exists"
        # a busy broker creates ~20-100 partitions/s
        timeout = max(timeout, partitions / 20.0)
        deadline = time.monotonic() + timeout
        while len(fetch_cluster_metadata(admin).topics.get(name, {})) < partitions:
            if time.monotonic() > deadline:
                raise ClusterUnavailableError("topic %s did not reach %d partitions within %.0f s"
                                              % (name, partitions, timeout))
            time.sleep(0.1)
        return {"topic": name, "action": action, "partitions": partitions}
    finally:
        internals.close_quietly(admin)


def wait_for_zk_topic(zookeeper_connect, topic, partitions, timeout=15.0):
    """Wait until /brokers/topics/[topic] lists at least `partitions` partitions (the mirror wrote it)."""
    from ..zookeeper import client as zkmod
    from ..core.layout import codecs, paths
    zk = zkmod.connect(zookeeper_connect)
    try:
        path = paths.topic_path(topic)
        deadline = time.monotonic() + timeout
        while True:
            if zk.exists(path):
                data, _ = zk.get(path)
                if len(codecs.decode_topic_assignment(data, path).partitions) >= partitions:
                    return
            if time.monotonic() > deadline:
                raise LocalClusterError("%s did not show %d partitions within %.0f s: is the registry mirror "
                                        "running? ('zkconsumer local status')" % (path, partitions, timeout))
            time.sleep(0.05)
    finally:
        zkmod.close(zk)


def make_value(seq, key, size):
    """A JSON message {"key","seq","ts","pad"} padded to exactly `size` bytes when size allows."""
    base = {"key": key, "seq": seq, "ts": int(time.time() * 1000), "pad": ""}
    raw = json.dumps(base, separators=(",", ":"))
    pad = size - len(raw)
    if pad > 0:
        base["pad"] = "x" * pad
        raw = json.dumps(base, separators=(",", ":"))
    return raw.encode()


def produce(bootstrap, topic, count, size=100, keys=10, partition=None, one_per_batch=False):
    """Produce `count` JSON messages; returns the number acknowledged.

    one_per_batch=True sends each record in its own produce request (slow): tansu's ListOffsets(latest) is only
    right then (a measured tansu quirk), which some tests need.
    """
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0 if one_per_batch else 10,
                                 batch_size=16384 if not one_per_batch else 1, acks=1, enable_idempotence=False,
                                 max_in_flight_requests_per_connection=1 if one_per_batch else 5)
    except (KafkaError, OSError) as e:
        raise ClusterUnavailableError("cannot reach the broker at %s: %s" % (bootstrap, e)) from e
    sent = False
    try:
        futures = []
        for i in range(count):
            key = "k%d" % (i % keys)
            fut = producer.send(topic, key=key.encode(), value=make_value(i, key, size), partition=partition)
            if one_per_batch:
                fut.get(timeout=30)
            else:
                futures.append(fut)
        producer.flush(timeout=120)
        for fut in futures:
            fut.get(timeout=30)
        sent = True
        return count
    finally:
        if sent:
            internals.close_quietly(producer)
        else:  # what the producer logs about the records it could not send is shown
            producer.close()
