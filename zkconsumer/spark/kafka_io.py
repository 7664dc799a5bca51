"""Kafka access of the source through kafka-python (no JVM Kafka client is available here).

* :class:`LogEndProbe` (driver): the log end of many partitions: ``ListOffsets(latest)``, what every Kafka client
  uses, exact on Apache Kafka (the high watermark). With ``logEnd=fetch`` (``from_fetch``) it is instead the *high
  watermark of a fetch response*, for brokers that answer ListOffsets wrongly (tansu 0.6 gives the base offset of
  the last batch + 1 after multi-record produce batches): the probe seeks each partition to ``max(ListOffsets
  (latest), last known end)`` and polls once with a tiny fetch size.
* :func:`read_range` (executor): one KafkaConsumer per task, ``assign`` + ``seek`` + ``poll`` until the position
  reaches ``end`` (``kafkaConsumer.pollTimeoutMs`` bounds each wait for records, not the whole task), rows outside
  ``[start, end)`` trimmed, OffsetOutOfRange handled as Spark's ``KafkaDataConsumer``, rows yielded as
  ``pyarrow.RecordBatch``.
"""
from __future__ import annotations

import bisect
import logging
import time
from typing import Dict, Iterable, Iterator, Optional, Tuple

from ..errors import ZkConsumerError

log = logging.getLogger(__name__)

TP = Tuple[str, int]


class DataLossError(ZkConsumerError):
    """Offsets the batch must read are no longer in the log (retention, topic recreated) and failOnDataLoss=true."""


