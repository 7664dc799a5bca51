"""A faster decoder for Kafka record batches (message format v2) on the fetch path.

kafka-python decodes a fetched partition through ``Fetcher.PartitionRecords``: one ``DefaultRecordBatch`` per batch
(a copy of the batch), one ``DefaultRecord`` per record with a pure-Python ``decode_varint`` call per field, then a
``ConsumerRecord`` built from the record's properties. :class:`FastPartitionRecords` replaces only the decoding step
(``_unpack_records``) with the record batch v2 decoder of :mod:`zkconsumer.kafka.record_batch` (in C when built).

It yields the same ``ConsumerRecord`` values and keeps the same bookkeeping (``next_fetch_offset``, ``leader_epoch``,
``bytes_read``, ``records_read``, drain at the end) as the stock code. It is used only where that is certainly
right: read_uncommitted isolation and a fetch whose complete batches are all magic 2; anything else (legacy
message formats, read_committed, undersized batches, an unknown ``records`` object) goes through kafka-python's own
``_unpack_records``. :func:`install` puts it on a ``KafkaConsumer`` only if kafka-python has the internals it relies
on and a self-test against the stock decoder passes, so another kafka-python version falls back to the stock path.
Its ``take()`` hands decoded batches over as lists, not a generator step per record.

:func:`install_lazy` (the fetcher threads') goes one step further: ``take()`` returns the records as a
``LazyRecords`` (``zkconsumer/_records.c``), checked as the decoder would decode them (the same errors at the same
take) but built one by one when they are read, by the thread that reads them. The records of a poll then never
live all at once between the fetch and their hand-out: what a record costs is allocated and freed while hot, instead
of tens of thousands of records mapping fresh memory every poll.
"""
import inspect
import logging
import struct

from kafka.errors import CorruptRecordError

from .internals import batch_data, consumer_fetcher, partition_records_class, records_buffer

from .record_batch import (BATCH_HEADER, BATCH_HEADER_SIZE, CODEC_MASK, CONTROL_FLAG, CRC_FROM, LOG_APPEND_TIME_FLAG,
                           DECODER, LazyRecords, columns, decode_records, join_records, scan_batches, scan_records,
                           scan_v2_batches)

log = logging.getLogger(__name__)

_EXPECTED_FIELDS = ("topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type", "key", "value",
                    "headers", "checksum", "serialized_key_size", "serialized_value_size", "serialized_header_size")

__all__ = ["install", "install_columnar", "install_lazy", "fast_partition_records_class",
           "columnar_partition_records_class", "lazy_partition_records_class", "records_of", "offset_at",
           "DECODER"]  # DECODER: "c" or "python", the decoder record_batch uses


