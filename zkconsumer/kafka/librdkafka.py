"""The librdkafka fetch engine (``fetch.engine=librdkafka``): the fetcher threads read through confluent-kafka.

:class:`RdKafkaFetchClient` gives a ``confluent_kafka.Consumer`` in assign mode the small part of kafka-python's
``KafkaConsumer`` interface a :class:`~zkconsumer.consumer.fetcher.FetcherThread` uses (assign, seek,
seek_to_beginning/end, position, poll, highwater, beginning/end offsets, close), so everything around the client
stays the same: the rebalancer's generations and stream fencing, the session lease checked before each hand-off,
the bounded stream queues, the out-of-range confirmation, offsets kept by zkconsumer's stores.

librdkafka joins no group here: it is only ever ``assign``-ed, never ``subscribe``-d, and never commits (its
``group.id`` is a private one, required by the client). What it adds over kafka-python is its own fetch pipeline
in C (prefetching per partition, bounded by ``queued.max.messages.kbytes``: ``fetch.message.max.bytes`` x
``queued.max.message.chunks``, at least 16 MiB, so memory stays bounded, if higher than with the default engine).
Records become kafka-python ``ConsumerRecord`` tuples, the type the streams hand out with either engine. Where
zkconsumer/_rdkafka_direct.c is built and can bind the librdkafka confluent-kafka loaded (:func:`direct_reader`),
the client's partitions are routed to a queue of its own and read from librdkafka's message structs, with no
confluent-kafka ``Message`` per record; else from ``consume()``'s Messages (in C by zkconsumer/_rdkafka_records.c
when it is built, else by the same loop in Python, ``_from_messages_py``).

Offsets: ``assign`` + ``seek`` are buffered and applied as one librdkafka ``assign`` with explicit start offsets at
the next ``poll``/``position`` (librdkafka cannot seek a partition it has not started fetching); a reset position
(``seek_to_beginning``/``seek_to_end``) is resolved with ``get_watermark_offsets`` (ListOffsets), so the reset
offset is known, as the default engine resolves it (within a bounded wait: a partition without a leader is handed to
librdkafka with the logical offset, and its reset point is known from its first records). librdkafka resets nothing
by itself (``auto.offset.reset=error``): an out-of-range position is raised from :meth:`RdKafkaFetchClient.poll`
as kafka-python's ``OffsetOutOfRangeError``, and the fetcher thread resets it and records the new position.

Brokers: librdkafka connects lazily and retries forever, so building the client asks a broker for metadata within
``socket.timeout.ms``; unreachable brokers fail the client, and with it the rebalance attempt, as kafka-python's
bootstrap does (the member goes DEGRADED after ``rebalance.max.retries`` and builds its next client from the brokers
registered in ZooKeeper then).
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import ConfigError

__all__ = ["RdKafkaFetchClient", "available", "client_settings", "direct_reader"]

log = logging.getLogger(__name__)

_BEGINNING, _END = -2, -1
# Messages per poll() (one consume() call). Each Message is an object the cyclic garbage collector tracks: 10,000 at
# once live through collections into the old generations and make full collections walk them (the fetcher thread
# spends ~2 us of CPU per record, ~1 us with the collector off); a batch well under the collector's first threshold
# (700 allocations) dies young: ~0.7 us. Taking several such batches per poll() into larger chunks costs more (~1 us).
CONSUME_BATCH = 200
# Messages per poll() of the direct reader (direct_reader): its records are not tracked by the collector, so larger
# batches only spread each poll's fixed cost (the fetcher's loop, a chunk per partition) over more records: process
# CPU per record at 200 / 1,000 / 2,000 / 5,000, one bench.cpu run each: 2.61 / 1.88 / 1.63 / 1.81 us. A batch holds
# only what librdkafka had queued (within queued.max.messages.kbytes): it waits for the first message only. A stream
# queue holds queued.max.message.chunks chunks of one poll's records of a partition: up to 2,000 records each (200 on
# the Message path), never more than librdkafka had queued.
DIRECT_BATCH = 2000
# How often the direct reader routes the assigned partitions again: librdkafka drops a partition's forward when it
# stops fetching it (an assign that replaces the assignment stops and restarts a kept partition after the call
# returns), and its fetched messages then wait in the partition's own queue until routed again (nothing is lost or
# reordered: routing moves them to the reader's queue ahead of anything fetched later).
REROUTE_S = 0.2


def available() -> Optional[str]:
    """None when confluent-kafka can be imported, else why not."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def client_settings(config: Any, servers: str) -> Dict[str, Any]:
    """librdkafka settings equivalent to the old consumer's fetch keys."""
    from ..core.kafka_security import of
    per_partition = config.fetch_message_max_bytes
    return dict(of(config).librdkafka_settings(), **{
        "bootstrap.servers": servers,
        "group.id": "zkconsumer-fetch-" + uuid.uuid4().hex[:12],  # required by the client; never joined
        "client.id": config.client_id or config.group_id or "zkconsumer",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        # the fetcher thread resets (and records) out-of-range positions; librdkafka reports them
        "auto.offset.reset": "error",
        "max.partition.fetch.bytes": per_partition,
        "fetch.max.bytes": max(per_partition, min(config.fetch_max_bytes, 50 * 1024 * 1024)),
        "fetch.min.bytes": max(1, config.fetch_min_bytes),
        "fetch.wait.max.ms": config.fetch_wait_max_ms,
        "socket.timeout.ms": max(10, config.socket_timeout_ms),
        "retry.backoff.ms": max(1, config.refresh_leader_backoff_ms),
        # the prefetch bound: as much per partition as the streams' queues hold, at least 1 MiB
        "queued.max.messages.kbytes": max(16 * 1024, per_partition * max(1, config.queued_max_message_chunks) // 1024),
        "check.crcs": True,
    }, **_queue_backoff(config))


def _queue_backoff(config: Any) -> Dict[str, Any]:
    """``fetch.queue.backoff.ms``: how long librdkafka waits before fetching a partition again after its prefetch
    queue was full. Its default, 1000 ms, idles a consumer that reads a backlog faster than one fetch per second:
    raw confluent-kafka read the consume bench's backlog at ~150-215k msg/s with it and ~1M msg/s with 10 ms, and
    this engine went from ~150k to ~400k. The old consumer's fetcher thread starts its next fetch as soon as its
    queue has room; here the wait is ``fetch.wait.max.ms`` (the longest a fetch may wait anyway; 100 ms by default),
    at least 10 ms (at 0 librdkafka's broker thread spins a core while the queue stays full) and at most librdkafka's
    default. The key exists from librdkafka 2.2."""
    import confluent_kafka
    if confluent_kafka.libversion()[1] < 0x02020000:
        return {}
    return {"fetch.queue.backoff.ms": min(1000, max(10, int(config.fetch_wait_max_ms)))}


_bound: Optional[str] = None  # the librdkafka path the direct reader is bound to, "" when it cannot bind
_bind_lock = threading.Lock()
# librdkafka's errors for a partition's existence (a deleted topic, a partition gone, one not known yet), which the
# Message path never sees (confluent-kafka's error_cb drops them without a callback set): logged, not raised, so the
# fetcher does not back off its other partitions; the group's rebalance follows the topic's change in ZooKeeper
_EXISTENCE_ERRORS = {"_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART"}


def _loaded_librdkafka() -> Optional[str]:
    """The file of the librdkafka confluent-kafka loaded (from /proc/self/maps; None where there is none, or where
    more than one librdkafka is mapped and none is confluent-kafka's own copy)."""
    import confluent_kafka
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[5].strip() for line in maps
                     if len(line.split(None, 5)) == 6 and "librdkafka" in os.path.basename(line.split(None, 5)[5])}
    except OSError:
        return None
    own = os.path.dirname(os.path.abspath(confluent_kafka.__file__)) + ".libs" + os.sep
    bundled = [p for p in paths if p.startswith(own)]
    if len(bundled) == 1:
        return bundled[0]
    return paths.pop() if len(paths) == 1 else None


