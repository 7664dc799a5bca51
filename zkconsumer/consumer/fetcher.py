"""Fetcher threads: read owned partitions from their leaders and fill the streams' bounded queues.

Each :class:`FetcherThread` owns one kafka-python ``KafkaConsumer`` used only for manual assignment (``assign`` +
``seek`` + ``poll``: no broker-side group, no commits). Brokers come from ZooKeeper's ``/brokers/ids`` (the
bootstrap list); partition leaders come from Kafka metadata, and kafka-python re-finds them after a leader change
(backing off ``refresh.leader.backoff.ms``). Partitions are spread over ``num.consumer.fetchers`` threads.

The rebalancer changes a fetcher's work only through :meth:`FetcherThread.assign`, which the fetcher applies on its
own thread (a KafkaConsumer is not thread-safe) and acknowledges; ``assign({})`` is "stop fetching". The work is
the partitions' :class:`~.partition_info.PartitionTopicInfo` objects: each is fetched from its consumed position,
and its fetch position is kept on it. A chunk holds what one poll fetched for a partition: checked, its records
built as the stream hands them out (:func:`~.fast_records.install_lazy`). A chunk that cannot be queued because the
stream is full is retried until it fits or the assignment changes — the bounded queue is the back-pressure, so
memory stays bounded by the queue settings whatever the backlog.

While every partition of a fetcher is caught up, it stops polling its client and asks the leaders itself whether
anything arrived (:mod:`~zkconsumer.kafka.idle_watch`: the same Fetch, ~10x less CPU than the client's rounds, plain
TCP only); the first answer with records, another high watermark or an error sends it back to its client, which
fetches from its own positions (the watch reads and moves none).

Resets are the fetcher's (Kafka 1.1.1 ``ConsumerFetcherThread.handleOffsetOutOfRange``): a partition without a
committed offset starts at ``auto.offset.reset``'s end of the log, a position the log does not have (retention
overtook it, the log was truncated) is reset the same way, and either way the new position becomes the partition's
consumed position, so the next commit records it (the client itself is told to reset nothing: kafka-python's and
librdkafka's own resets would move the fetch position without the member knowing).
"""
import abc
import logging
import queue
import threading
import time
from typing import Dict, List, Optional, Tuple

from ..core.rate_meter import RateMeter
from ..errors import ClusterUnavailableError, MessageTooLargeError, ZkConsumerError
from .lease import NoLease
from .member_metrics import FetchCounters
from .partition_info import PartitionTopicInfo, ResetTo
from ..kafka.fast_records import offset_at, records_of
from ..kafka.record_batch import payload_bytes
from .stream import Chunk

log = logging.getLogger(__name__)


def consumer_settings(config):
    """kafka-python settings equivalent to the old consumer's fetch keys (Kafka 1.1.1 ``ConsumerConfig``)."""
    settings = dict(
        client_id=config.client_id or config.group_id or "zkconsumer",
        group_id=None,
        enable_auto_commit=False,
        # kafka-python resets nothing by itself: an out-of-range position is raised to the fetcher, which resets it
        # and records the new position (FetcherThread._reset)
        auto_offset_reset="none",
        max_partition_fetch_bytes=config.fetch_message_max_bytes,
        fetch_min_bytes=config.fetch_min_bytes,
        fetch_max_wait_ms=config.fetch_wait_max_ms,
        request_timeout_ms=max(config.socket_timeout_ms, config.fetch_wait_max_ms + 5000),
        bootstrap_timeout_ms=config.socket_timeout_ms,  # a new fetch client gives up on unreachable brokers
        retry_backoff_ms=config.refresh_leader_backoff_ms,
        max_poll_records=100000,
        check_crcs=True,
    )
    from ..core.kafka_security import of
    settings.update(of(config).client_kwargs())
    if "socket.receive.buffer.bytes" in config.explicit_keys:
        # only when asked for: a fixed SO_RCVBUF (Scala's 64 KiB default) turns off the kernel's autotuning
        settings["receive_buffer_bytes"] = config.socket_receive_buffer_bytes
    return settings


#: how long one poll of the fetch loop waits for records when its client's poll can be woken (an assignment change or
#: a shutdown ends it at once: :func:`~zkconsumer.kafka.internals.install_poll_wake`); kafka-python keeps fetching
#: inside it (one Fetch per ``fetch.wait.max.ms`` while the partitions are idle)
IDLE_POLL_MS = 500
#: the same where a poll cannot be woken (the librdkafka engine), or while a reset point is looked for (every 0.2 s)
SHORT_POLL_MS = 20

#: the longest an idle watch (:mod:`~zkconsumer.kafka.idle_watch`) lasts before the client polls once more (its own
#: checks, its metadata); it ends at once when an answer has anything, on any trouble, and at an assignment change or a
#: shutdown
WATCH_MAX_S = 30.0
#: how long a fetcher leaves the idle watch alone after a connection, an answer or a leader's silence it could not use
#: (see :func:`watch_retry`)
WATCH_BACKOFF_S = 10.0
WATCH_BACKOFF_MAX_S = 600.0
#: a leader late to connect or answer: the watch tried again after WATCH_BACKOFF_S this many times in a row, then after
#: a doubled wait, up to WATCH_LATE_BACKOFF_MAX_S
WATCH_LATE_AT_BASE = 3
WATCH_LATE_BACKOFF_MAX_S = 120.0
#: a fetcher logs the idle watch's trouble at INFO at most this often (at DEBUG otherwise)
WATCH_TROUBLE_LOG_S = 600.0


