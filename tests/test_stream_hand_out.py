"""The stream's hand-out within a chunk (KafkaStream.__next__, the per-record hot path): a generation bump, a close
or a stale lease stops the rest of a chunk, next() and give_back() may be mixed into a for loop, and an exception
inside the hand-out leaves the in-flight flag down with nothing skipped. Pure code: no services needed."""
import queue
import threading
from collections import namedtuple

import pytest

from zkconsumer.consumer.partition_info import PartitionTopicInfo
from zkconsumer.consumer.stream import Chunk, Generation, KafkaStream

R = namedtuple("R", "topic partition offset")


def _stream(*chunks, lease=None):
    q = queue.Queue()
    for c in chunks:
        q.put(c)
    g = Generation()
    return KafkaStream(q, g, timeout_ms=0, lease=lease), g, q


def _chunk(gen, offsets, part=None):
    part = part if part is not None else PartitionTopicInfo(("t", 0), "g_c-0")
    return Chunk(gen, part, [R(part.tp[0], part.tp[1], o) for o in offsets])


def _drain(s):
    from zkconsumer.errors import ConsumerTimeoutError
    out = []
    try:
        for rec in s:
            out.append(rec.offset)
    except ConsumerTimeoutError:
        pass
    return out


def test_a_generation_bump_stops_the_rest_of_the_chunk():
    old, new = PartitionTopicInfo(("t", 0), "g_c-0"), PartitionTopicInfo(("t", 0), "g_c-0")
    s, g, q = _stream(_chunk(0, range(5), old))
    got = []
    for rec in s:
        got.append(rec.offset)
        if rec.offset == 1:
            g.value = 1  # a rebalance: what is left of generation 0 must not be handed out
            q.put(_chunk(1, [10, 11], new))
        if rec.offset == 11:
            break
    assert got == [0, 1, 10, 11]
    assert (old.consumed, new.consumed) == (2, 12)


def test_next_and_give_back_mixed_into_a_for_loop():
    part = PartitionTopicInfo(("t", 0), "g_c-0")
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

    def wait_fresh(self, give_up):
        self.waits += 1
        self.deadline = self.now + 10.0
        return True


def test_a_stale_lease_is_checked_before_the_next_record_of_a_chunk():
    lease = _Lease()
    s, _, _ = _stream(_chunk(0, range(4)), lease=lease)
    got = []
    for rec in s:
        got.append(rec.offset)
        if rec.offset == 1:
            lease.now = 20.0  # a pause: the session may have expired
        if rec.offset == 3:
            break
    assert got == [0, 1, 2, 3] and lease.waits == 1


class _FailsOn(PartitionTopicInfo):
    """A partition whose consumed position cannot be recorded once: when it would become offset + 1."""

    def __init__(self, offset):
        self.offset, self.failed, self._consumed = offset, False, None
        super().__init__(("t", 0), "g_c-0")

    @property
    def consumed(self):
        return self._consumed

    @consumed.setter
    def consumed(self, v):
        if v == self.offset + 1 and not self.failed:
            self.failed = True
            raise KeyboardInterrupt("landed inside the hand-out")
        self._consumed = v


def test_an_exception_mid_chunk_does_not_wedge_the_fence_or_skip_a_record():
    part = _FailsOn(2)
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
