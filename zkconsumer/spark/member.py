"""``GroupMember``: the streaming source's driver-side member of the legacy ZooKeeper group.

A :class:`~zkconsumer.consumer.ZookeeperConsumerConnector` that never fetches: it registers in
``/consumers/[g]/ids``, takes part in every rebalance with the group's assignor, claims (ephemeral) owner nodes and
releases them like any member, but ``start_delivery`` only records which partitions it owns; the source plans
micro-batches for exactly those partitions and Spark's executors read them.  Commits go through the connector's
fenced path (only partitions still owned under our ZooKeeper session) and never move an offset backwards.

When the query stops, the source's ``stop()`` commits the last batch in Spark's commit log and then releases the
member's registration and owner nodes (:mod:`.leave`); where it cannot tell which batch that is (stopped while a
batch was planned), the application releases them after committing the query's last batch
(:func:`~zkconsumer.spark.finish_query`), or the :class:`~zkconsumer.spark.listener.ReleaseOnTermination` listener
does (if the application installed it). Every member also starts a tiny *reaper* process (:mod:`._reaper`, unless
``ownerReaper=false``) that waits for the member's process to die and, if the driver died with it (``kill -9``, a
lost node: no code of the application runs), deletes them at once. Otherwise the nodes are ephemeral and vanish
after ``zookeeper.session.timeout.ms``.

With ``offsets.storage=kafka`` the member also keeps the offsets of partitions that receive nothing alive in Kafka's
offset manager (:mod:`.keepalive`).
"""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import uuid

from ..consumer.connector import RebalanceListener, ZookeeperConsumerConnector
from ..consumer.fetcher import NoFetchers
from ..core.layout import codecs
from ..offsets import CommitResult
from . import keepalive

log = logging.getLogger(__name__)


def spark_consumer_id(group):
    """``<group>_spark-<host>-<millis>-<uuid8>``: the Scala id format with a ``spark-`` marker, so tools (and
    :func:`~zkconsumer.spark.commit.commit_batch`) can tell Spark members from others."""
    host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname()) or "host"
    return "spark-%s-%d-%s" % (host, int(time.time() * 1000), uuid.uuid4().hex[:8])


class _Listener(RebalanceListener):
    def __init__(self, member):
        self.member = member

    def on_revoke(self, partitions):
        self.member._forget(partitions, "revoked")

    def on_lost(self, partitions):
        self.member._forget(partitions, "lost (ZooKeeper session expired, or owner node gone or not ours)")