def direct_reader(consumer: Any) -> Optional[Any]:
    """A ``zkconsumer._rdkafka_direct.Reader`` of *consumer* (a ``confluent_kafka.Consumer``), or None where it is not
    built, the loaded librdkafka cannot be bound (another version than confluent-kafka's, not found), or
    ``ZKCONSUMER_RDKAFKA_DIRECT=0`` is set (the engine then reads ``consume()``'s Messages)."""
    global _bound
    if _rdkafka_direct is None or os.environ.get("ZKCONSUMER_RDKAFKA_DIRECT", "1") == "0":
        return None
    import confluent_kafka
    if confluent_kafka.version()[0].split(".")[0] not in ("1", "2"):
        # the client handle's place in the Consumer object is known for confluent-kafka 1.x and 2.x
        log.info("librdkafka engine: reading confluent-kafka's Messages (confluent-kafka %s is not known to the direct "
                 "reader)", confluent_kafka.version()[0])
        return None
    with _bind_lock:  # fetcher threads build their clients concurrently
        if _bound is None:
            path = _loaded_librdkafka()
            try:
                if path is None:
                    raise OSError("the librdkafka confluent-kafka uses is not found in /proc/self/maps")
                version = _rdkafka_direct.bind(path)
                if version != confluent_kafka.libversion()[0]:
                    raise OSError("%s is librdkafka %s, confluent-kafka uses %s"
                                  % (path, version, confluent_kafka.libversion()[0]))
                _bound = path
            except OSError as e:
                log.info("librdkafka engine: reading confluent-kafka's Messages (%s)", e)
                _bound = ""
    if not _bound or type(consumer) is not confluent_kafka.Consumer:
        return None
    try:
        return _rdkafka_direct.Reader(consumer)
    except (TypeError, RuntimeError) as e:
        log.info("librdkafka engine: reading confluent-kafka's Messages (%s)", e)
        return None


