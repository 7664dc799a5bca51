"""zkconsumer._records, the C record decoder, against the pure-Python decoder of zkconsumer.kafka.record_batch.

The C extension is what the consumer uses (``record_batch.DECODER == "c"``); it must be built on the machines that
run the suite (``.ci/bootstrap`` builds it with the package: it needs a C compiler and Python's headers). The Python
decoder is itself checked against kafka-python's stock decoder in test_fast_records.py; here hypothesis checks that
the two decoders return the same records and sizes, and fail on the same inputs, for valid record data, valid data
with bytes flipped, cut or appended, and arbitrary bytes.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import CorruptRecordError

from zkconsumer.kafka import record_batch

C = record_batch._c_records


def test_the_c_decoder_is_built_and_in_use():
    assert C is not None, ("zkconsumer._records (zkconsumer/_records.c) is not built: install a C compiler and "
                           "Python's headers (apt-get install gcc python3-dev) and run .ci/bootstrap again")
    assert record_batch.DECODER == "c" and record_batch.decode_records is record_batch._decode_records_c


def zigzag(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_record(ts_delta, offset_delta, key, value, headers):
    body = bytearray(b"\x00")
    body += zigzag(ts_delta) + zigzag(offset_delta)
    body += zigzag(-1) if key is None else zigzag(len(key)) + key
    body += zigzag(-1) if value is None else zigzag(len(value)) + value
    body += zigzag(len(headers))
    for hk, hv in headers:
        hkb = hk.encode("utf-8")
        body += zigzag(len(hkb)) + hkb
        body += zigzag(-1) if hv is None else zigzag(len(hv)) + hv
    return zigzag(len(body)) + bytes(body)


blobs = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(st.tuples(st.integers(-(1 << 40), 1 << 40), st.integers(0, 1 << 20), blobs, blobs,
                             st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)), max_size=12)


def both(buf, pos, end, count, base=1000, first_ts=1_700_000_000_000, max_ts=1_700_000_000_999, lat=0):
    args = (buf, pos, end, count, base, first_ts, max_ts, lat, "t", 3, 5, ConsumerRecord)
    c = record_batch._decode_records_c(*args)
    assert_scan_same(args, c)
    return record_batch.decode_records_py(*args), c


def assert_scan_same(args, decoded):
    """The lazy check (scan_batch) keeps exactly the records the C decoder decodes, with their sizes, offsets and
    payload bytes, and stops with the same error."""
    if not isinstance(args[0], bytes):
        return
    lazy, sizes, error = record_batch.scan_records(*args)
    recs, dsizes, derror = decoded
    assert [lazy[i] for i in range(len(lazy))] == recs
    assert [lazy.offset(i) for i in range(len(lazy))] == [r.offset for r in recs]
    assert sizes == dsizes
    assert lazy.nbytes == record_batch.payload_bytes(recs)
    assert (error is None) == (derror is None) and str(error) == str(derror), (error, derror)


def assert_same(py, c):
    (precs, psizes, perr), (crecs, csizes, cerr) = py, c
    assert crecs == precs
    assert all(type(r) is ConsumerRecord for r in crecs)
    assert csizes == psizes
    assert (perr is None) == (cerr is None), (perr, cerr)
    if cerr is not None:
        assert isinstance(cerr, CorruptRecordError) and isinstance(perr, CorruptRecordError)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.integers(0, 8), st.booleans(), st.integers(-(1 << 62), 1 << 62))
def test_valid_records_decode_identically(recs, prefix, log_append_time, base):
    data = b"\xff" * prefix + b"".join(encode_record(*r) for r in recs)
    py, c = both(data, prefix, len(data), len(recs), base=base, lat=8 if log_append_time else 0)
    assert py[2] is None and len(py[0]) == len(recs)
    assert_same(py, c)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.data())
def test_damaged_records_fail_or_decode_identically(recs, data):
    good = b"".join(encode_record(*r) for r in recs)
    buf = bytearray(good)
    for _ in range(data.draw(st.integers(0, 4))):
        if buf:
            i = data.draw(st.integers(0, len(buf) - 1))
            buf[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    buf = bytes(buf[:cut]) + data.draw(st.binary(max_size=6))
    end = data.draw(st.integers(0, len(buf)))
    count = data.draw(st.integers(0, len(recs) + 2))
    assert_same(*both(buf, 0, end, count))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 5))
def test_arbitrary_bytes_fail_or_decode_identically(buf, count):
    assert_same(*both(buf, 0, len(buf), count))


def test_long_varints_keep_64_bits_as_java_does():
    # a 10-byte varint whose last byte sets bits past the 64th: Java's readVarlong drops them, so do both decoders
    ten = bytes([0xFF] * 9 + [0x7F])
    rec = b"\x00" + ten + b"\x00" + b"\x01" + b"\x01"  # attrs, ts delta (huge), offset delta 0, key -1, value -1
    data = zigzag(len(rec) + 1) + rec + b"\x00"  # + header count 0
    py, c = both(data, 0, len(data), 1)
    assert_same(py, c)
    assert py[2] is None
    assert -(1 << 63) <= py[0][0].timestamp - 1_700_000_000_000 < (1 << 63)
    eleven = bytes([0xFF] * 10 + [0x01])  # 11 bytes: too long for both
    bad = b"\x00" + eleven + b"\x00\x01\x01\x00"
    assert_same(*both(zigzag(len(bad)) + bad, 0, len(bad) + 1, 1))


def test_payload_bytes_counts_keys_and_values():
    data = encode_record(0, 0, b"k" * 3, b"v" * 10, []) + encode_record(0, 1, None, b"v" * 7, [("h", b"x")])
    recs, _, err = record_batch.decode_records(data, 0, len(data), 2, 0, 0, 0, 0, "t", 0, -1, ConsumerRecord)
    assert err is None and record_batch.payload_bytes(recs) == 20
    assert C.payload_bytes(recs) == 20
    with pytest.raises(TypeError):
        C.payload_bytes([("not", "a", "record")])


def test_memoryview_and_bytearray_buffers():
    data = encode_record(5, 0, None, b"abc", [])
    for buf in (bytearray(data), memoryview(data)):
        recs, sizes, err = C.decode_records(buf, 0, len(data), 1, 10, 100, 200, 0, "t", 0, 1, ConsumerRecord)
        assert err is None and recs[0].value == b"abc" and recs[0].offset == 10 and recs[0].timestamp == 105


def big_records(n, data):
    """n records of about 100 bytes (keys, headers and lengths drawn): a batch of more than 16 KiB, which scan_batch
    checks without the interpreter lock"""
    out = []
    for i in range(n):
        key = data.draw(st.one_of(st.none(), st.binary(max_size=20))) if i % 37 == 0 else None
        headers = data.draw(st.lists(st.tuples(st.text(max_size=6), blobs), max_size=2)) if i % 53 == 0 else []
        out.append(encode_record(i * 3, i, key, b"x" * (100 + i % 7), headers))
    return b"".join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_large_batches_check_without_the_lock_as_they_decode(data):
    n = data.draw(st.integers(160, 400))
    buf = bytearray(big_records(n, data))
    assert len(buf) >= 16384
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    end = data.draw(st.integers(len(buf) - 200, len(buf)))
    assert_same(*both(bytes(buf), 0, end, data.draw(st.integers(n - 2, n + 1))))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.integers(0, 7))
def test_crc32c_matches_the_crc32c_package(data, skip):
    from crc32c import crc32c
    view = memoryview(data)[min(skip, len(data)):]  # any alignment
    assert C.crc32c(view) == crc32c(view)
    assert C.crc32c(view, False) == crc32c(view)  # by tables, where the CPU has the instruction too


def test_the_batch_crc_is_checked_with_the_records():
    from crc32c import crc32c
    for n in (3, 300):  # a small batch (checked under the lock) and a large one (without it)
        recs = b"".join(encode_record(i, i, None, b"v" * 100, []) for i in range(n))
        head = bytes(range(61))
        data = head + recs
        args = (data, 61, len(data), n, 1000, 0, 0, 0, "t", 3, 5, ConsumerRecord)
        crc = crc32c(data[21:])
        plain = record_batch.scan_records(*args)
        checked = record_batch.scan_records(*args, 21, crc)
        assert checked is not None and [list(x) if isinstance(x, C.LazyRecords) else x for x in checked] == \
            [list(x) if isinstance(x, C.LazyRecords) else x for x in plain]
        assert record_batch.scan_records(*args, 21, crc ^ 1) is None
        bad = bytearray(data)
        bad[-5] ^= 1  # a value byte: structurally fine, the CRC tells
        assert record_batch.scan_records(bytes(bad), *args[1:], 21, crc) is None
    with pytest.raises(ValueError, match="CRC"):
        record_batch.scan_records(data, *args[1:2], len(data) + 1, *args[3:], 21, crc)


def test_batches_are_checked_in_one_call_up_to_the_first_that_fails():
    from crc32c import crc32c
    data, jobs = b"", []
    for k in range(6):  # six small batches (each under 16 KiB, all of them over)
        recs = b"".join(encode_record(i, i, None, b"v" * 100, []) for i in range(40 * (k + 1)))
        data += bytes(61)
        start = len(data) - 61
        data += recs
        jobs.append((start + 61, len(data), 40 * (k + 1), 1000 * k, 0, 0, 0, "t", 3, 5, ConsumerRecord, start + 21,
                     crc32c(data[start + 21:])))
    one = [record_batch.scan_records(data, *job) for job in jobs]
    every = record_batch.scan_batches(data, jobs)
    assert len(every) == 6 and all(x is not None and y is not None for x, y in zip(one, every))
    for (lazy, sizes, error), (lazy2, sizes2, error2) in zip(one, every):
        assert list(lazy) == list(lazy2) and sizes == sizes2 and error is None and error2 is None
    bad = list(jobs)
    bad[2] = bad[2][:-1] + (bad[2][-1] ^ 1,)  # the third batch's CRC differs: it is the last one read
    got = record_batch.scan_batches(data, bad)
    assert len(got) == 3 and got[2] is None and list(got[1][0]) == list(one[1][0])
    bad = list(jobs)
    bad[1] = (bad[1][0], bad[1][1] - 3) + bad[1][2:-2] + (-1, 0)  # the second batch's records run past its end
    got = record_batch.scan_batches(data, bad)
    assert len(got) == 2 and isinstance(got[1][2], CorruptRecordError) and len(got[1][0]) == 79
    assert record_batch.scan_batches(data, []) == []
    with pytest.raises(TypeError):
        C.scan_batches(data, [jobs[0], "not a batch"])


@pytest.mark.parametrize("small", [False, True])
def test_a_fetch_is_checked_while_other_threads_run(small):
    """Other Python threads run while the records of a fetch are checked (one large batch, or many small ones):
    with a switch interval far longer than the test, a thread can only run when another gives the lock up, and
    the checks are all the main thread does."""
    import sys
    import threading
    import time
    recs = b"".join(encode_record(i, i % 100, None, b"v" * 100, []) for i in range(100_000))
    if small:  # batches of 100 records (~11 KB each)
        step = len(encode_record(0, 0, None, b"v" * 100, []))
        jobs = [(k * step * 100, (k + 1) * step * 100, 100, k * 100, 0, 0, 0, "t", 3, 5, ConsumerRecord)
                for k in range(1000)]

        def check():
            C.scan_batches(recs, jobs)
    else:
        def check():
            C.scan_batch(recs, 0, len(recs), 100_000, 0, 0, 0, 0, "t", 3, 5, ConsumerRecord)
    ran = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ran[0] += 1
            time.sleep(0)  # gives the lock back at once: the main thread is never kept waiting

    old = sys.getswitchinterval()
    t = threading.Thread(target=spin, daemon=True)
    sys.setswitchinterval(1000.0)
    try:
        t.start()
        deadline = time.monotonic() + 30
        while True:
            before = ran[0]
            check()
            if ran[0] > before or time.monotonic() > deadline:
                break
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()
    assert ran[0] > before, "no other thread ran while a fetch was checked: it held the interpreter lock"
