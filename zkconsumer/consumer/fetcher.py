"""Fetcher threads: read owned partitions from their leaders and fill the streams' bounded queues.

Each :class:`FetcherThread` owns one kafka-python ``KafkaConsumer`` used only for manual assignment (``assign`` +
``seek`` + ``poll``: no broker-side group, no commits). Brokers come from ZooKeeper's ``/brokers/ids`` (the
bootstrap list); partition leaders come from Kafka metadata, and kafka-python re-finds them after a leader change
(backing off ``refresh.leader.backoff.ms``). Partitions are spread over ``num.consumer.fetchers`` threads.

The rebalancer changes a fetcher's work only through :meth:`FetcherThread.assign`, which the fetcher applies on its
own thread (a KafkaConsumer is not thread-safe) and acknowledges; ``assign({})`` is "stop fetching". A chunk that
cannot be queued because the stream is full is retried until it fits or the assignment changes — the bounded queue
is the back-pressure, so memory stays bounded by the queue settings whatever the backlog.
"""
import logging
import queue
import threading
import time

from ..errors import ClusterUnavailableError, MessageTooLargeError, ZkConsumerError
from .stream import Chunk
from .record_batch import payload_bytes

log = logging.getLogger(__name__)


def consumer_settings(config):
    """kafka-python settings equivalent to the old consumer's fetch keys (Kafka's ConsumerConfig.scala)."""
    settings = dict(
        client_id=config.client_id or config.group_id or "zkconsumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if config.auto_offset_reset == "smallest" else "latest",
        max_partition_fetch_bytes=config.fetch_message_max_bytes,
        fetch_min_bytes=config.fetch_min_bytes,
        fetch_max_wait_ms=config.fetch_wait_max_ms,
        request_timeout_ms=max(config.socket_timeout_ms, config.fetch_wait_max_ms + 5000),
        bootstrap_timeout_ms=config.socket_timeout_ms,  # a new fetch client gives up on unreachable brokers
        retry_backoff_ms=config.refresh_leader_backoff_ms,
        max_poll_records=100000,
        check_crcs=True,
    )
    from ..kafka_security import of
    settings.update(of(config).client_kwargs())
    if "socket.receive.buffer.bytes" in config.explicit_keys:
        # only when asked for: a fixed SO_RCVBUF (Scala's 64 KiB default) turns off the kernel's autotuning
        settings["receive_buffer_bytes"] = config.socket_receive_buffer_bytes
    return settings


