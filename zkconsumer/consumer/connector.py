"""``ZookeeperConsumerConnector``: the library API of the ZooKeeper-coordinated consumer (Kafka's ZookeeperConsumerConnector.scala).

    config = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"})
    with ZookeeperConsumerConnector(config) as conn:
        [stream] = conn.create_message_streams({"orders": 1})["orders"]
        for msg in stream:            # kafka-python ConsumerRecord: topic, partition, offset, key, value, ...
            handle(msg)

The connector registers in ``/consumers/[g]/ids`` with the Scala JSON format, takes part in the group's
rebalances through one rebalancer thread (:mod:`.rebalancer`), claims owner nodes with consumer thread ids as data,
fetches from partition leaders into bounded queues (:mod:`.fetcher`) and commits next offsets to the configured
offset store (ZooKeeper, Kafka or dual). Positions count as consumed when a stream hands a record out (ZookeeperConsumerConnector.scala).
"""
import logging
import queue
import threading
import time

from kazoo.exceptions import NoNodeError

from ..errors import ConfigError, GroupConflictError, ZkConsumerError
from ..layout import codecs, paths
from ..layout.names import validate_topic
from ..offsets import make_offset_store
from .. import zk as zkmod
from .. import zk_auth
from .fetcher import FetcherManager
from .rebalancer import Rebalancer
from .stream import SHUTDOWN, Generation, KafkaStream

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
        self.positions = {}                 # (t, p) -> next offset to deliver (consumed position)
        self.generation = Generation()
        self.streams = []
        self._queues = {}                   # (topic, n) or n (wildcard) -> Queue
        self._wildcard = False
        self.registration = None
        self.member_info = _member_info(config)
        self.commit_counts = {"zookeeper": 0, "kafka": 0}  # successful commits per store (metrics)
        self.rebalancer = None
        self.fetchers = None
        self._bootstrap = bootstrap_servers
        self._bootstrap_given = bool(bootstrap_servers)  # else read from ZooKeeper, and re-read for new clients
        self._commit_thread = None
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
        s = KafkaStream(q, self.generation, self.positions, self.config.consumer_timeout_ms, name=name,
                        lease=self.lease)
        self.streams.append(s)
        return s

    def _start(self, wait_timeout=None):
        self._preflight_checks()
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

    def _preflight_checks(self):
        """The checks before the first registration, side by side (each waits on its own broker round trips; in a
        row they made a joining member's start ~2x slower): the storage switch check in a helper thread, the
        split-brain guard here. A refusal of the guard is raised at once (the read-only storage check is left to
        finish on its own: with an unreachable broker it could take its whole timeout); otherwise the storage
        check's refusal, if any."""
        box: dict = {}

        def storage_check():
            try:
                self._refuse_stale_zookeeper_offsets()
            except BaseException as e:  # handed to the starting thread
                box["error"] = e
        t = threading.Thread(target=storage_check, daemon=True, name="%s-storage-check" % self.consumer_id)
        t.start()
        self._refuse_split_brain()
        t.join()
        if "error" in box:
            raise box["error"]

    def _refuse_split_brain(self, clock=time.monotonic, sleep=time.sleep):
        """Before registering (at start, and again before every re-registration after a session expiry): is the
        broker-side group of the same id active (members, not Empty/Dead)? Then both rebalance protocols would hand
        out the same partitions: GroupConflictError. A broker that does not answer, or has no coordinator yet
        (COORDINATOR_NOT_AVAILABLE while ``__consumer_offsets`` is created), is asked again until
        ``split.brain.check.timeout.ms``; after that the answer is unknown: SplitBrainUnknownError with
        ``split.brain.check=refuse`` (the default), a warning with ``warn``; ``off`` never asks."""
        from zkconsumer.broker_group import describe_broker_group
        from ..errors import KafkaSecurityError, SplitBrainUnknownError
        self._refuse_cut_over_group()
        mode = self.config.split_brain_check
        if mode == "off":
            return
        timeout = self.config.split_brain_check_timeout_ms / 1000.0
        deadline = clock() + timeout
        said = False
        while True:
            why = None
            try:
                servers = self._bootstrap if self._bootstrap_given else self._fresh_bootstrap()
                bg = describe_broker_group(servers, self.group, security=self.config.kafka_security,
                                           timeout_ms=int(max(1000, min(5000, (deadline - clock()) * 1000))))
                if bg.error is None or bg.active:
                    break
                why = "the broker answered %s for the group" % bg.error  # e.g. COORDINATOR_LOAD_IN_PROGRESS
            except KafkaSecurityError:
                raise  # a refused TLS handshake or SASL login does not heal by asking again
            except ZkConsumerError as e:
                why = str(e)
            if not said and clock() < deadline:
                said = True
                log.warning("split-brain check for group %s: %s; asking again for up to %.0f s", self.group, why,
                            max(0.0, deadline - clock()))
            if clock() >= deadline:
                if mode == "warn":
                    log.warning("could not find out whether group %s is active as a broker-coordinated group "
                                "within %.0f s (%s); joining anyway (split.brain.check=warn)", self.group, timeout, why)
                    return
                raise SplitBrainUnknownError(
                    "cannot tell whether group %s is active as a broker-coordinated group (%s; asked for %.0f s, "
                    "split.brain.check.timeout.ms): not joining, since both protocols would consume the same "
                    "partitions. Set split.brain.check=warn to join when the broker cannot be asked"
                    % (self.group, why, timeout))
            sleep(0.5)
        if bg.active:
            raise GroupConflictError(
                "group %s is already active as a broker-coordinated group (%s, state %s, %d member(s), e.g. %s): a "
                "ZooKeeper-coordinated member would consume the same partitions (split brain); stop those "
                "consumers or use another group.id" % (self.group, bg.describe_protocol(), bg.state, len(bg.members),
                                                       bg.members[0]["member_id"]))

    def metrics(self) -> dict:
        """The Scala consumer's metrics, by their JMX names, read now (cheap: counters kept per chunk and per
        commit; rates are left to the scraper): ``ConsumerLag`` {(t, p): lag}, ``MaxLag``, ``MinFetchRate``
        (fetch passes/s of the slowest fetcher), ``MessagesPerSec`` / ``BytesPerSec`` (totals: counters),
        ``ZooKeeperCommitsPerSec`` / ``KafkaCommitsPerSec`` (totals), ``RebalanceRateAndTime`` (count and
        seconds), ``OwnedPartitionsCount``, plus the member's state and whether dual commit writes ZooKeeper
        alone."""
        rb = self.rebalancer
        owned = set(rb.owned) if rb is not None else set()
        hw = self.fetchers.highwaters() if self.fetchers is not None and hasattr(self.fetchers, "highwaters") \
            else {}
        lag = {tp: max(0, hw[tp] - self.positions[tp]) for tp in owned if tp in hw and tp in self.positions}
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
                "OwnedPartitionsCount": len(owned),
                "offsets_degraded": self.offsets_degraded}

    @property
    def offsets_degraded(self) -> bool:
        """True while dual commit writes ZooKeeper alone (Kafka's offset manager down past
        ``dual.commit.kafka.outage.ms``)."""
        return bool(getattr(self.offset_store, "zookeeper_only", False))

    def _refuse_stale_zookeeper_offsets(self):
        """A member on ZooKeeper storage must not start where Kafka holds newer offsets for the group: that is a
        direct kafka -> zookeeper switch, resuming from frozen ZooKeeper offsets (reprocessing everything since the
        Kafka-only phase began) - also the unsafe mix of a ZooKeeper-only member beside Kafka-only ones. The safe
        way back is the dual phase first (``zkmigrate plan --to zookeeper``); ``offsets.storage.switch.check=off``
        skips this. One OffsetFetch at start; a broker that cannot be asked only logs a warning."""
        if self.config.offsets_storage != "zookeeper" or self.config.offsets_storage_switch_check == "off":
            return
        from .. import groups as zkgroups
        from ..group_describe import member_infos
        # quiet: a malformed registration is reported (once, as an error) by the rebalancer's group read
        live = set(zkgroups.live_members(self.zk, self.group, quiet=True)) - {self.consumer_id}
        modes = {m: i.mode for m, i in member_infos(self.zk, self.group).items() if m in live}
        kafka_only = sorted(m for m, mode in modes.items() if mode == "kafka")
        if kafka_only:
            raise GroupConflictError(
                "group %s has members on Kafka-only offset storage (%s): a member on offsets.storage=zookeeper "
                "beside them resumes from stale offsets at every hand-over. Go back through the dual phase "
                "('zkmigrate plan --to zookeeper'), or set offsets.storage.switch.check=off"
                % (self.group, ", ".join(kafka_only[:3])))
        if "dual" in modes.values():
            return  # the rollback's second phase: dual members keep ZooKeeper up to date
        for attempt in (0, 1):
            ahead, zoffs, koffs = self._kafka_ahead()
            if not ahead:
                return
            if attempt == 0:
                time.sleep(2.0)  # a dual commit in flight writes Kafka a moment before ZooKeeper
        t, p = ahead[0]
        raise GroupConflictError(
            "group %s keeps newer offsets in Kafka than in ZooKeeper for %d partition(s) (e.g. %s-%d: Kafka %d, "
            "ZooKeeper %s): starting with offsets.storage=zookeeper would resume from the older ZooKeeper "
            "offsets. Go back through the dual phase (offsets.storage=kafka, dual.commit.enabled=true; see "
            "'zkmigrate plan --to zookeeper'), copy them ('zkmigrate rollback --execute'), or set "
            "offsets.storage.switch.check=off" % (self.group, len(ahead), t, p, koffs[(t, p)],
                                                   zoffs.get((t, p), "none")))

    def _kafka_ahead(self):
        """``(partitions where Kafka is ahead of ZooKeeper, ZooKeeper offsets, Kafka offsets)``; nothing when Kafka
        cannot be asked (logged)."""
        from .. import groups as zkgroups
        from ..offsets import ZooKeeperOffsetStore
        from ..offsets.kafka import KafkaOffsetStore
        try:
            # the topics that count: those with offsets in ZooKeeper, and those this member subscribes to
            try:
                topics = set(self.zk.get_children(paths.group_offsets_path(self.group)))
            except NoNodeError:
                topics = set()
            if self.registration is not None and not self.registration.is_wildcard:
                topics |= set(self.registration.subscription)
            parts = sorted(zkgroups.partitions_with_offsets_or_in_map(self.zk, self.group, topics))
            if not parts:
                return [], {}, {}
            # Kafka first: a group without offsets in Kafka (the usual case) costs no read of ZooKeeper's offsets
            store = KafkaOffsetStore(self._kafka_bootstrap(), self.group, config=self.config)
            try:
                koffs = store.fetch(parts)
            finally:
                store.close()
            zoffs = ZooKeeperOffsetStore(self.zk, self.group, strict=False).fetch(sorted(koffs)) if koffs else {}
        except ZkConsumerError as e:
            log.warning("could not compare group %s's Kafka offsets with ZooKeeper's before starting on ZooKeeper "
                        "storage: %s", self.group, e)
            return [], {}, {}
        ahead = sorted(tp for tp, k in koffs.items() if zoffs.get(tp) is None or k > zoffs[tp])
        return ahead, zoffs, koffs

    def _refuse_cut_over_group(self):
        """The fence ``zkmigrate cutover`` leaves: a group handed to broker-coordinated consumers is not joined by a
        ZooKeeper member (an old deployment restarting) unless ``cutover.fence=ignore``."""
        if self.config.cutover_fence == "ignore":
            return
        import json
        try:
            data, _ = self.zk.get(paths.group_migration_path(self.group))
        except Exception:  # no record (the normal case), or not ours to judge: no fence
            return
        try:
            rec = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as e:
            log.warning("ignoring the unreadable migration record %s (no cutover fence): %s",
                        paths.group_migration_path(self.group), e)
            return
        if isinstance(rec, dict) and rec.get("phase") == "cutover":
            raise GroupConflictError(
                "group %s was cut over to broker-coordinated consumers (%s, %s): a ZooKeeper-coordinated member "
                "must not join it; after a deliberate rollback ('zkmigrate rollback --execute' clears the mark) "
                "start again, or set cutover.fence=ignore" % (self.group, rec.get("by"), rec.get("since")))

    def _make_fetchers(self):
        """The fetcher manager (a subclass that only coordinates — e.g. a Spark driver member — overrides this)."""
        servers = self._bootstrap if self._bootstrap_given else self._fresh_bootstrap
        return FetcherManager(self.config, servers, on_error=self._on_fetch_error)

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
    def stop_delivery(self):
        """New generation, streams fenced, fetchers stopped, queues cleared: nothing old is delivered."""
        self.generation.value += 1
        for s in self.streams:
            s.fence()
        self.fetchers.stop_all(self.generation.value)
        for s in self.streams:
            s.clear()

    def start_delivery(self, plan):
        """plan: {(t, p): (start offset or None, thread id)} -> fetchers running under the current generation."""
        work = {}
        for tp, (offset, thread_id) in plan.items():
            n = int(thread_id.rsplit("-", 1)[1])
            key = n if self._wildcard else (tp[0], n)
            work[tp] = (offset, self._queues[key])
        resets = self.fetchers.assign(self.generation.value, work) or {}
        for tp, off in resets.items():
            # the reset point counts as consumed (unless a record was handed out already): the next commit
            # records it, so a restart does not reset again and skip what was produced meanwhile
            self.positions.setdefault(tp, off)
        return resets

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
            offsets = {tp: self.positions[tp] for tp in partitions if tp in self.positions and tp in rb.owned}
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
            log.warning("offset commit failed for %d partition(s): %s", len(result.failed),
                        "; ".join("%s-%d: %s" % (t, p, e) for (t, p), e in sorted(result.failed.items())[:5]))
            rb.on_commit_result(result)
        if raise_errors:
            result.raise_for_errors()
        return result

    def _auto_commit_loop(self):
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not self._stopped.wait(interval):
            try:
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
        with self._shutdown_lock:
            if self._closed:
                return
            self._closed = True
        self._stopped.set()
        rb = self.rebalancer
        deadline = time.monotonic() + self.shutdown_bound_s()

        def left():
            return max(0.1, deadline - time.monotonic())
        leaving = []
        reg_path = paths.consumer_registration_path(self.group, self.consumer_id)
        try:
            if rb is not None:
                rb.stop()
                rb.join(left())
                self.zk.remove_listener(rb.session_listener)
                if self.registration is not None and self.zk.connected and not (
                        self.config.rebalance_leave_grace_ms > 0 and leave_grace):
                    from .registration import deregister_first
                    self._bounded("deleting the registration", lambda: deregister_first(
                        self.zk, self.group, self.consumer_id), left())
                # the rebalancer may still hold the lock in a ZooKeeper call that waits for an unreachable server
                locked = rb.lock.acquire(timeout=left())
                try:
                    self.stop_delivery()
                    leaving = list(rb.owned)
                    session = self.zk.client_id[0] if self.zk.connected and self.zk.client_id else None
                    can_write = session is not None and rb.session_id == session
                finally:
                    if locked:
                        rb.lock.release()
                if self.config.auto_commit_enable and leaving:
                    if can_write:
                        self._bounded("committing %d partition(s)" % len(leaving),
                                      lambda: self.commit_partitions(leaving), left())
                    else:
                        log.warning("shutdown: ZooKeeper is unreachable or the session changed: the consumed offsets "
                                    "of %d partition(s) were not committed (messages delivered since the last "
                                    "commit will be delivered again)", len(leaving))
                if leaving:
                    self.listener_call("on_revoke", set(leaving))
                locked = rb.lock.acquire(timeout=left())
                try:
                    rb.owned.clear()
                finally:
                    if locked:
                        rb.lock.release()
            if self.registration is not None:
                from .ownership import release_and_deregister
                if self.zk.connected:
                    if self.config.rebalance_leave_grace_ms > 0 and leave_grace:
                        from .leave_grace import announce_leave
                        self._bounded("announcing the restart (rebalance.leave.grace.ms)",
                                      lambda: announce_leave(self.zk, self.group, self.consumer_id,
                                                             self.registration, self.config.rebalance_leave_grace_ms),
                                      left())
                    self._bounded("releasing owner nodes and the registration",
                                  lambda: release_and_deregister(self.zk, self.group, leaving, reg_path), left())
                    from .registration import withdraw_member_info
                    self._bounded("withdrawing the member info node",
                                  lambda: withdraw_member_info(self.zk, self.group, self.consumer_id), left())
                else:
                    log.warning("shutdown: ZooKeeper is unreachable: the owner nodes and the registration vanish "
                                "when the session expires (zookeeper.session.timeout.ms)")
        finally:
            for q in self._queues.values():
                try:
                    q.put_nowait(SHUTDOWN)
                except queue.Full:
                    while True:
                        try:
                            q.get_nowait()
                        except queue.Empty:
                            break
                    q.put_nowait(SHUTDOWN)
            if self.fetchers is not None:
                self.fetchers.shutdown(timeout=left())
            self.lease.stop()
            try:  # a commit still waiting for ZooKeeper holds the store's lock: bounded too
                self._bounded("closing the offset store", self.offset_store.close, left())
            finally:
                self._bounded("closing the ZooKeeper session", lambda: zkmod.close(self.zk), left())
            if self._commit_thread is not None:
                self._commit_thread.join(min(left(), 5.0))

    def shutdown_bound_s(self):
        """How long shutdown() may take in all: twice zookeeper.connection.timeout.ms, at most 20 s."""
        return 2 * min(10.0, self.config.zookeeper_connection_timeout_ms / 1000.0)

    @staticmethod
    def _bounded(what, fn, seconds):
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
