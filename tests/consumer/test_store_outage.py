"""The engine while Kafka is unreachable (a cluster of its own: its broker is frozen with SIGSTOP, or stopped).

* A slow offset store does not hold up a rebalance: the commit of the partitions leaving the member gets at most
  ``zookeeper.session.timeout.ms`` (what a successor would wait for a member killed with ``kill -9``), then the
  partitions are released anyway (the late commit is fenced); before, the rebalance waited for the Kafka store's
  whole retry budget, and a failed commit failed the attempt, so the partitions were never released during the
  outage. The store here is the real Kafka store talking to a frozen broker, not a sleep.
* Dual commit fences every retry of its Kafka write: a retry after the member lost the partition writes nothing
  (a late retry could otherwise overwrite its successor's offset with an older one).
* ``shutdown()`` keeps to its bound with a fetcher stuck on unreachable brokers and the rebalancer stuck waiting
  for it, and its final commit still goes through.
"""
import threading
import time

import pytest

from tests.support.chaos_support import own_cluster_fixture
from tests.support.consumer_helpers import StreamCollector, connector, owners, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.errors import OwnershipLostError
from zkconsumer.core.layout import codecs, paths

pytestmark = pytest.mark.live

own = own_cluster_fixture("store-outage")



@pytest.fixture
def zk(own):
    client = zkmod.connect(own.zookeeper_connect)
    yield client
    zkmod.close(client)


def _topic(own, name, partitions):
    """Create a topic, retrying while the broker is still settling after an earlier test stopped or froze it."""
    def created():
        try:
            return own.create_topic(name, partitions)
        except Exception:
            return None
    return wait_until(created, 60, interval=1.0, message="topic %s created" % name)


def _fake_member(zk, g, name, topic):
    """A registration the test writes (a member that never claims): the group's assignment counts it."""
    reg = codecs.ConsumerRegistration.static({topic: 1})
    zk.create(paths.consumer_registration_path(g, "%s_%s" % (g, name)), codecs.encode_consumer_registration(reg),
              ephemeral=True, makepath=True)


def test_a_frozen_kafka_store_does_not_hold_up_the_release(own, zk, unique, conns):
    g, t = unique("frozen"), _topic(own, unique("frozen"), 2)
    b = connector(own, g, defaults=True, **{"consumer.id": "b", "offsets.storage": "kafka",
                                           "dual.commit.enabled": "false"})
    conns.append(b)
    [stream] = b.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    produced = produce_tracked(own.bootstrap_servers, t, 20, partitions=2, tag="before")
    wait_until(lambda: len(col.seen(t)) == len(produced), 30, message="b to consume")
    own.freeze("broker")
    try:
        joined = time.monotonic()
        _fake_member(zk, g, "a", t)  # "a" sorts first: partition 0 goes to it
        wait_until(lambda: owners(zk, g, [t]) == {(t, 1): "%s_b-0" % g}, 30,
                   message="b to release partition 0 while the Kafka store cannot commit it")
        released = time.monotonic() - joined
        wait_until(lambda: b.state == "IDLE", 10, message="b's rebalance to end")
    finally:
        own.thaw("broker")
    print("\nfrozen Kafka store: partition 0 released %.1f s after the join (bound: zookeeper.session.timeout.ms, "
          "6 s)" % released)


def _dual_store(own, zk, g):
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.offsets import make_offset_store
    config = ConsumerConfig.from_properties({
        "group.id": g, "zookeeper.connect": own.zookeeper_connect, "offsets.storage": "kafka",
        "dual.commit.enabled": "true", "offsets.channel.backoff.ms": "500", "offsets.commit.max.retries": "1000",
        "offsets.channel.socket.timeout.ms": "90000"})  # retries enough to outlast the broker's restart
    return make_offset_store(config, zk, bootstrap_servers=own.bootstrap_servers)


@pytest.mark.parametrize("path", ["sequential", "overlapped"])
def test_a_dual_commit_retry_after_the_partition_moved_writes_nothing(own, zk, unique, path):
    from zkconsumer.offsets import OwnershipFence
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    g, t = unique("dualre"), _topic(own, unique("dualre"), 1)
    tp, owner = (t, 0), paths.partition_owner_path(g, t, 0)
    zk.create(owner, b"me-0", ephemeral=True, makepath=True)
    fence = OwnershipFence(zk.client_id[0], {tp: owner})
    store = _dual_store(own, zk, g)
    successor = zkmod.connect(own.zookeeper_connect)
    results, stopped = [], False
    try:
        assert store.commit({tp: 5}, fence=fence).ok
        if path == "sequential":
            store._kafka_healthy = False  # as after any Kafka failure: Kafka first, then ZooKeeper
        before = dict(store.stats)
        own.stop("broker")
        stopped = True
        th = threading.Thread(target=lambda: results.append(store.commit({tp: 7}, fence=fence)), daemon=True)
        th.start()
        wait_until(lambda: store.stats[path] > before[path], 10, message="the commit to pass its ownership check")
        zk.delete(owner)  # the partition moves to another member
        successor.create(owner, b"successor-0", ephemeral=True)
        own.start("broker")
        stopped = False
        th.join(120)
        assert not th.is_alive(), "the dual commit did not end"
        [result] = results
        assert isinstance(result.failed.get(tp), OwnershipLostError), result
        kafka = KafkaOffsetStore(own.bootstrap_servers, g)
        try:
            assert kafka.fetch([tp]) == {tp: 5}, "a retry wrote Kafka after the partition had moved"
        finally:
            kafka.close()
        if path == "sequential":  # ZooKeeper only gets what Kafka acknowledged
            assert int(zk.get(paths.partition_offset_path(g, t, 0))[0]) == 5
    finally:
        if stopped:
            own.start("broker")
        store.close()
        zkmod.close(successor)


def test_shutdown_keeps_its_bound_and_commits_with_a_fetcher_stuck_on_unreachable_brokers(own, zk, unique, conns):
    g, t = unique("stuck"), _topic(own, unique("stuck"), 2)
    a = connector(own, g, defaults=True, **{"num.consumer.fetchers": "2", "consumer.id": "a"})
    conns.append(a)
    a.create_message_streams({t: 1})
    b = connector(own, g, defaults=True, **{"num.consumer.fetchers": "2", "consumer.id": "b"})  # partition 0's
    # fetcher has no client yet
    conns.append(b)
    [stream] = b.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    wait_until(lambda: owners(zk, g, [t]) == {(t, 0): "%s_a-0" % g, (t, 1): "%s_b-0" % g}, 30,
               message="a owning partition 0, b partition 1")
    produced = produce_tracked(own.bootstrap_servers, t, 10, partition=1, tag="p1")
    wait_until(lambda: len(col.seen(t)) == 10, 30, message="b to consume partition 1")
    own.stop("broker")
    try:
        a.shutdown()  # b gets partition 0: its fetcher's first client waits socket.timeout.ms for the brokers
        wait_until(lambda: b.owned_partitions().get((t, 0)), 30, message="b to claim partition 0")
        done = threading.Event()
        t0 = time.monotonic()
        threading.Thread(target=lambda: (b.shutdown(), done.set()), daemon=True).start()
        bound = b.shutdown_bound_s()
        assert done.wait(bound + 5), "shutdown took longer than its bound (%.0f s)" % bound
        print("\nshutdown with a fetcher stuck on unreachable brokers: %.1f s (bound %.0f s)"
              % (time.monotonic() - t0, bound))
        assert int(zk.get(paths.partition_offset_path(g, t, 1))[0]) == produced[-1][1] + 1, \
            "the final commit of partition 1 was not made"
    finally:
        own.start("broker")
