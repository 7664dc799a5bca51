"""Kafka's record batch v2 (message format 2), decoded: the batch and record layout, a decoder in Python and the
same decoder in C (``zkconsumer/_records.c``, used when built), and the columnar form the Spark source reads.

The layout (Kafka's ``DefaultRecordBatch`` and ``DefaultRecord``)::

    batch:  baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32 (crc32c of
            attributes..end), attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
            producerId int64, producerEpoch int16, baseSequence int32, recordCount int32, records...
    record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint, keyLength varint, key,
            valueLength varint, value, headerCount varint, [headerKeyLength varint, headerKey,
            headerValueLength varint, headerValue]...          (varints are zigzag-encoded)

Pure: no kafka-python internals beyond the error class and the record type the caller passes in;
:mod:`zkconsumer.kafka.fast_records` puts the decoder on kafka-python's fetch path.
"""
import struct

from kafka.errors import CorruptRecordError

__all__ = ["decode_records", "decode_records_py", "DECODER", "payload_bytes", "columns", "columns_py", "ColumnSink",
           "scan_v2_batches", "scan_records", "scan_batches", "LazyRecords", "join_records"]

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header
BATCH_HEADER_SIZE = BATCH_HEADER.size
LEN_AT = struct.Struct(">i")
LOG_OVERHEAD = 12          # baseOffset + batchLength
MAGIC_AT = 16              # baseOffset + batchLength + partitionLeaderEpoch
CRC_FROM = 21              # attributes start here: the CRC covers attributes..end
CODEC_MASK = 0x07
LOG_APPEND_TIME_FLAG = 0x08
CONTROL_FLAG = 0x20

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


def _decode_records_c(*args):
    out, sizes, error = _c_records.decode_records(*args)
    return out, sizes, _c_error(error)


def _scan_records_c(*args):
    """decode_records' arguments and result, but the records are a ``LazyRecords``: checked now (the same reads and
    errors), each built when it is read (C only). Two more arguments, ``crc_from`` and ``crc``, check the batch's
    CRC-32C (of ``buf[crc_from:end]``) first, in the same call: None when it differs. 16 KiB or more are checked
    without the interpreter lock."""
    return _scanned(_c_records.scan_batch(*args))


def _scan_batches_c(data, batches):
    """_scan_records_c of several batches of *data* (a list of its arguments but the first, each with ``crc_from``
    and ``crc``) in one call, the interpreter lock given up once for them all: their results in order, up to and
    including the first whose CRC differs (None) or whose records stop short (what follows it is never read)."""
    return [_scanned(x) for x in _c_records.scan_batches(data, batches)]


def _scanned(scanned):
    if scanned is None:
        return None
    records, sizes, error = scanned
    return records, sizes, _c_error(error)


def _c_error(error):
    """The C decoder's (kind, message) as the Python decoder's CorruptRecordError, or None."""
    if error is None:
        return None
    kind, message = error
    return _corrupt(message if kind == "corrupt" else "Found invalid record structure: %s" % message)


#: decode_records building each record when it is read, or None where the C extension is not built
scan_records = _scan_records_c if _c_records is not None else None
scan_batches = _scan_batches_c if _c_records is not None else None
LazyRecords = _c_records.LazyRecords if _c_records is not None else None
join_records = _c_records.join_records if _c_records is not None else None

#: the decoder in use: C when the extension was built, else Python (both give the same records and errors' kinds)
decode_records = _decode_records_c if _c_records is not None else decode_records_py
DECODER = "c" if _c_records is not None else "python"


def payload_bytes(records):
    """The records' keys' + values' bytes (a fetched chunk's size for the queue bound and BytesPerSec)."""
    if LazyRecords is not None and type(records) is LazyRecords:
        return records.nbytes
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
    """The records a columnar consumer (:func:`zkconsumer.kafka.fast_records.install_columnar`) decoded, as
    columns: ``offsets``, ``timestamps``, ``types``, ``keys``, ``values`` and ``headers`` (None unless asked for)."""

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
    unpack_len = LEN_AT.unpack_from
    while n - pos >= LOG_OVERHEAD:
        length, = unpack_len(buf, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if end > n:
            break
        if length < BATCH_HEADER_SIZE - LOG_OVERHEAD or buf[pos + MAGIC_AT] != 2:
            return None
        batches.append((pos, end))
        pos = end
    return batches
