"""A member leaving the group (``ZookeeperConsumerConnector.shutdown``): ordered, and bounded in time.

Order. When every other member is a zkconsumer member the registration goes first, so they start their rebalance
while this member stops and commits: they wait for its owner nodes (watched), which it deletes only after its last
delivery and commit. With a JVM member in the group (it would back off on our owner nodes) the registration and the
owner nodes go together in one multi-op at the end. With ``rebalance.leave.grace.ms`` > 0 (and ``leave_grace``) the
member announces that it comes back instead of deleting its registration first.

Bounds. Every step that talks to ZooKeeper or a store runs on a helper thread and is given up (logged) when the
connector's ``shutdown_bound_s()`` has passed: ZooKeeper may be unreachable, and owner nodes and the registration
then vanish with the session. What could not be committed is said in the log. Each step has a share of the bound, so
that a rebalance in progress (waiting for brokers, say) or a fetcher that cannot stop does not leave the final
commit no time: the rebalancer gets until a quarter of it to finish, stopping the fetchers until half of it, the
commit until 85 %, the release the rest.
"""
import logging
import queue
import threading
import time
from typing import Any, Callable

from ..zookeeper import client as zkmod
from ..core.layout import paths
from .leave_grace import announce_leave
from .ownership import release_and_deregister
from .registration import deregister_first, withdraw_member_info
from .stream import SHUTDOWN

__all__ = ["shut_down", "bounded"]

log = logging.getLogger(__name__)


def shut_down(conn: Any, leave_grace: bool = True) -> None:
    """Stop *conn* and leave its group (see the module's docstring); a second call does nothing."""
    with conn._shutdown_lock:
        if conn._closed:
            return
        conn._closed = True
    conn._stopped.set()
    conn._commit_soon.set()  # the auto-commit thread ends
    rb = conn.rebalancer
    budget = conn.shutdown_bound_s()
    start = time.monotonic()
    deadline = start + budget

    def left():
        return max(0.1, deadline - time.monotonic())

    def until(share):
        """Seconds left of the first *share* of the bound (at least a little, so every step is tried)."""
        return max(0.05, start + share * budget - time.monotonic())
    leaving = []
    reg_path = paths.consumer_registration_path(conn.group, conn.consumer_id)
    try:
        if rb is not None:
            rb.stop()
            rb.join(until(0.25))
            conn.zk.remove_listener(rb.session_listener)
            if conn.registration is not None and conn.zk.connected and not (
                    conn.config.rebalance_leave_grace_ms > 0 and leave_grace):
                bounded("deleting the registration", lambda: deregister_first(
                    conn.zk, conn.group, conn.consumer_id), until(0.35))
            # the rebalancer may still hold the lock in a ZooKeeper call that waits for an unreachable server
            locked = rb.lock.acquire(timeout=until(0.4))
            try:
                conn.stop_delivery(timeout=until(0.5))
                leaving = list(rb.owned)
                session = conn.zk.client_id[0] if conn.zk.connected and conn.zk.client_id else None
                can_write = session is not None and rb.session_id == session
            finally:
                if locked:
                    rb.lock.release()
            if conn.config.auto_commit_enable and leaving:
                if can_write:
                    bounded("committing %d partition(s)" % len(leaving),
                                  lambda: conn.commit_partitions(leaving), until(0.85))
                else:
                    log.warning("shutdown: ZooKeeper is unreachable or the session changed: the consumed offsets "
                                "of %d partition(s) were not committed (messages delivered since the last "
                                "commit will be delivered again)", len(leaving))
            if leaving:
                conn.listener_call("on_revoke", set(leaving))
            locked = rb.lock.acquire(timeout=left())
            try:
                rb.parts.clear()
            finally:
                if locked:
                    rb.lock.release()
        if conn.registration is not None:
            if conn.zk.connected:
                if conn.config.rebalance_leave_grace_ms > 0 and leave_grace:
                    bounded("announcing the restart (rebalance.leave.grace.ms)",
                                  lambda: announce_leave(conn.zk, conn.group, conn.consumer_id,
                                                         conn.registration, conn.config.rebalance_leave_grace_ms),
                                  left())
                bounded("releasing owner nodes and the registration",
                              lambda: release_and_deregister(conn.zk, conn.group, leaving, reg_path), left())
                bounded("withdrawing the member info node",
                              lambda: withdraw_member_info(conn.zk, conn.group, conn.consumer_id), left())
            else:
                log.warning("shutdown: ZooKeeper is unreachable: the owner nodes and the registration vanish "
                            "when the session expires (zookeeper.session.timeout.ms)")
    finally:
        for q in conn._queues.values():
            try:
                q.put_nowait(SHUTDOWN)
            except queue.Full:
                while True:
                    try:
                        q.get_nowait()
                    except queue.Empty:
                        break
                q.put_nowait(SHUTDOWN)
        if conn.fetchers is not None:
            conn.fetchers.shutdown(timeout=left())
        conn.lease.stop()
        try:  # a commit still waiting for ZooKeeper holds the store's lock: bounded too
            bounded("closing the offset store", conn.offset_store.close, left())
        finally:
            bounded("closing the ZooKeeper session", lambda: zkmod.close(conn.zk), left())
        if conn._commit_thread is not None:
            conn._commit_thread.join(min(left(), 5.0))


def bounded(what: str, fn: Callable[[], object], seconds: float) -> bool:
    """Run fn on a helper thread; give up waiting after `seconds` (logged). True if it finished without error."""
    done, errors = threading.Event(), []

    def run():
        try:
            fn()
        except Exception as e:
            errors.append(e)
        finally:
            done.set()
    threading.Thread(target=run, daemon=True, name="zkconsumer-shutdown").start()
    if not done.wait(seconds):
        log.warning("shutdown: %s did not finish within %.0f s (ZooKeeper unreachable?); going on without it",
                    what, seconds)
        return False
    if errors:
        log.warning("shutdown: %s failed: %s", what, errors[0])
        return False
    return True