def _make_class():
    from kafka.consumer.fetcher import ConsumerRecord
    from kafka.protocol.consumer import IsolationLevel

    stock = partition_records_class()
    read_uncommitted = IsolationLevel.READ_UNCOMMITTED

    try:
        from crc32c import crc32c as _crc32c
    except ImportError:  # kafka-python's own (pure Python, slow) implementation
        from kafka.record.util import calc_crc32c as _crc32c

    class FastPartitionRecords(stock):
        """kafka-python's PartitionRecords with a faster decoder for v2 batches (see the module docstring)."""

        def _unpack_records(self, tp, records, key_deserializer, value_deserializer):
            buf = records_buffer(records)
            if self.isolation_level != read_uncommitted or not isinstance(buf, (bytes, bytearray, memoryview)):
                return stock._unpack_records(self, tp, records, key_deserializer, value_deserializer)
            if not isinstance(buf, bytes):
                buf = bytes(buf)
            batches = scan_v2_batches(buf)
            if batches is None:
                return stock._unpack_records(self, tp, records, key_deserializer, value_deserializer)
            if self._takes_batches and key_deserializer is None and value_deserializer is None:
                self._batches = self._decoded_batches(tp, buf, batches)
                self._skipping = True
                return iter(())  # a placeholder: take() reads self._batches
            return self._fast_unpack(tp, buf, batches, key_deserializer, value_deserializer)

        #: take() hands decoded batches over as lists (no Python step per record); the columnar subclass, which
        #: decodes into its sink, turns it off
        _takes_batches = True
        _batches = None       # the decoded batches (a generator) while take() reads them, then _ENDED
        _current = ()         # the records of the batch being taken, their sizes, the next index, the batch's error
        _sizes = ()
        _index = 0
        _batch_error = None
        _skipping = False     # records below the fetch offset may still come (the stock take()'s dropwhile)

        def take(self, n=None):
            """What the stock take() returns, with the same bookkeeping after each call (records skipped below the
            fetch offset counted as read, the next fetch offset after the last record taken, the error that ended a
            batch raised once the records before it have been taken, drain() after the last batch), a batch at a
            time instead of a generator step per record."""
            if self._batches is None:
                return stock.take(self, n)
            self._maybe_raise_next_inline_exception()
            out = []
            try:
                self._take_into(out, n)
            except Exception as e:
                if not out:
                    raise
                self._next_inline_exception = e  # raised by the next take(), as the stock take() does
            return out

        def _take_into(self, out, n):
            taken = 0  # records handed over into out (a LazyRecords holds many)
            while self.record_iterator is not None and (n is None or taken < n):
                recs, i = self._current, self._index
                if i >= len(recs):
                    if not self._next_batch():
                        return
                    continue
                if self._skipping:
                    fetch_offset = self.fetch_offset
                    j = i
                    while j < len(recs) and self._offset_at(recs, j) < fetch_offset:
                        j += 1
                    if j > i:
                        self._advance(i, j)
                        continue
                    self._skipping = False
                j = len(recs) if n is None else min(len(recs), i + n - taken)
                self._hand_over(out, recs, i, j)
                self._advance(i, j)
                taken += j - i

        def _advance(self, i, j):
            self.records_read += j - i
            sizes = self._sizes
            self.bytes_read += sum(sizes) if i == 0 and j == len(sizes) else sum(sizes[i:j])
            self.next_fetch_offset = self._offset_at(self._current, j - 1) + 1
            self._index = j

        #: decode_records, or (the lazy subclass) scan_records
        _decode = staticmethod(decode_records)
        #: the lazy subclass checks the CRCs of uncompressed batches with their records, all of a fetch in one
        #: call (record_batch.scan_batches: without the interpreter lock from 16 KiB)
        _checks_crc = False

        @staticmethod
        def _offset_at(recs, j):
            return recs[j][3]

        @staticmethod
        def _hand_over(out, recs, i, j):
            out.extend(recs if i == 0 and j == len(recs) else recs[i:j])

        def _next_batch(self):
            """Move to the next decoded batch; False when there is none: drained after the last batch, or (as the
            stock generator once it raised) nothing more and no drain after a failure."""
            self._current, self._index = (), 0
            if self._batches is _ENDED:
                return False
            error, self._batch_error = self._batch_error, None
            if error is not None:  # what ended the batch just taken
                self._batches = _ENDED
                raise error
            try:
                recs, sizes, error = next(self._batches)
            except StopIteration:
                self._batches = _ENDED
                self.drain()
                return False
            except Exception:
                self._batches = _ENDED
                raise
            self._current, self._sizes, self._batch_error = recs, sizes, error
            return True

        def _fast_unpack(self, tp, buf, batches, key_deserializer, value_deserializer):
            deserialize = key_deserializer is not None or value_deserializer is not None
            for recs, sizes, error in self._decoded_batches(tp, buf, batches):
                if deserialize:
                    for rec, size in zip(recs, sizes):
                        rec = self._deserialized(rec, key_deserializer, value_deserializer)
                        self.records_read += 1
                        self.bytes_read += size
                        self.next_fetch_offset = rec[3] + 1
                        yield rec
                else:
                    for rec, size in zip(recs, sizes):
                        self.records_read += 1
                        self.bytes_read += size
                        self.next_fetch_offset = rec[3] + 1
                        yield rec
                if error is not None:
                    raise error
            self.drain()

        def _decoded_batches(self, tp, buf, batches):
            """(records, sizes, error) of each batch that is not a control batch, in order: the CRC checked, the
            leader epoch and (after control batches, and after the last batch) the next fetch offset kept."""
            topic, partition = tp.topic, tp.partition
            check_crcs = self.check_crcs
            header = BATCH_HEADER.unpack_from
            view = memoryview(buf)
            next_offset = None
            headers = [header(buf, start) for start, _end in batches]
            # the uncompressed batches that are not control batches, with their CRCs: checked in one call (the lazy
            # decoder, without the interpreter lock); their results in order, up to the first that failed
            fold = check_crcs and self._checks_crc
            scanned = iter(scan_batches(buf, [
                (start + BATCH_HEADER_SIZE, end, h[12], h[0], h[7], h[8], h[5] & LOG_APPEND_TIME_FLAG, topic,
                 partition, h[2], ConsumerRecord, start + CRC_FROM, h[4])
                for (start, end), h in zip(batches, headers) if not h[5] & (CODEC_MASK | CONTROL_FLAG)]) if fold else ())
            for (start, end), h in zip(batches, headers):
                (base_offset, _length, leader_epoch, _magic, crc, attributes, last_offset_delta, first_timestamp,
                 max_timestamp, _pid, _pepoch, _pseq, count) = h
                checked = None
                if fold and not attributes & (CODEC_MASK | CONTROL_FLAG):
                    checked = next(scanned, _UNREAD)
                    if checked is _UNREAD:  # (cannot happen: a batch after one that failed is never read)
                        checked = self._decode(buf, start + BATCH_HEADER_SIZE, end, count, base_offset,
                                               first_timestamp, max_timestamp, attributes & LOG_APPEND_TIME_FLAG,
                                               topic, partition, leader_epoch, ConsumerRecord, start + CRC_FROM, crc)
                    crc_failed = checked is None
                else:
                    crc_failed = check_crcs and _crc32c(view[start + CRC_FROM:end]) != crc
                if crc_failed:
                    raise CorruptRecordError("Record batch for partition %s at offset %s failed crc check"
                                             % (self.topic_partition, base_offset))
                self.leader_epoch = leader_epoch
                next_offset = base_offset + last_offset_delta + 1
                if attributes & CONTROL_FLAG:  # transaction markers are not returned to the consumer
                    self.next_fetch_offset = next_offset
                    continue
                if checked is not None:
                    yield checked
                    continue
                if attributes & CODEC_MASK:
                    data, pos = _decompressed(buf[start:end])
                    data_end = len(data)
                else:
                    data, pos, data_end = buf, start + BATCH_HEADER_SIZE, end
                yield self._decode(data, pos, data_end, count, base_offset, first_timestamp, max_timestamp,
                                   attributes & LOG_APPEND_TIME_FLAG, topic, partition, leader_epoch, ConsumerRecord)
            if next_offset is not None:
                # v2 keeps a batch's last offset even when compaction removed its last records: continue after it
                self.next_fetch_offset = next_offset

        def _deserialized(self, rec, key_deserializer, value_deserializer):
            topic, headers = rec[0], rec[8]
            return rec._replace(key=self._deserialize(key_deserializer, topic, headers, rec[6]),
                                value=self._deserialize(value_deserializer, topic, headers, rec[7]))

    return FastPartitionRecords


