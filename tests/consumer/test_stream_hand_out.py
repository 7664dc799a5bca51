"""The stream's hand-out within a chunk (KafkaStream.__next__, the per-record hot path): a generation bump, a close
or a stale lease stops the rest of a chunk, next() and give_back() may be mixed into a for loop, and an exception
inside the hand-out leaves the in-flight flag down with nothing skipped. Every test runs against both hand-outs, the
C one (zkconsumer._stream, when built) and the Python one. Pure code: no services needed."""
import queue
import threading
import time
from collections import namedtuple

import pytest

from kafka.consumer.fetcher import ConsumerRecord

from zkconsumer.consumer import stream as stream_module
from zkconsumer.consumer.lease import SessionLease
from zkconsumer.consumer.partition_info import PartitionTopicInfo
from zkconsumer.consumer.stream import Chunk, Generation, KafkaStream, PyKafkaStream

R = namedtuple("R", "topic partition offset")

STREAMS = [pytest.param(PyKafkaStream, id="python")]
if stream_module.HAND_OUT == "c":
    STREAMS.insert(0, pytest.param(KafkaStream, id="c"))


@pytest.fixture(params=STREAMS, autouse=True)
def stream_class(request, monkeypatch):
    monkeypatch.setitem(globals(), "STREAM", request.param)
    return request.param


STREAM = KafkaStream


def _stream(*chunks, lease=None):
    q = queue.Queue()
    for c in chunks:
        q.put(c)
    g = Generation()
    return STREAM(q, g, timeout_ms=0, lease=lease), g, q


def _part():
    return PartitionTopicInfo(("t", 0), "c-0")


def _chunk(gen, offsets, part=None, record=R):
    part = part if part is not None else _part()
    if record is R:
        return Chunk(gen, part, [R("t", part.tp[1], o) for o in offsets])
    return Chunk(gen, part, [ConsumerRecord("t", part.tp[1], -1, o, 0, 0, None, b"v", [], None, -1, 1, -1)
                             for o in offsets])


def _drain(s):
    from zkconsumer.errors import ConsumerTimeoutError
    out = []
    try:
        for rec in s:
            out.append(rec.offset)
    except ConsumerTimeoutError:
        pass
    return out


@pytest.mark.parametrize("record", [R, ConsumerRecord])
def test_a_generation_bump_stops_the_rest_of_the_chunk(record):
    old, new = _part(), _part()
    s, g, q = _stream(_chunk(0, range(5), old, record))
    got = []
    for rec in s:
        got.append(rec.offset)
        if rec.offset == 1:
            g.value = 1  # a rebalance: what is left of generation 0 must not be handed out
            q.put(_chunk(1, [10, 11], new, record))
        if rec.offset == 11:
            break
    assert got == [0, 1, 10, 11]
    assert (old.consumed, new.consumed) == (2, 12)


def test_next_and_give_back_mixed_into_a_for_loop():
    part = _part()
    s, _, _ = _stream(_chunk(0, range(6), part))
    got = []
    it = iter(s)
    got.append(next(it).offset)          # 0, by the loop's iterator
    got.append(next(s).offset)           # 1, by the stream itself
    rec = next(it)                       # 2
    got.append(rec.offset)
    s.give_back(rec)                     # 2 again
    assert part.consumed == 2
    for r in it:
        got.append(r.offset)
        if r.offset == 5:
            break
    assert got == [0, 1, 2, 2, 3, 4, 5] and part.consumed == 6


def test_close_stops_the_for_loop():
    s, _, _ = _stream(_chunk(0, range(5)))
    got = []
    for rec in s:
        got.append(rec.offset)
        if rec.offset == 2:
            s.close()
    assert got == [0, 1, 2]


class _Lease:
    """A lease whose deadline the test moves; wait_fresh counts its calls and renews."""

    def __init__(self):
        self.now, self.deadline, self.waits = 0.0, 10.0, 0

    def clock(self):
        return self.now

    def pause(self):
        self.now = 20.0  # a pause: the session may have expired

    def wait_fresh(self, give_up):
        self.waits += 1
        self.deadline = self.now + 10.0
        return True


class _Renewing(SessionLease):
    """A real lease (its deadline a slot, read where the C hand-out reads it) on time.monotonic; wait_fresh counts
    its calls and renews."""

    def __init__(self):
        super().__init__(None, 6000)
        self.deadline, self.waits = time.monotonic() + 60.0, 0

    def pause(self):
        self.deadline = time.monotonic() - 0.001  # just past, on the session's own clock

    def wait_fresh(self, abort=lambda: False, poll=0.05):
        self.waits += 1
        self.deadline = time.monotonic() + 60.0
        return True


@pytest.mark.parametrize("lease_class", [_Lease, _Renewing], ids=["injected-clock", "session-lease"])
def test_a_stale_lease_is_checked_before_the_next_record_of_a_chunk(lease_class):
    lease = lease_class()
    s, _, _ = _stream(_chunk(0, range(4)), lease=lease)
    got = []
    for rec in s:
        got.append(rec.offset)
        if rec.offset == 1:
            lease.pause()
        if rec.offset == 3:
            break
    assert got == [0, 1, 2, 3] and lease.waits == 1


