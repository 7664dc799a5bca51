"""``ZookeeperConsumerConnector``: the library API of the ZooKeeper-coordinated consumer (Kafka's ZookeeperConsumerConnector.scala).

    config = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"})
    with ZookeeperConsumerConnector(config) as conn:
        [stream] = conn.create_message_streams({"orders": 1})["orders"]
        for msg in stream:            # kafka-python ConsumerRecord: topic, partition, offset, key, value, ...
            handle(msg)

The connector registers in ``/consumers/[g]/ids`` with the Scala JSON format, takes part in the group's
rebalances through one rebalancer thread (:mod:`.rebalancer`), claims owner nodes with consumer thread ids as data,
fetches from partition leaders into bounded queues (:mod:`.fetcher`) and commits next offsets to the configured
offset store (ZooKeeper, Kafka or dual). Positions count as consumed when a stream hands a record out (ZookeeperConsumerConnector.scala),
kept with everything else about an owned partition on its :class:`~.partition_info.PartitionTopicInfo`. A reset
point (``auto.offset.reset`` for a partition without a committed offset, or one the log no longer has) counts as
consumed too and is committed at once, not at the next auto-commit.
"""
import logging
import queue
import threading
import time


from ..errors import ConfigError, ZkConsumerError
from ..layout import codecs, paths
from ..layout.names import validate_topic
from ..offsets import make_offset_store
from .. import zk as zkmod
from .. import zk_auth
from . import join_guards
from .fetcher import FetcherManager
from .rebalancer import Rebalancer
from .shutdown import shut_down
from .stream import Generation, KafkaStream

log = logging.getLogger(__name__)


class RebalanceListener:
    """Hooks the rebalancer calls (override what you need). Each gets a set of (topic, partition).

    * ``on_revoke``: before ownership of these partitions is released — delivery has stopped, so this is the place
      to commit (``connector.commit_offsets()``) when ``auto.commit.enable=false``;
    * ``on_assign``: after the owner nodes are claimed and offsets read, before fetching starts;
    * ``on_lost``: the ZooKeeper session expired; these partitions may already belong to someone else (no commit
      is possible for them any more).
    """

    def on_revoke(self, partitions):
        pass

    def on_assign(self, partitions):
        pass

    def on_lost(self, partitions):
        pass


