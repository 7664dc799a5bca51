"""A partition without a leader (its only replica's broker is down) on a cluster of two Apache Kafka brokers.

The Scala consumer's leader finder (Kafka 1.1.1 ``ConsumerFetcherManager.LeaderFinderThread``) left such a partition
out of the fetchers and added it when a leader appeared; the rebalance never waited for it. Here too: the member
claims it, fetches every other partition at once, resolves its reset point when the leader is back (and commits
it), and the rebalance holds the ownership lock for no longer than a short bounded wait. Before, resolving the
reset point waited ``socket.timeout.ms`` per leaderless partition inside the rebalance, the fetcher's assignment
timed out after 30 s, the attempt failed and the next one started over.
"""
import json
import time

import pytest

from tests.support.chaos_support import own_cluster_fixture
from tests.support.consumer_helpers import StreamCollector, connector, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.core.layout import paths

pytestmark = pytest.mark.live

own = own_cluster_fixture("leaderless", brokers=2, broker_config={"zookeeper.session.timeout.ms": 6000,
                                                                  "unclean.leader.election.enable": "false"})



def _leader(zk, t, p):
    data, _ = zk.get("/brokers/topics/%s/partitions/%d/state" % (t, p))
    return json.loads(data.decode())["leader"]


def _probe_until_delivered(own, col, t, p, timeout, what):
    """Produce one record to partition p every half second until the collector has one of p (a record produced
    before the member's reset to the log end is skipped by it, as it should be)."""
    def delivered():
        produce_tracked(own.bootstrap_servers, t, 1, partition=p, tag="probe")
        return any(q == p for _, q, _ in col.seen(t))
    wait_until(delivered, timeout, interval=0.5, message=what)


def test_a_leaderless_partition_is_fetched_when_its_leader_is_back(own, unique, conns):
    from kafka.admin import KafkaAdminClient
    t, g = unique("nolead"), unique("nolead")
    admin = KafkaAdminClient(bootstrap_servers=own.bootstrap_servers)
    try:
        admin.create_topics({t: {"assignments": {0: [0], 1: [1]}}})  # one replica each, on different brokers
    finally:
        admin.close()
    zk = zkmod.connect(own.zookeeper_connect)
    stopped = False
    try:
        wait_until(lambda: zk.exists("/brokers/topics/%s/partitions/1/state" % t) and _leader(zk, t, 1) == 1, 30,
                   message="partition 1 led by broker 1")
        own.stop("broker-1")
        stopped = True
        wait_until(lambda: _leader(zk, t, 1) == -1, 30, message="partition 1 without a leader")
        started = time.monotonic()
        a = connector(own, g, defaults=True)
        conns.append(a)
        [stream] = a.create_message_streams({t: 1})[t]
        col = StreamCollector(stream)
        col.start()
        wait_until(lambda: len(a.owned_partitions()) == 2, 30, message="a to own both partitions")
        _probe_until_delivered(own, col, t, 0, 20, "partition 0 delivered while partition 1 has no leader")
        first_p0 = time.monotonic() - started
        assert a.commit_offsets(raise_errors=True) is not None  # the ownership lock is free: commits go through
        own.start("broker-1")
        stopped = False
        wait_until(lambda: _leader(zk, t, 1) == 1, 60, message="partition 1 led again")
        led = time.monotonic()
        _probe_until_delivered(own, col, t, 1, 40, "partition 1 delivered once its leader is back")
        back_p1 = time.monotonic() - led
        # its reset point was committed when it was resolved, not at the first auto-commit a minute later; that
        # commit records the consumed position, which may already be past the first record handed out meanwhile,
        # never past the last one handed out
        # (the commit thread writes it as the first records go out: waited for here, far below the 60 s interval)
        path = paths.partition_offset_path(g, t, 1)
        wait_until(lambda: zk.exists(path), 10, message="partition 1's reset point to be committed")
        assert int(zk.get(path)[0]) <= max(o for _, p, o in col.seen(t) if p == 1) + 1
        assert a.rebalancer.stats["failed_attempts"] == 0, a.rebalancer.stats
        print("\nleaderless partition: partition 0 delivered %.1f s after the member started, partition 1 %.1f s "
              "after its leader was back" % (first_p0, back_p1))
    finally:
        if stopped:
            own.start("broker-1")
        zkmod.close(zk)
