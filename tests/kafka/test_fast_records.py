"""zkconsumer.kafka.fast_records: our v2 record batch decoder must yield exactly what kafka-python's stock
``Fetcher.PartitionRecords`` yields (every ConsumerRecord field, and the bookkeeping the fetcher reads).

Pure tests build batches with kafka-python's own ``DefaultRecordBatchBuilder`` (patched the way a broker sets base
offsets, leader epochs and attribute flags); the last test reads real broker data through the connector.
"""
import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.structs import TopicPartition

from zkconsumer.kafka import fast_records, record_batch

FAST = fast_records.fast_partition_records_class()
LAZY = fast_records.lazy_partition_records_class(FAST)  # None without the C extension
STOCK = Fetcher.PartitionRecords
CLASSES = [FAST] + ([LAZY] if LAZY is not None else [])


def _flat(got):
    """take()'s result as ConsumerRecords (a LazyRecords built record by record)."""
    return [r for x in got for r in (x if type(x) is record_batch.LazyRecords else (x,))]
TP = TopicPartition("fast-records", 3)


def build_batch(records, base_offset=0, compression=0, leader_epoch=0, log_append_time=None, control=False,
                transactional=False, offset_gap=1):
    """records: [(timestamp, key, value, headers)] -> one v2 batch (bytes) as a broker would store it."""
    pid = 7 if transactional else -1
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=0 if transactional else -1,
                                        base_sequence=0 if transactional else -1, batch_size=1 << 24)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i * offset_gap, timestamp=ts, key=key, value=value, headers=headers)
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, leader_epoch)
    attributes, = struct.unpack_from(">h", batch, 21)
    if log_append_time is not None:
        attributes |= 0x08
        struct.pack_into(">q", batch, 35, log_append_time)  # maxTimestamp
    if control:
        attributes |= 0x20
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def read_all(cls, data, fetch_offset=0, step=None, **kw):
    """(records, bookkeeping after each take) read through a PartitionRecords class."""
    part = cls(fetch_offset, TP, MemoryRecords(data), **kw)
    out, states = [], []
    while part:
        got = _flat(part.take(step))
        out.extend(got)
        states.append((len(got), part.next_fetch_offset, part.leader_epoch, part.bytes_read, part.records_read,
                       bool(part)))
        if not got and step is None:
            break
    return out, states


def assert_same(data, **kw):
    stock = read_all(STOCK, data, **kw)
    for cls in CLASSES:
        fast = read_all(cls, data, **kw)
        assert fast == stock, cls
        for a, b in zip(fast[0], stock[0]):  # field by field, types included (bytes vs bytearray, list headers)
            assert type(a) is ConsumerRecord
            for x, y in zip(a, b):
                assert type(x) is type(y) and x == y
    return stock


def test_installed_for_this_kafka_python():
    assert FAST is not None and issubclass(FAST, STOCK)


blob = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40)))
record = st.tuples(st.integers(min_value=0, max_value=2 ** 42), blob, blob, st.lists(header, max_size=4))
batch_spec = st.tuples(
    st.lists(record, min_size=1, max_size=30),
    st.sampled_from([0, 0, 1]),                                           # none, gzip
    st.integers(min_value=-1, max_value=2 ** 31 - 1),                     # leader epoch
    st.one_of(st.none(), st.integers(min_value=0, max_value=2 ** 42)),    # LOG_APPEND_TIME max timestamp
    st.integers(min_value=1, max_value=3),                                # offset gaps (compaction)
    st.booleans())                                                        # control batch


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(batch_spec, min_size=0, max_size=5), start=st.integers(min_value=0, max_value=50),
       skip=st.integers(min_value=0, max_value=40), step=st.one_of(st.none(), st.integers(min_value=1, max_value=7)),
       check_crcs=st.booleans(), trailing=st.integers(min_value=0, max_value=70))
def test_same_records_as_kafka_python(batches, start, skip, step, check_crcs, trailing):
    data = b""
    offset = start
    for records, compression, epoch, lat, gap, control in batches:
        data += build_batch(records, offset, compression, epoch, lat, control=control, offset_gap=gap)
        offset += len(records) * gap + 1
    if trailing and data:  # a partial batch at the end of the fetch (max bytes reached) is ignored
        data += data[:trailing]
    assert_same(data, fetch_offset=start + skip, step=step, check_crcs=check_crcs)


