"""A faster decoder for Kafka record batches (message format v2) on the fetch path.

kafka-python decodes a fetched partition through ``Fetcher.PartitionRecords``: one ``DefaultRecordBatch`` per batch
(a copy of the batch), one ``DefaultRecord`` per record with a pure-Python ``decode_varint`` call per field, then a
``ConsumerRecord`` built from the record's properties. :class:`FastPartitionRecords` replaces only the decoding step
(``_unpack_records``) with a decoder written from the protocol's record batch v2 layout::

    batch:  baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32 (crc32c of
            attributes..end), attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
            producerId int64, producerEpoch int16, baseSequence int32, recordCount int32, records...
    record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint, keyLength varint, key,
            valueLength varint, value, headerCount varint, [headerKeyLength varint, headerKey,
            headerValueLength varint, headerValue]...          (varints are zigzag-encoded)

It yields the same ``ConsumerRecord`` values and keeps the same bookkeeping (``next_fetch_offset``, ``leader_epoch``,
``bytes_read``, ``records_read``, drain at the end) as the stock code. It is used only where that is certainly
right: read_uncommitted isolation and a fetch whose complete batches are all magic 2; anything else (legacy
message formats, read_committed, undersized batches, an unknown ``records`` object) goes through kafka-python's own
``_unpack_records``. :func:`install` puts it on a ``KafkaConsumer`` only if kafka-python has the internals it relies
on and a self-test against the stock decoder passes, so another kafka-python version falls back to the stock path.
"""
import inspect
import logging
import struct

from kafka.errors import CorruptRecordError

log = logging.getLogger(__name__)

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header
_BATCH_HEADER_SIZE = _BATCH_HEADER.size
_LEN_AT = struct.Struct(">i")
_LOG_OVERHEAD = 12          # baseOffset + batchLength
_MAGIC_AT = 16              # baseOffset + batchLength + partitionLeaderEpoch
_CRC_FROM = 21              # attributes start here: the CRC covers attributes..end
_CODEC_MASK = 0x07
_LOG_APPEND_TIME_FLAG = 0x08
_CONTROL_FLAG = 0x20
_EXPECTED_FIELDS = ("topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type", "key", "value",
                    "headers", "checksum", "serialized_key_size", "serialized_value_size", "serialized_header_size")


_ZZ = tuple((b >> 1) ^ -(b & 1) for b in range(128))  # one-byte zigzag varints


