"""``ZookeeperConsumerConnector``: the library API of the ZooKeeper-coordinated consumer (Kafka 1.1.1
``kafka.consumer.ZookeeperConsumerConnector``).

    config = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"})
    with ZookeeperConsumerConnector(config) as conn:
        [stream] = conn.create_message_streams({"orders": 1})["orders"]
        for msg in stream:            # kafka-python ConsumerRecord: topic, partition, offset, key, value, ...
            handle(msg)

The connector registers in ``/consumers/[g]/ids`` with the Scala JSON format, takes part in the group's
rebalances through one rebalancer thread (:mod:`.rebalancer`), claims owner nodes with consumer thread ids as data,
fetches from partition leaders into bounded queues (:mod:`.fetcher`) and commits next offsets to the configured
offset store (ZooKeeper, Kafka or dual). Positions count as consumed when a stream hands a record out (as Kafka
1.1.1 ``ConsumerIterator.next`` records them), kept with everything else about an owned partition on its
:class:`~.partition_info.PartitionTopicInfo`. A reset
point (``auto.offset.reset`` for a partition without a committed offset, or one the log no longer has) counts as
consumed too and is committed at once, not at the next auto-commit.
"""
import logging
import queue
import threading
import time
from typing import Dict, Iterable, Optional, Tuple

from ..errors import ConfigError, ZkConsumerError
from ..core.layout import codecs, paths
from ..core.layout.names import validate_topic
from ..offsets import CommitResult, make_offset_store
from ..zookeeper import client as zkmod
from ..zookeeper import auth as zk_auth
from . import join_guards
from .fetcher import FetcherManager, Fetchers, NoFetchers
from .member import Member
from .member_metrics import MemberMetrics
from .rebalancer import Rebalancer
from .shutdown import ShutdownBudget, bounded, leave_group
from .stream import SHUTDOWN, Generation, KafkaStream

log = logging.getLogger(__name__)


class RebalanceListener:
    """Hooks the rebalancer calls (override what you need). Each gets a set of (topic, partition).

    * ``on_revoke``: before ownership of these partitions is released — delivery has stopped, so this is the place
      to commit (``connector.commit_offsets()``) when ``auto.commit.enable=false``;
    * ``on_assign``: after the owner nodes are claimed and offsets read, before fetching starts;
    * ``on_lost``: the ZooKeeper session expired, or a rebalance found owner nodes of ours gone or not ours
      (deleted out of band); these partitions may already belong to someone else (no commit is possible for them
      any more).

    ``on_assign`` gets the whole assignment; ``on_revoke`` and ``on_lost`` name only partitions the last
    ``on_assign`` gave and no hook has taken back since (shutdown included), so each is revoked once.
    """

    def on_revoke(self, partitions):
        pass

    def on_assign(self, partitions):
        pass

    def on_lost(self, partitions):
        pass