def test_typical_and_compressible_batches():
    recs = [(1700000000000 + i, None if i % 3 else b"key-%d" % i, b"x" * 100, [("trace", b"abc")] if i % 5 == 0
             else []) for i in range(500)]
    for compression in (0, 1):
        data = build_batch(recs, 1000, compression) + build_batch(recs, 1500, compression, leader_epoch=4)
        if compression:
            assert len(data) < 20000  # really compressed
        out, _ = assert_same(data, fetch_offset=1000)
        assert len(out) == 1000 and out[-1].offset == 1999 and out[-1].leader_epoch == 4
        assert out[0].serialized_header_size == len("trace") + 3 and out[1].serialized_header_size == -1


def test_multibyte_varints_and_big_values():
    recs = [(2 ** 40 + i * 100000, b"k" * 70000, b"v" * (i * 9000), [("h" * 200, b"z" * 300)] * 3)
            for i in range(5)]
    assert_same(build_batch(recs, 10 ** 12, offset_gap=100000))


def test_deserializers_and_control_batch():
    recs = [(1, b"a", b"1", []), (2, None, b"22", [("h", None)])]
    data = build_batch(recs, 0) + build_batch([(3, b"\0\0", b"\0\0\0\0\0\0", [])], 2, control=True,
                                              transactional=True) + build_batch(recs, 3, transactional=True)
    from kafka.serializer import DeserializeWrapper  # what kafka-python's Fetcher wraps plain callables in
    out, _ = assert_same(data, key_deserializer=DeserializeWrapper(lambda b: None if b is None else
                                                                        b.decode().upper()),
                              value_deserializer=DeserializeWrapper(lambda b: int(b)))
    assert [r.offset for r in out] == [0, 1, 3, 4] and out[0].key == "A" and out[1].value == 22


def test_legacy_batches_use_the_stock_path():
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(5):
        builder.append(i, timestamp=1000 + i, key=b"k", value=b"v%d" % i)
    legacy = bytes(builder.build())
    v2 = build_batch([(5, b"k", b"v", [])], 5)
    out, _ = assert_same(legacy + v2)
    assert [r.offset for r in out] == [0, 1, 2, 3, 4, 5]
    assert out[0].checksum is not None  # v1 records carry a checksum: decoded by kafka-python


def test_read_committed_uses_the_stock_path():
    data = build_batch([(1, b"a", b"b", [])], 0)
    assert_same(data, isolation_level=IsolationLevel.READ_COMMITTED)


def _corrupted(data, at):
    bad = bytearray(data)
    bad[at] ^= 0x40
    return bytes(bad)


@pytest.mark.parametrize("compression", [0, 1])
def test_crc_corruption_raises_the_same_error(compression):
    recs = [(i, b"key", b"value" * 20, []) for i in range(50)]
    good = build_batch(recs, 0, compression)
    data = good + _corrupted(build_batch(recs, 50, compression), len(good) - 10)
    for cls in [STOCK] + CLASSES:
        part = cls(0, TP, MemoryRecords(data), check_crcs=True)
        assert len(_flat(part.take())) == 50  # the good batch, then the error on the next take
        with pytest.raises(CorruptRecordError, match="failed crc check"):
            part.take()
        assert part.next_fetch_offset == 50


def test_structural_corruption_without_crc_check_raises_corrupt_record_error():
    recs = [(i, b"key", b"value", []) for i in range(20)]
    data = build_batch(recs, 0)
    for at in range(61, len(data), 7):
        bad = _corrupted(data, at)
        results = []
        for cls in [STOCK] + CLASSES:
            part = cls(0, TP, MemoryRecords(bad), check_crcs=False)
            got, error = [], None
            try:
                while part:
                    chunk = _flat(part.take())
                    got.extend(chunk)
                    if not chunk:
                        break
            except Exception as e:
                error = type(e)
            results.append((error, len(got)))
        assert all(r == results[0] for r in results), (at, results)
        assert results[0][0] in (None, CorruptRecordError), (at, results)


def _takes(cls, data, fetch_offset, step, check_crcs, takes=12):
    """Each take()'s outcome and the bookkeeping after it, errors included, for at most *takes* calls, while the
    part is not drained (kafka-python takes from no drained part)."""
    part = cls(fetch_offset, TP, MemoryRecords(data), check_crcs=check_crcs)
    out = []
    for _ in range(takes):
        if not part:
            break
        try:
            got = _flat(part.take(step))
            outcome = [tuple(r) for r in got]
        except Exception as e:
            outcome = type(e).__name__
        out.append((outcome, part.next_fetch_offset, part.leader_epoch, part.bytes_read, part.records_read,
                    bool(part)))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=4), data=st.data(),
       step=st.one_of(st.none(), st.integers(min_value=1, max_value=7)), check_crcs=st.booleans(),
       skip=st.integers(min_value=0, max_value=12), control=st.booleans())
