"""A member that loses its partitions in a rebalance and is given the same ones back commits them again: the
ownership fence of the new generation is a new one. (Fences were cached by the member's partition set: the same set
claimed again got the old fence, withdrawn when the partitions were released, and every fenced commit of them was
refused, "partition not owned in this generation", until the set changed.)"""
import pytest

from tests.support.consumer_helpers import connector, owners
from tests.support.waiting import wait_until
from zkconsumer.core.layout import codecs, paths

pytestmark = pytest.mark.live


def test_partitions_claimed_again_are_committed(services, zk, unique):
    topic, group = services.create_topic(unique("fr"), 1), unique("g")
    tp = (topic, 0)
    b = connector(services, group, **{"consumer.id": "b", "auto.commit.enable": "false"})
    # "a" sorts before "b": the range assignor gives it the partition (it never claims it)
    a = paths.consumer_registration_path(group, "%s_a" % group)
    try:
        b.create_message_streams({topic: 1})
        wait_until(lambda: owners(zk, group, [topic]) == {tp: "%s_b-0" % group}, 30, "b to claim the partition")
        rb = b.rebalancer
        with rb.lock:
            assert b.offset_store.commit({tp: 1}, fence=rb.fence()).ok
        zk.create(a, codecs.encode_consumer_registration(codecs.ConsumerRegistration.static({topic: 1})),
                  ephemeral=True, makepath=True)
        wait_until(lambda: not owners(zk, group, [topic]), 30, "b to release the partition")
        zk.delete(a)
        wait_until(lambda: owners(zk, group, [topic]) == {tp: "%s_b-0" % group}, 30, "b to claim it again")
        with rb.lock:
            result = b.offset_store.commit({tp: 2}, fence=rb.fence())
        assert result.ok, result.failed
        assert b.offset_store.fetch([tp]) == {tp: 2}
    finally:
        b.shutdown()
        if zk.exists(a):
            zk.delete(a)
