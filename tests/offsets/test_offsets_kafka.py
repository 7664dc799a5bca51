"""KafkaOffsetStore against the session's real broker."""
import socket
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from zkconsumer.kafka import internals as client_internals
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.errors import OffsetStoreError
from zkconsumer.offsets.kafka import KafkaOffsetStore
from tests.support.waiting import wait_for_coordinator, wait_until


def _config(group, **over):
    props = {"group.id": group, "offsets.channel.backoff.ms": "100", "offsets.commit.max.retries": "2",
             "offsets.channel.socket.timeout.ms": "3000"}
    props.update(over)
    return ConsumerConfig.from_properties(props, require_zookeeper=False)


@pytest.fixture
def topic(services, unique):
    return services.create_topic(unique("kt"), 3)


def test_round_trip_fresh_group_visible_to_kafka_consumer(services, unique, topic):
    g = unique("g")
    store = KafkaOffsetStore(services.bootstrap_servers, g, _config(g))
    try:
        assert store._admin is None  # nothing touches the network before the first call
        assert store.fetch([(topic, 0), (topic, 1)]) == {}
        r = store.commit({(topic, 0): 17, (topic, 2): 3})
        assert r.ok and r.committed == {(topic, 0): 17, (topic, 2): 3}
        admin, node = store._admin, store._node
        assert store.fetch([(topic, 0), (topic, 1), (topic, 2)]) == {(topic, 0): 17, (topic, 2): 3}
        assert store.commit({(topic, 0): 18}).ok
        assert store._admin is admin and store._node == node  # one connection, reused
        assert store.fetch([(topic, 0)]) == {(topic, 0): 18}
    finally:
        store.close()
    consumer = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, group_id=g, enable_auto_commit=False)
    try:
        assert consumer.committed(TopicPartition(topic, 0)) == 18
        assert consumer.committed(TopicPartition(topic, 2)) == 3
        assert consumer.committed(TopicPartition(topic, 1)) is None
    finally:
        consumer.close()
    with pytest.raises(OffsetStoreError, match="closed"):
        store.fetch([(topic, 0)])


def test_unknown_topic_is_a_partition_failure(services, unique, topic):
    """tansu: UNKNOWN_TOPIC_OR_PARTITION for a topic it does not know; a missing partition of a known topic is
    accepted and stored (NONE).  Not retried: reported at once."""
    g, missing = unique("g"), unique("missing")
    with KafkaOffsetStore(services.bootstrap_servers, g, _config(g)) as store:
        t0 = time.monotonic()
        r = store.commit({(topic, 1): 5, (missing, 0): 9})
        assert time.monotonic() - t0 < 2.0
        assert r.committed == {(topic, 1): 5}
        assert set(r.failed) == {(missing, 0)}
        assert "UnknownTopicOrPartition" in str(r.failed[(missing, 0)])
        with pytest.raises(OffsetStoreError, match=missing):
            r.raise_for_errors()
        assert store.fetch([(topic, 1), (missing, 0)]) == {(topic, 1): 5}


def test_reconnects_after_coordinator_connection_closed(services, unique, topic):
    g = unique("g")
    with KafkaOffsetStore(services.bootstrap_servers, g, _config(g)) as store:
        assert store.commit({(topic, 0): 1}).ok
        store._drop_coordinator()  # what NOT_COORDINATOR does: disconnect, FindCoordinator again
        assert store.commit({(topic, 0): 2}).ok
        client_internals.close_connection(store._admin, store._node)  # connection dropped under us
        assert store.fetch([(topic, 0)]) == {(topic, 0): 2}


def test_unreachable_broker_bounded(unique):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connection refused
    g = unique("g")
    store = KafkaOffsetStore("127.0.0.1:%d" % port, g, _config(g, **{"offsets.channel.socket.timeout.ms": "1500"}))
    for call in (lambda: store.commit({("t", 0): 1}), lambda: store.fetch([("t", 0)])):
        t0 = time.monotonic()
        with pytest.raises(OffsetStoreError) as ei:
            call()
        elapsed = time.monotonic() - t0
        assert elapsed < 6.0, elapsed
        assert "127.0.0.1:%d" % port in str(ei.value) and "offsets.channel.socket.timeout.ms" in str(ei.value)
    store.close()


def test_begin_commit_sends_before_its_answer_is_asked_for(services, unique, topic):
    """begin_commit hands the OffsetCommit to the client's IO thread at once: another client sees the offsets
    before finish() is called; finish() returns what commit() would, retries and errors included."""
    g = unique("g")
    with KafkaOffsetStore(services.bootstrap_servers, g, _config(g)) as store, \
            KafkaOffsetStore(services.bootstrap_servers, g, _config(g)) as reader:
        store.commit({(topic, 0): 1})  # the coordinator is known from here on
        finish = store.begin_commit({(topic, 0): 7, (topic, 1): 8, (unique("missing"), 0): 9})
        wait_until(lambda: reader.fetch([(topic, 0), (topic, 1)]) == {(topic, 0): 7, (topic, 1): 8}, timeout=10)
        r = finish()
        assert r.committed == {(topic, 0): 7, (topic, 1): 8} and len(r.failed) == 1
        assert "UnknownTopicOrPartition" in str(next(iter(r.failed.values())))
        assert store.begin_commit({})().committed == {}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = KafkaOffsetStore("127.0.0.1:%d" % port, g, _config(g, **{"offsets.channel.socket.timeout.ms": "1000"}))
    finish = down.begin_commit({(topic, 0): 1})  # cannot be sent now: commit() itself, when asked
    with pytest.raises(OffsetStoreError, match="127.0.0.1:%d" % port):
        finish()
    down.close()