def test_partial_takes_and_failures_keep_the_stock_bookkeeping(sizes, data, step, check_crcs, skip, control):
    """Batch by batch take() (the fast path hands decoded batches over whole) against the stock generator: the
    same records per take, the same error on the same take, the same offsets, counts and drain after each."""
    blob = b""
    offset = 0
    for i, n in enumerate(sizes):
        blob += build_batch([(i, b"k%d" % j, b"v" * j, []) for j in range(n)], offset,
                            control=control and i == 1)
        offset += n
    if data.draw(st.booleans(), label="corrupt"):
        blob = _corrupted(blob, data.draw(st.integers(min_value=0, max_value=len(blob) - 1), label="at"))
    stock = _takes(STOCK, blob, skip, step, check_crcs)
    for cls in CLASSES:
        assert _takes(cls, blob, skip, step, check_crcs) == stock, cls


@pytest.mark.parametrize("count_delta", [-3, -1, 1, 5, 1 << 20])
@pytest.mark.parametrize("step", [None, 2])
def test_a_record_count_that_disagrees_with_the_records_fails_as_in_kafka_python(count_delta, step):
    """The header's record count says fewer records than the batch holds (bytes left over) or more (the data ends
    inside a record): every class raises what the stock decoder raises, after the same records."""
    good = build_batch([(i, b"k", b"v" * i, []) for i in range(4)], 0)
    batch = build_batch([(i, b"k", b"v" * i, [("h", b"x")]) for i in range(6)], 4)
    count, = struct.unpack_from(">i", batch, 57)
    bad = bytearray(batch)
    struct.pack_into(">i", bad, 57, count + count_delta)
    data = good + bytes(bad)  # check_crcs off: the count field is not covered by a check here
    stock = _takes(STOCK, data, 0, step, False)
    assert any(isinstance(outcome, str) for outcome, *_ in stock)  # the stock decoder does fail
    for cls in CLASSES:
        assert _takes(cls, data, 0, step, False) == stock, cls


def test_real_broker_records_match_a_plain_kafka_consumer(services, unique):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    from tests.support.consumer_helpers import connector
    from zkconsumer.errors import ConsumerTimeoutError

    topic = services.create_topic(unique("fast-records"), 3)
    n = 600
    producer = KafkaProducer(bootstrap_servers=services.bootstrap_servers, linger_ms=20, acks=1,
                             enable_idempotence=False, batch_size=16384)
    try:
        for i in range(n):
            key = None if i % 7 == 0 else ("key-%d" % i).encode()
            headers = [] if i % 3 else [("h%d" % j, b"" if j == 1 else ("v%d" % (i * j)).encode()) for j in range(3)]
            producer.send(topic, value=("value-%d-" % i).encode() * (1 + i % 50), key=key, headers=headers,
                          partition=i % 3)
        producer.flush(30)
    finally:
        producer.close()

    plain = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tps = [KTP(topic, p) for p in range(3)]
        plain.assign(tps)
        plain.seek_to_beginning(*tps)
        want = []
        for _ in range(200):
            for recs in plain.poll(timeout_ms=500).values():
                want.extend(recs)
            if len(want) >= n:
                break
    finally:
        plain.close()
    assert len(want) == n

    conn = connector(services, unique("fast-records-group"), **{"consumer.timeout.ms": "5000",
                                                                  "auto.commit.enable": "false",
                                                                  "fetch.engine": "kafka-python"})  # its decoder
    try:
        [stream] = conn.create_message_streams({topic: 1})[topic]
        got = []
        try:
            for rec in stream:
                got.append(rec)
                if len(got) >= n:
                    break
        except ConsumerTimeoutError:
            pass
        installed = [vars(f._consumer._fetcher).get("PartitionRecords") for f in conn.fetchers.fetchers
                     if f._consumer is not None]
    finally:
        conn.shutdown()
    assert len(got) == n
    key = lambda r: (r.partition, r.offset)  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)
    assert any(r.headers for r in got) and any(r.key is None for r in got)
    # the fast decoder was really in use (records built as the stream hands them out, where the C extension is built)
    assert installed and all(cls is FAST or issubclass(cls, FAST) for cls in installed)
    assert LAZY is None or all(cls.__name__ == "LazyPartitionRecords" for cls in installed)


