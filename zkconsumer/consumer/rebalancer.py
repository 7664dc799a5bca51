"""The rebalancer: one thread that owns all of a connector's ownership state (Kafka 1.1.1
``ZookeeperConsumerConnector.ZKRebalancerListener`` and its ``<consumer id>_watcher_executor`` thread).

States and transitions (``Rebalancer.state``)::

    STARTING   --registered-------------------------------------------> SETTLING
    IDLE       --group/topic/broker watch, audit timer, fence failure--> SETTLING
    SETTLING   --rebalance.settle.ms passed (the burst is coalesced)---> attempt
    attempt:   ASSIGNING  one consistent read of members, subscriptions, partitions; the assignor
                          (unchanged assignment and fetchers running: --> IDLE at once, nothing stops)
               RELEASING  new generation; streams fenced; fetchers stopped; queues cleared; commit (auto-commit;
                          waited for at most zookeeper.session.timeout.ms) and the revoke hook for the partitions
                          leaving us; their owner nodes deleted
               CLAIMING   owner nodes for the partitions coming to us, one atomic multi-op, only under the session
                          we registered with --conflict--> BACKOFF (watches on the conflicting owner nodes)
               FETCHING   offsets of the new partitions read (after the claim, so the previous owner's
                          commit-before-release is visible); the assign hook; fetchers started (a partition without
                          a committed offset starts at its reset point, committed at once) ----------------> IDLE
               after every attempt: owner nodes of our session that we do not own (a claim whose answer was
               lost) are deleted
    BACKOFF    --owner node deleted, new event, or rebalance.backoff.ms + jitter---------------------> SETTLING
               (woken only by the deletion of an owner node it waits for, with no other event since, the next
               attempt resumes at CLAIMING with the same assignment: nothing else changed, so the group is not
               read again)
               --rebalance.max.retries failed attempts in a row------------------------------------> DEGRADED
               (a claim conflict — a predecessor has not released yet — is a wait, not a failed attempt; a
               wait longer than twice zookeeper.session.timeout.ms is logged with the owner nodes' data and
               sessions, and shows in metrics()["ClaimWait"])
    DEGRADED   retries every rebalance.slow.retry.ms and at once on any event; never idle while registered
    SUSPENDED  ZooKeeper connection lost (same session may come back); after zookeeper.suspended.grace.ms the
               generation is bumped and fetchers stop, so nothing is delivered while peers may have taken over;
               --reconnected--> SETTLING (verify the assignment; fetch resumes from the consumed positions)
    LOST       the session expired: everything revoked locally (no commit: the owner nodes died with the
               session), the lost hook; --new session--> split-brain check, re-register --> SETTLING
               (the check refuses while a broker-coordinated group of the same id is active, or cannot be
               asked with split.brain.check=refuse: a failed attempt, retried like any other)
    STOPPED    shutdown()

Unlike Scala, partitions that stay with this consumer are not released and re-claimed: they keep their owner
nodes and resume from the consumed position, and a member whose assignment did not change keeps fetching.
"""
import logging
import queue
import random
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Set, Tuple

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KazooState

from ..core.assignors import get_assignor, own_assignment
from ..errors import (GroupConflictError, OwnershipLostError, RebalanceError, RegistrationConflictError,
                      SplitBrainUnknownError)
from ..core.layout import paths
from ..offsets import OwnershipFence
from . import ownership
from .group_view import GroupReader
from .partition_info import OwnedThreads, PartitionTopicInfo
from .leave_grace import withdraw_leave
from .registration import publish_member_info, register, withdraw_member_info

if TYPE_CHECKING:
    from .member import Member

log = logging.getLogger(__name__)

TP = Tuple[str, int]

STARTING, IDLE, SETTLING, ASSIGNING, RELEASING, CLAIMING, FETCHING = (
    "STARTING", "IDLE", "SETTLING", "ASSIGNING", "RELEASING", "CLAIMING", "FETCHING")
BACKOFF, DEGRADED, SUSPENDED, LOST, STOPPED = "BACKOFF", "DEGRADED", "SUSPENDED", "LOST", "STOPPED"

AUDIT_INTERVAL_S = 30.0


class _Stopping(Exception):
    """The rebalancer was stopped (shutdown) while an attempt ran: the attempt ends, neither done nor failed (never
    leaves the rebalancer: not one of zkconsumer's errors)."""

    def __init__(self, consumer_id: str) -> None:
        super().__init__("%s: shutdown under way; the rebalance attempt ends" % consumer_id)


