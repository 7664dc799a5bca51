"""A member leaving the group (``ZookeeperConsumerConnector.shutdown``): ordered, and bounded in time.

Order. When every other member is a zkconsumer member the registration goes first, so they start their rebalance
while this member stops and commits: they wait for its owner nodes (watched), which it deletes only after its last
delivery and commit. With a JVM member in the group (it would back off on our owner nodes) the registration and the
owner nodes go together in one multi-op at the end. With ``rebalance.leave.grace.ms`` > 0 (and ``leave_grace``) the
member announces that it comes back instead of deleting its registration first.

Bounds. Every step that talks to ZooKeeper or a store runs on a helper thread and is given up (logged) when the
connector's ``shutdown_bound_s()`` (a :class:`ShutdownBudget`) has passed: ZooKeeper may be unreachable, and owner
nodes and the registration then vanish with the session. What could not be committed is said in the log. Each step
has a share of the bound, so that a rebalance in progress (waiting for brokers, say) or a fetcher that cannot stop
does not leave the final commit no time: the rebalancer gets until a quarter of it to finish, stopping the fetchers
until half of it, then (delivery stopped) a connection to ZooKeeper that is down for a moment until 60 % to come
back, the commit until 85 % (it waits for a stale session lease to be renewed, within that share), a listener hook
of a rebalance attempt still under way until 90 %, the release the rest; the connector closes its streams,
fetchers, offset store and ZooKeeper session in what is left. A rebalance attempt that outlives its quarter ends at
its next unlocked section (a listener hook, say): when shutdown has the ownership lock meanwhile, nothing of that
attempt is released, claimed or delivered after shutdown's final commit.

Hooks. Shutdown's ``on_revoke`` names the partitions the listener was given (``on_assign``) and no hook has taken
back: not those an attempt's ``on_revoke`` under way already names (shutdown waits for that hook before it releases
them, so a commit made in it still lands), nor those an attempt claimed but never announced.
"""
import logging
import threading
import time
from typing import Callable, List, Set

from ..core.layout import paths
from .leave_grace import announce_leave
from .member import Member
from .ownership import release_and_deregister
from .registration import deregister_first, withdraw_member_info

__all__ = ["ShutdownBudget", "leave_group", "bounded"]

log = logging.getLogger(__name__)


class ShutdownBudget:
    """The bound of one shutdown (*seconds* from now), and how much of it is left for a step."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self.start = clock()
        self.deadline = self.start + seconds

    def left(self) -> float:
        """Seconds left of the bound (at least a little, so every step is tried)."""
        return max(0.1, self.deadline - self._clock())

    def until(self, share: float) -> float:
        """Seconds left of the first *share* of the bound (at least a little, so every step is tried)."""
        return max(0.05, self.start + share * self.seconds - self._clock())


def leave_group(member: Member, budget: ShutdownBudget, leave_grace: bool = True) -> None:
    """*member* leaves its group (see the module's docstring): its rebalancer stops, delivery stops, the consumed
    positions are committed, the listener's ``on_revoke`` is called, and the owner nodes, the registration and the
    member info node go (or a leave-grace marker announces that the member comes back). The caller has told the
    auto-commit thread to end (a commit it has begun may still finish meanwhile) and closes the member's resources
    afterwards. Called from a listener hook (on the rebalancer's own thread), it waits neither for that thread nor
    for the hook."""
    rb = member.rebalancer
    leaving: List = []
    revoking: Set = set()
    reg_path = paths.consumer_registration_path(member.group, member.consumer_id)
    # shutdown() called from a listener hook runs on the rebalancer's own thread: nothing to wait for there
    on_rebalancer = threading.current_thread() is rb
    if rb is not None:
        rb.stop()
        if not on_rebalancer:
            rb.join(budget.until(0.25))
        member.zk.remove_listener(rb.session_listener)
        deregister = member.registration is not None and not (
            member.config.rebalance_leave_grace_ms > 0 and leave_grace)
        if deregister and member.zk.connected:
            bounded("deleting the registration", lambda: deregister_first(
                member.zk, member.group, member.consumer_id), budget.until(0.35))
            deregister = False
        # the rebalancer may still hold the lock in a ZooKeeper call that waits for an unreachable server
        locked = rb.lock.acquire(timeout=budget.until(0.4))
        try:
            member.stop_delivery(timeout=budget.until(0.5))
            leaving = list(rb.owned)
            # not those an attempt's on_revoke named already, nor those claimed but never given with on_assign
            revoking = rb.take_announced(leaving)
        finally:
            if locked:
                rb.lock.release()
        # a connection down for a moment (a ZooKeeper leader election, a dropped connection) is waited for now that
        # nothing more is delivered, within the bound: deciding at once would skip the final commit of a session
        # that is back a moment later
        _wait_connected(member.zk, budget.until(0.6))
        if deregister and member.zk.connected:
            bounded("deleting the registration", lambda: deregister_first(
                member.zk, member.group, member.consumer_id), budget.until(0.65))
        session = member.zk.client_id[0] if member.zk.connected and member.zk.client_id else None
        can_write = session is not None and rb.session_id == session
        if member.config.auto_commit_enable and leaving:
            if can_write:
                step = budget.until(0.85)
                until = time.monotonic() + step
                bounded("committing %d partition(s)" % len(leaving),
                        lambda: member.commit_partitions(leaving, until=until), step)
            else:
                log.warning("shutdown: ZooKeeper is unreachable or the session changed: the consumed offsets "
                            "of %d partition(s) were not committed (messages delivered since the last "
                            "commit will be delivered again)", len(leaving))
        # a hook of the attempt still under way (a slow on_revoke committing its partitions) ends before anything
        # is released, within the bound
        if not on_rebalancer and not rb.hook_idle.wait(budget.until(0.9)):
            log.warning("shutdown: a rebalance listener hook still runs after %.0f s; releasing the partitions anyway",
                        time.monotonic() - budget.start)
        if revoking:
            member.listener_call("on_revoke", revoking)
        locked = rb.lock.acquire(timeout=budget.left())
        try:
            # a commit still in flight (a store slower than the bound) must not write them once they are released
            rb.withdraw(leaving)
            rb.parts.clear()
        finally:
            if locked:
                rb.lock.release()
    if member.registration is not None:
        if member.zk.connected:
            if member.config.rebalance_leave_grace_ms > 0 and leave_grace:
                bounded("announcing the restart (rebalance.leave.grace.ms)",
                        lambda: announce_leave(member.zk, member.group, member.consumer_id,
                                               member.registration, member.config.rebalance_leave_grace_ms),
                        budget.left())
            # the info node after the registration (listed without one, a member looks like a JVM member): when
            # the registration's deletion did not finish, both go with the session
            if bounded("releasing owner nodes and the registration",
                       lambda: release_and_deregister(member.zk, member.group, leaving, reg_path), budget.left()):
                bounded("withdrawing the member info node",
                        lambda: withdraw_member_info(member.zk, member.group, member.consumer_id), budget.left())
        else:
            log.warning("shutdown: ZooKeeper is unreachable: the owner nodes and the registration vanish "
                        "when the session expires (zookeeper.session.timeout.ms)")


def _wait_connected(zk, seconds: float) -> bool:
    """Wait at most *seconds* for kazoo to be connected; whether it is."""
    deadline = time.monotonic() + seconds
    while not zk.connected and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(zk.connected)


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