def _read_columnar(data, fetch_offset, step, check_crcs, with_headers):
    sink = record_batch.ColumnSink(with_headers=with_headers)
    part = fast_records.columnar_partition_records_class(FAST, sink)(fetch_offset, TP, MemoryRecords(data),
                                                                     check_crcs=check_crcs)
    markers = []
    while part:
        got = part.take(step)
        markers.extend(got)
        if not got and step is None:
            break
    return sink.take(), markers, (part.next_fetch_offset, part.leader_epoch, part.bytes_read, part.records_read)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(batch_spec, min_size=0, max_size=5), start=st.integers(min_value=0, max_value=50),
       skip=st.integers(min_value=0, max_value=40), step=st.one_of(st.none(), st.integers(min_value=1, max_value=7)),
       check_crcs=st.booleans(), with_headers=st.booleans())
def test_columnar_reading_gives_the_columns_of_kafka_pythons_records(batches, start, skip, step, check_crcs,
                                                                      with_headers):
    """install_columnar (the Spark source's path): the sink holds exactly the fields of the records kafka-python
    returns, in order, and the position and bookkeeping end the same; one marker per batch that gave records."""
    data = b""
    offset = start
    for records, compression, epoch, lat, gap, control in batches:
        data += build_batch(records, offset, compression, epoch, lat, control=control, offset_gap=gap)
        offset += len(records) * gap + 1
    stock, _ = read_all(STOCK, data, fetch_offset=start + skip, check_crcs=check_crcs)
    part = STOCK(start + skip, TP, MemoryRecords(data), check_crcs=check_crcs)
    part.take()
    (offsets, stamps, types, keys, values, headers), markers, state = _read_columnar(
        data, start + skip, step, check_crcs, with_headers)
    assert offsets == [r.offset for r in stock] and stamps == [r.timestamp for r in stock]
    assert types == [r.timestamp_type for r in stock] and keys == [r.key for r in stock]
    assert values == [r.value for r in stock]
    assert headers == ([r.headers for r in stock] if with_headers else None)
    assert state == (part.next_fetch_offset, part.leader_epoch, part.bytes_read, part.records_read)
    assert [m.offset for m in markers] == sorted({m.offset for m in markers}) and len(markers) <= len(batches)
    assert (not markers) == (not stock) and (not stock or markers[-1].offset == stock[-1].offset)


def test_columnar_c_and_python_agree():
    recs = [ConsumerRecord("t", 0, -1, o, 10 * o, o % 2, None if o % 3 else b"k", b"v%d" % o, [("h", b"x")], None,
                           1, 2, 3) for o in range(50)]
    c_lists, py_lists = [[] for _ in range(6)], [[] for _ in range(6)]
    assert record_batch.columns(recs, 7, *c_lists) == record_batch.columns_py(recs, 7, *py_lists) == (43, 49)
    assert c_lists == py_lists and c_lists[0] == list(range(7, 50))
    assert record_batch.columns(recs, 99, [], [], [], [], [], None) == (0, None)


def test_read_range_columnar_and_record_paths_agree(services, unique, monkeypatch):
    """The Spark source's read_range: the columnar path (records decoded into columns) and the path through the
    consumer's records (where install_columnar is unavailable) give the same Arrow batches, headers included, the
    range's end trimmed."""
    from kafka import KafkaProducer
    from zkconsumer.spark import kafka_io

    topic = services.create_topic(unique("columnar"), 1)
    producer = KafkaProducer(bootstrap_servers=services.bootstrap_servers, linger_ms=20, acks=1,
                             enable_idempotence=False, batch_size=4096)
    try:
        for i in range(700):
            producer.send(topic, value=b"v%d" % i * (1 + i % 9), key=None if i % 5 else b"k%d" % i, partition=0,
                          headers=[("h", b"%d" % i)] if i % 4 == 0 else [])
        producer.flush(30)
    finally:
        producer.close()

    def read(**kw):
        return [b.to_pylist() for b in kafka_io.read_range(services.bootstrap_servers, topic, 0, 13, 650,
                                                           batch_rows=100, include_headers=True, **kw)]
    columnar = read()
    monkeypatch.setattr(fast_records, "install_columnar", lambda consumer, sink: False)
    through_records = read()
    rows = [r for batch in columnar for r in batch]
    assert [len(b) for b in columnar] == [100] * 6 + [37]  # arrowBatchSize rows per batch, whatever the polls
    assert columnar == through_records and [r["offset"] for r in rows] == list(range(13, 650))
    assert rows[0]["value"] == b"v13" * 5 and rows[0]["headers"] is None and rows[3]["headers"][0]["value"] == b"16"