def _varint(buf, pos):
    """Zigzag varint at buf[pos] -> (value, next pos); the general (multi-byte) case. At most 10 bytes; bits past
    the 64th are dropped, as Java's ByteUtils.readVarlong does (and the C decoder)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= ((b & 0x7F) << shift) & 0xFFFFFFFFFFFFFFFF
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long at position %d" % pos)


def decode_records_py(buf, pos, end, count, base_offset, first_timestamp, max_timestamp, log_append_time, topic,
                   partition, leader_epoch, record_cls):
    """Decode ``count`` v2 records from ``buf[pos:end]`` (bytes).

    Returns (records, sizes, error): ConsumerRecord tuples without deserialization (key/value are the raw bytes),
    the records' size_in_bytes (the record length field), and the exception that stopped decoding early or None.
    """
    out = []
    sizes = []
    append = out.append
    size_append = sizes.append
    new = tuple.__new__
    timestamp_type = 1 if log_append_time else 0
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length = _ZZ[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    length = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    length, pos = _varint(buf, pos)
            start = pos
            if buf[pos] < 0x80:           # record attributes (unused)
                pos += 1
            else:
                _, pos = _varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                ts_delta = _ZZ[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    ts_delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    ts_delta, pos = _varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                offset_delta = _ZZ[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    offset_delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    offset_delta, pos = _varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                key_len = _ZZ[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    key_len = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    key_len, pos = _varint(buf, pos)
            if key_len >= 0:
                key = buf[pos:pos + key_len]
                pos += key_len
            else:
                key = None
                key_len = -1
            b = buf[pos]
            if b < 0x80:
                value_len = _ZZ[b]
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    b = (b & 0x7F) | (b2 << 7)
                    value_len = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    value_len, pos = _varint(buf, pos)
            if value_len >= 0:
                value = buf[pos:pos + value_len]
                pos += value_len
            else:
                value = None
                value_len = -1
            b = buf[pos]
            if b == 0:                    # no headers: the common case
                pos += 1
                headers = []
                header_size = -1
            else:
                if b < 0x80:
                    count_h = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    count_h, pos = _varint(buf, pos)
                if count_h < 0:
                    raise _corrupt("Found invalid number of record headers {}".format(count_h))
                headers = []
                header_size = 0
                for _h in range(count_h):
                    hk_len, pos = _varint(buf, pos)
                    if hk_len < 0:
                        raise _corrupt("Invalid negative header key size {}".format(hk_len))
                    h_key = buf[pos:pos + hk_len].decode("utf-8")
                    pos += hk_len
                    hv_len, pos = _varint(buf, pos)
                    if hv_len >= 0:
                        h_value = buf[pos:pos + hv_len]
                        pos += hv_len
                        header_size += hk_len + len(h_value)
                    else:
                        h_value = None
                        header_size += hk_len
                    headers.append((h_key, h_value))
                if not headers:
                    header_size = -1
            if pos - start != length:
                raise _corrupt("Invalid record size: expected to read {} bytes in record payload, but instead read {}"
                               .format(length, pos - start))
            if pos > end:  # read past the batch end (slicing bytes does not raise, and buf may hold later batches)
                raise IndexError("record runs past the end of its batch")
            append(new(record_cls, (topic, partition, leader_epoch, base_offset + offset_delta,
                                    max_timestamp if log_append_time else first_timestamp + ts_delta,
                                    timestamp_type, key, value, headers, None, key_len, value_len, header_size)))
            size_append(length)
    except CorruptRecordError as err:
        return out, sizes, err
    except (ValueError, IndexError) as err:  # UnicodeDecodeError is a ValueError
        return out, sizes, _corrupt("Found invalid record structure: {!r}".format(err))
    if pos != end:
        return out, sizes, _corrupt("{} unconsumed bytes after all records consumed".format(end - pos))
    return out, sizes, None


def _corrupt(message):
    return CorruptRecordError(message)


try:
    from zkconsumer import _records as _c_records  # the same decoder in C (zkconsumer/_records.c), when built
except ImportError:  # no C compiler at install time: the Python decoder
    _c_records = None  # type: ignore[assignment]


def _decode_records_c(buf, pos, end, count, base_offset, first_timestamp, max_timestamp, log_append_time, topic,
                      partition, leader_epoch, record_cls):
    out, sizes, error = _c_records.decode_records(buf, pos, end, count, base_offset, first_timestamp, max_timestamp,
                                                  log_append_time, topic, partition, leader_epoch, record_cls)
    if error is not None:
        kind, message = error
        error = _corrupt(message if kind == "corrupt" else "Found invalid record structure: %s" % message)
    return out, sizes, error


#: the decoder in use: C when the extension was built, else Python (both give the same records and errors' kinds)
decode_records = _decode_records_c if _c_records is not None else decode_records_py
DECODER = "c" if _c_records is not None else "python"


def payload_bytes(records):
    """The records' keys' + values' bytes (a fetched chunk's size for the queue bound and BytesPerSec)."""
    if _c_records is not None:
        return _c_records.payload_bytes(records)
    nbytes = 0
    for r in records:
        nbytes += max(0, r.serialized_value_size) + max(0, r.serialized_key_size)
    return nbytes


def columns_py(records, min_offset, offsets, timestamps, types, keys, values, headers):
    """The Python twin of the C ``columns``: append the fields of the records at or after *min_offset* to the
    lists (*headers* may be None); returns (appended, last offset or None)."""
    n, last = 0, None
    for rec in records:
        off = rec[3]
        if off < min_offset:
            continue
        offsets.append(off)
        timestamps.append(rec[4])
        types.append(rec[5])
        keys.append(rec[6])
        values.append(rec[7])
        if headers is not None:
            headers.append(rec[8])
        n, last = n + 1, off
    return n, last


columns = _c_records.columns if _c_records is not None else columns_py


class ColumnSink:
    """The records a columnar consumer (:func:`install_columnar`) decoded, as columns: ``offsets``,
    ``timestamps``, ``types``, ``keys``, ``values`` and ``headers`` (None unless asked for)."""

    def __init__(self, with_headers: bool = False):
        self.with_headers = with_headers
        self._empty()

    def _empty(self):
        self.offsets, self.timestamps, self.types, self.keys, self.values = [], [], [], [], []
        self.headers = [] if self.with_headers else None

    def take(self):
        """(offsets, timestamps, types, keys, values, headers) gathered so far; the sink starts empty again."""
        out = (self.offsets, self.timestamps, self.types, self.keys, self.values, self.headers)
        self._empty()
        return out


def scan_v2_batches(buf):
    """Complete batches in a fetched buffer as [(start, end)], or None unless every one is a well-sized magic-2
    batch (the caller then uses the stock decoder, which also reports malformed data its own way). A trailing
    partial batch is ignored, as kafka-python's MemoryRecords does."""
    batches = []
    pos = 0
    n = len(buf)
    unpack_len = _LEN_AT.unpack_from
    while n - pos >= _LOG_OVERHEAD:
        length, = unpack_len(buf, pos + 8)
        end = pos + _LOG_OVERHEAD + length
        if end > n:
            break
        if length < _BATCH_HEADER_SIZE - _LOG_OVERHEAD or buf[pos + _MAGIC_AT] != 2:
            return None
        batches.append((pos, end))
        pos = end
    return batches