class _Counted(PartitionTopicInfo):
    __slots__ = ()


def test_the_consumed_position_goes_where_the_partitions_type_says_even_when_it_changes():
    """The hand-out writes the consumed position at the slot's place only while the type's attribute is that slot:
    a property defined on the type later, or another type of partition, gets the write its own way."""
    part, other = _Counted(("t", 0), "c-0"), PartitionTopicInfo(("t", 1), "c-0")
    s, _, _ = _stream(_chunk(0, range(2), part), _chunk(0, range(5, 7), other), _chunk(0, range(10, 12), part))
    it = iter(s)
    assert next(it).offset == 0 and part.consumed == 1
    seen = []
    slot = PartitionTopicInfo.consumed
    try:
        _Counted.consumed = property(slot.__get__, lambda self, v: (seen.append(v), slot.__set__(self, v)))
        assert part.consumed == 1  # a lookup on the changed type, which gives it a new version
        assert next(it).offset == 1 and part.consumed == 2 and seen == [2]
        assert [next(it).offset, next(it).offset] == [5, 6] and other.consumed == 7
        assert [next(it).offset, next(it).offset] == [10, 11] and part.consumed == 12 and seen == [2, 11, 12]
    finally:
        del _Counted.consumed
    assert _drain(s) == [] and part.consumed == 12


class _Foreign:
    """A partition-like object carrying PartitionTopicInfo's slot descriptor without being one: the descriptor
    refuses it, and so must the hand-out (it must not write at another class's offset)."""

    __slots__ = ("tp",)
    consumed = PartitionTopicInfo.consumed

    def __init__(self, tp):
        self.tp = tp


def test_a_slot_descriptor_of_another_class_is_refused_as_python_refuses_it():
    s, _, _ = _stream(_chunk(0, range(2), _Foreign(("t", 0))))
    with pytest.raises(TypeError, match="doesn't apply"):
        next(iter(s))


class _FailsOn(PartitionTopicInfo):
    """Recording the consumed position *offset* + 1 raises once (as an asynchronous exception could)."""

    __slots__ = ("offset", "failed")

    def __setattr__(self, name, value):
        if name == "consumed" and value is not None and value == getattr(self, "offset", -2) + 1 \
                and not self.failed:
            object.__setattr__(self, "failed", True)
            raise KeyboardInterrupt("landed inside the hand-out")
        object.__setattr__(self, name, value)


def test_an_exception_mid_chunk_does_not_wedge_the_fence_or_skip_a_record():
    part = _FailsOn(("t", 0), "c-0")
    part.offset, part.failed = 2, False
    s, _, _ = _stream(_chunk(0, range(4), part))
    got = []
    with pytest.raises(KeyboardInterrupt):
        for rec in s:
            got.append(rec.offset)
    assert got == [0, 1]
    done = threading.Event()
    threading.Thread(target=lambda: (s.fence(), done.set()), daemon=True).start()
    assert done.wait(2.0), "fence() wedged on an in-flight flag left up by an exception"
    assert _drain(s) == [2, 3] and part.consumed == 4  # nothing skipped


def _lazy_chunk(gen, offsets, part):
    """A chunk whose records are a LazyRecords (what the fetchers queue): built one by one as they are handed out."""
    import struct
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from zkconsumer.kafka.record_batch import BATCH_HEADER_SIZE, scan_records
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, o in enumerate(offsets):
        builder.append(o - offsets[0], timestamp=1700000000000 + i, key=None, value=b"v%d" % o, headers=[])
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, offsets[0])
    data = bytes(batch)
    records, _, error = scan_records(data, BATCH_HEADER_SIZE, len(data), len(offsets), offsets[0], 1700000000000,
                                     1700000000000 + len(offsets), False, "t", part.tp[1], -1, ConsumerRecord)
    assert error is None and len(records) == len(offsets)
    return Chunk(gen, part, records)


@pytest.mark.skipif(stream_module.HAND_OUT != "c", reason="LazyRecords come with the C extension")
def test_records_built_at_hand_out_can_be_given_back_and_fenced():
    part = _part()
    s, g, q = _stream(_lazy_chunk(0, list(range(5)), part))
    it = iter(s)
    first = next(it)
    assert type(first) is ConsumerRecord and first.offset == 0 and first.value == b"v0" and part.consumed == 1
    rec = next(it)
    s.give_back(rec)  # the record handed out last is the same object when read again
    assert part.consumed == 1 and next(it) is rec and part.consumed == 2
    g.value = 1  # a rebalance: the rest of the chunk is not built or handed out
    q.put(_lazy_chunk(1, [7, 8], part))
    assert _drain(s) == [7, 8] and part.consumed == 9