class RdKafkaFetchClient:
    """A confluent_kafka.Consumer behind the KafkaConsumer calls a FetcherThread makes (see the module docstring).
    Used from the fetcher thread only, like the KafkaConsumer it stands in for; :meth:`highwater` alone may be
    called from any thread (it reads a copy)."""

    def __init__(self, config: Any, servers: Any):
        why = available()
        if why is not None:
            raise ConfigError("fetch.engine", "librdkafka", "kafka-python, or install confluent-kafka for librdkafka",
                              "pip install 'zkconsumer[librdkafka]' (%s)" % why)
        from confluent_kafka import Consumer
        from confluent_kafka import KafkaError as RdError
        from kafka import TopicPartition
        from kafka.consumer.fetcher import ConsumerRecord
        self._record, self._tp, self._eof = ConsumerRecord, TopicPartition, RdError._PARTITION_EOF
        servers = ",".join(servers) if isinstance(servers, (list, tuple)) else str(servers)
        self._c = Consumer(client_settings(config, servers))
        self._timeout_s = max(1.0, config.socket_timeout_ms / 1000.0)
        try:
            # librdkafka connects lazily and retries forever: ask one broker for one topic's metadata now, so that
            # unreachable brokers fail this client (and the rebalance attempt that needs it) within
            # socket.timeout.ms, as kafka-python's bootstrap does; the next attempt builds a client from the brokers
            # registered then. __consumer_offsets: any broker answers for it, existing or not, and nothing is created
            self._c.list_topics(topic="__consumer_offsets", timeout=self._timeout_s)
        except BaseException:
            self._c.close()
            raise
        try:
            self._reader = direct_reader(self._c)
        except BaseException:
            self._c.close()
            raise
        self._routed_at = 0.0
        self._reset = _BEGINNING if config.auto_offset_reset == "smallest" else _END
        self._assigned: List[Any] = []          # kafka TopicPartitions, in assign order
        self._pending: Optional[Dict[Any, int]] = None  # tp -> start offset (or _BEGINNING/_END) not yet applied
        self._position: Dict[Any, int] = {}     # tp -> next offset to hand out
        self._hw: Dict[Any, int] = {}           # tp -> high watermark (see _refresh_highwaters)
        self._hw_at = 0.0
        self._out_of_range: Dict[Any, int] = {}  # tp -> position, raised at the next poll (records came first)
        self._deferred: Optional[Exception] = None  # another fetch error, raised at the next poll

    # -- assignment --------------------------------------------------------------------------------------------
    def assign(self, tps: Iterable[Any]) -> None:
        """Replace the assignment; positions of partitions kept stay, new ones start at auto.offset.reset unless
        seeked before the next poll."""
        self._assigned = list(tps)
        self._position = {tp: self._position[tp] for tp in self._assigned if tp in self._position}
        if self._assigned:
            self._pending = {}
        else:
            self._pending = None
            self._c.unassign()
            if self._reader is not None:
                self._reader.route([])

    def seek(self, tp: Any, offset: int) -> None:
        self._want(tp, int(offset))

    def seek_to_beginning(self, *tps: Any) -> None:
        for tp in tps or self._assigned:
            self._want(tp, _BEGINNING)

    def seek_to_end(self, *tps: Any) -> None:
        for tp in tps or self._assigned:
            self._want(tp, _END)

    def _want(self, tp: Any, offset: int) -> None:
        if tp not in self._assigned:
            raise ValueError("partition %s-%d is not assigned" % (tp.topic, tp.partition))
        if self._pending is None:
            self._pending = {t: self._position[t] for t in self._assigned if t in self._position}
        self._pending[tp] = offset
        self._position.pop(tp, None)

    def _apply(self, wait_s: Optional[float] = None) -> None:
        """Resolve reset positions (ListOffsets, within *wait_s* seconds in all, default ``socket.timeout.ms``) and
        hand librdkafka one assignment with explicit offsets."""
        if self._pending is None:
            return
        from confluent_kafka import TopicPartition as RdTP
        self._route()  # before librdkafka starts fetching them (and before any state changes: it may fail)
        pending, self._pending = self._pending, None
        deadline = time.monotonic() + (self._timeout_s if wait_s is None else wait_s)
        rd = []
        for tp in self._assigned:
            off = pending.get(tp, self._position.get(tp, self._reset))
            if off < 0:
                try:
                    low, high = self._c.get_watermark_offsets(RdTP(tp.topic, tp.partition),
                                                              timeout=max(0.1, deadline - time.monotonic()))
                except Exception as e:  # e.g. a partition without a leader, or librdkafka's metadata lacks it
                    log.info("%s-%d: the reset offset is not known yet (%s); librdkafka resolves it when fetching",
                             tp.topic, tp.partition, e)
                    rd.append(RdTP(tp.topic, tp.partition, off))  # the logical offset: resolved by librdkafka
                    continue
                off = low if off == _BEGINNING else high
            self._position[tp] = off
            rd.append(RdTP(tp.topic, tp.partition, off))
        self._c.assign(rd)

    def position(self, tp: Any, timeout_ms: Optional[int] = None) -> Optional[int]:
        self._apply(None if timeout_ms is None else timeout_ms / 1000.0)
        return self._position.get(tp)

    def settled_position(self, tp: Any, wait_s: float) -> Optional[int]:
        """The position of *tp* once its reset is resolved (None while not known), waiting at most *wait_s*."""
        self._apply(wait_s)
        return self._position.get(tp)

    # -- fetching ----------------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int = 0) -> Dict[Any, list]:
        """``{TopicPartition: [ConsumerRecord]}`` of what librdkafka has fetched, in offset order per partition."""
        self._apply()
        if not self._assigned:
            return {}
        if self._out_of_range or self._deferred is not None:
            self._raise_deferred()
        if self._reader is not None:
            out = self._read_direct(self._reader, timeout_ms)
        else:
            msgs = self._c.consume(num_messages=CONSUME_BATCH, timeout=timeout_ms / 1000.0)
            out, err = from_messages(msgs, self._record, self._tp, self._eof)
            if err is not None:  # rare: handle the failed message, convert the rest (nothing fetched is dropped)
                self._after_error(msgs, out, err)
        for tp, recs in out.items():
            if recs:
                self._position[tp] = recs[-1][3] + 1
        self._refresh_highwaters()
        if not out and (self._out_of_range or self._deferred is not None):
            self._raise_deferred()
        return out

    def _route(self) -> None:
        if self._reader is not None:
            self._reader.route([(tp.topic, tp.partition) for tp in self._assigned])
            self._routed_at = time.monotonic()

    def _read_direct(self, reader: Any, timeout_ms: int) -> Dict[Any, list]:
        """What the direct reader has (its errors noted as ``_after_error`` notes a failed message's), and anything
        found in the consumer's own queue: serving it (confluent-kafka's ``consume``) runs its callbacks on this thread
        as its own calls do, and a message there (a partition librdkafka fetched before it was routed, which routing
        before ``assign`` should prevent) is merged in offset order rather than left behind."""
        from confluent_kafka import KafkaError as RdError
        from kafka.errors import KafkaError
        if time.monotonic() - self._routed_at >= REROUTE_S:
            reader.reroute()
            self._routed_at = time.monotonic()
        out, errors = reader.read(DIRECT_BATCH, max(0, int(timeout_ms)), self._record, self._tp, self._eof)
        for code, name, reason, topic, partition, offset in errors:
            if code == RdError._AUTO_OFFSET_RESET and topic is not None:
                self._out_of_range[self._tp(topic, partition)] = offset if offset >= 0 else -1
            elif name in _EXISTENCE_ERRORS:
                log.info("librdkafka engine: %s", reason)
            elif self._deferred is None:
                self._deferred = KafkaError('librdkafka: KafkaError{code=%s,val=%d,str="%s"}' % (name, code, reason))
        stray = self._c.consume(num_messages=CONSUME_BATCH, timeout=0)
        if stray:
            more, err = from_messages(stray, self._record, self._tp, self._eof)
            if err is not None:
                self._after_error(stray, more, err)
            for tp, recs in more.items():
                log.warning("librdkafka engine: %d record(s) of %s-%d from offset %d came through the consumer's own "
                            "queue; merged in offset order", len(recs), tp.topic, tp.partition, recs[0][3])
                merged = out.setdefault(tp, [])
                merged.extend(recs)
                merged.sort(key=lambda r: r[3])
        return out

    def _after_error(self, msgs: List[Any], out: Dict[Any, list], err: Any) -> None:
        """After a failed message in *msgs* (its error *err*): note an out-of-range position, or else the first
        other error, for the next poll to raise, and add the records of the messages after it to *out*; the same for
        each later failed message."""
        from confluent_kafka import KafkaError as RdError
        from kafka.errors import KafkaError
        TopicPartition = self._tp
        while err is not None:
            code = err.code()
            i = next(i for i, m in enumerate(msgs) if getattr(m.error(), "code", lambda: None)() == code)
            m = msgs[i]
            offset = m.offset()
            if code == RdError._AUTO_OFFSET_RESET and m.topic() is not None:
                self._out_of_range[TopicPartition(m.topic(), m.partition())] = offset if offset is not None else -1
            elif self._deferred is None:
                self._deferred = KafkaError("librdkafka: %s" % err)
            msgs = msgs[i + 1:]
            more, err = from_messages(msgs, self._record, TopicPartition, self._eof)
            for tp, recs in more.items():
                out.setdefault(tp, []).extend(recs)

    def _raise_deferred(self) -> None:
        """Raise what a poll found after records it returned: an out-of-range position (as kafka-python does,
        ``OffsetOutOfRangeError({tp: position})``), then any other fetch error."""
        from kafka.errors import OffsetOutOfRangeError
        oor = {tp: off for tp, off in self._out_of_range.items() if tp in self._assigned}
        self._out_of_range = {}
        if oor:
            raise OffsetOutOfRangeError(oor)
        err, self._deferred = self._deferred, None
        if err is not None:
            raise err

    def _refresh_highwaters(self) -> None:
        """librdkafka's cached high watermarks (from its fetch responses, no request), copied at most twice a second
        on the fetcher thread: other threads (metrics) read the copy and never call into the client, which
        blocked a metrics read for good while the fetcher thread sat in ``consume``."""
        now = time.monotonic()
        if now - self._hw_at < 0.5:
            return
        self._hw_at = now
        from confluent_kafka import TopicPartition as RdTP
        hw = {}
        for tp in self._assigned:
            try:
                _, high = self._c.get_watermark_offsets(RdTP(tp.topic, tp.partition), cached=True)
            except Exception:
                continue
            if high is not None and high >= 0:
                hw[tp] = high
        self._hw = hw

    def highwater(self, tp: Any) -> Optional[int]:
        """The partition's high watermark as last seen by the fetcher thread (any thread may ask)."""
        return self._hw.get(tp)

    def _watermarks(self, tps: Iterable[Any], index: int) -> Dict[Any, int]:
        from confluent_kafka import TopicPartition as RdTP
        return {tp: self._c.get_watermark_offsets(RdTP(tp.topic, tp.partition), timeout=self._timeout_s)[index]
                for tp in tps}

    def beginning_offsets(self, tps: Iterable[Any]) -> Dict[Any, int]:
        return self._watermarks(tps, 0)

    def end_offsets(self, tps: Iterable[Any]) -> Dict[Any, int]:
        return self._watermarks(tps, 1)

    def close(self, autocommit: bool = False) -> None:
        try:
            if self._reader is not None:
                self._reader.close()  # first: the consumer's close waits for the reader's references to its queues
        finally:
            self._c.close()