def _make_class():
    from kafka.consumer.fetcher import ConsumerRecord, Fetcher
    from kafka.protocol.consumer import IsolationLevel

    stock = Fetcher.PartitionRecords
    read_uncommitted = IsolationLevel.READ_UNCOMMITTED

    try:
        from crc32c import crc32c as _crc32c
    except ImportError:  # kafka-python's own (pure Python, slow) implementation
        from kafka.record.util import calc_crc32c as _crc32c

    class FastPartitionRecords(stock):
        """kafka-python's PartitionRecords with a faster decoder for v2 batches (see the module docstring)."""

        def _unpack_records(self, tp, records, key_deserializer, value_deserializer):
            buf = getattr(records, "_buffer", None)
            if self.isolation_level != read_uncommitted or not isinstance(buf, (bytes, bytearray, memoryview)):
                return stock._unpack_records(self, tp, records, key_deserializer, value_deserializer)
            if not isinstance(buf, bytes):
                buf = bytes(buf)
            batches = scan_v2_batches(buf)
            if batches is None:
                return stock._unpack_records(self, tp, records, key_deserializer, value_deserializer)
            return self._fast_unpack(tp, buf, batches, key_deserializer, value_deserializer)

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
            header = _BATCH_HEADER.unpack_from
            view = memoryview(buf)
            next_offset = None
            for start, end in batches:
                (base_offset, _length, leader_epoch, _magic, crc, attributes, last_offset_delta, first_timestamp,
                 max_timestamp, _pid, _pepoch, _pseq, count) = header(buf, start)
                if check_crcs and _crc32c(view[start + _CRC_FROM:end]) != crc:
                    raise CorruptRecordError("Record batch for partition %s at offset %s failed crc check"
                                             % (self.topic_partition, base_offset))
                self.leader_epoch = leader_epoch
                next_offset = base_offset + last_offset_delta + 1
                if attributes & _CONTROL_FLAG:  # transaction markers are not returned to the consumer
                    self.next_fetch_offset = next_offset
                    continue
                if attributes & _CODEC_MASK:
                    data, pos = _decompressed(buf[start:end])
                    data_end = len(data)
                else:
                    data, pos, data_end = buf, start + _BATCH_HEADER_SIZE, end
                yield decode_records(data, pos, data_end, count, base_offset, first_timestamp, max_timestamp,
                                     attributes & _LOG_APPEND_TIME_FLAG, topic, partition, leader_epoch,
                                     ConsumerRecord)
            if next_offset is not None:
                # v2 keeps a batch's last offset even when compaction removed its last records: continue after it
                self.next_fetch_offset = next_offset

        def _deserialized(self, rec, key_deserializer, value_deserializer):
            topic, headers = rec[0], rec[8]
            return rec._replace(key=self._deserialize(key_deserializer, topic, headers, rec[6]),
                                value=self._deserialize(value_deserializer, topic, headers, rec[7]))

    return FastPartitionRecords


def _decompressed(batch_bytes):
    """(records bytes, start) of a compressed batch, decompressed by kafka-python's own codecs."""
    from kafka.record.default_records import DefaultRecordBatch
    batch = DefaultRecordBatch(batch_bytes)
    iter(batch)  # decompresses (and checks the codec is available)
    data, pos = batch._buffer, batch._pos
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
        from kafka.consumer.fetcher import ConsumerRecord, Fetcher
        stock = getattr(Fetcher, "PartitionRecords", None)
        if not isinstance(stock, type) or tuple(ConsumerRecord._fields) != _EXPECTED_FIELDS:
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
        out = part.take()
        return out, part.next_fetch_offset, part.leader_epoch, part.bytes_read, part.records_read, bool(part)

    return read(stock) == read(cls)


def install_columnar(consumer, sink):
    """Make ``consumer`` decode v2 batches straight into *sink* (a :class:`ColumnSink`): its ``poll`` then returns,
    per partition, one marker ConsumerRecord per batch (the offset of the batch's last record, no key or value),
    and the records themselves are in the sink, in order. For a reader that wants columns (the Spark source):
    no record is built in Python. Positions and errors are kafka-python's, as with :func:`install`. Returns False
    (consumer untouched) where the fast decoder is unavailable."""
    cls = fast_partition_records_class()
    fetcher = getattr(consumer, "_fetcher", None)
    if cls is None or fetcher is None or getattr(type(fetcher), "PartitionRecords", None) is not cls.__bases__[0]:
        return False
    fetcher.PartitionRecords = columnar_partition_records_class(cls, sink)
    return True


def columnar_partition_records_class(fast_class, sink):
    """A subclass of *fast_class* (FastPartitionRecords) that decodes into *sink* (see :func:`install_columnar`)."""
    return type("ColumnarPartitionRecords", (fast_class,), {"sink": sink, "_fast_unpack": _columnar_unpack})


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


def install(consumer):
    """Make ``consumer`` (a kafka-python KafkaConsumer) decode v2 batches with FastPartitionRecords; returns True
    if installed. Leaves the consumer untouched when unavailable."""
    cls = fast_partition_records_class()
    fetcher = getattr(consumer, "_fetcher", None)
    if cls is None or fetcher is None or getattr(type(fetcher), "PartitionRecords", None) is not cls.__bases__[0]:
        return False
    fetcher.PartitionRecords = cls  # an instance attribute: only this consumer's fetcher uses it
    return True