class GroupMember(ZookeeperConsumerConnector):
    """A non-fetching group member. ``join(topics=...)`` or ``join(topic_filter=Whitelist(...))``."""

    def __init__(self, config, bootstrap_servers=None, reaper=True, clock=time.monotonic):
        if not config.consumer_id:
            config = config.with_overrides({"consumer.id": spark_consumer_id(config.group_id)})
        if config.auto_commit_enable:
            config = config.with_overrides({"auto.commit.enable": "false"})
        super().__init__(config, listener=_Listener(self), bootstrap_servers=bootstrap_servers)
        # (t, p) -> start offset the rebalancer read (None = none committed)
        self._assigned = {}
        # number of completed assignments
        self.claims = 0
        # (t, p) -> value of `claims` when it was (re)claimed
        self.claimed_at = {}
        self._want_reaper = reaper
        self._reaper = None
        self._clock = clock
        # OffsetKeepAlive (offsets.storage=kafka), made at the first keep_alive
        self._keepalive = None

    # -- subscription ------------------------------------------------------------------------------------------
    def join(self, topics=(), topic_filter=None, wait_timeout=None):
        self._check_not_started()
        if topic_filter is not None:
            self._wildcard = True
            self.registration = codecs.ConsumerRegistration.wildcard(
                topic_filter.regex, 1, whitelist=topic_filter.pattern == "white_list")
        else:
            if not topics:
                raise ValueError("join() needs topics or a topic filter")
            self.registration = codecs.ConsumerRegistration.static({t: 1 for t in topics})
        if self._want_reaper:
            self._reaper = start_reaper(self.config.zookeeper_connect, self.group, self.consumer_id,
                                         self.config, driver_pid=os.getppid())
        # engine: split-brain check, rebalancer, waits for the first rebalance
        self._start(wait_timeout)
        return self

    def _make_fetchers(self):
        """The engine's hook: a coordinating-only member has no fetchers (Spark's executors read)."""
        return NoFetchers()

    # -- delivery hooks the rebalancer calls (under its lock) --------------------------------------------------
    def stop_delivery(self, timeout=None):
        self.generation.value += 1

    def start_delivery(self, parts):
        self.claims += 1
        for tp in parts:
            if tp not in self._assigned:
                self.claimed_at[tp] = self.claims
        self._assigned = {tp: part.consumed for tp, part in parts.items()}
        log.info("%s owns %d partition(s): %s", self.consumer_id, len(parts),
                 ", ".join("%s-%d" % tp for tp in sorted(parts)[:20]))

    def _forget(self, partitions, why):
        for tp in partitions:
            self._assigned.pop(tp, None)
            self.claimed_at.pop(tp, None)
        if self._keepalive is not None:
            self._keepalive.forget(partitions)
        log.info("%s: partitions %s: %s", self.consumer_id, why, ", ".join("%s-%d" % tp for tp in sorted(partitions)))

    # -- what the source reads ---------------------------------------------------------------------------------
    def ownership(self, stale_wait=1.0):
        """``(owned set, {tp: claim number}, claims)`` when the last rebalance completed, else None (a rebalance
        is under way: plan nothing new until it ends).

        None too while the session lease is stale (after a pause our session may have expired and others may own
        our partitions): like a stream, nothing is handed out until a round trip to ZooKeeper under the same
        session renewed the lease (waited for up to *stale_wait* seconds here; the source asks again at its next
        trigger), or the session loss is known and the partitions are gone."""
        rb = self.rebalancer
        if rb is None:
            return None
        lease = self.lease
        if not lease.fresh():
            give_up = time.monotonic() + stale_wait
            if not lease.wait_fresh(lambda: time.monotonic() > give_up or self._stopped.is_set()):
                return None
        with rb.lock:
            if not rb.fetching or not lease.fresh():
                return None
            owned = set(rb.owned)
            return owned, {tp: self.claimed_at.get(tp, 0) for tp in owned}, self.claims

    def wait_ownership(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            snap = self.ownership()
            if snap is not None or time.monotonic() > deadline:
                return snap
            time.sleep(0.05)

    def commit_forward(self, offsets):
        """Fenced commit of ``{(t, p): next_offset}`` for partitions still owned, only where it moves the stored
        offset forward. Returns a :class:`CommitResult` (never raises for per-partition failures)."""
        from .commit import forward_only
        rb = self.rebalancer
        result = CommitResult()
        if rb is None or not offsets:
            return result
        with rb.lock:
            own = {tp: off for tp, off in offsets.items() if tp in rb.owned}
            for tp in set(offsets) - set(own):
                log.info("not committing %s-%d=%d: no longer owned by %s", tp[0], tp[1], offsets[tp],
                         self.consumer_id)
            if not own:
                return result
            result = forward_only(self.offset_store, own, fence=rb.fence())
            for tp, off in own.items():
                if tp in result.committed and tp not in result.unchanged:
                    rb.parts[tp].consumed = off
            if self._keepalive is not None:
                self._keepalive.wrote(tp for tp in result.committed if tp not in result.unchanged)
        if result.failed:
            rb.on_commit_result(result)
        return result

    def keep_alive(self, partitions):
        """With ``offsets.storage=kafka``: re-commit, unchanged, the stored offsets of owned partitions not written
        for ``auto.commit.interval.ms`` (at most half of the brokers' ``offsets.retention.minutes``), fenced, so
        Kafka does not delete them while the query runs (see :mod:`.keepalive`). Cheap when nothing is due."""
        rb = self.rebalancer
        if rb is None or self.config.offsets_storage != "kafka":
            return None
        if self._keepalive is None:
            self._keepalive = keepalive.for_config(self.config, self._kafka_bootstrap(), clock=self._clock)
        with rb.lock:
            own = [tp for tp in partitions if tp in rb.owned]
            if not self._keepalive.due(own):
                return None
            result = self._keepalive.refresh(self.offset_store, own, fence=rb.fence())
        if result is not None and result.failed:
            rb.on_commit_result(result)
        return result

    def reset_offsets(self, offsets):
        """Fenced commit of ``{(t, p): offset}`` for partitions still owned, **backwards too**: only for a log that
        went behind the stored offset (topic recreated, log truncated) with ``failOnDataLoss=false``, where the
        stored offset belongs to data that no longer exists."""
        rb = self.rebalancer
        if rb is None:
            return CommitResult()
        with rb.lock:
            own = {tp: off for tp, off in offsets.items() if tp in rb.owned}
            return self.offset_store.commit(own, fence=rb.fence()) if own else CommitResult()

    def shutdown(self):
        try:
            super().shutdown()
        finally:
            if self._reaper is not None:
                try:
                    # the reaper finds nothing left to delete and exits
                    self._reaper.stdin.close()
                except Exception:
                    pass
                self._reaper = None


def start_reaper(zookeeper_connect, group, consumer_id, config=None, driver_pid=0):
    """Start the reaper process for this member (see :mod:`._reaper`); its stdin is a pipe only we hold, its stderr
    ours (what it did goes to the same log); ``driver_pid``: the process whose death means the application is gone
    (0: release as soon as we are). It gets the member's ``zookeeper.session.timeout.ms`` (how long the member's
    nodes may outlive its process) and, with ZooKeeper authentication in ``config``, the scheme and the credentials
    file's path (not the password)."""
    session_ms = config.zookeeper_session_timeout_ms if config is not None else 6000
    auth_args = []
    if config is not None and config.zookeeper_auth_scheme != "none":
        auth_args = [config.zookeeper_auth_scheme, config.zookeeper_auth_credentials_file or "",
                     config.zookeeper_sasl_mechanism, "true" if config.zookeeper_set_acl else "false"]
    try:
        return subprocess.Popen([sys.executable, "-m", "zkconsumer.spark._reaper", zookeeper_connect, group,
                                 consumer_id, str(int(driver_pid or 0)), str(int(session_ms))] + auth_args,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True, env=dict(os.environ))
    except OSError as e:
        log.warning("cannot start the owner-node reaper (owner nodes will vanish with the ZooKeeper session "
                    "instead): %s", e)
        return None