def watch_retry(backoff: float, lates: int, late: bool) -> Tuple[float, float, int]:
    """``(seconds the fetcher leaves the idle watch alone, the backoff for the next trouble, the late troubles in a
    row)`` after a trouble of the watch; *backoff* and *lates* are what the last trouble left (``WATCH_BACKOFF_S``
    and 0 after a watch that lasted its WATCH_MAX_S without any).

    A refused or closed connection or an answer that could not be used: the wait is *backoff*, doubled at each such
    trouble up to WATCH_BACKOFF_MAX_S. A leader late to connect or answer (``WatchTrouble.late``) is most often an
    overloaded broker or host, which passes (a fleet's mass start): the watch is tried again after WATCH_BACKOFF_S
    WATCH_LATE_AT_BASE times in a row (a watch between them that lasted past every leader's bound, so that each
    answered in time, ends the row), then after a wait doubled at each late trouble up to WATCH_LATE_BACKOFF_MAX_S:
    a leader that stays late (a broker at its ``max.connections``, which the kernel's backlog hides) costs its
    partitions a delay of up to CONNECT_S, or the watch's wait + ANSWER_MARGIN_S, each time the watch tries it, and
    each try connects again. Doubled on every late answer, up to 600 s, a mass start had left a sixth of its
    fetchers polling their clients for minutes after the load was gone (each ~2% of a core while idle)."""
    if late:
        lates += 1
        doublings = min(max(0, lates - WATCH_LATE_AT_BASE), 16)
        return min(WATCH_BACKOFF_S * 2 ** doublings, WATCH_LATE_BACKOFF_MAX_S), backoff, lates
    return backoff, min(backoff * 2, WATCH_BACKOFF_MAX_S), lates

#: how long applying an assignment waits for the reset points of partitions without a committed offset; one that
#: is not known by then (its partition has no leader, say) is resolved by the fetch loop when it can be
RESOLVE_WAIT_S = 2.0


def idle_wait_ms(config) -> int:
    """How long the idle watch asks a leader to hold each Fetch: ``fetch.idle.wait.ms`` when ``fetch.min.bytes`` is 1
    (the broker answers a Fetch as soon as one byte is there, so a longer hold delays nothing; it only answers an
    idle fetcher less often), never less than ``fetch.wait.max.ms``; ``fetch.wait.max.ms`` when ``fetch.min.bytes`` is
    more than 1 (the broker holds what is below it until the wait ends, as it would hold the client's Fetch)."""
    if config.fetch_min_bytes == 1:
        return max(config.fetch_wait_max_ms, config.fetch_idle_wait_ms)
    return config.fetch_wait_max_ms


