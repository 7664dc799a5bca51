"""A slow offset store (the Kafka offset manager may retry for a minute) must not hold up the rebalancer: the
store write runs without the ownership lock, so a rebalance (and suspension, session loss) is handled at once, and
the late write is fenced: it cannot commit partitions the member no longer owns. A store whose commit sleeps 20 s
(a wrapper around the real ZooKeeper store) stands for the slow one."""
import threading
import time

from tests.support.consumer_helpers import StreamCollector, connector, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.errors import OwnershipLostError


class SlowOnce:
    def __init__(self, store, seconds):
        self.store, self.seconds, self.armed = store, seconds, False
        self.entered = threading.Event()

    def commit(self, offsets, fence=None, **kw):
        if self.armed:
            self.armed = False
            self.entered.set()
            time.sleep(self.seconds)
        return self.store.commit(offsets, fence=fence, **kw)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_slow_commit_does_not_block_a_rebalance_and_is_fenced(services, zk, unique, conns):
    g, t = unique("slow"), services.create_topic(unique("slow"), 4)
    a = connector(services, g, **{"auto.commit.enable": "false"})
    conns.append(a)
    slow = SlowOnce(a.offset_store, 20.0)
    a.offset_store = slow
    [stream] = a.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    wait_until(lambda: len(a.owned_partitions()) == 4, 20, message="a owns everything")
    produce_tracked(services.bootstrap_servers, t, 40, partitions=4, tag="slow")
    wait_until(lambda: len(col.seen(t)) == 40, 20, message="a consumed")
    slow.armed = True
    results = []
    committer = threading.Thread(target=lambda: results.append(a.commit_offsets()), daemon=True)
    committer.start()
    assert slow.entered.wait(5)
    t0 = time.monotonic()
    b = connector(services, g)
    conns.append(b)
    b.create_message_streams({t: 1})
    wait_until(lambda: len(a.owned_partitions()) == 2 and len(b.owned_partitions()) == 2, 15,
               message="the rebalance while a's commit is still sleeping")
    took = time.monotonic() - t0
    assert committer.is_alive(), "the slow commit finished early: the test proves nothing"
    assert took < 12, "the rebalance waited %.1f s for the slow commit" % took
    committer.join(30)
    [result] = results
    lost = {tp for tp, e in result.failed.items() if isinstance(e, OwnershipLostError)}
    assert lost == {tp for tp in ((t, p) for p in range(4)) if tp not in a.owned_partitions()}, result.failed