class FetcherThread(threading.Thread):
    def __init__(self, index, bootstrap_servers, config, on_error=None):
        super().__init__(name="zkconsumer-fetcher-%d" % index, daemon=True)
        self.bootstrap_servers = bootstrap_servers
        self.config = config
        self.on_error = on_error or (lambda tp, exc: None)
        self._consumer = None
        self._lock = threading.Condition()
        self._pending = None        # (generation, {tp: (offset or None, queue)}, done_event)
        self._assignment = {}       # tp -> queue
        self._generation = -1
        self._stopped = False
        self._apply_error = None
        self._last_range_check = 0.0
        self._range_suspects = {}   # tp -> position found out of range by ListOffsets at the last check
        self.resets = {}            # (t, p) -> offset auto.offset.reset chose at the last assignment
        self.failures = 0           # consecutive failures of the fetch loop
        self.fetches = 0            # fetch passes completed (metrics: MinFetchRate)
        self.fetch_seconds = 0.0    # time spent in those passes' fetch requests (metrics)
        self.errors = 0             # fetch errors, retried or not (metrics)
        self.started_at = time.monotonic()
        self._next = {}             # TopicPartition -> next offset to hand over (re-fetched from after a failure)

    # -- called by the rebalancer ------------------------------------------------------------------------------
    def assign(self, generation, work, timeout=30.0):
        """Replace this fetcher's work: {tp: (start offset or None for auto.offset.reset, queue)}. Blocks until
        the fetcher has applied it (so when assign({}) returns, nothing more is put on any queue)."""
        done = threading.Event()
        with self._lock:
            self._pending = (generation, dict(work), done)
            self._lock.notify_all()
        if not self.is_alive():
            self._apply_pending()
        if not done.wait(timeout):
            raise ClusterUnavailableError("fetcher %s did not apply a new assignment within %.0f s"
                                          % (self.name, timeout))
        error, self._apply_error = self._apply_error, None
        if error is not None:  # e.g. brokers unreachable: the rebalance attempt fails and is retried
            raise error
        return dict(self.resets) if work else {}

    def shutdown(self):
        with self._lock:
            self._stopped = True
            self._lock.notify_all()

    # -- fetcher thread ----------------------------------------------------------------------------------------
    def _changing(self):
        return self._pending is not None or self._stopped

    def _apply_pending(self):
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        generation, work, done = pending
        self._apply_error = None
        try:
            if work:
                consumer = self._ensure_consumer()
                consumer.assign(list(work))
                seek_begin, seek_end = [], []
                for tp, (offset, _) in work.items():
                    if offset is None or offset < 0:
                        (seek_begin if self.config.auto_offset_reset == "smallest" else seek_end).append(tp)
                    else:
                        consumer.seek(tp, offset)
                if seek_begin:
                    consumer.seek_to_beginning(*seek_begin)
                if seek_end:
                    consumer.seek_to_end(*seek_end)
                self._resolve_resets(consumer, seek_begin + seek_end)
            else:
                self.resets = {}  # nothing assigned, nothing reset (a stale map once failed this empty assignment)
                if self._consumer is not None:
                    self._consumer.assign([])
            self._assignment = {tp: q for tp, (_, q) in work.items()}
            self._next = {tp: off for tp, (off, _) in work.items() if off is not None and off >= 0}
            if work:
                tp_type = type(next(iter(work)))
                for (t, p), off in self.resets.items():
                    self._next[tp_type(t, p)] = off
            self._generation = generation
        except Exception as e:
            log.error("fetcher %s could not apply its assignment: %r", self.name, e, exc_info=True)
            self._assignment = {}
            self._apply_error = e
        finally:
            done.set()

    def _resolve_resets(self, consumer, tps):
        """The offsets auto.offset.reset chose (ListOffsets now, not lazily at the first fetch), so the connector
        can count them as consumed and commit them, as the Scala consumer did (kafka 1.1.1
        core/src/main/scala/kafka/consumer/ConsumerFetcherThread.scala handleOffsetOutOfRange, and
        PartitionTopicInfo.resetConsumeOffset): a message produced to an empty partition while the group is down
        is then delivered at the next start instead of being skipped by another reset to the end."""
        self.resets = {}
        for tp in tps:
            try:
                off = consumer.position(tp, timeout_ms=self.config.socket_timeout_ms)
            except Exception as e:
                log.warning("could not resolve the auto.offset.reset position of %s-%d yet: %s",
                            tp.topic, tp.partition, e)
                continue
            if off is not None:
                self.resets[(tp.topic, tp.partition)] = off

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
                from ..kafka_connect_errors import connect_error
                from ..kafka_security import of
                raise connect_error("reach brokers", servers, of(self.config), e) from e
            # decode v2 record batches with our own decoder (same records; kafka-python's for anything else)
            from .fast_records import install
            install(self._consumer)
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
            if self._consumer is not None:
                try:
                    self._consumer.close(autocommit=False)
                except Exception:
                    pass

    def _loop(self):
        from kafka.consumer.fetcher import RecordTooLargeError
        from kafka.errors import KafkaError
        while True:
            with self._lock:
                while not self._stopped and self._pending is None and not self._assignment:
                    self._lock.wait(1.0)
                if self._stopped:
                    break
            if self._pending is not None:
                self._apply_pending()  # an error goes back to the rebalancer through assign()
                continue
            polled_at = time.monotonic()
            try:
                batches = self._consumer.poll(timeout_ms=20)  # short: assignment changes wait for this
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
                q = self._assignment.get(tp)
                if q is None or not records:
                    continue
                chunk = Chunk(generation, (tp.topic, tp.partition), records, payload_bytes(records))
                if not self._put(q, chunk):
                    break  # assignment changing: the rest of this poll is dropped (it will be re-fetched)
                self._next[tp] = records[-1].offset + 1
            self.failures = 0  # a whole pass without failure
            self.fetches += 1
            self.fetch_seconds += time.monotonic() - polled_at

    def _rewind(self):
        """After a failure, fetch again from what was handed over last: records polled but not put on a queue
        would otherwise be skipped (kafka-python's position already moved past them)."""
        consumer = self._consumer
        if consumer is None:
            return
        for tp, off in list(self._next.items()):
            if tp in self._assignment:
                try:
                    consumer.seek(tp, off)
                except Exception as e:
                    log.warning("fetcher %s could not seek %s-%d back to %d: %s", self.name, tp.topic, tp.partition,
                                off, e)

    def _surface(self, exc):
        """Put a FetchError on each stream queue this fetcher feeds (current generation, never blocking)."""
        from ..errors import FetchError
        by_queue = {}
        for tp, q in list(self._assignment.items()):
            by_queue.setdefault(id(q), (q, []))[1].append("%s-%d" % (tp.topic, tp.partition))
        for q, parts in by_queue.values():
            err = FetchError("fetching %s failed %d times in a row: %s: %s"
                             % (", ".join(sorted(parts)), self.failures, type(exc).__name__, exc))
            try:
                q.put_nowait(Chunk(self._generation, None, err))
            except queue.Full:
                pass  # the stream is behind anyway; the next failure tries again

    def _check_out_of_range(self):
        """Apply auto.offset.reset to a position the log no longer (or not yet) has, when the broker did not say so.

        A real broker answers a fetch outside the log with OFFSET_OUT_OF_RANGE and kafka-python resets by itself;
        some Kafka-protocol brokers (tansu 0.6) return nothing. A high watermark alone is no proof: right after a
        leader election the new leader's watermark can lag the old one (KIP-207, KAFKA-2334), and resetting then
        would skip (largest) or replay (smallest) a caught-up partition. So a position counts as out of range only
        when a fresh ListOffsets (earliest and latest, from the current leader) says so twice, at least a second
        apart, with the position unchanged; checked at most once a second, only while fetches return nothing."""
        now = time.monotonic()
        if now - self._last_range_check < 1.0 or self._consumer is None:
            return
        self._last_range_check = now
        consumer = self._consumer
        suspects = {}
        for tp in list(self._assignment):
            try:
                hw = consumer.highwater(tp)
                pos = consumer.position(tp, timeout_ms=0) if hw is not None else None
            except Exception:
                continue
            if hw is not None and pos is not None and pos > hw:
                suspects[tp] = pos
        confirmed = {}
        if suspects:
            try:
                latest = consumer.end_offsets(list(suspects))
                earliest = consumer.beginning_offsets(list(suspects))
            except Exception as e:  # e.g. OFFSET_NOT_AVAILABLE while a new leader's watermark catches up
                log.info("cannot confirm the log range of %s yet: %s", sorted(map(tuple, suspects)), e)
                latest = earliest = {}
            for tp, pos in suspects.items():
                if tp in latest and tp in earliest and not earliest[tp] <= pos <= latest[tp]:
                    confirmed[tp] = (pos, earliest[tp], latest[tp])
        previous, self._range_suspects = self._range_suspects, {tp: v[0] for tp, v in confirmed.items()}
        for tp, (pos, first, last) in confirmed.items():
            if previous.get(tp) != pos:
                continue  # seen once: confirm on the next check
            reset = self.config.auto_offset_reset
            log.error("Current offset %d for partition [%s,%d] out of range (log %d..%d); resetting to the %s "
                      "offset (auto.offset.reset=%s)", pos, tp.topic, tp.partition, first, last,
                      "earliest" if reset == "smallest" else "latest", reset)
            if reset == "smallest":
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek_to_end(tp)
            self._range_suspects.pop(tp, None)

    def _put(self, q, chunk):
        lease = getattr(self, "lease", None)
        if lease is not None and not lease.fresh():  # no hand-off from a stale lease
            if not lease.wait_fresh(self._changing):
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