def test_every_retry_is_fenced_again(services, unique, topic, zk):
    """A Kafka commit that must retry (coordinator loading) re-reads the owner nodes before every retry: when
    ownership moved meanwhile (our node released, a successor's created in the same session window), the retry is
    not sent and the successor's offset stands. The first attempt's error is injected in our own send step."""
    from kafka import errors as Errors
    from zkconsumer.zookeeper import client as zkmod
    from zkconsumer.errors import OwnershipLostError
    from zkconsumer.core.layout import paths
    from zkconsumer.offsets.base import OwnershipFence

    g = unique("refence")
    tp = (topic, 0)
    owner = paths.partition_owner_path(g, topic, 0)
    zk.create(owner, b"us-0", ephemeral=True, makepath=True)
    successor = zkmod.connect(services.zookeeper_connect)
    moved = []

    class LoadingOnce(KafkaOffsetStore):
        async def _async_commit(self, node, offsets):
            if not moved:  # attempt 1: the coordinator is "loading"; meanwhile the partition changes hands
                zk.delete(owner)
                successor.create(owner, b"them-0", ephemeral=True)
                theirs.commit({tp: 500})
                moved.append(True)
                return {k: (Errors.CoordinatorLoadInProgressError, None) for k in offsets}
            return await super()._async_commit(node, offsets)

    theirs = KafkaOffsetStore(services.bootstrap_servers, g, _config(g))
    store = LoadingOnce(services.bootstrap_servers, g, _config(g), zk=zk)
    try:
        wait_for_coordinator(theirs, tp)
        fence = OwnershipFence(zk.client_id[0], {tp: owner})
        assert fence.verify(zk) == {}  # verified once, as the rebalancer does right after claiming
        result = store.commit({tp: 7}, fence=fence)
        assert moved and tp in result.failed and isinstance(result.failed[tp], OwnershipLostError), result.failed
        assert "belongs to session" in str(result.failed[tp])
        assert theirs.fetch([tp]) == {tp: 500}, "the late retry wrote over the successor's offset"
    finally:
        store.close()
        theirs.close()
        zkmod.close(successor)


def test_a_withdrawn_partition_is_refused_by_the_old_fence(services, unique, zk):
    """The rebalancer withdraws what it releases from the fence a commit may still hold."""
    from zkconsumer.errors import OwnershipLostError
    from zkconsumer.core.layout import paths
    from zkconsumer.offsets.base import OwnershipFence

    g = unique("withdraw")
    owners = {("t", p): paths.partition_owner_path(g, "t", p) for p in (0, 1)}
    for path in owners.values():
        zk.create(path, b"x", ephemeral=True, makepath=True)
    fence = OwnershipFence(zk.client_id[0], owners)
    assert fence.verify(zk) == {}
    fence.withdraw([("t", 1)])
    refused = fence.precheck(zk, [("t", 0), ("t", 1)])
    assert set(refused) == {("t", 1)} and isinstance(refused[("t", 1)], OwnershipLostError)


def test_fetch_errors_are_raised_not_read_as_no_offset(services, unique, topic):
    """GROUP/TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION or a partition missing from the OffsetFetch
    answer is an error, not "no offset" (a Kafka-storage member would reset, a rollback would leave it out).
    The broker's answer is altered in our own decoding step (a secured cluster is not needed to see the rule)."""
    from kafka import errors as Errors
    g = unique("fetcherr")
    for broken in ("auth", "missing", "group"):
        class Broken(KafkaOffsetStore):
            async def _async_fetch(self, node, parts):
                got = await super()._async_fetch(node, parts)
                if broken == "auth":
                    got[(topic, 1)] = (Errors.TopicAuthorizationFailedError, -1)
                elif broken == "missing":
                    got.pop((topic, 2), None)
                else:
                    got = {tp: (Errors.GroupAuthorizationFailedError, None) for tp in parts}
                return got
        store = Broken(services.bootstrap_servers, g, _config(g))
        try:
            wait_until(lambda: store.commit({(topic, 0): 3}).ok, 30, interval=0.5, message="a first commit")
            with pytest.raises(OffsetStoreError) as info:
                store.fetch([(topic, 0), (topic, 1), (topic, 2)])
            text = str(info.value)
            assert g in text, text
            if broken == "auth":
                assert "%s-1" % topic in text and "TopicAuthorizationFailed" in text
            elif broken == "missing":
                assert "%s-2" % topic in text and "no answer" in text
            else:
                assert "GroupAuthorizationFailed" in text
        finally:
            store.close()