def _from_messages_py(msgs: List[Any], record_cls: Any, tp_cls: Any,
                      eof_code: int) -> Tuple[Dict[Any, list], Optional[Any]]:
    """``({tp_cls(topic, partition): [record_cls record]}, error or None)`` of a ``consume()`` result: what
    zkconsumer/_rdkafka_records.c computes, in Python (its docstring has the fields). Messages with the error code
    ``eof_code`` are skipped; at any other error the records so far are returned with that error."""
    out: Dict[Any, list] = {}
    new = tuple.__new__
    last_tp = None
    bucket: list = []
    for m in msgs:
        err = m.error()
        if err is not None:
            if err.code() == eof_code:
                continue
            return out, err
        topic, partition = m.topic(), m.partition()
        if last_tp is None or last_tp[0] != topic or last_tp[1] != partition:
            last_tp = tp_cls(topic, partition)
            bucket = out.setdefault(last_tp, [])
        key, value, headers = m.key(), m.value(), m.headers()
        ts_type, ts = m.timestamp()
        hs: list
        if headers:
            hs = [tuple(h) for h in headers]  # (str key, bytes or None value)
            hsize = sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0) for k, v in hs)
        else:
            hs, hsize = [], -1
        bucket.append(new(record_cls, (topic, partition, -1, m.offset(), ts, 1 if ts_type == 2 else 0, key, value,
                                       hs, None, len(key) if key is not None else -1,
                                       len(value) if value is not None else -1, hsize)))
    return out, None


_Converter = Callable[[List[Any], Any, Any, int], Tuple[Dict[Any, list], Optional[Any]]]
_from_messages_c: Optional[_Converter]
try:  # the same conversion in C (zkconsumer/_rdkafka_records.c), when built: about a third of the Python loop's time
    from .._rdkafka_records import from_messages as _from_messages_c
except ImportError:  # no C compiler when installed
    _from_messages_c = None
from_messages: _Converter = _from_messages_c if _from_messages_c is not None else _from_messages_py
CONVERTER = "c" if _from_messages_c is not None else "python"
try:  # the direct reader (zkconsumer/_rdkafka_direct.c), when built
    from .. import _rdkafka_direct
except ImportError:  # no C compiler when installed
    _rdkafka_direct = None  # type: ignore[assignment]