#: the batches of a FastPartitionRecords that has none left (drained, or failed)
_ENDED = iter(())
#: a batch the one-call check did not reach
_UNREAD = object()


def _decompressed(batch_bytes):
    """(records bytes, start) of a compressed batch, decompressed by kafka-python's own codecs."""
    from kafka.record.default_records import DefaultRecordBatch
    batch = DefaultRecordBatch(batch_bytes)
    iter(batch)  # decompresses (and checks the codec is available)
    data, pos = batch_data(batch)
    return bytes(data), pos


_CLASS = None
_CHECKED = False


def fast_partition_records_class():
    """The FastPartitionRecords class, or None when this kafka-python does not look like the one it was written
    against (missing internals, or the self-test disagrees with the stock decoder)."""
    global _CLASS, _CHECKED
    if _CHECKED:
        return _CLASS
    _CHECKED = True
    try:
        from kafka.consumer.fetcher import ConsumerRecord
        stock = partition_records_class()
        if stock is None or tuple(ConsumerRecord._fields) != _EXPECTED_FIELDS:
            return None
        for name in ("_unpack_records", "_deserialize", "take", "drain"):
            if not callable(getattr(stock, name, None)):
                return None
        params = inspect.signature(stock.__init__).parameters
        for name in ("fetch_offset", "tp", "records", "key_deserializer", "value_deserializer", "check_crcs",
                     "isolation_level"):
            if name not in params:
                return None
        cls = _make_class()
        if not _self_test(stock, cls):
            log.warning("kafka-python's record decoding changed; using its stock decoder")
            return None
        _CLASS = cls
        if DECODER == "python":
            log.warning("the C record decoder is not built (no C compiler when zkconsumer was installed): records "
                        "are decoded in Python, 3-10x slower (zkconsumer_info{decoder=\"python\"})")
    except Exception as e:  # any surprise: the stock path
        log.warning("fast record decoding unavailable (%s); using kafka-python's decoder", e)
        _CLASS = None
    return _CLASS


