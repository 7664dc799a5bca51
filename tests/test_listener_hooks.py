"""The documented listener pattern must not deadlock: on_revoke waits for a worker thread that commits the work in
flight with commit_offsets(), which takes the rebalancer's lock to read the positions, so the rebalancer must call
the hook without holding that lock (else on_revoke would never return and the owner nodes would be held forever)."""
import threading

from consumer_helpers import StreamCollector, connector, wait_until
from zkconsumer.consumer import RebalanceListener


class CommitOnRevoke(RebalanceListener):
    def __init__(self):
        self.conn = None
        self.revokes = []          # (partitions, worker finished within 10 s, commit error)

    def on_revoke(self, partitions):
        result = {}

        def worker():
            try:
                self.conn.commit_offsets(raise_errors=True)
            except Exception as e:
                result["error"] = e
        th = threading.Thread(target=worker, daemon=True)
        th.start()
        th.join(10)  # the application waits for its worker, bounded here so that the test can fail, not hang
        self.revokes.append((set(partitions), not th.is_alive(), result.get("error")))


def test_on_revoke_may_wait_for_a_thread_that_commits(services, zk, unique, conns):
    g, t = unique("hook"), services.create_topic(unique("hook"), 4)
    listener = CommitOnRevoke()
    a = connector(services, g, listener=listener)
    listener.conn = a
    conns.append(a)
    [stream] = a.create_message_streams({t: 1})[t]
    StreamCollector(stream).start()
    wait_until(lambda: len(a.owned_partitions()) == 4, 20, message="a owns everything")
    b = connector(services, g)
    conns.append(b)
    b.create_message_streams({t: 1})
    wait_until(lambda: listener.revokes, 30, message="a's on_revoke")
    parts, finished, error = listener.revokes[0]
    assert finished, "the worker's commit_offsets() blocked while on_revoke waited for it (deadlock)"
    assert error is None, error
    wait_until(lambda: len(a.owned_partitions()) == 2 and len(b.owned_partitions()) == 2, 30,
               message="the partitions handed over")