class ZookeeperConsumerConnector:
    def __init__(self, config, listener=None, bootstrap_servers=None):
        if not config.group_id:
            raise ConfigError("group.id", config.group_id, "a group id (required)")
        if not config.zookeeper_connect:
            raise ConfigError("zookeeper.connect", config.zookeeper_connect, "host:port[,host:port][/chroot]")
        self.config = config
        self.listener = listener or RebalanceListener()
        self.consumer_id = codecs.make_consumer_id(config.group_id, config.consumer_id)
        self.group = config.group_id
        self.generation = Generation()
        self.streams = []
        self._queues = {}                   # (topic, n) or n (wildcard) -> Queue
        self._wildcard = False
        self.registration = None
        self.member_info = _member_info(config)
        self.commit_counts = {"zookeeper": 0, "kafka": 0, "failed": 0}  # commits per store, and failed ones (metrics)
        self.rebalancer = None
        self.fetchers = None
        self._bootstrap = bootstrap_servers
        self._bootstrap_given = bool(bootstrap_servers)  # else read from ZooKeeper, and re-read for new clients
        self._commit_thread = None
        self._commit_soon = threading.Event()   # wakes the auto-commit thread: reset points to commit, or stop
        self._reset_partitions = {}             # (t, p) -> PartitionTopicInfo whose reset point awaits its commit
        self._stopped = threading.Event()
        self._shutdown_lock = threading.Lock()
        self._closed = False
        self.zk_auth = zk_auth.from_config(config)
        self.zk = zkmod.connect(config.zookeeper_connect, config.zookeeper_session_timeout_ms,
                                config.zookeeper_connection_timeout_ms, auth=self.zk_auth)
        if self.zk_auth.enabled:
            try:  # a wrong digest password is another identity: say so now, not at the first write
                for path in (paths.group_path(self.group), paths.group_ids_path(self.group),
                             paths.group_owners_path(self.group), paths.group_offsets_path(self.group)):
                    zk_auth.check_write_access(self.zk, self.zk_auth, path, config.zookeeper_connect)
            except BaseException:
                zkmod.close(self.zk)
                raise
        from .lease import SessionLease
        self.lease = SessionLease(self.zk, config.zookeeper_session_timeout_ms)
        try:
            self.offset_store = make_offset_store(config, self.zk, bootstrap_servers=self._kafka_bootstrap()
                                                  if config.offsets_storage == "kafka" else None)
        except Exception:
            zkmod.close(self.zk)
            raise

    # -- subscription ------------------------------------------------------------------------------------------
    def create_message_streams(self, topic_count_map):
        """{topic: number of streams} -> {topic: [KafkaStream, ...]} (may be called once)."""
        self._check_not_started()
        if not topic_count_map:
            raise ConfigError("topic count map", topic_count_map, "at least one topic with >= 1 stream")
        out = {}
        for topic, n in topic_count_map.items():
            validate_topic(topic)
            if not isinstance(n, int) or n < 1:
                raise ConfigError("streams for topic %s" % topic, n, "an integer >= 1")
            out[topic] = [self._new_stream((topic, i), "%s-%d" % (topic, i)) for i in range(n)]
        self.registration = codecs.ConsumerRegistration.static(dict(topic_count_map))
        self._start()
        return out

    def create_message_streams_by_filter(self, topic_filter, num_streams=1):
        """Whitelist(regex) or Blacklist(regex) -> [KafkaStream] shared by every matching topic (Kafka's TopicFilter.scala);
        topics created later that match are consumed without restart."""
        self._check_not_started()
        if not isinstance(num_streams, int) or num_streams < 1:
            raise ConfigError("num_streams", num_streams, "an integer >= 1")
        self._wildcard = True
        streams = [self._new_stream(i, "%s-%d" % (topic_filter.regex, i)) for i in range(num_streams)]
        self.registration = codecs.ConsumerRegistration.wildcard(topic_filter.regex, num_streams,
                                                                 whitelist=topic_filter.pattern == "white_list")
        self._start()
        return streams

    def _check_not_started(self):
        if self.registration is not None:
            raise ZkConsumerError("create_message_streams may be called only once per connector")
        if self._closed:
            raise ZkConsumerError("connector is shut down")

    def _new_stream(self, key, name):
        q = queue.Queue(self.config.queued_max_message_chunks)
        self._queues[key] = q
        s = KafkaStream(q, self.generation, self.config.consumer_timeout_ms, name=name, lease=self.lease)
        self.streams.append(s)
        return s

    def _start(self, wait_timeout=None):
        join_guards.preflight_checks(self)
        self.lease.start()
        self.fetchers = self._make_fetchers()
        for f in getattr(self.fetchers, "fetchers", ()):
            f.lease = self.lease
        self.rebalancer = Rebalancer(self)
        self.zk.add_listener(self.rebalancer.session_listener)
        self.rebalancer.start()
        if self.config.auto_commit_enable:
            self._commit_thread = threading.Thread(target=self._auto_commit_loop, daemon=True,
                                                   name="%s-autocommit" % self.consumer_id)
            self._commit_thread.start()
        cfg = self.config
        timeout = wait_timeout or (cfg.rebalance_max_retries * (cfg.rebalance_backoff_ms / 1000.0 + 5) + 10)
        done = self.rebalancer.first_done.wait(timeout)
        if self.rebalancer.start_error is not None:
            err = self.rebalancer.start_error
            self.shutdown()
            raise err
        if not done:
            log.warning("%s: first rebalance still in progress after %.0f s (state %s)", self.consumer_id,
                        timeout, self.rebalancer.state)

    def _refuse_split_brain(self):
        """Before a re-registration (the rebalancer, after a session expiry): see :mod:`.join_guards`."""
        join_guards.refuse_split_brain(self)

    def metrics(self) -> dict:
        """The Scala consumer's metrics, by their JMX names, read now (cheap: counters kept per chunk and per
        commit; rates are left to the scraper): ``ConsumerLag`` {(t, p): lag}, ``MaxLag``, ``MinFetchRate``
        (fetch passes/s of the slowest fetcher), ``MessagesPerSec`` / ``BytesPerSec`` (totals: counters),
        ``ZooKeeperCommitsPerSec`` / ``KafkaCommitsPerSec`` (totals), ``RebalanceRateAndTime`` (count and
        seconds), ``OwnedPartitionsCount``, plus the member's state, what a claim waits for (``ClaimWait``:
        seconds and ``{owner node path: {"owner": its data, "session": "0x..."}}``) and whether dual commit writes
        ZooKeeper alone."""
        rb = self.rebalancer
        parts = dict(rb.parts) if rb is not None else {}
        hw = self.fetchers.highwaters() if self.fetchers is not None and hasattr(self.fetchers, "highwaters") \
            else {}
        lag = {tp: max(0, hw[tp] - part.consumed) for tp, part in parts.items()
               if tp in hw and part.consumed is not None}
        rates = self.fetchers.fetch_rates() if self.fetchers is not None and hasattr(self.fetchers,
                                                                                    "fetch_rates") else []
        stats = dict(rb.stats) if rb is not None else {}
        return {"group": self.group, "consumer_id": self.consumer_id,
                "client_id": self.config.client_id or self.group,
                "state": rb.state if rb is not None else "NEW",
                "ConsumerLag": lag, "MaxLag": max(lag.values(), default=0),
                "MinFetchRate": min(rates) if rates else 0.0,
                "MessagesPerSec": sum(s.messages for s in self.streams),
                "BytesPerSec": sum(s.bytes for s in self.streams),
                "ZooKeeperCommitsPerSec": self.commit_counts["zookeeper"],
                "KafkaCommitsPerSec": self.commit_counts["kafka"],
                "RebalanceRateAndTime": {"count": stats.get("rebalances", 0),
                                         "seconds": round(stats.get("rebalance_seconds", 0.0), 6),
                                         "failed_attempts": stats.get("failed_attempts", 0)},
                "OwnedPartitionsCount": len(parts),
                "ClaimWait": {"seconds": round(rb.claim_wait_seconds(), 3), "owners": dict(rb.claim_wait)}
                if rb is not None else {},
                "offsets_degraded": self.offsets_degraded}

    @property
    def offsets_degraded(self) -> bool:
        """True while dual commit writes ZooKeeper alone (Kafka's offset manager down past
        ``dual.commit.kafka.outage.ms``)."""
        return bool(getattr(self.offset_store, "zookeeper_only", False))

    def _make_fetchers(self):
        """The fetcher manager (a subclass that only coordinates — e.g. a Spark driver member — overrides this)."""
        servers = self._bootstrap if self._bootstrap_given else self._fresh_bootstrap
        return FetcherManager(self.config, servers, on_error=self._on_fetch_error, on_reset=self._reset_recorded)

    def _kafka_bootstrap(self):
        if not self._bootstrap:
            self._bootstrap = zkmod.bootstrap_from_zk(self.zk, self.config.zookeeper_connect,
                                                      self.config.security_protocol)
        return self._bootstrap

    def _fresh_bootstrap(self):
        """The brokers registered in ZooKeeper now (falls back to the last list read if ZooKeeper cannot say)."""
        try:
            self._bootstrap = zkmod.bootstrap_from_zk(self.zk, self.config.zookeeper_connect,
                                                      self.config.security_protocol)
        except Exception as e:
            if not self._bootstrap:
                raise
            log.warning("cannot re-read the brokers from ZooKeeper (%s); using %s", e, self._bootstrap)
        return self._bootstrap

    # -- delivery control (rebalancer thread) ------------------------------------------------------------------
    def stop_delivery(self, timeout=None):
        """New generation, streams fenced, fetchers stopped (within *timeout* seconds when given), queues cleared:
        nothing old is delivered. A reset point still queued behind dropped records is recorded."""
        self.generation.value += 1
        for s in self.streams:
            s.fence()
        self.fetchers.stop_all(self.generation.value, timeout)
        for s in self.streams:
            s.clear()
        rb = self.rebalancer
        for part in list(rb.parts.values()) if rb is not None else ():
            part.apply_reset()

    def start_delivery(self, parts):
        """parts: {(t, p): PartitionTopicInfo} -> fetchers running under the current generation, each partition
        from its consumed position (its reset point when it has none: recorded, and committed at once)."""
        for part in parts.values():
            n = int(part.thread_id.rsplit("-", 1)[1])
            part.queue = self._queues[n if self._wildcard else (part.tp[0], n)]
        self.fetchers.assign(self.generation.value, parts)

    def _reset_recorded(self, part):
        """A fetcher recorded a reset point: commit it now (auto-commit), not at the next interval, so a member
        killed before that still leaves it behind: its successor resumes from it instead of resetting again to the
        then end of the log and skipping what was produced meanwhile (with largest, the default). A reset queued
        behind records still to be handed out is committed when the stream gets to it; a commit that fails is
        retried (see :meth:`_commit_reset_points`)."""
        if self.config.auto_commit_enable:
            self._reset_partitions[part.tp] = part
            self._commit_soon.set()

    def _commit_reset_points(self, pending):
        """Commit the reset points of *pending* ``{(t, p): PartitionTopicInfo}`` that are the consumed position now,
        and drop from it what is done: committed, or no longer ours (its ownership ended; a partition released by a
        rebalance was committed before the release). What remains is retried by the caller: a reset still queued
        behind records (:class:`~.partition_info.ResetTo`, recorded when the stream gets there) and a commit that
        failed (ZooKeeper or the Kafka offset manager unreachable for a moment, a lease not fresh yet). True when
        a commit was tried and left some of them uncommitted."""
        from ..errors import OwnershipLostError
        rb = self.rebalancer
        with rb.lock:
            for tp, part in list(pending.items()):
                if rb.parts.get(tp) is not part:
                    del pending[tp]
            ready = [tp for tp, part in pending.items() if part.reset_to is None and part.consumed is not None]
        if not ready:
            return False
        result = self.commit_partitions(ready)
        if result is None:  # the lease was not fresh: nothing was written
            return True
        for tp in ready:
            if tp in result.committed or isinstance(result.failed.get(tp), OwnershipLostError):
                pending.pop(tp, None)
        return any(tp in pending for tp in ready)

    def listener_call(self, name, partitions):
        try:
            getattr(self.listener, name)(partitions)
        except Exception:
            log.exception("rebalance listener %s failed", name)

    def _on_fetch_error(self, tp, exc):
        self._last_fetch_error = (time.time(), exc)

    @property
    def last_fetch_error(self):
        """(unix time, exception) of the last fetch failure, or None (fetchers retry; the streams raise
        FetchError when failures persist)."""
        return getattr(self, "_last_fetch_error", None)

    # -- offsets -----------------------------------------------------------------------------------------------
    def commit_offsets(self, raise_errors=False):
        """Commit the consumed positions of every owned partition (only changed ones are written)."""
        rb = self.rebalancer
        if rb is None:
            return None
        with rb.lock:
            owned = list(rb.owned)
        return self.commit_partitions(owned, raise_errors=raise_errors)

    def commit_partitions(self, partitions, raise_errors=False):
        """Commit the consumed positions of ``partitions`` that we own. The ownership lock is held only to take the
        offsets and the fence: the store write runs without it, so a slow store (the Kafka offset manager retrying
        for a minute) never delays suspension, session loss or a rebalance; the fence refuses what we no longer
        own, re-checked before every attempt."""
        rb = self.rebalancer
        if not self.lease.fresh():  # after a pause: a round trip first (a commit would be fenced anyway)
            give_up = time.monotonic() + self.lease.timeout_s()
            if not self.lease.wait_fresh(lambda: time.monotonic() > give_up or self._stopped.is_set()):
                log.warning("commit skipped: no answer from ZooKeeper under our session for a while (the session "
                            "may have expired)")
                return None
        with rb.lock:
            parts = rb.parts
            offsets = {tp: part.consumed for tp, part in ((tp, parts.get(tp)) for tp in partitions)
                       if part is not None and part.consumed is not None}
            if not offsets:
                return None
            fence = rb.fence()
        result = self.offset_store.commit(offsets, fence=fence)
        if result.committed:
            kind = getattr(self.offset_store, "name", "zookeeper")
            if kind in ("zookeeper", "dual"):
                self.commit_counts["zookeeper"] += 1
            if kind == "kafka" or (kind == "dual" and not result.degraded):
                self.commit_counts["kafka"] += 1
        if result.failed:
            self.commit_counts["failed"] += 1
            log.warning("offset commit failed for %d partition(s): %s", len(result.failed),
                        "; ".join("%s-%d: %s" % (t, p, e) for (t, p), e in sorted(result.failed.items())[:5]))
            rb.on_commit_result(result)
        if raise_errors:
            result.raise_for_errors()
        return result

    #: how often a reset point still waiting for its commit (queued behind records) is looked at; after a failed
    #: commit the wait doubles up to RESET_RETRY_MAX_S
    RESET_RETRY_S = 0.2
    RESET_RETRY_MAX_S = 5.0

    def _auto_commit_loop(self):
        """Every auto.commit.interval.ms: everything owned; in between, at once, the reset points just recorded
        (tried again until each is committed or no longer ours)."""
        interval = self.config.auto_commit_interval_ms / 1000.0
        next_at = time.monotonic() + interval
        pending = {}
        retry = self.RESET_RETRY_S
        while True:
            wait = max(0.0, next_at - time.monotonic())
            woken = self._commit_soon.wait(min(wait, retry) if pending else wait)
            if self._stopped.is_set():
                break
            try:
                if woken:
                    self._commit_soon.clear()
                while self._reset_partitions:
                    tp, part = self._reset_partitions.popitem()
                    pending[tp] = part
                if pending and self._commit_reset_points(pending):
                    retry = min(self.RESET_RETRY_MAX_S, retry * 2)
                else:
                    retry = self.RESET_RETRY_S
                if time.monotonic() >= next_at:
                    next_at = time.monotonic() + interval
                    self.commit_offsets()
            except Exception as e:
                log.warning("exception during autoCommit: %s", e)

    # -- introspection -----------------------------------------------------------------------------------------
    def owned_partitions(self):
        rb = self.rebalancer
        return dict(rb.owned) if rb else {}

    @property
    def state(self):
        return self.rebalancer.state if self.rebalancer else "NEW"

    # -- shutdown ----------------------------------------------------------------------------------------------
    def shutdown(self, leave_grace=True):
        """Delete the registration, stop fetching, commit (auto-commit), release owner nodes, end the streams.

        When every other member is a zkconsumer member the registration goes first, so they start their rebalance
        while this member stops and commits: they wait for its owner nodes (watched), which it deletes only after
        its last delivery and commit. With a JVM member in the group (it would back off on our owner nodes) the
        registration and the owner nodes go together in one multi-op at the end.

        Bounded: the whole shutdown takes at most ``shutdown_bound_s()`` (ZooKeeper may be unreachable; owner nodes
        and the registration then vanish with the session, and what could not be committed is said in the log).
        With ``rebalance.leave.grace.ms`` > 0 the member announces that it comes back (the others keep its
        partitions unassigned that long); ``leave_grace=False`` leaves for good (the group rebalances now).
        """
        shut_down(self, leave_grace)

    def shutdown_bound_s(self):
        """How long shutdown() may take in all: twice zookeeper.connection.timeout.ms, at most 20 s."""
        return 2 * min(10.0, self.config.zookeeper_connection_timeout_ms / 1000.0)

    def shutdown_streams(self):
        """End every stream's iteration without shutting down (signal-safe); call shutdown() afterwards."""
        for s in self.streams:
            s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def _member_info(config):
    """What this member publishes beside its registration (host, client id, where its offsets live)."""
    import os
    import socket

    from .. import __version__
    from ..layout.member_info import MemberInfo
    return MemberInfo(host=socket.gethostname(), client_id=config.client_id or config.group_id,
                      offsets_storage=config.offsets_storage, dual_commit=bool(config.dual_commit_enabled),
                      pid=os.getpid(), library="zkconsumer %s" % __version__,
                      auto_commit_interval_ms=config.auto_commit_interval_ms if config.auto_commit_enable else None)