class Rebalancer(threading.Thread):
    """The thread named ``<consumer id>_watcher_executor`` that runs a connector's rebalances (the states and
    transitions are in the module's docstring).

    Who writes what:

    * only this thread changes ownership: ``parts`` (the registry ``{(t, p): PartitionTopicInfo}`` of the owned
      partitions; ``owned`` is a read-only view of it), ``session_id`` (the session they were claimed under),
      the commit fence, and the connector's delivery generation (through ``stop_delivery`` / ``start_delivery``);
      :meth:`shutdown <.connector.ZookeeperConsumerConnector.shutdown>` stops this thread first, then stops
      delivery and clears ``parts`` under ``lock`` (without it when the lock is not free within its share of the
      shutdown's bound);
    * this thread alone also writes ``state``, ``stats``, ``failures``, ``claim_wait`` and the claim plan;
      ``metrics()`` reads them without a lock (``claim_wait`` is replaced whole, never changed in place);
    * every other thread only puts events on ``events``: kazoo's watch and session callbacks (on kazoo's event
      thread), the suspension and leave-grace timers, :meth:`stop`, and :meth:`on_commit_result` (a commit the
      fence refused: it also raises the ``_verify_owners`` flag). None of them blocks, so a ZooKeeper callback
      never waits for a rebalance.

    ``lock`` (re-entrant) guards ``parts``, ``session_id``, the fence and ``fetching``. An attempt holds it from
    start to end, except around three calls made with it released (:meth:`_unlocked`): the listener hooks, the
    wait for the commit of the partitions leaving, and starting the fetchers (which may wait for brokers). The
    hooks run unlocked because ``on_revoke`` may wait for application threads that call
    :meth:`commit_offsets <.connector.ZookeeperConsumerConnector.commit_offsets>`, which takes the lock to read
    the consumed positions: holding it there would deadlock. That is safe because delivery has stopped before
    the hooks run (a new generation, streams fenced, fetchers stopped) and no other thread changes ownership, so
    what a commit reads meanwhile is consistent. Committers (the application, the auto-commit thread, the commit
    of the partitions leaving, shutdown) take the lock only to read positions and the fence, never for a store's
    round trip.
    """

    def __init__(self, member: "Member"):
        """*member*: the connector whose ownership this thread keeps (:class:`~.member.Member`: what it drives)."""
        super().__init__(name="%s_watcher_executor" % member.consumer_id, daemon=True)
        c = member
        self.c = c
        self.zk = c.zk
        self.config = c.config
        self.group = c.config.group_id
        self.consumer_id = c.consumer_id
        self.assignor = get_assignor(c.config.partition_assignment_strategy, c.config.legacy_consumer_version)
        self.events: "queue.Queue[Tuple[str, Any]]" = queue.Queue()
        # ownership state; commits take it too
        self.lock = threading.RLock()
        # (t, p) -> PartitionTopicInfo, claimed under self.session_id
        self.parts: Dict[TP, PartitionTopicInfo] = {}
        # the same, read as (t, p) -> thread id
        self.owned = OwnedThreads(self.parts)
        # the partitions the listener was given (on_assign) and not revoked or lost since: the hooks name only these
        self.announced: FrozenSet[TP] = frozenset()
        self._announced_lock = threading.Lock()
        # set while no listener hook of an attempt runs (shutdown waits for one before it releases)
        self.hook_idle = threading.Event()
        self.hook_idle.set()
        self.session_id = None
        # the session our registration was created under
        self._registered_session = None
        # (t, p) whose claim may have been applied unseen (ConnectionLoss)
        self._uncertain: Set[TP] = set()
        # monotonic time the current claim wait began
        self._waiting_since = None
        # owner node path -> {"owner": data, "session": "0x..."} waited for
        self.claim_wait: Dict[str, Dict[str, Any]] = {}
        self._wait_reported_at = None
        self.fetching = False
        # check our owner nodes at the next attempt (fence failure, audit)
        self._verify_owners = False
        self.state = STARTING
        self.failures = 0
        self.stats: Dict[str, Any] = {
            "attempts": 0, "rebalances": 0, "failed_attempts": 0, "claim_waits": 0, "noop_attempts": 0,
            "last_duration_ms": None, "last_zk_reads": None, "zk_reads": 0, "state_changes": 0,
            "rebalance_seconds": 0.0, "claim_resumes": 0, "session_expiries": 0}
        self.first_done = threading.Event()
        self._stopping = False
        self._suspended_timer = None
        self._need_register = True
        self._registered_once = False
        self._ghost_timer = None
        # registrations and partition maps cached between attempts
        self._reader = None
        # topics whose owner directory (persistent) a claim made or found: not ensured again
        self._owner_dirs: Set[str] = set()
        self._fence = None
        self._fence_key = None
        # every fence handed out that a commit may still hold (a store retrying across rebalances), and its lock
        self._fences: "weakref.WeakSet[OwnershipFence]" = weakref.WeakSet()
        self._fences_lock = threading.Lock()
        self._conflicted = False
        # {(t, p): thread id} a claim waits for (the rest of its attempt done)
        self._claim_plan = None
        # an owner node it waits for was deleted, and nothing else happened
        self._claim_woken = False
        self.start_error = None

    # -- event intake (any thread; never blocks) ---------------------------------------------------------------
    def watch(self, event=None):
        self.events.put(("watch", event.path if event is not None else None))

    def session_listener(self, state):
        self.events.put(("session", state))

    def request(self, why):
        self.events.put(("request", why))

    def stop(self):
        self._stopping = True
        if self._ghost_timer is not None:
            self._ghost_timer.cancel()
        self.events.put(("stop", None))

    def _set_state(self, state):
        if state != self.state:
            log.debug("rebalancer %s: %s -> %s", self.consumer_id, self.state, state)
            self.state = state
            self.stats["state_changes"] += 1

    # -- main loop ---------------------------------------------------------------------------------------------
    def run(self):
        """The event loop; it never dies of an unexpected error (logged, then the loop goes on with a rebalance)."""
        while not self._stopping:
            try:
                self._loop()
            except Exception as e:
                log.error("rebalancer %s: unexpected error (continuing with a new rebalance): %r",
                          self.consumer_id, e, exc_info=log.isEnabledFor(logging.DEBUG))
                time.sleep(self.config.rebalance_backoff_ms / 1000.0)
        self._set_state(STOPPED)
        self.first_done.set()

    def _loop(self):
        settle = self.config.rebalance_settle_ms / 1000.0
        dirty, attempt_at = True, time.monotonic()
        while not self._stopping:
            now = time.monotonic()
            connected = self.zk.state == KazooState.CONNECTED
            if dirty and now >= attempt_at and connected and self.state not in (SUSPENDED,):
                ok = self._attempt_safely()
                if self._stopping:
                    break
                if ok:
                    dirty = False
                    self.failures = 0
                    self._set_state(IDLE)
                    self.first_done.set()
                else:
                    # waiting for a predecessor's release is not a failure
                    if not self._conflicted:
                        self.failures += 1
                    if self.failures >= self.config.rebalance_max_retries:
                        wait = self.config.rebalance_slow_retry_ms / 1000.0
                        if self.state != DEGRADED:
                            log.error("%s can't rebalance after %d retries; not giving up: retrying every %.1f s "
                                      "and on every group change", self.consumer_id, self.failures, wait)
                        self._set_state(DEGRADED)
                        self.first_done.set()
                    else:
                        wait = self.config.rebalance_backoff_ms / 1000.0
                        self._set_state(BACKOFF)
                    attempt_at = time.monotonic() + wait * (1 + random.uniform(0, 0.2))
                continue
            if dirty and connected and self.state not in (SUSPENDED,):
                timeout = max(0.0, attempt_at - now)
            else:
                timeout = None if dirty else AUDIT_INTERVAL_S
            try:
                kind, arg = self.events.get(timeout=timeout if timeout is None else max(timeout, 0.001))
            except queue.Empty:
                # periodic audit: a no-op attempt unless something drifted
                if not dirty:
                    dirty, attempt_at = True, time.monotonic()
                    self._verify_owners = True
                continue
            if kind == "stop":
                break
            if kind == "owner_deleted":
                self._claim_woken = self._claim_plan is not None
            else:
                # anything else may change the assignment: the next attempt reads the group again
                self._claim_plan = None
                self._claim_woken = False
            if kind == "session":
                dirty, attempt_at = self._on_session(arg, dirty, attempt_at)
                continue
            if kind == "grace":
                self._pause_for_suspension()
                continue
            if kind == "owner_deleted" and dirty:
                # the partition we wait for is free: claim at once
                attempt_at = time.monotonic()
                continue
            # watch / request: (re)attempt after the settle window; a burst is one attempt
            if not dirty:
                dirty, attempt_at = True, time.monotonic() + settle
                if self.state == IDLE:
                    self._set_state(SETTLING)
            elif self.state in (BACKOFF, DEGRADED):
                attempt_at = min(attempt_at, time.monotonic() + settle)

    def _on_session(self, state, dirty, attempt_at):
        if state == KazooState.SUSPENDED:
            self._set_state(SUSPENDED)
            grace = self.config.zookeeper_suspended_grace_ms / 1000.0
            self._cancel_grace()
            self._suspended_timer = threading.Timer(grace, lambda: self.events.put(("grace", None)))
            self._suspended_timer.daemon = True
            self._suspended_timer.start()
            return dirty, attempt_at
        if state == KazooState.LOST:
            self._cancel_grace()
            self._revoke_lost()
            self._set_state(LOST)
            return True, time.monotonic()
        # CONNECTED: same session back (from SUSPENDED) or a new one (after LOST)
        self._cancel_grace()
        if self.session_id is not None and self.zk.client_id and self.zk.client_id[0] != self.session_id \
                and self.parts:
            # a new session without a LOST event: our owner nodes are gone
            self._revoke_lost()
        self._set_state(SETTLING)
        return True, time.monotonic()

    def _cancel_grace(self):
        if self._suspended_timer is not None:
            self._suspended_timer.cancel()
            self._suspended_timer = None

    # -- attempts ----------------------------------------------------------------------------------------------
    def _attempt_safely(self):
        self.stats["attempts"] += 1
        t0 = time.monotonic()
        log.info("begin rebalancing consumer %s try #%d", self.consumer_id, self.failures)
        self._conflicted = False
        try:
            with self.lock:
                try:
                    ok = self._attempt()
                finally:
                    self._reconcile_safely()
        except RegistrationConflictError as e:
            # like Scala 0.9+: a duplicate consumer.id fails the subscription call
            if self.state == STARTING:
                log.error("%s", e)
                self.start_error = e
                self._stopping = True
                self.first_done.set()
            else:
                log.error("cannot re-register: %s", e)
            ok = False
        except _Stopping:
            log.info("%s: shutdown under way: the rebalance attempt ends", self.consumer_id)
            return False
        except (GroupConflictError, SplitBrainUnknownError) as e:
            # re-registration refused: keep asking
            log.error("%s: not re-registering: %s (asking again at the next attempt)", self.consumer_id, e)
            ok = False
        except Exception as e:
            # ZooKeeper changing under us, connection loss, offset store down...
            log.info("exception during rebalance of %s: %s", self.consumer_id, e, exc_info=log.isEnabledFor(10))
            ok = False
        self.stats["last_duration_ms"] = round((time.monotonic() - t0) * 1000, 1)
        self.stats["rebalance_seconds"] += time.monotonic() - t0
        log.info("end rebalancing consumer %s try #%d (%s)", self.consumer_id, self.failures,
                 "ok" if ok else "failed")
        if not ok and self._conflicted:
            # a predecessor still holds a partition: wait for its release
            self.stats["claim_waits"] += 1
        elif not ok:
            self.stats["failed_attempts"] += 1
            # Kafka 1.1.1 logs "... Clearing the cache before the next rebalancing operation is triggered" here;
            # this member keeps its group read cache, whose watches keep it true
            log.info("Rebalancing attempt failed; the next attempt reads the group again (the registrations and "
                     "partition maps that did not change come from the cache)")
        return ok

    def _reconcile_safely(self):
        try:
            self._reconcile()
        except Exception as e:
            # ZooKeeper unreachable: the next attempt reconciles
            log.info("%s: could not reconcile owner nodes yet: %s", self.consumer_id, e)

    def _attempt(self):
        c = self.c
        # a claim that waits is resumed only by this attempt, and only when woken by the release it waits for
        resume = self._claim_plan if self._claim_woken else None
        self._claim_plan, self._claim_woken = None, False
        if self._need_register:
            # registering (again): the group is read in full
            resume = None
            # a re-registration (session expiry): a broker-side group may have formed
            if self._registered_once:
                c.recheck_join_guards()
            sent = c.lease.clock()
            # the member info node with the registration: listed without one, this member would turn every leave
            # grace off
            made: list = []
            try:
                session = register(self.zk, self.group, self.consumer_id, c.registration,
                                   wait_timeout=self.config.zookeeper_session_timeout_ms / 1000.0 * 2,
                                   info=c.member_info, made=made)
            except RegistrationConflictError:
                # the id is another session's: an info node of ours must not stand for it
                withdraw_member_info(self.zk, self.group, self.consumer_id)
                raise
            self._registered_session = session
            if not (made and made[-1]):
                # an earlier session's was there (replaced in one multi-op), or it could not be made with it
                publish_member_info(self.zk, self.group, self.consumer_id, c.member_info)
            # back: no more ghost of us
            withdraw_leave(self.zk, self.group, self.consumer_id)
            # the lease follows the session registered under: a new one after an expiry, and at the first
            # registration too (the session the lease started with may have expired since)
            c.lease.new_session(session, sent)
            self._need_register = False
            self._registered_once = True
        if resume is not None:
            self.stats["claim_resumes"] += 1
            return self._claim_and_fetch(resume)
        self._set_state(ASSIGNING)
        if self._reader is None or self._reader.zk is not self.zk:
            self._reader = GroupReader(self.zk, self.group, on_change=self.watch)
        snap = self._reader.read(self.config.exclude_internal_topics, watch=self.watch)
        self.stats["last_zk_reads"] = snap.zk_reads
        self.stats["zk_reads"] += snap.zk_reads
        if self.consumer_id not in snap.members:
            self._need_register = True
            raise RebalanceError("own registration %s is missing" % self.consumer_id)
        self._schedule_ghost_expiry(snap.ghost_expiry_ms)
        if not snap.broker_ids:
            log.warning("no brokers found when trying to rebalance.")
        new = own_assignment(self.assignor, self.consumer_id, snap.consumers_for_topic, snap.partitions)
        if new == self.owned and self.fetching:
            lost = self._lost_owner_nodes() if self._verify_owners else set()
            self._verify_owners = False
            if not lost:
                self.stats["noop_attempts"] += 1
                return True
            # an owner node of ours is gone (deleted out of band) or not ours: our commits for it are fenced and a
            # peer could claim it while we deliver. Stop, forget the partition and claim it again from the store.
            log.warning("owner node(s) of %s missing or not ours: %s; claiming them again", self.consumer_id,
                        ", ".join("%s-%d" % tp for tp in sorted(lost)))
            if self._stopping:
                # shutdown (past its wait for the lock) revokes them with the rest
                raise _Stopping(self.consumer_id)
            self.withdraw(lost)
            for tp in lost:
                del self.parts[tp]
        else:
            lost = set()
        self.stats["rebalances"] += 1
        # RELEASING
        self._set_state(RELEASING)
        c.stop_delivery()
        self.fetching = False
        if lost:
            # taken from us out of band: no commit is possible for them any more, as after a session expiry
            self._hook("on_lost", lost)
        leaving = {tp for tp, part in self.parts.items() if new.get(tp) != part.thread_id}
        if leaving:
            if self.config.auto_commit_enable:
                self._commit_leaving(leaving)
            self._hook("on_revoke", set(leaving))
            self.withdraw(leaving)
            ownership.release(self.zk, self.group, leaving)
            for tp in leaving:
                del self.parts[tp]
        return self._claim_and_fetch({tp: th for tp, th in new.items() if self.owned.get(tp) != th})

    def _commit_leaving(self, leaving):
        """Commit the partitions leaving us before they are released (so their next owner starts where we stopped),
        waiting for the store at most ``zookeeper.session.timeout.ms`` — what the next owner would wait for a member
        killed with kill -9 — with the ownership lock released meanwhile. A store slower than that (the Kafka offset
        manager retrying for a minute) does not hold the rebalance up: the partitions are released anyway, their
        next owner starts from the offsets committed before (messages since may be delivered again), and the late
        commit is fenced (withdrawn from the fence before the release). A failed commit is logged, not a failed
        attempt (as Kafka 1.1.1 ``ZKRebalancerListener.closeFetchersForQueues`` goes on after ``commitOffsets``)."""
        done = threading.Event()
        failed = []

        def commit():
            try:
                self.c.commit_partitions(leaving)
            except Exception as e:
                failed.append(e)
            finally:
                done.set()
        bound = self.config.zookeeper_session_timeout_ms / 1000.0
        threading.Thread(target=commit, daemon=True, name="%s-commit-leaving" % self.consumer_id).start()
        if not self._unlocked(done.wait, bound):
            log.warning("%s: the commit of %d partition(s) leaving this member still waits for the offset store "
                        "after %.1f s (zookeeper.session.timeout.ms); releasing them anyway: their next owner starts "
                        "from the offsets committed before, so messages delivered since may be delivered again",
                        self.consumer_id, len(leaving), bound)
        elif failed:
            log.warning("%s: the commit of %d partition(s) leaving this member failed (%s); releasing them anyway: "
                        "their next owner starts from the offsets committed before", self.consumer_id, len(leaving),
                        failed[0])

    def _claim_and_fetch(self, coming):
        """CLAIMING and FETCHING of an attempt: owner nodes for *coming*, then offsets and fetchers for everything
        owned. On a conflict the plan is kept: woken by the release it waits for, the next attempt resumes here."""
        c = self.c
        self._set_state(CLAIMING)
        session = self.zk.client_id[0]
        if session != self._registered_session:
            # our registration (and any owner node of ours) went with the old session: a claim now would create
            # owner nodes of a member nobody counts. The session event re-registers first.
            self._need_register = True
            raise RebalanceError("ZooKeeper session changed during the rebalance (registered under 0x%x, now 0x%x)"
                                 % (self._registered_session or 0, session))
        if self._stopping:  # shutdown went on without the lock (an attempt that held it past its share)
            raise _Stopping(self.consumer_id)
        # settled below, unless the claim's outcome cannot be known
        self._uncertain.update(coming)
        conflicts = ownership.claim(self.zk, self.group, coming, self._owner_dirs)
        self._uncertain.difference_update(coming)
        if conflicts:
            self._conflicted = True
            self._claim_plan = coming
            waited = {}
            # wake up as soon as a conflicting owner lets go
            for t, p in conflicts:
                path = paths.partition_owner_path(self.group, t, p)
                # one watcher per path, however often
                st = self.zk.exists(path, watch=self._on_owner_event)
                if st is not None and st.ephemeralOwner == 0:
                    # consumers only ever create ephemeral owner nodes: a persistent one belongs to no live member
                    # and would never go away by itself (the claim would wait forever)
                    self._delete_stale_owner(path, st)
                elif st is None:
                    self.events.put(("owner_deleted", path))
                else:
                    waited[path] = st.ephemeralOwner
            self._note_claim_wait(waited)
            return False
        self._note_claim_wait(None)
        self.session_id = session
        for tp, th in coming.items():
            self.parts[tp] = PartitionTopicInfo(tp, th)
        # FETCHING
        self._set_state(FETCHING)
        need = [tp for tp, part in self.parts.items() if not part.offset_read]
        if need:
            fetched = c.offset_store.fetch(need)
            for tp in need:
                part, off = self.parts[tp], fetched.get(tp)
                part.start_offset = off if off is not None and off >= 0 else None
                part.offset_read = True
                if part.consumed is None:
                    part.consumed = part.start_offset
        self._hook("on_assign", set(self.parts))
        # the fetchers may wait for brokers (a new client) and reset points: without the lock, as for a hook
        self._unlocked(c.start_delivery, dict(self.parts))
        self.fetching = True
        return True

    def _note_claim_wait(self, waited):
        """Keep what a claim waits for ({owner node path: its session}, None when the claim went through); a wait
        longer than twice ``zookeeper.session.timeout.ms`` — a predecessor killed with kill -9 is gone after one —
        is logged, naming each node, its data and its session, and shows in the member's metrics
        (``ClaimWait``)."""
        if not waited:
            self._waiting_since = None
            self._wait_reported_at = None
            self.claim_wait = {}
            return
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        known = self.claim_wait
        wait = {}
        for path, session in sorted(waited.items()):
            entry = known.get(path)
            if entry is None or entry["session"] != "0x%x" % session:
                try:
                    data, _ = self.zk.get(path)
                    owner = data.decode("utf-8", "replace")
                except Exception:
                    owner = "?"
                entry = {"owner": owner, "session": "0x%x" % session}
            wait[path] = entry
        self.claim_wait = wait
        bound = 2 * self.config.zookeeper_session_timeout_ms / 1000.0
        waited_s = now - self._waiting_since
        if waited_s >= bound and (self._wait_reported_at is None or now - self._wait_reported_at >= bound):
            self._wait_reported_at = now
            log.warning("%s: the claim has waited %.0f s (more than twice zookeeper.session.timeout.ms) for %s",
                        self.consumer_id, waited_s, "; ".join(
                            "owner node %s held by %s (ZooKeeper session %s)" % (path, e["owner"], e["session"])
                            for path, e in wait.items()))

    def claim_wait_seconds(self):
        """How long the current claim has waited for owner nodes of others (0.0 when none waits)."""
        since = self._waiting_since
        return 0.0 if since is None else time.monotonic() - since

    def _reconcile(self):
        """Delete owner nodes of our session for partitions we do not own: claims whose outcome we could not know
        (ConnectionLoss after the server applied them) would otherwise hold those partitions for as long as we
        live, and their next owner would wait for ever (a conflict is a wait, never a failure)."""
        stray = [tp for tp in self._uncertain if tp not in self.parts]
        self._uncertain.intersection_update(stray)
        if not stray or not self.zk.connected:
            return
        ours = ownership.owned_by_session(self.zk, self.group, stray)
        if ours:
            log.warning("%s: deleting owner node(s) of this member's ZooKeeper session that it does not own (a claim "
                        "whose answer was lost): %s", self.consumer_id,
                        ", ".join(paths.partition_owner_path(self.group, t, p) for t, p in sorted(ours)))
            ownership.release(self.zk, self.group, list(ours))
        self._uncertain.difference_update(stray)

    def _unlocked(self, fn, *args, checked=False):
        """Run fn(*args) with the ownership lock (held once by the attempt) released: see :meth:`_hook`.

        shutdown() goes on beside an attempt that outlives its wait for this thread (a quarter of its bound): it
        takes the lock while the attempt is here, stops delivery, commits and releases. The attempt goes no further
        once the rebalancer is stopping (no hook, release, claim or start of delivery after shutdown's final
        commit): it ends here, before *fn* (unless the caller has just *checked*, under the lock) or when it has the
        lock back (:class:`_Stopping`)."""
        if self._stopping and not checked:
            raise _Stopping(self.consumer_id)
        self.lock.release()
        try:
            return fn(*args)
        finally:
            self.lock.acquire()
            if self._stopping:
                raise _Stopping(self.consumer_id)

    def _delete_stale_owner(self, path, stat):
        try:
            data, _ = self.zk.get(path)
        except Exception:
            data = b"?"
        log.warning("owner node %s (data %r) is persistent, not held by any consumer session: a stale or "
                    "hand-made node; deleting it to claim the partition", path, data[:100])
        try:
            self.zk.delete(path, version=stat.version)
        except Exception as e:
            # changed or gone meanwhile: the next attempt looks again
            log.info("could not delete stale owner node %s: %s", path, e)

    def _pause_for_suspension(self):
        if self.state != SUSPENDED:
            return
        log.warning("%s: ZooKeeper connection suspended for longer than zookeeper.suspended.grace.ms; pausing "
                    "delivery until it is back", self.consumer_id)
        with self.lock:
            self.c.stop_delivery()
            self.fetching = False

    def _on_owner_event(self, event):
        """Data watch on a conflicting owner node. One bound method for every path and wait, so kazoo keeps ONE
        watcher per path (kazoo keeps every distinct callable: a new lambda per retry would pile up thousands during
        a long conflict)."""
        self.events.put(("owner_deleted", event.path))

    def _hook(self, name, partitions):
        """Call a listener hook WITHOUT holding the ownership lock (held once by the attempt), so that a hook may
        wait for application threads that call commit_offsets() (the documented on_revoke pattern: finish the
        work in flight, commit it, then let the partitions go). Delivery has stopped, and only this thread changes
        ownership (shutdown, going on beside an attempt, waits for a hook under way before it releases anything:
        ``hook_idle``), so what a commit sees meanwhile is consistent.

        ``on_assign`` announces *partitions* (the whole assignment); ``on_revoke`` and ``on_lost`` are called only
        for those of *partitions* announced and not taken back since (none left: no call), and they are taken out
        of ``announced`` before the hook begins, so shutdown does not revoke them a second time. Nothing between
        that bookkeeping and the call can end the attempt: a stop is seen before it, or when the hook returns."""
        if self._stopping:
            raise _Stopping(self.consumer_id)
        if name == "on_assign":
            with self._announced_lock:
                self.announced = frozenset(partitions)
        else:
            partitions = self.take_announced(partitions)
            if not partitions:
                return
        self.hook_idle.clear()
        try:
            self._unlocked(self.c.listener_call, name, partitions, checked=True)
        finally:
            self.hook_idle.set()

    def take_announced(self, partitions):
        """Those of *partitions* the listener was given with ``on_assign`` and not revoked or lost since, taken out
        of ``announced`` (atomically: a caller without the ownership lock, shutdown past its wait, and this thread
        never both get one): the ones an ``on_revoke`` or ``on_lost`` about to be called may name."""
        with self._announced_lock:
            told = self.announced.intersection(partitions)
            self.announced = self.announced - told
        return set(told)

    def _revoke_lost(self):
        self.stats["session_expiries"] += 1
        log.warning("ZK expired; release old broker parition ownership; re-register consumer %s",
                    self.consumer_id)
        with self.lock:
            self.c.stop_delivery()
            self.fetching = False
            lost = set(self.parts)
            told = self.take_announced(lost)
            self.parts.clear()
            # their nodes died with the session, unless some were made under a new one
            self._uncertain |= lost
            self.session_id = None
            self._registered_session = None
            self._need_register = True
            # the watches that kept its cache true died with the session
            self._reader = None
        if told:
            self.c.listener_call("on_lost", told)

    def _schedule_ghost_expiry(self, expiry_ms):
        """A member in its leave grace keeps its partitions unassigned until it is back; rebalance when the grace
        ends (a little after, so the marker is expired by then for every member's clock)."""
        if self._ghost_timer is not None:
            self._ghost_timer.cancel()
            self._ghost_timer = None
        if expiry_ms is None or self._stopping:
            return
        delay = max(0.0, expiry_ms / 1000.0 - time.time()) + 0.25
        self._ghost_timer = threading.Timer(delay, lambda: self.request("leave grace ended"))
        self._ghost_timer.daemon = True
        self._ghost_timer.start()

    # -- used by the connector under self.lock -----------------------------------------------------------------
    def fence(self):
        """The ownership fence of the current generation (built once per change of ownership: the ZooKeeper store
        reads every owner node once per fence object)."""
        key = (self.session_id, frozenset(self.parts))
        if self._fence is None or self._fence_key != key:
            self._fence = OwnershipFence(self.session_id or 0, ownership.owner_paths(self.group, self.parts))
            self._fence_key = key
            with self._fences_lock:
                self._fences.add(self._fence)
        return self._fence

    def withdraw(self, partitions):
        """No commit writes these partitions' offsets from now on through any fence handed out so far: the current
        one, or an older one a commit in flight still holds (a Kafka store retrying across rebalances), since the
        in-multi check of a ZooKeeper write cannot tell our owner node from a successor's (both version 0). Called
        when the member is about to release them, or found their owner nodes gone or not ours. The next fence is a
        new one, even for the same partitions claimed again (a cached fence keyed by the partition set would be a
        withdrawn one, and refuse every commit of them)."""
        with self._fences_lock:
            # one C-level copy of the weak references (iterating the WeakSet could meet a fence dying meanwhile)
            for ref in list(self._fences.data):
                fence = ref()
                if fence is not None:
                    fence.withdraw(partitions)
        self._fence = None

    def on_commit_result(self, result):
        if any(isinstance(e, OwnershipLostError) for e in result.failed.values()):
            self._verify_owners = True
            self.request("ownership lost (commit fenced)")

    def _lost_owner_nodes(self):
        """Owned partitions whose owner node is missing, holds another thread id, or belongs to another session."""
        session = self.zk.client_id[0] if self.zk.client_id else None
        lost = set()
        for (t, p), part in list(self.parts.items()):
            th = part.thread_id
            try:
                data, stat = self.zk.get(paths.partition_owner_path(self.group, t, p))
            except NoNodeError:
                lost.add((t, p))
                continue
            if data != th.encode() or stat.ephemeralOwner != session:
                lost.add((t, p))
        return lost