class RdKafkaFetcherThread(FetcherThread):
    """A fetcher thread reading through librdkafka (``fetch.engine=librdkafka``, :mod:`.librdkafka`): the same
    loop, hand-off, lease and queues; only the client differs."""

    def _ensure_consumer(self):
        if self._consumer is None:
            from ..kafka_connect_errors import connect_error
            from ..kafka_security import of
            from .librdkafka import RdKafkaFetchClient
            servers = self.bootstrap_servers() if callable(self.bootstrap_servers) else self.bootstrap_servers
            try:
                self._consumer = RdKafkaFetchClient(self.config, servers)
            except ZkConsumerError:  # e.g. confluent-kafka not installed (ConfigError)
                raise
            except Exception as e:  # confluent_kafka.KafkaException: no broker answered within socket.timeout.ms
                raise connect_error("reach brokers", servers, of(self.config), e) from e
        return self._consumer


FETCHER_THREADS = {"kafka-python": FetcherThread, "librdkafka": RdKafkaFetcherThread}


class FetcherManager:
    """``num.consumer.fetchers`` fetcher threads; partitions are spread over them by a stable hash."""

    def __init__(self, config, bootstrap_servers, on_error=None, thread_class=None):
        self.config = config
        thread_class = thread_class or FETCHER_THREADS[getattr(config, "fetch_engine", "kafka-python")]
        self.fetchers = [thread_class(i, bootstrap_servers, config, on_error)
                         for i in range(config.num_consumer_fetchers)]
        for f in self.fetchers:
            f.start()

    def _index(self, tp):
        return (hash(tp[0]) * 31 + tp[1]) % len(self.fetchers)

    def assign(self, generation, work):
        """work: {(topic, partition): (offset or None, queue)}; {} stops every fetcher. Returns {(t, p): offset}
        of the partitions auto.offset.reset positioned."""
        from kafka import TopicPartition
        split = [dict() for _ in self.fetchers]
        for (topic, partition), v in work.items():
            split[self._index((topic, partition))][TopicPartition(topic, partition)] = v
        resets = {}
        for f, w in zip(self.fetchers, split):
            resets.update(f.assign(generation, w) or {})
        return resets

    def highwaters(self):
        """``{(topic, partition): high watermark}`` the fetchers last saw (metrics: ConsumerLag)."""
        out = {}
        for f in self.fetchers:
            consumer = f._consumer
            if consumer is None:
                continue
            for tp in list(f._assignment):
                try:
                    hw = consumer.highwater(tp)
                except Exception:
                    continue
                if hw is not None:
                    out[(tp.topic, tp.partition)] = hw
        return out

    def fetch_rates(self):
        """Completed fetch passes per second of each fetcher thread since it started (MinFetchRate is the min)."""
        now = time.monotonic()
        return [f.fetches / max(1e-3, now - f.started_at) for f in self.fetchers]

    def stop_all(self, generation):
        """Stop every fetcher. Never raises: a fetcher that cannot apply "stop" (its client broken or its thread
        gone) puts nothing more on any queue either, and the streams are fenced by the generation anyway."""
        for f in self.fetchers:
            try:
                f.assign(generation, {})
            except Exception as e:
                log.warning("fetcher %s did not stop cleanly: %s", f.name, e)

    def shutdown(self, timeout=10.0):
        for f in self.fetchers:
            f.shutdown()
        deadline = time.monotonic() + timeout
        for f in self.fetchers:
            f.join(max(0.0, deadline - time.monotonic()))