def _self_test(stock, cls):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record import MemoryRecords
    from kafka.structs import TopicPartition
    data = b""
    offset = 0
    for compression in (0, 1):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(5):
            builder.append(i, timestamp=1700000000000 + 37 * i, key=None if i % 2 else b"k%d" % i,
                           value=None if i == 3 else b"v" * (i * 50), headers=[("h", b"x")] if i == 2 else [])
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, offset)
        offset += 5
        data += bytes(batch)
    tp = TopicPartition("self-test", 0)

    def read(kind):
        part = kind(1, tp, MemoryRecords(data), check_crcs=True)
        out = [r for x in part.take() for r in (x if LazyRecords is not None and type(x) is LazyRecords else (x,))]
        return out, part.next_fetch_offset, part.leader_epoch, part.bytes_read, part.records_read, bool(part)

    return read(stock) == read(cls)


def install_columnar(consumer, sink):
    """Make ``consumer`` decode v2 batches straight into *sink* (a
    :class:`~zkconsumer.kafka.record_batch.ColumnSink`): its ``poll`` then returns, per partition, one marker
    ConsumerRecord per batch (the offset of the batch's last record, no key or value), and the records themselves
    are in the sink, in order. For a reader that wants columns (the Spark source):
    no record is built in Python. Positions and errors are kafka-python's, as with :func:`install`. Returns False
    (consumer untouched) where the fast decoder is unavailable."""
    cls = fast_partition_records_class()
    fetcher = consumer_fetcher(consumer)
    if cls is None or fetcher is None or getattr(type(fetcher), "PartitionRecords", None) is not cls.__bases__[0]:
        return False
    fetcher.PartitionRecords = columnar_partition_records_class(cls, sink)
    return True


def columnar_partition_records_class(fast_class, sink):
    """A subclass of *fast_class* (FastPartitionRecords) that decodes into *sink* (see :func:`install_columnar`)."""
    return type("ColumnarPartitionRecords", (fast_class,), {"sink": sink, "_fast_unpack": _columnar_unpack,
                                                             "_takes_batches": False})


def _columnar_unpack(self, tp, buf, batches, key_deserializer, value_deserializer):
    """FastPartitionRecords._fast_unpack for :func:`install_columnar`: records go to ``self.sink``; one marker
    record is yielded per batch that gave any."""
    from kafka.consumer.fetcher import ConsumerRecord
    if key_deserializer is not None or value_deserializer is not None:
        raise ValueError("a columnar consumer has no deserializers")
    sink = self.sink
    for recs, sizes, error in self._decoded_batches(tp, buf, batches):
        n, last = columns(recs, self.fetch_offset, sink.offsets, sink.timestamps, sink.types, sink.keys, sink.values,
                          sink.headers)
        self.records_read += len(recs)
        self.bytes_read += sum(sizes)
        if recs:
            self.next_fetch_offset = recs[-1][3] + 1
        if n:
            yield ConsumerRecord(tp.topic, tp.partition, self.leader_epoch, last, -1, -1, None, None, [], None, -1, -1,
                                 -1)
        if error is not None:
            raise error
    self.drain()