class ZookeeperConsumerConnector(Member):
    """A member of a ZooKeeper-coordinated consumer group (see the module's docstring for an example).

    :param config: a :class:`~zkconsumer.core.config.ConsumerConfig` (``group.id`` and ``zookeeper.connect`` required).
    :param listener: a :class:`RebalanceListener` whose hooks the rebalancer calls (default: one that does
        nothing).
    :param bootstrap_servers: ``host:port[,host:port]`` of the Kafka brokers; default: the brokers registered in
        ZooKeeper's ``/brokers/ids`` (read again for every new Kafka client).
    :raises ConfigError: ``group.id`` or ``zookeeper.connect`` is missing, or the ZooKeeper credentials file
        (``zookeeper.auth.credentials.file``) cannot be used.
    :raises ZkAuthError: ZooKeeper refused the credentials, or they give no write access to the group's nodes.
    :raises ClusterUnavailableError: ZooKeeper cannot be reached within ``zookeeper.connection.timeout.ms``, or
        (``offsets.storage=kafka``, no *bootstrap_servers*) no broker is registered in it.

    The constructor connects to ZooKeeper; nothing is registered until :meth:`create_message_streams` (or
    :meth:`create_message_streams_by_filter`), which may be called once. Use the connector as a context manager,
    or call :meth:`shutdown`.

    Threads, and what each writes (kafka-python's ``BaseCoordinator`` keeps a note like this one):

    * **the application**: builds the connector and its streams (``config``, ``streams``, ``_queues``,
      ``registration``, the offset store: fixed from then on), iterates each stream from one thread at a time
      (the stream writes the partition's consumed position, :attr:`PartitionTopicInfo.consumed
      <.partition_info.PartitionTopicInfo.consumed>`, as it hands a record out), and calls :meth:`commit_offsets`
      and :meth:`shutdown`;
    * **the rebalancer** (:class:`~.rebalancer.Rebalancer`, one thread): every change of ownership, the registry
      of owned partitions (``rebalancer.parts``) and the delivery generation (:meth:`stop_delivery`,
      :meth:`start_delivery`); kazoo's watch and session callbacks and the timers only put events on its queue;
    * **the fetchers** (``num.consumer.fetchers`` threads, :mod:`.fetcher`): each partition's fetch position and
      reset point, the chunks on the stream queues, the last fetch error; a reset point recorded (by the fetcher,
      or by the stream that reaches one queued behind records) is handed to the auto-commit thread
      (``_reset_partitions``, a dict whose single operations are atomic);
    * **the auto-commit thread**: :meth:`commit_offsets` every ``auto.commit.interval.ms``, reset points at once;
    * short-lived helpers: the commit of the partitions leaving in a rebalance, the bounded steps of
      :meth:`shutdown`, the start's storage check; and the session lease's heartbeat (:mod:`.lease`).

    Locks. ``rebalancer.lock`` guards the registry of owned partitions, the ZooKeeper session they were claimed
    under and the commit fence: the rebalancer holds it through an attempt, and a commit takes it only to read the
    consumed positions, the fence and its sequence number (the store is written without it, so a slow store never
    holds a rebalance up). The ZooKeeper and Kafka offset stores each hold a lock of their own around a call's
    requests, and under it order commits by sequence (:class:`~zkconsumer.offsets.CommitOrder`): commits reach
    the store in any order, never an older position after a newer one;
    ``_shutdown_lock`` makes :meth:`shutdown` run once. The hot path takes no lock: a stream checks the generation
    around each hand-out and the rebalancer bumps the generation and waits for every stream's in-flight flag
    (:meth:`KafkaStream.fence <.stream.KafkaStream.fence>`) before ownership changes. The metrics counters
    (``commit_counts``, the streams' counts) are updated without a lock.
    """

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
        # (topic, n) or n (wildcard) -> Queue
        self._queues = {}
        self._wildcard = False
        self.registration = None
        self.member_info = _member_info(config)
        # commits per store, and failed ones (metrics)
        self.commit_counts = {"zookeeper": 0, "kafka": 0, "failed": 0}
        self.rebalancer = None
        self.fetchers: Fetchers = NoFetchers()   # until the member starts
        self._last_fetch_error = None
        self._bootstrap = bootstrap_servers
        # else read from ZooKeeper, and re-read for new clients
        self._bootstrap_given = bool(bootstrap_servers)
        self._commit_thread = None
        # wakes the auto-commit thread: reset points to commit, or stop
        self._commit_soon = threading.Event()
        # (t, p) -> PartitionTopicInfo whose reset point awaits its commit
        self._reset_partitions = {}
        # the last commit's sequence number, taken with its positions under the rebalancer's lock
        self._commit_sequence = 0
        self._stopped = threading.Event()
        self._shutdown_lock = threading.Lock()
        self._closed = False
        self.zk_auth = zk_auth.from_config(config)
        self.zk = zkmod.connect(config.zookeeper_connect, config.zookeeper_session_timeout_ms,
                                config.zookeeper_connection_timeout_ms, auth=self.zk_auth)
        if self.zk_auth.enabled:
            # a wrong digest password is another identity: say so now, not at the first write
            try:
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
        """Subscribe to topics, join the group and return the streams to iterate (may be called once).

        Runs the checks before joining (the cutover fence, the split-brain guard, the storage switch check),
        registers the member in ``/consumers/[g]/ids`` and waits for its first rebalance: at most about
        ``rebalance.max.retries`` x (``rebalance.backoff.ms`` + 5 s) + 10 s, then it logs a warning and returns
        while the rebalance goes on.

        :param topic_count_map: ``{topic: number of streams}``; each stream is fed by its own thread id
            (``<consumer id>-<n>``) and is iterated by one application thread at a time.
        :returns: ``{topic: [KafkaStream, ...]}``, the streams in thread id order.
        :raises ConfigError: the map is empty or a stream count is not an integer >= 1.
        :raises InvalidNameError: a topic is not a legal Kafka topic name.
        :raises ZkConsumerError: called a second time, or after :meth:`shutdown`.
        :raises GroupConflictError: a check refused the join: the group was cut over to broker-coordinated
            consumers, is active as a broker-coordinated group, or Kafka holds newer offsets than ZooKeeper.
        :raises SplitBrainUnknownError: whether the group is active on the broker side could not be found out
            (``split.brain.check=refuse``).
        :raises RegistrationConflictError: another live session holds this consumer id (a duplicate explicit
            ``consumer.id``), or ZooKeeper refuses the registration (a fenced group); the connector is shut down.
        """
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
        """Subscribe to every topic a filter allows, join the group and return the streams (may be called once).

        Topics created later that match are consumed without a restart: the filter is evaluated against
        ``/brokers/topics`` at every rebalance (Kafka 1.1.1 ``WildcardTopicCount``). Otherwise as
        :meth:`create_message_streams`.

        :param topic_filter: a :class:`~zkconsumer.core.subscription.topic_filter.Whitelist` or
            :class:`~zkconsumer.core.subscription.topic_filter.Blacklist` (Kafka 1.1.1 ``kafka.consumer.TopicFilter``).
        :param num_streams: how many streams (thread ids) share every matching topic.
        :returns: ``[KafkaStream, ...]``, shared by every matching topic.
        :raises ConfigError: *num_streams* is not an integer >= 1.
        :raises ZkConsumerError: called a second time, or after :meth:`shutdown`; and as
            :meth:`create_message_streams` for the checks and the registration.
        """
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
        join_guards.preflight_checks(self.zk, self.config, self.consumer_id, self.registration, self._brokers)
        self.lease.start()
        self.fetchers = self._make_fetchers()
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

    def recheck_join_guards(self):
        """Before a re-registration (the rebalancer, after a session expiry): the split-brain guard of
        :mod:`.join_guards`."""
        join_guards.refuse_split_brain(self.zk, self.config, self._brokers)

    def metrics(self) -> dict:
        """The Scala consumer's metrics, by their JMX names, read now (cheap: counters kept per chunk and per
        commit; rates are left to the scraper but MinFetchRate's): ``ConsumerLag`` {(t, p): lag}, ``MaxLag``,
        ``MinFetchRate`` (the smallest one-minute rate of Fetch requests answered, per fetcher and broker; the
        librdkafka engine's polls), ``MessagesPerSec`` / ``BytesPerSec`` (totals: counters),
        ``ZooKeeperCommitsPerSec`` / ``KafkaCommitsPerSec`` (totals), ``RebalanceRateAndTime`` (count and
        seconds), ``OwnedPartitionsCount``, plus the member's state, what a claim waits for (``ClaimWait``:
        seconds and ``{owner node path: {"owner": its data, "session": "0x..."}}``) and whether dual commit writes
        ZooKeeper alone. :meth:`metrics_snapshot` has these and more, typed."""
        return self.metrics_snapshot().jmx()

    def metrics_snapshot(self) -> MemberMetrics:
        """Everything the member's metrics show, read now without a lock (each figure is a plain counter or a
        value one thread replaces whole): what the Prometheus collector reads, and all it reads."""
        rb = self.rebalancer
        parts = dict(rb.parts) if rb is not None else {}
        hw = self.fetchers.highwaters()
        lag = {tp: max(0, hw[tp] - part.consumed) for tp, part in parts.items()
               if tp in hw and part.consumed is not None}
        rates = self.fetchers.fetch_rates()
        stats = dict(rb.stats) if rb is not None else {}
        topic_counts: Dict[str, Tuple[int, int]] = {}
        for s in list(self.streams):
            for t, (n, b) in list(s.by_topic.items()):
                messages, nbytes = topic_counts.get(t, (0, 0))
                topic_counts[t] = (messages + n, nbytes + b)
        return MemberMetrics(
            group=self.group, consumer_id=self.consumer_id, client_id=self.config.client_id or self.group,
            engine=self.config.fetch_engine, state=rb.state if rb is not None else "NEW",
            consumer_lag=lag, min_fetch_rate=min(rates) if rates else 0.0,
            messages=sum(s.messages for s in self.streams), bytes=sum(s.bytes for s in self.streams),
            topic_counts=topic_counts, queued_chunks=sum(s.queue.qsize() for s in self.streams),
            fetch=self.fetchers.counters(),
            zookeeper_commits=self.commit_counts["zookeeper"], kafka_commits=self.commit_counts["kafka"],
            commit_failures=self.commit_counts["failed"], session_expiries=stats.get("session_expiries", 0),
            rebalances=stats.get("rebalances", 0), rebalance_seconds=round(stats.get("rebalance_seconds", 0.0), 6),
            failed_rebalance_attempts=stats.get("failed_attempts", 0), owned_partitions=len(parts),
            claim_wait_seconds=round(rb.claim_wait_seconds(), 3) if rb is not None else 0.0,
            claim_wait_owners=dict(rb.claim_wait) if rb is not None else None,
            offsets_degraded=self.offsets_degraded)

    @property
    def offsets_degraded(self) -> bool:
        """True while dual commit writes ZooKeeper alone (Kafka's offset manager down past
        ``dual.commit.kafka.outage.ms``)."""
        return self.offset_store.zookeeper_only

    def _make_fetchers(self) -> Fetchers:
        """The member's fetchers, made when it starts (a member that only coordinates — the Spark driver's —
        returns :class:`~.fetcher.NoFetchers`)."""
        servers = self._bootstrap if self._bootstrap_given else self._fresh_bootstrap
        return FetcherManager(self.config, servers, on_error=self._on_fetch_error, on_reset=self._reset_recorded,
                              lease=self.lease)

    def _brokers(self):
        """The bootstrap servers given, else the brokers registered in ZooKeeper now."""
        return self._bootstrap if self._bootstrap_given else self._fresh_bootstrap()

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
        # the generation first, then the stop: shutdown() sets _stopped before it bumps the generation, so either
        # this assignment is of an older generation (nothing of it is handed out) or it is not made at all
        generation = self.generation.value
        if self._stopped.is_set():
            return
        for part in parts.values():
            n = int(part.thread_id.rsplit("-", 1)[1])
            part.queue = self._queues[n if self._wildcard else (part.tp[0], n)]
        self.fetchers.assign(generation, parts)

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
        # the lease was not fresh: nothing was written
        if result is None:
            return True
        # superseded: the store confirmed a newer commit's position, read later from the same partition info, so
        # at or past the reset point
        for tp in ready:
            if tp in result.committed or tp in result.superseded \
                    or isinstance(result.failed.get(tp), OwnershipLostError):
                pending.pop(tp, None)
        return any(tp in pending for tp in ready)

    def listener_call(self, name, partitions):
        hooks = {"on_revoke": self.listener.on_revoke, "on_assign": self.listener.on_assign,
                 "on_lost": self.listener.on_lost}
        try:
            hooks[name](partitions)
        except Exception:
            log.exception("rebalance listener %s failed", name)

    def _on_fetch_error(self, tp, exc):
        self._last_fetch_error = (time.time(), exc)

    @property
    def last_fetch_error(self):
        """(unix time, exception) of the last fetch failure, or None (fetchers retry; the streams raise
        FetchError when failures persist)."""
        return self._last_fetch_error

    # -- offsets -----------------------------------------------------------------------------------------------
    def commit_offsets(self, raise_errors: bool = False) -> Optional[CommitResult]:
        """Commit the consumed positions of every owned partition (the ZooKeeper store writes only changed ones).

        A position counts as consumed once a stream has handed its record out. Safe to call from any thread,
        the rebalance listener's ``on_revoke`` included.

        :param raise_errors: raise when a partition could not be committed, instead of only reporting it.
        :returns: the store's :class:`~zkconsumer.offsets.CommitResult` (``committed``, ``failed`` with the
            reasons, ``superseded``: left out because the store confirmed the write of a commit that read their
            positions later, from another thread, so they are not failures: what is stored covers them), or None
            when nothing was committed: no streams yet, nothing owned with a known position, or ZooKeeper did not
            confirm the session within its timeout (after a pause: see :meth:`commit_partitions`). With
            *raise_errors*, a return means every partition is stored (``committed``, or covered: ``superseded``).
        :raises OwnershipLostError: (*raise_errors*) every failure is a partition this member no longer owns.
        :raises OffsetStoreError: (*raise_errors*) the store failed for some partition; the exception's ``result``
            is the :class:`~zkconsumer.offsets.CommitResult`.
        :raises OffsetManagerUnavailableError: (``offsets.storage=kafka`` without dual commit, whatever
            *raise_errors* says) no broker or coordinator answered.
        """
        rb = self.rebalancer
        if rb is None:
            return None
        with rb.lock:
            owned = list(rb.owned)
        return self.commit_partitions(owned, raise_errors=raise_errors)

    def commit_partitions(self, partitions: Iterable[Tuple[str, int]], raise_errors: bool = False,
                          until: Optional[float] = None) -> Optional[CommitResult]:
        """Commit the consumed positions of *partitions* that this member owns; call it after the streams exist.

        The ownership lock is held only to take the offsets, the fence and the commit's sequence number: the store
        write runs without it, so a slow store (the Kafka offset manager retrying for a minute) never delays
        suspension, session loss or a rebalance; the fence refuses what we no longer own, re-checked before every
        attempt. The sequence orders commits made by several threads (the auto-commit thread, the application,
        the commit of the partitions leaving, shutdown's): the store does not write a partition for which it has
        confirmed a commit with a higher one (``superseded`` in the result), and for one whose higher commit is in
        flight or of unknown outcome it writes that commit's position instead, so an older position never lands
        after a newer one and a newer commit that fails does not cost an older one its write; a position that moved
        back (a reset point, a partition claimed again) is read later, so it is written. When the session lease is
        stale (the process was paused, say) a ZooKeeper round trip under our session comes first.

        :param partitions: ``(topic, partition)`` pairs; those not owned, or without a known position, are left
            out.
        :param raise_errors: as for :meth:`commit_offsets`.
        :param until: shutdown's own commit: the ``time.monotonic()`` until which it waits for that round trip,
            though shutdown has begun (other commits give up then); none is made after it.
        :returns: as :meth:`commit_offsets`.
        :raises OwnershipLostError: (*raise_errors*) as for :meth:`commit_offsets`.
        :raises OffsetStoreError: (*raise_errors*) as for :meth:`commit_offsets`.
        :raises OffsetManagerUnavailableError: as for :meth:`commit_offsets`.
        """
        rb = self.rebalancer
        if rb is None:
            return None
        # after a pause: a round trip first (a commit would be fenced anyway)
        if not self.lease.fresh():
            give_up = time.monotonic() + self.lease.timeout_s() if until is None else until
            stopping = self._stopped.is_set if until is None else (lambda: False)
            if not self.lease.wait_fresh(lambda: time.monotonic() > give_up or stopping()):
                log.warning("commit skipped: no answer from ZooKeeper under our session for a while (the session "
                            "may have expired)")
                return None
        with rb.lock:
            if until is not None and time.monotonic() > until:
                log.warning("commit skipped: shutdown's share of its bound for the final commit has passed")
                return None
            parts = rb.parts
            offsets = {tp: part.consumed for tp, part in ((tp, parts.get(tp)) for tp in partitions)
                       if part is not None and part.consumed is not None}
            if not offsets:
                return None
            fence = rb.fence()
            self._commit_sequence += 1
            sequence = self._commit_sequence
        result = self.offset_store.commit(offsets, fence=fence, sequence=sequence)
        if result.committed:
            kind = self.offset_store.name
            if kind in ("zookeeper", "dual"):
                self.commit_counts["zookeeper"] += 1
            if kind == "kafka" or (kind == "dual" and not result.degraded):
                self.commit_counts["kafka"] += 1
        if result.failed:
            self.commit_counts["failed"] += 1
            log.warning("offset commit failed for %d partition(s): %s", len(result.failed),
                        "; ".join("%s-%d: %s" % (t, p, e) for (t, p), e in sorted(result.failed.items())[:5]))
            rb.on_commit_result(result)
        if result.superseded:
            log.debug("offset commit #%d: %d partition(s) left to a newer commit", sequence, len(result.superseded))
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
        with self._shutdown_lock:
            if self._closed:
                return
            self._closed = True
        self._stopped.set()
        self._commit_soon.set()  # the auto-commit thread ends
        budget = ShutdownBudget(self.shutdown_bound_s())
        try:
            leave_group(self, budget, leave_grace)
        finally:
            self._close(budget)

    def _close(self, budget):
        """The streams end; the fetchers, the lease, the offset store and the ZooKeeper session are closed, within
        what is left of the shutdown's *budget* (a :class:`~.shutdown.ShutdownBudget`)."""
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
        self.fetchers.shutdown(timeout=budget.left())
        self.lease.stop()
        try:  # a commit still waiting for ZooKeeper holds the store's lock: bounded too
            bounded("closing the offset store", self.offset_store.close, budget.left())
        finally:
            bounded("closing the ZooKeeper session", lambda: zkmod.close(self.zk), budget.left())
        if self._commit_thread is not None:
            self._commit_thread.join(min(budget.left(), 5.0))

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
    from ..core.layout.member_info import MemberInfo
    return MemberInfo(host=socket.gethostname(), client_id=config.client_id or config.group_id,
                      offsets_storage=config.offsets_storage, dual_commit=bool(config.dual_commit_enabled),
                      pid=os.getpid(), library="zkconsumer %s" % __version__,
                      auto_commit_interval_ms=config.auto_commit_interval_ms if config.auto_commit_enable else None)