def _consumer(bootstrap, security=None, kafka_params=(), client_id="zkconsumer-spark", **kw):
    """A KafkaConsumer that joins no group: the source's settings ``kw``, the Kafka security settings (*security*, a
    :class:`~zkconsumer.core.kafka_security.KafkaSecurity`), then the user's ``kafka.*`` passthrough
    (:func:`~zkconsumer.spark.kafka_options.kafka_client_config`; a ``kafka.group.id`` is its group.id, as in Spark,
    but partitions are assigned, so it never joins that group), then what the source's semantics need (no auto
    commit)."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError
    from ..kafka.connect_errors import connect_error
    from ..core.kafka_security import PLAINTEXT
    security = security or PLAINTEXT
    conf = dict(bootstrap_servers=bootstrap.split(","), client_id=client_id, group_id=None)
    conf.update(kw)
    conf.update(security.client_kwargs())
    conf.update(dict(kafka_params))
    conf.update(enable_auto_commit=False)
    try:
        return KafkaConsumer(**conf)
    except (KafkaError, OSError) as e:
        raise connect_error("reach the Kafka brokers", bootstrap, security, e) from e


class LogEndProbe:
    """Driver-side helper holding one KafkaConsumer (created lazily; never pickled)."""

    def __init__(self, bootstrap, from_fetch=False, security=None, kafka_params=(), client_id="zkconsumer-spark"):
        self.bootstrap = bootstrap
        self.from_fetch = from_fetch
        self.security = security
        self.kafka_params = tuple(kafka_params)
        self.client_id = client_id
        self._c = None
        self._known: Dict[TP, int] = {}

    def __getstate__(self):
        return {"bootstrap": self.bootstrap, "from_fetch": self.from_fetch, "security": self.security,
                "kafka_params": self.kafka_params, "client_id": self.client_id, "_c": None, "_known": {}}

    def _client(self):
        if self._c is None:
            self._c = _consumer(self.bootstrap, self.security, self.kafka_params, self.client_id,
                                auto_offset_reset="latest",
                                fetch_max_wait_ms=10,
                                max_partition_fetch_bytes=1024, fetch_max_bytes=1 << 20, max_poll_records=1,
                                check_crcs=False)
        return self._c

    def close(self):
        if self._c is not None:
            try:
                from ..kafka.internals import close_quietly
                close_quietly(self._c, autocommit=False)
            except Exception:
                pass
            self._c = None

    def earliest(self, tps: Iterable[TP]) -> Dict[TP, int]:
        from kafka import TopicPartition
        tps = sorted(set(tps))
        if not tps:
            return {}
        res = self._client().beginning_offsets([TopicPartition(t, p) for t, p in tps])
        return {(k.topic, k.partition): v for k, v in res.items()}

    def offsets_for_times(self, timestamps: Dict[TP, int]) -> Dict[TP, Optional[int]]:
        """ListOffsets by timestamp: per partition the earliest offset whose timestamp is >= the given one (ms),
        or None when there is none (every record is older: Spark's "no offset matched")."""
        from kafka import TopicPartition
        if not timestamps:
            return {}
        res = self._client().offsets_for_times({TopicPartition(t, p): ts for (t, p), ts in timestamps.items()})
        return {(k.topic, k.partition): (v.offset if v is not None else None) for k, v in res.items()}

    def log_ends(self, tps: Iterable[TP], timeout_s: float = 15.0) -> Dict[TP, int]:
        from kafka import TopicPartition
        tps = sorted(set(tps))
        if not tps:
            return {}
        c = self._client()
        ktps = [TopicPartition(t, p) for t, p in tps]
        if not self.from_fetch:
            ends: Dict[TP, int] = {(k.topic, k.partition): v for k, v in c.end_offsets(ktps).items()}
            self._known.update(ends)
            return ends
        c.assign(ktps)
        listed = c.end_offsets(ktps)
        state = getattr(getattr(c, "_subscription", None), "assignment", None)
        for k in ktps:
            c.seek(k, max(listed[k], self._known.get((k.topic, k.partition), 0)))
            if state is not None and k in state:
                state[k].highwater = None
        ends = {}
        if state is not None:
            pending = set(ktps)
            deadline = time.monotonic() + timeout_s
            while pending and time.monotonic() < deadline:
                c.poll(timeout_ms=100, max_records=1, update_offsets=False)
                for k in list(pending):
                    hw = state[k].highwater if k in state else None
                    if hw is not None:
                        ends[(k.topic, k.partition)] = max(hw, listed[k])
                        pending.discard(k)
            if pending:
                log.warning("no fetch response within %.0f s for %s; using ListOffsets(latest)", timeout_s,
                            ", ".join("%s-%d" % (k.topic, k.partition) for k in sorted(pending)[:5]))
        for k in ktps:
            ends.setdefault((k.topic, k.partition), listed[k])
        self._known.update(ends)
        return ends


_ARROW_SCHEMAS: dict = {}


def arrow_schema(include_headers: bool = False):
    """The rows' Arrow schema; with ``include_headers`` a trailing ``headers`` column (Spark's Kafka source type
    ``array<struct<key:string,value:binary>>``)."""
    if include_headers not in _ARROW_SCHEMAS:
        import pyarrow as pa
        fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
                  ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
        if include_headers:
            fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
        _ARROW_SCHEMAS[include_headers] = pa.schema(fields)
    return _ARROW_SCHEMAS[include_headers]


def _batch(topic, partition, cols):
    """An Arrow batch of *cols*: (offsets, timestamps in ms, timestamp types, keys, values, headers or None)."""
    import pyarrow as pa
    offsets, stamps, types, keys, values, headers = cols
    n = len(offsets)
    ts = pa.array(stamps, pa.int64())
    ts = pa.compute.multiply(ts, 1000).cast(pa.timestamp("us", tz="UTC"))
    schema = arrow_schema(headers is not None)
    cols = [pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
            pa.array([topic] * n, pa.string()) if n else pa.array([], pa.string()),
            pa.array([partition] * n, pa.int32()), pa.array(offsets, pa.int64()), ts, pa.array(types, pa.int32())]
    if headers is not None:
        # as Spark's Kafka source: null (not an empty array) for a record without headers
        cols.append(pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers],
                             schema.field("headers").type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def read_range(bootstrap: str, topic: str, partition: int, start: int, end: int, poll_timeout_ms: int = 120000,
               fail_on_data_loss: bool = True, batch_rows: int = 20000, include_headers: bool = False,
               security=None, kafka_params: Iterable = (), client_id: str = "zkconsumer-spark") -> Iterator:
    """Yield ``pyarrow.RecordBatch`` es holding the records of ``[start, end)`` of one partition (with a
    ``headers`` column when ``include_headers``; connecting with *security*, a KafkaSecurity).

    ``poll_timeout_ms`` (``kafkaConsumer.pollTimeoutMs``) bounds each wait for the next records, as the timeout of
    one poll in Spark's ``KafkaDataConsumer``: a task fails only when no record arrives for that long, however long
    the whole range takes (time spent by Spark between batches does not count). Offsets that are no longer in the
    log (Kafka's OffsetOutOfRange) are handled as Spark's ``KafkaDataConsumer.getEarliestAvailableOffsetBetween``:
    with ``fail_on_data_loss`` the task fails naming the missing offsets; without, the part of ``[start, end)`` the
    log still holds is read and the rest skipped with a warning. No row outside ``[start, end)`` is ever yielded."""
    import pyarrow.compute  # noqa: F401  (pa.compute)
    from kafka import TopicPartition
    from kafka.errors import OffsetOutOfRangeError
    if end <= start:
        return
    tp = TopicPartition(topic, partition)
    c = _consumer(bootstrap, security, kafka_params, client_id, auto_offset_reset="none", max_poll_records=batch_rows,
                  fetch_max_wait_ms=100,
                  max_partition_fetch_bytes=16 << 20, fetch_max_bytes=64 << 20, check_crcs=True)
    from ..kafka.fast_records import install, install_columnar
    from ..kafka.record_batch import ColumnSink, columns
    sink = ColumnSink(with_headers=include_headers)
    # records decoded straight into columns (C where built): no record object per row on this path
    columnar = install_columnar(c, sink)
    if not columnar:
        # else the consumer's own record decoder, as the member's fetchers use
        install(c)
    name = "%s-%d" % (topic, partition)
    try:
        c.assign([tp])
        c.seek(tp, start)
        # the rows read so far, as columns: (offsets, timestamps, types, keys, values, headers or None)
        cols = ColumnSink(with_headers=include_headers).take()
        pos = start
        reappeared = 0
        waiting_since = time.monotonic()
        while pos < end:
            if time.monotonic() - waiting_since > poll_timeout_ms / 1000.0:
                raise ZkConsumerError("no record of %s at offset %d arrived within %d ms (kafkaConsumer.pollTimeoutMs;"
                                      " reading [%d, %d))" % (name, pos, poll_timeout_ms, start, end))
            try:
                recs = c.poll(timeout_ms=500, max_records=batch_rows).get(tp, ())
            except OffsetOutOfRangeError as e:
                sink.take()
                nxt = _out_of_range(c, tp, name, pos, start, end, fail_on_data_loss, e)
                if nxt == pos:
                    reappeared += 1
                    if reappeared > 3:
                        raise DataLossError("offset %d of %s keeps disappearing from the log (topic deleted and "
                                            "recreated?) while reading [%d, %d)" % (pos, name, start, end)) from e
                if nxt >= end:
                    break
                c.seek(tp, nxt)
                pos = nxt
                waiting_since = time.monotonic()
                continue
            got = sink.take()
            # the consumer's records, into the same columns
            if not columnar:
                columns(recs, pos, *got)
            lo = bisect.bisect_left(got[0], pos) if got[0] and got[0][0] < pos else 0
            hi = bisect.bisect_left(got[0], end) if got[0] and got[0][-1] >= end else len(got[0])
            if hi > lo:
                for column, new in zip(cols, got):
                    if column is not None:
                        column.extend(new[lo:hi])
                pos = cols[0][-1] + 1
            before = pos
            # jumps over compaction / transaction-marker gaps
            pos = max(pos, c.position(tp))
            if hi > lo or pos > before:
                waiting_since = time.monotonic()
            # arrowBatchSize rows per batch (a poll may bring several batches)
            while len(cols[0]) >= batch_rows:
                yield _batch(topic, partition, tuple(None if col is None else col[:batch_rows] for col in cols))
                for col in cols:
                    if col is not None:
                        del col[:batch_rows]
                # the time Spark spent with the batch is not a poll's
                waiting_since = time.monotonic()
        if cols[0]:
            yield _batch(topic, partition, cols)
    finally:
        from ..kafka.internals import close_quietly
        close_quietly(c, autocommit=False)


def _out_of_range(c, tp, name, pos, start, end, fail_on_data_loss, cause) -> int:
    """Kafka answered OffsetOutOfRange for ``pos``: the next offset to read (``end`` when nothing of ``[pos, end)``
    is left), or DataLossError with ``fail_on_data_loss``. The cases of Spark's
    ``KafkaDataConsumer.getEarliestAvailableOffsetBetween``."""
    earliest = c.beginning_offsets([tp])[tp]
    latest = c.end_offsets([tp])[tp]
    held = "the log now holds [%d, %d)" % (earliest, latest)
    if pos >= latest or earliest >= end:
        what, nxt = "offsets [%d, %d) of %s are not in the log any more (%s)" % (pos, end, name, held), end
    elif pos >= earliest:
        # gone a moment ago, there again now (a topic deleted, recreated and written to at once): read it again
        log.warning("offset %d of %s was out of range but is in the log again (%s): some data may have been lost",
                    pos, name, held)
        return pos
    else:
        what, nxt = "offsets [%d, %d) of %s are not in the log any more (%s)" % (pos, earliest, name, held), earliest
    if fail_on_data_loss:
        raise DataLossError("%s, while reading [%d, %d): data was lost (retention, DeleteRecords, or the topic "
                            "deleted and recreated). Set failOnDataLoss=false to skip what is gone." % (what, start, end)
                            ) from cause
    log.warning("%s; skipping them (failOnDataLoss=false)", what)
    return nxt
