"""Ownership fences across rebalances.

* A member that loses its partitions in a rebalance and is given the same ones back commits them again: the
  ownership fence of the new generation is a new one. (Fences were cached by the member's partition set: the same set
  claimed again got the old fence, withdrawn when the partitions were released, and every fenced commit of them was
  refused, "partition not owned in this generation", until the set changed.)
* A partition the member releases is withdrawn from every fence it handed out, not only the current one: a commit
  still holding a fence of an earlier generation (a store retrying across rebalances) must not write over the
  offset of the partition's next owner, whose owner node the in-multi check cannot tell from ours (both version 0).
"""
import pytest

from tests.support.consumer_helpers import connector, owners
from tests.support.waiting import wait_until
from zkconsumer.core.layout import codecs, paths
from zkconsumer.errors import OwnershipLostError

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


def test_a_released_partition_is_withdrawn_from_older_fences_too(services, zk, unique):
    topic, group = services.create_topic(unique("fw"), 2), unique("g")
    tp0, tp1 = (topic, 0), (topic, 1)
    b = connector(services, group, **{"consumer.id": "b", "auto.commit.enable": "false"})
    fake = {name: paths.consumer_registration_path(group, "%s_%s" % (group, name)) for name in ("a", "c")}
    reg = codecs.encode_consumer_registration(codecs.ConsumerRegistration.static({topic: 1}))
    successor = paths.partition_owner_path(group, topic, 0)
    try:
        b.create_message_streams({topic: 1})
        wait_until(lambda: set(owners(zk, group, [topic])) == {tp0, tp1}, 30, "b to claim both partitions")
        rb = b.rebalancer
        with rb.lock:
            old = rb.fence()  # held by a commit that goes on across the next rebalances (a store retrying)
        assert b.offset_store.commit({tp0: 1}, fence=old).ok  # partition 0 verified under it
        # "c" sorts after "b": b keeps partition 0 and releases 1 (withdrawn from the fence current then: old)
        zk.create(fake["c"], reg, ephemeral=True, makepath=True)
        wait_until(lambda: set(owners(zk, group, [topic])) == {tp0}, 30, "b to release partition 1")
        with rb.lock:
            assert b.offset_store.commit({tp0: 2}, fence=rb.fence()).ok  # a newer fence becomes the current one
        # "a" sorts before "b": b releases partition 0 (and claims 1, which c never claimed)
        zk.create(fake["a"], reg, ephemeral=True, makepath=True)
        wait_until(lambda: owners(zk, group, [topic]) == {tp1: "%s_b-0" % group}, 30, "b to release partition 0")
        # partition 0's next owner claims it: a node of another session, version 0 as ours was
        zk.create(successor, ("%s_a-0" % group).encode(), ephemeral=True)
        result = b.offset_store.commit({tp0: 1}, fence=old)
        assert not result.ok and isinstance(result.failed.get(tp0), OwnershipLostError), result
        assert b.offset_store.fetch([tp0]) == {tp0: 2}
    finally:
        b.shutdown()
        for path in list(fake.values()) + [successor]:
            if zk.exists(path):
                zk.delete(path)