def lazy_partition_records_class(fast_class):
    """A subclass of *fast_class* (FastPartitionRecords) whose take() returns ``LazyRecords``: the records checked
    as the decoder would decode them (the same errors, at the same take), each built when it is read. A take gives
    one LazyRecords (a list of ConsumerRecords where the stock path decoded); None where the C extension is not
    built."""
    if scan_records is None:
        return None
    fast_take = fast_class.take

    def take(self, n=None):
        out = fast_take(self, n)
        return [join_records(out)] if len(out) > 1 and type(out[0]) is LazyRecords else out

    def hand_over(out, recs, i, j):
        out.append(recs if i == 0 and j == len(recs) else recs.slice(i, j))

    return type("LazyPartitionRecords", (fast_class,), {
        "take": take, "_decode": staticmethod(scan_records), "_checks_crc": True,
        "_hand_over": staticmethod(hand_over),
        "_offset_at": staticmethod(lambda recs, j: recs.offset(j))})


_LAZY = None


def install_lazy(consumer):
    """Make ``consumer`` hand fetched v2 batches over as ``LazyRecords`` (see :func:`lazy_partition_records_class`;
    its ``poll`` then returns, per partition, a list of LazyRecords, or of ConsumerRecords where the stock path
    decoded). For a reader that hands records out one by one (the fetcher threads): each record is built by the
    thread that reads it, when it reads it. Falls back to :func:`install` (and returns False) where unavailable."""
    global _LAZY
    cls = fast_partition_records_class()
    fetcher = consumer_fetcher(consumer)
    if cls is None or fetcher is None or getattr(type(fetcher), "PartitionRecords", None) is not cls.__bases__[0]:
        return False
    if _LAZY is None:
        lazy = lazy_partition_records_class(cls)
        _LAZY = lazy if lazy is not None and _self_test(cls.__bases__[0], lazy) else False
    if not _LAZY:
        return install(consumer) and False
    fetcher.PartitionRecords = _LAZY
    return True


def records_of(items):
    """What a lazily installed consumer's poll returned for one partition, as one sequence of records: a LazyRecords
    (the lists' LazyRecords joined) or a list of ConsumerRecords (built, where some came as ConsumerRecords)."""
    if not items or LazyRecords is None:
        return items
    lazy = [type(x) is LazyRecords for x in items]
    if all(lazy):
        return items[0] if len(items) == 1 else join_records(items)
    if not any(lazy):
        return items
    return [rec for x, is_lazy in zip(items, lazy) for rec in (x if is_lazy else (x,))]


def offset_at(records, i):
    """The offset of ``records[i]`` (a LazyRecords builds nothing for it)."""
    return records.offset(i) if type(records) is LazyRecords else records[i].offset


def install(consumer):
    """Make ``consumer`` (a kafka-python KafkaConsumer) decode v2 batches with FastPartitionRecords; returns True
    if installed. Leaves the consumer untouched when unavailable."""
    cls = fast_partition_records_class()
    fetcher = consumer_fetcher(consumer)
    if cls is None or fetcher is None or getattr(type(fetcher), "PartitionRecords", None) is not cls.__bases__[0]:
        return False
    fetcher.PartitionRecords = cls  # an instance attribute: only this consumer's fetcher uses it
    return True


def decoder_in_use():
    """The record decoder the fetchers use: ``c`` or ``python`` (zkconsumer's), or ``kafka-python`` (its stock
    decoder, when this kafka-python does not look like the one zkconsumer's was written against)."""
    return DECODER if fast_partition_records_class() is not None else "kafka-python"