class FetcherThread(threading.Thread):
    #: the clock of the fetch rates (MinFetchRate's meters)
    clock = staticmethod(time.monotonic)

    def __init__(self, index, bootstrap_servers, config, on_error=None, on_reset=None, lease=None):
        super().__init__(name="zkconsumer-fetcher-%d" % index, daemon=True)
        self.bootstrap_servers = bootstrap_servers
        self.config = config
        self.on_error = on_error or (lambda tp, exc: None)
        self.on_reset = on_reset or (lambda part: None)  # a reset point was recorded on this PartitionTopicInfo
        self.lease = lease if lease is not None else NoLease()  # no hand-off while it is stale
        self._consumer = None
        self._lock = threading.Condition()
        self._pending = None        # (generation, {(t, p): PartitionTopicInfo}, done_event)
        self._assignment = {}       # (t, p) -> PartitionTopicInfo fetched now (under self._generation)
        self._generation = -1
        self._stopped = False
        self._apply_error = None
        self._wake = None           # ends the client's poll in progress (install_poll_wake), when it has one
        self._last_range_check = 0.0
        self._last_resolve = 0.0
        # some partition of the assignment may have an unresolved reset point (the fetch loop looks for it)
        self._unresolved = False
        self.failures = 0           # consecutive failures of the fetch loop
        # what the fetch metrics count (FetchRequestRateAndTimeMs, MinFetchRate): the Fetch responses the client
        # received and the time from each request, and a one-minute rate of them per broker, as Scala's fetcher
        # threads (one per broker) counted (on the client's IO thread and by the idle watch, _count_response); where the client cannot
        # report them (the librdkafka engine), the fetch loop's polls
        self.fetches = 0
        self.fetch_seconds = 0.0
        self._counts_requests = False
        self._broker_meters: Dict[object, RateMeter] = {}  # node id -> the rate of its Fetch responses
        self._poll_meter = RateMeter(self.clock())
        self._leaders: List[object] = []  # the brokers leading this fetcher's partitions (_refresh_leaders)
        self._leaders_at = float("-inf")
        self.errors = 0             # fetch errors, retried or not (metrics)
        self._count_lock = threading.Lock()  # the IO thread and the idle watch both count Fetch responses
        self._watch = None          # the idle watch (PLAINTEXT clients whose poll can be woken)
        self._watch_not_before = 0.0
        self._watch_backoff = WATCH_BACKOFF_S
        self._watch_lates = 0
        self._watch_trouble_logged = float("-inf")
        self.watch_troubles = 0     # idle watches ended by a connection, an answer or a leader's silence
        self.watch_rounds = 0       # idle watch answers read

    # -- called by the rebalancer ------------------------------------------------------------------------------
    def assign(self, generation, work, timeout=None):
        """Replace this fetcher's work: {(t, p): PartitionTopicInfo}, each fetched from its consumed position (or
        its reset point when it has none). Blocks until the fetcher has applied it (so when assign({}) returns,
        nothing more is put on any queue), at most *timeout* seconds (default: ``socket.timeout.ms``, what a new
        client may wait for the brokers, plus the wait for reset points and a margin)."""
        if timeout is None:
            timeout = self.config.socket_timeout_ms / 1000.0 + RESOLVE_WAIT_S + 5.0
        done = threading.Event()
        with self._lock:
            self._pending = (generation, dict(work), done)
            self._lock.notify_all()
        self._wake_poll()
        if not self.is_alive():
            self._apply_pending()
        if not done.wait(timeout):
            raise ClusterUnavailableError("fetcher %s did not apply a new assignment within %.0f s"
                                          % (self.name, timeout))
        error, self._apply_error = self._apply_error, None
        if error is not None:  # e.g. brokers unreachable: the rebalance attempt fails and is retried
            raise error

    def shutdown(self):
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        self._wake_poll()

    def _wake_poll(self):
        wake = self._wake
        if wake is not None:
            wake()
        watch = self._watch
        if watch is not None:
            watch.wake()

    # -- fetcher thread ----------------------------------------------------------------------------------------
    def _changing(self):
        return self._pending is not None or self._stopped

    def _apply_pending(self):
        from kafka import TopicPartition
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        generation, work, done = pending
        self._apply_error = None
        try:
            if work:
                consumer = self._ensure_consumer()
                consumer.assign([TopicPartition(*tp) for tp in work])
                resets = []
                for tp, part in work.items():
                    part.apply_reset()  # a reset point whose marker was dropped with its queue
                    part.reset_unresolved = part.consumed is None or part.consumed < 0
                    if part.reset_unresolved:
                        resets.append(TopicPartition(*tp))
                    else:
                        consumer.seek(TopicPartition(*tp), part.consumed)
                        part.fetched = part.consumed
                if resets:
                    if self.config.auto_offset_reset == "smallest":
                        consumer.seek_to_beginning(*resets)
                    else:
                        consumer.seek_to_end(*resets)
                self._assignment = work
                self._generation = generation
                self._unresolved = bool(resets)
                self._restart_meters()
                if resets:
                    self._resolve_resets(RESOLVE_WAIT_S)
            else:
                if self._consumer is not None:
                    self._consumer.assign([])
                self._assignment = {}
                self._generation = generation
                self._restart_meters()
        except Exception as e:
            log.error("fetcher %s could not apply its assignment: %r", self.name, e, exc_info=True)
            self._assignment = {}
            self._apply_error = e
        finally:
            done.set()

    def _resolve_resets(self, wait_s=0.0):
        """Record the reset points that became known (at most one bounded wait for all of them: kafka-python resolves
        them together). A partition whose reset point is not known yet — no leader, say — stays unresolved and is
        fetched when it is: the others are fetched meanwhile, as the Scala consumer's leader finder
        (``ConsumerFetcherManager.LeaderFinderThread``, Kafka 1.1.1) left a partition without a leader out and added
        it when one appeared."""
        self._last_resolve = time.monotonic()
        unresolved = False
        for tp in sorted(tp for tp, part in self._assignment.items() if part.reset_unresolved):
            part = self._assignment[tp]
            off = self._settled_position(tp, wait_s)
            wait_s = 0.0
            if off is not None:
                part.reset_unresolved = False
                self._record_reset(part, off)
            else:
                unresolved = True
        self._unresolved = unresolved

    def _settled_position(self, tp, wait_s):
        """The client's position of *tp* once a reset settled it (None while it is not known), waiting at most
        *wait_s* seconds for the reset requests in flight."""
        from kafka import TopicPartition
        consumer = self._consumer
        ktp = TopicPartition(*tp)
        if wait_s > 0:
            try:
                consumer.position(ktp, timeout_ms=int(wait_s * 1000))
            except Exception as e:
                log.warning("could not resolve the auto.offset.reset position of %s-%d yet: %s", tp[0], tp[1], e)
                return None
        state = consumer._subscription.assignment.get(ktp)  # no request: what the resets settled so far
        return state.position.offset if state is not None and state.has_valid_position else None

    def _record_reset(self, part, offset):
        """A reset point becomes the partition's consumed position, so the next commit records it (Kafka 1.1.1
        ``ConsumerFetcherThread.handleOffsetOutOfRange``: ``resetFetchOffset`` and ``resetConsumeOffset``): a
        restart resumes from it instead of resetting again and skipping what was produced meanwhile. When records
        fetched before the reset are still queued or being handed out, the reset is queued behind them (a
        :class:`ResetTo` chunk) and recorded when the stream gets there."""
        if part.consumed is None or part.consumed == part.fetched:  # nothing of it queued or in a stream's hands
            part.consumed = offset
            part.reset_to = None
        else:
            part.reset_to = offset
            self._put(part.queue, Chunk(self._generation, part, ResetTo(offset, self.on_reset)))
        part.fetched = offset
        self.on_reset(part)

    def _reset(self, tp, position, why):
        """Apply auto.offset.reset to *tp*, whose *position* the log does not have (Kafka 1.1.1
        ``ConsumerFetcherThread.handleOffsetOutOfRange``), and record the new position."""
        from kafka import TopicPartition
        part = self._assignment.get(tp)
        if part is None:
            return
        reset = self.config.auto_offset_reset
        if reset == "smallest":
            self._consumer.seek_to_beginning(TopicPartition(*tp))
        else:
            self._consumer.seek_to_end(TopicPartition(*tp))
        part.range_suspect = None
        off = self._settled_position(tp, RESOLVE_WAIT_S)
        log.error("Current offset %s for partition [%s,%d] out of range (%s); reset offset to %s "
                  "(auto.offset.reset=%s)", position, tp[0], tp[1], why,
                  off if off is not None else "the %s offset, not known yet"
                  % ("earliest" if reset == "smallest" else "latest"), reset)
        part.reset_unresolved = off is None
        if off is None:
            self._unresolved = True
        else:
            self._record_reset(part, off)

    def _truncated(self, divergent):
        """kafka-python found the log truncated below our position (KIP-320, an unclean leader election): fetch
        again from the point where the logs diverge (or reset, when the broker does not know it), and record it."""
        from kafka import TopicPartition
        for ktp, meta in divergent.items():
            tp = (ktp.topic, ktp.partition)
            part = self._assignment.get(tp)
            if part is None:
                continue
            if meta is None:
                self._reset(tp, part.fetched, "log truncated, no divergence point known")
                continue
            log.error("log of partition [%s,%d] truncated below offset %s (an unclean leader election?): fetching "
                      "again from %d", tp[0], tp[1], part.fetched, meta.offset)
            self._consumer.seek(TopicPartition(*tp), meta.offset)
            self._record_reset(part, meta.offset)

    def _ensure_consumer(self):
        if self._consumer is None:
            from kafka import KafkaConsumer
            from kafka.errors import KafkaError
            # a callable re-reads the brokers (from ZooKeeper's /brokers/ids) for every new client, so a member
            # whose brokers moved or came back finds them on the next attempt, as the Scala consumer's leader finder
            # re-read the broker list from ZooKeeper
            servers = self.bootstrap_servers() if callable(self.bootstrap_servers) else self.bootstrap_servers
            try:
                self._consumer = KafkaConsumer(bootstrap_servers=servers, **consumer_settings(self.config))
            except (KafkaError, OSError) as e:
                from ..kafka.connect_errors import connect_error
                from ..core.kafka_security import of
                raise connect_error("reach brokers", servers, of(self.config), e) from e
            # decode v2 record batches with our own decoder (same records; kafka-python's for anything else), each
            # record built when its stream hands it out; and read this client's sockets in larger pieces
            from ..kafka import fast_records, socket_reads
            if not fast_records.install_lazy(self._consumer):
                fast_records.install(self._consumer)
            socket_reads.install(self._consumer)
            from ..kafka.internals import install_poll_wake, observe_fetch_responses
            self._wake = install_poll_wake(self._consumer)
            self._counts_requests = observe_fetch_responses(self._consumer, self._count_response)
            self._watch = self._make_watch()
            if self._wake is None:
                log.warning("fetcher %s: this kafka-python's poll cannot be woken (an internal install_poll_wake "
                            "uses is missing): polling %d ms at a time, with more CPU while idle",
                            self.name, SHORT_POLL_MS)
        return self._consumer

    #: consecutive fetch-loop failures after which the error is handed to the streams of the partitions
    SURFACE_AFTER = 3

    def run(self):
        """The fetch loop, restarted after any failure (a dead fetcher would leave its partitions silently
        unconsumed): each failure is logged with its cause and retried after a second; when failures persist
        (SURFACE_AFTER in a row, without a successful poll between them) a FetchError goes to every stream of
        this fetcher's partitions, so the application's iterator raises it."""
        try:
            while True:
                try:
                    self._loop()
                    return
                except Exception as e:
                    self.failures += 1
                    self.errors += 1
                    log.error("fetcher %s failed (%d in a row; retrying in 1 s): %s", self.name, self.failures, e,
                              exc_info=self.failures == 1)
                    self.on_error(None, e)
                    if self.failures >= self.SURFACE_AFTER:
                        self._surface(e)
                    self._rewind()
                    self._wait_for_change(1.0)
                    if self._stopped:
                        return
        finally:
            if self._watch is not None:
                self._watch.close()
            if self._consumer is not None:
                try:
                    from ..kafka.internals import close_quietly
                    close_quietly(self._consumer, autocommit=False)
                except Exception:
                    pass

    #: what the client's poll returned for one partition, as one sequence of records
    _one_sequence = staticmethod(records_of)

    def _loop(self):
        from kafka.consumer.fetcher import RecordTooLargeError
        from kafka.errors import KafkaError, LogTruncationError, OffsetOutOfRangeError
        from ..kafka.internals import PollWoken
        while True:
            with self._lock:
                while not self._stopped and self._pending is None and not self._assignment:
                    self._lock.wait(1.0)
                if self._stopped:
                    break
            if self._pending is not None:
                self._apply_pending()  # an error goes back to the rebalancer through assign()
                continue
            if self._unresolved and time.monotonic() - self._last_resolve >= 0.2:
                self._resolve_resets()
            polled_at = time.monotonic()
            wait_ms = IDLE_POLL_MS if self._wake is not None and not self._unresolved else SHORT_POLL_MS
            try:
                batches = self._consumer.poll(timeout_ms=wait_ms)
            except PollWoken:  # an assignment change or a shutdown: nothing was fetched in this poll
                continue
            except OffsetOutOfRangeError as e:  # kafka-python resets nothing itself (auto_offset_reset="none")
                for ktp, position in (e.args[0] if e.args and isinstance(e.args[0], dict) else {}).items():
                    self._reset((ktp.topic, ktp.partition), position, "OFFSET_OUT_OF_RANGE")
                continue
            except LogTruncationError as e:
                self._truncated(e.divergent_offsets)
                continue
            except RecordTooLargeError as e:
                self.errors += 1
                err = MessageTooLargeError("a message is larger than fetch.message.max.bytes=%d: %s"
                                           % (self.config.fetch_message_max_bytes, e))
                log.error("%s", err)
                self.on_error(None, err)
                self._wait_for_change(5.0)
                continue
            except (KafkaError, OSError) as e:
                self.errors += 1
                log.warning("fetch error (retrying after refresh.leader.backoff.ms): %s", e)
                self._wait_for_change(self.config.refresh_leader_backoff_ms / 1000.0)
                continue
            except Exception as e:
                if "Failed to make progress" in str(e):
                    err = MessageTooLargeError("a message is larger than fetch.message.max.bytes=%d: %s"
                                               % (self.config.fetch_message_max_bytes, e))
                    log.error("%s", err)
                    self.on_error(None, err)
                else:
                    log.exception("unexpected fetch error; retrying")
                self._wait_for_change(1.0)
                continue
            if not batches:
                self._check_out_of_range()
            generation = self._generation
            for tp, records in batches.items():
                part = self._assignment.get(tp)
                records = self._one_sequence(records)  # a LazyRecords, or a list of ConsumerRecords
                if part is None or not records:
                    continue
                if part.reset_unresolved:  # its reset settled: it starts at these records
                    part.reset_unresolved = False
                    self._record_reset(part, offset_at(records, 0))
                if not self._put(part.queue, Chunk(generation, part, records, payload_bytes(records))):
                    break  # assignment changing: the rest of this poll is dropped (it will be re-fetched)
                part.fetched = offset_at(records, -1) + 1
            self.failures = 0  # a whole pass without failure
            if not self._counts_requests:
                self.fetches += 1
                self.fetch_seconds += time.monotonic() - polled_at
                self._poll_meter.mark(self.clock())
            self._refresh_leaders()
            if not batches and self._watch is not None:
                self._watch_while_idle()

    def _count_response(self, node_id, seconds):
        """A Fetch response came from broker *node_id* *seconds* after its request (the client's IO thread, the only
        writer then, or the idle watch on the fetcher thread)."""
        with self._count_lock:
            self.fetches += 1
            self.fetch_seconds += seconds
            self._broker_meter(node_id).mark(self.clock())

    def _make_watch(self):
        """An idle watch for this fetcher's client, or None: only plain TCP connections (TLS and SASL stay on the
        client's path), only where the client's poll can be woken and its Fetch responses are counted (the watch's
        answers are counted the same way), and only with ``fetch.min.bytes`` and ``fetch.wait.max.ms`` of at least 1
        (at 0 every answer comes at once: nothing to watch). It asks its leaders to hold each Fetch
        :func:`idle_wait_ms`."""
        from ..core.kafka_security import of
        if self._wake is None or not self._counts_requests or self.config.fetch_min_bytes < 1 or \
                self.config.fetch_wait_max_ms < 1 or \
                of(self.config).protocol != "PLAINTEXT":
            return None
        from ..kafka.idle_watch import IdleWatch
        return IdleWatch(consumer_settings(self.config)["client_id"], idle_wait_ms(self.config),
                         self.config.fetch_min_bytes, self.config.fetch_message_max_bytes)

    def _watch_while_idle(self):
        """Every partition caught up after a poll that fetched nothing: ask their leaders with the idle watch instead
        of polling the client, until an answer has records, another high watermark or an error, the assignment
        changes, the fetcher stops, or WATCH_MAX_S passed. Nothing is fetched or moved meanwhile: the client goes on
        from its own positions."""
        now = time.monotonic()
        if now < self._watch_not_before or self._unresolved or self._changing():
            return
        from kafka import TopicPartition
        from ..kafka.idle_watch import WatchTrouble
        from ..kafka.internals import caught_up_plan
        plan = caught_up_plan(self._consumer, [TopicPartition(*tp) for tp in self._assignment])
        if plan is None:
            return
        watch = self._watch
        watch.clear_wake()
        if self._changing():
            return
        try:
            ended = watch.watch(plan, now + WATCH_MAX_S, self._count_watch_answer)
        except WatchTrouble as e:
            self.watch_troubles += 1
            backoff, self._watch_backoff, self._watch_lates = watch_retry(self._watch_backoff, self._watch_lates,
                                                                          e.late)
            self._watch_not_before = time.monotonic() + backoff
            log_it = log.info if now - self._watch_trouble_logged >= WATCH_TROUBLE_LOG_S else log.debug
            if log_it is log.info:
                self._watch_trouble_logged = now
            log_it("fetcher %s: idle watch ended (%s); its client fetches, the watch is tried again in %.0f s "
                   "(%d times so far)", self.name, e, backoff, self.watch_troubles)
        else:
            if ended is False:  # every leader answered for WATCH_MAX_S: the next trouble waits WATCH_BACKOFF_S again
                self._watch_backoff, self._watch_lates = WATCH_BACKOFF_S, 0
            elif ended and time.monotonic() - now >= watch.answer_bound_s:
                # it lasted past every leader's bound: each answered in time, so a late trouble after it is not in a
                # row with those before
                self._watch_lates = 0

    def _count_watch_answer(self, node_id, seconds):
        """An idle watch's answer: a Fetch response like the client's (fetch metrics, MinFetchRate)."""
        self._count_response(node_id, seconds)
        self.watch_rounds += 1
        self._refresh_leaders()

    def _broker_meter(self, node_id):
        meter = self._broker_meters.get(node_id)
        if meter is None:  # made by the IO thread or by the fetch loop, whichever comes first: one wins
            meter = self._broker_meters.setdefault(node_id, RateMeter(self.clock()))
        return meter

    def _restart_meters(self):
        """A new assignment: MinFetchRate's meters start afresh (0 for their first 5 s), as every Scala fetcher
        thread did, a rebalance closing them all (fetcher thread)."""
        self._broker_meters = {}
        self._poll_meter = RateMeter(self.clock())
        self._leaders_at = float("-inf")
        self._refresh_leaders()

    def _refresh_leaders(self):
        """At most once a second, on the fetcher thread: note the brokers leading this fetcher's partitions and drop
        the meters of the others (a broker fetched from again later is measured afresh, as a new Scala fetcher
        thread); what MinFetchRate reads does not depend on when it is read."""
        now = self.clock()
        if not self._counts_requests or now - self._leaders_at < 1.0:
            return
        self._leaders_at = now
        from kafka import TopicPartition
        from ..kafka.internals import fetch_leaders
        consumer = self._consumer
        parts = list(self._assignment)
        try:
            leaders = fetch_leaders(consumer, [TopicPartition(*tp) for tp in parts]) if parts and consumer else set()
        except Exception:  # metadata replaced under the read: the next pass has it
            return
        if leaders is None:  # this kafka-python cannot say: every broker that has answered
            leaders = set(self._broker_meters)
        meters = self._broker_meters
        for node in [n for n in list(meters) if n not in leaders]:
            meters.pop(node, None)
        for node in leaders:
            self._broker_meter(node)  # a leader that has not answered yet is measured from now
        self._leaders = sorted(leaders, key=str)

    def fetch_rates_now(self):
        """For MinFetchRate (any thread may ask; only reads): the one-minute rate of Fetch responses from each
        broker leading one of this fetcher's partitions (0 for a meter's first 5 s, as a new Scala fetcher thread
        read; one that stops answering falls towards 0); the rate of its polls where the client does not count
        requests (the librdkafka engine: polls go on while a broker is silent, so that rate does not fall);
        ``[]`` without partitions (Scala shut such threads down)."""
        if not self._assignment or self._consumer is None:
            return []
        now = self.clock()
        if not self._counts_requests:
            return [self._poll_meter.rate(now)]
        meters = self._broker_meters
        return [meter.rate(now) if meter is not None else 0.0
                for meter in (meters.get(node) for node in list(self._leaders))]

    def _rewind(self):
        """After a failure, fetch again from what was handed over last: records polled but not put on a queue
        would otherwise be skipped (kafka-python's position already moved past them)."""
        from kafka import TopicPartition
        consumer = self._consumer
        if consumer is None:
            return
        for tp, part in list(self._assignment.items()):
            off = part.fetched
            if off is None or part.reset_unresolved:
                continue
            try:
                consumer.seek(TopicPartition(*tp), off)
            except Exception as e:
                log.warning("fetcher %s could not seek %s-%d back to %d: %s", self.name, tp[0], tp[1], off, e)

    def _surface(self, exc):
        """Put a FetchError on each stream queue this fetcher feeds (current generation, never blocking)."""
        from ..errors import FetchError
        by_queue = {}
        for tp, part in list(self._assignment.items()):
            by_queue.setdefault(id(part.queue), (part.queue, []))[1].append("%s-%d" % tp)
        for q, parts in by_queue.values():
            err = FetchError("fetching %s failed %d times in a row: %s: %s"
                             % (", ".join(sorted(parts)), self.failures, type(exc).__name__, exc))
            try:
                q.put_nowait(Chunk(self._generation, None, err))
            except queue.Full:
                pass  # the stream is behind anyway; the next failure tries again

    def _check_out_of_range(self):
        """Apply auto.offset.reset to a position the log no longer (or not yet) has, when the broker did not say so.

        A real broker answers a fetch outside the log with OFFSET_OUT_OF_RANGE (handled in the fetch loop); some
        Kafka-protocol brokers (tansu 0.6) return nothing. A high watermark alone is no proof: right after a
        leader election the new leader's watermark can lag the old one (KIP-207, KAFKA-2334), and resetting then
        would skip (largest) or replay (smallest) a caught-up partition. So a position counts as out of range only
        when a fresh ListOffsets (earliest and latest, from the current leader) says so twice, at least a second
        apart, with the position unchanged; checked at most once a second, only while fetches return nothing."""
        from kafka import TopicPartition
        now = time.monotonic()
        if now - self._last_range_check < 1.0 or self._consumer is None:
            return
        self._last_range_check = now
        consumer = self._consumer
        suspects = {}
        for tp, part in list(self._assignment.items()):
            if part.reset_unresolved:
                continue
            ktp = TopicPartition(*tp)
            try:
                hw = consumer.highwater(ktp)
                pos = self._settled_position(tp, 0.0) if hw is not None else None
            except Exception:
                continue
            if hw is not None and pos is not None and pos > hw:
                suspects[ktp] = pos
        confirmed = {}
        if suspects:
            try:
                latest = consumer.end_offsets(list(suspects))
                earliest = consumer.beginning_offsets(list(suspects))
            except Exception as e:  # e.g. OFFSET_NOT_AVAILABLE while a new leader's watermark catches up
                log.info("cannot confirm the log range of %s yet: %s", sorted(map(tuple, suspects)), e)
                latest = earliest = {}
            for ktp, pos in suspects.items():
                if ktp in latest and ktp in earliest and not earliest[ktp] <= pos <= latest[ktp]:
                    confirmed[(ktp.topic, ktp.partition)] = (pos, earliest[ktp], latest[ktp])
        twice = []
        for tp, part in list(self._assignment.items()):
            found = confirmed.get(tp)
            before, part.range_suspect = part.range_suspect, found[0] if found is not None else None
            # the same position found outside the log at the previous check too (once: confirm at the next one)
            if found is not None and before == found[0]:
                twice.append((tp, found))
        for tp, (pos, first, last) in twice:
            self._reset(tp, pos, "log %d..%d, confirmed twice by ListOffsets" % (first, last))

    def _put(self, q, chunk):
        if not self.lease.fresh():  # no hand-off from a stale lease
            if not self.lease.wait_fresh(self._changing):
                return False
        while not self._changing():
            try:
                q.put(chunk, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _wait_for_change(self, seconds):
        with self._lock:
            if not self._changing():
                self._lock.wait(seconds)


def _as_is(items):
    return items


class RdKafkaFetcherThread(FetcherThread):
    """A fetcher thread reading through librdkafka (``fetch.engine=librdkafka``, :mod:`.librdkafka`): the same
    loop, hand-off, lease, queues and resets; only the client differs."""

    #: its client's poll returns one list of ConsumerRecords per partition already
    _one_sequence = staticmethod(_as_is)

    def _ensure_consumer(self):
        if self._consumer is None:
            from ..kafka.connect_errors import connect_error
            from ..core.kafka_security import of
            from ..kafka.librdkafka import RdKafkaFetchClient
            servers = self.bootstrap_servers() if callable(self.bootstrap_servers) else self.bootstrap_servers
            try:
                self._consumer = RdKafkaFetchClient(self.config, servers)
            except ZkConsumerError:  # e.g. confluent-kafka not installed (ConfigError)
                raise
            except Exception as e:  # confluent_kafka.KafkaException: no broker answered within socket.timeout.ms
                raise connect_error("reach brokers", servers, of(self.config), e) from e
        return self._consumer

    def _settled_position(self, tp, wait_s):
        from kafka import TopicPartition
        return self._consumer.settled_position(TopicPartition(*tp), wait_s)


FETCHER_THREADS = {"kafka-python": FetcherThread, "librdkafka": RdKafkaFetcherThread}

TP = Tuple[str, int]


class Fetchers(abc.ABC):
    """What a member's fetchers do for the connector and its rebalancer (:class:`FetcherManager`: the fetcher
    threads; :class:`NoFetchers`: a member that coordinates and fetches nothing, as the Spark driver's).

    The rebalancer calls :meth:`assign` and :meth:`stop_all` under its ownership lock, from its own thread;
    the member's metrics call :meth:`highwaters`, :meth:`fetch_rates` and :meth:`counters` from any thread;
    :meth:`shutdown` is the last call.
    """

    @abc.abstractmethod
    def assign(self, generation: int, parts: Dict[TP, PartitionTopicInfo]) -> None:
        """Fetch exactly *parts* under *generation* from now on, each from its consumed position (its reset point
        when it has none); ``{}`` stops fetching. Returns when the fetchers have applied it: nothing fetched under
        an earlier assignment is queued afterwards."""

    @abc.abstractmethod
    def stop_all(self, generation: int, timeout: Optional[float] = None) -> None:
        """Stop fetching (within *timeout* seconds in all when given); never raises."""

    @abc.abstractmethod
    def highwaters(self) -> Dict[TP, int]:
        """``{(topic, partition): high watermark}`` last seen (metrics: ConsumerLag)."""

    @abc.abstractmethod
    def fetch_rates(self) -> List[float]:
        """The one-minute rate of Fetch requests answered by each broker each fetcher fetches from (metrics:
        MinFetchRate is the smallest)."""

    @abc.abstractmethod
    def counters(self) -> FetchCounters:
        """Fetch requests answered, their time and the fetch errors since the fetchers started, summed (metrics)."""

    @abc.abstractmethod
    def shutdown(self, timeout: float = 10.0) -> None:
        """End the fetchers, waiting at most *timeout* seconds."""


class NoFetchers(Fetchers):
    """The fetchers of a member that fetches nothing (before it starts, or a coordinating-only member)."""

    def assign(self, generation: int, parts: Dict[TP, PartitionTopicInfo]) -> None:
        pass

    def stop_all(self, generation: int, timeout: Optional[float] = None) -> None:
        pass

    def highwaters(self) -> Dict[TP, int]:
        return {}

    def fetch_rates(self) -> List[float]:
        return []

    def counters(self) -> FetchCounters:
        return FetchCounters()

    def shutdown(self, timeout: float = 10.0) -> None:
        pass


class FetcherManager(Fetchers):
    """``num.consumer.fetchers`` fetcher threads; partitions are spread over them by a stable hash. Each thread
    checks *lease* before it hands a chunk to a stream."""

    def __init__(self, config, bootstrap_servers, on_error=None, thread_class=None, on_reset=None, lease=None):
        self.config = config
        thread_class = thread_class or FETCHER_THREADS[config.fetch_engine]
        self.fetchers = [thread_class(i, bootstrap_servers, config, on_error, on_reset, lease)
                         for i in range(config.num_consumer_fetchers)]
        for f in self.fetchers:
            f.start()

    def _index(self, tp):
        return (hash(tp[0]) * 31 + tp[1]) % len(self.fetchers)

    def assign(self, generation, parts):
        """parts: {(topic, partition): PartitionTopicInfo}; {} stops every fetcher."""
        split = [dict() for _ in self.fetchers]
        for tp, part in parts.items():
            split[self._index(tp)][tp] = part
        for f, w in zip(self.fetchers, split):
            f.assign(generation, w)

    def highwaters(self):
        """``{(topic, partition): high watermark}`` the fetchers last saw (metrics: ConsumerLag)."""
        from kafka import TopicPartition
        out = {}
        for f in self.fetchers:
            consumer = f._consumer
            if consumer is None:
                continue
            for tp in list(f._assignment):
                try:
                    hw = consumer.highwater(TopicPartition(*tp))
                except Exception:
                    continue
                if hw is not None:
                    out[tp] = hw
        return out

    def fetch_rates(self):
        """Each fetcher thread's one-minute rates of Fetch responses per broker it fetches partitions from
        (:meth:`FetcherThread.fetch_rates_now`; MinFetchRate is the smallest)."""
        return [rate for f in self.fetchers for rate in f.fetch_rates_now()]

    def counters(self):
        """The fetcher threads' counters, summed (read without a lock: each is a plain number, written under its
        fetcher's count lock or by one thread)."""
        return FetchCounters(requests=sum(f.fetches for f in self.fetchers),
                             seconds=sum(f.fetch_seconds for f in self.fetchers),
                             errors=sum(f.errors for f in self.fetchers))

    def stop_all(self, generation, timeout=None):
        """Stop every fetcher, within *timeout* seconds in all when given. Never raises: a fetcher that cannot apply
        "stop" in time (its client broken, waiting for unreachable brokers, or its thread gone) applies it when it
        can (the latest assignment wins), and the streams are fenced by the generation meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for f in self.fetchers:
            try:
                f.assign(generation, {}, None if deadline is None else max(0.01, deadline - time.monotonic()))
            except Exception as e:
                log.warning("fetcher %s did not stop cleanly: %s", f.name, e)

    def shutdown(self, timeout=10.0):
        for f in self.fetchers:
            f.shutdown()
        deadline = time.monotonic() + timeout
        for f in self.fetchers:
            f.join(max(0.0, deadline - time.monotonic()))
