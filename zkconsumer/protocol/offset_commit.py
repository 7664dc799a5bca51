"""OffsetCommit v2-v5 with its partitions encoded in one pass.

kafka-python 3.0 builds an object per partition (``OffsetCommitRequestPartition``) and encodes each one field by
field: about 4 ms of CPU for 1,000 partitions, which is most of a commit's client time and, under the interpreter
lock, time the dual store's ZooKeeper half waits for. In versions 2 to 5 the topics array is the request's last
field and every partition is ``partition_index int32, committed_offset int64, committed_metadata string`` (no leader
epoch: v6; no flexible encoding: v8), so this class lets kafka-python encode the header and the fields before the
array (group, generation, member, retention) and appends the array itself with ``struct``: byte-identical output
(``tests/test_offset_commit_request.py``), ~0.3 ms. Any other version is encoded by kafka-python from the same
offsets. The class keeps kafka-python's name, which is how kafka-python finds the message's schema.

The answer to such a request (v2-v5: ``throttle_time_ms`` from v3, then per topic its name and per partition
``partition_index int32, error_code int16``) is read with ``struct`` too, into :class:`OffsetCommitResult`'s
``error_codes``: kafka-python's generic decoder built an object per partition (~1 ms of the IO thread for 1,000
partitions). When every error code is 0 (checked on the raw bytes) only the partition ids are read, in one
``unpack``, and no dict is built: ``acknowledges(request)`` compares them with the request's (~0.03 ms). The
request's header hands kafka-python this reader for its own answer only; every other OffsetCommit in the process
is decoded by kafka-python as before.
"""
from __future__ import annotations

import functools
import struct
from typing import Dict, List, Optional, Tuple

from kafka.protocol import consumer as _consumer

from .. import client_internals

__all__ = ["OffsetCommitRequest", "OffsetCommitResult", "make_request"]

_TOPIC = _consumer.OffsetCommitRequest.OffsetCommitRequestTopic
_PARTITION = _TOPIC.OffsetCommitRequestPartition
_COUNT = struct.Struct(">i")
_NAME_LEN = struct.Struct(">h")
# partition, offset, metadata "" (string length 0)
_ENTRY = struct.Struct(">iqh")
# partition, error code
_ANSWER = struct.Struct(">ih")


class OffsetCommitRequest(_consumer.OffsetCommitRequest):
    __slots__ = ("offsets_by_topic",)

    def encode(self, version=None, header=False, framed=False):
        v = self.API_VERSION if version is None else version
        if v is None or not 2 <= v <= 5 or self.topics:
            if not self.topics:
                self.topics = _topics(self.offsets_by_topic)
            return super().encode(version=version, header=header, framed=framed)
        # ends with the empty array's count
        head = super().encode(version=version, header=header, framed=False)
        parts = [head[:-4], _COUNT.pack(len(self.offsets_by_topic))]
        pack = _ENTRY.pack
        for topic, entries in self.offsets_by_topic.items():
            name = topic.encode("utf-8")
            parts.append(_NAME_LEN.pack(len(name)) + name + _COUNT.pack(len(entries)))
            parts.extend([pack(p, off, 0) for p, off in entries])
        body = b"".join(parts)
        return _COUNT.pack(len(body)) + body if framed else body

    def with_header(self, correlation_id=0, client_id="kafka-python"):
        super().with_header(correlation_id=correlation_id, client_id=client_id)
        client_internals.wrap_header(self, _Header)


class _Header:
    """kafka-python's request header, except that it names :class:`_Reader` as the reader of a v2-v5 answer."""

    __slots__ = ("_header",)

    def __init__(self, header):
        object.__setattr__(self, "_header", header)

    def __getattr__(self, name):
        return getattr(self._header, name)

    def __setattr__(self, name, value):
        setattr(self._header, name, value)

    def get_response_class(self):
        version = self._header.request_api_version
        if version is not None and 2 <= version <= 5:
            return _Reader(version)
        return self._header.get_response_class()

    def __repr__(self):
        return repr(self._header)


class OffsetCommitResult:
    """An OffsetCommit v2-v5 answer. ``error_codes``: ``{(topic, partition): error code}`` (0: committed), built
    on first use; :meth:`acknowledges` tells, without building it, whether every partition of a request was
    committed (the usual answer)."""

    __slots__ = ("correlation_id", "throttle_time_ms", "_topics", "_codes")

    def __init__(self, correlation_id: int, throttle_time_ms: int,
                 topics: List[Tuple[str, Tuple[int, ...], Optional[Tuple[int, ...]]]]):
        self.correlation_id = correlation_id
        self.throttle_time_ms = throttle_time_ms
        # per topic: name, partitions, error codes (None: all 0)
        self._topics = topics
        self._codes: Optional[Dict[Tuple[str, int], int]] = None

    @property
    def error_codes(self) -> Dict[Tuple[str, int], int]:
        if self._codes is None:
            codes: Dict[Tuple[str, int], int] = {}
            for name, partitions, errors in self._topics:
                codes.update(zip([(name, p) for p in partitions], errors or [0] * len(partitions)))
            self._codes = codes
        return self._codes

    def acknowledges(self, offsets_by_topic: Dict[str, List[Tuple[int, int]]]) -> bool:
        """True when this answers exactly the partitions of *offsets_by_topic* (a request's, partitions in
        order), each with error 0."""
        if len(self._topics) != len(offsets_by_topic):
            return False
        seen = set()
        for name, partitions, errors in self._topics:
            entries = offsets_by_topic.get(name)
            if errors is not None or entries is None or name in seen or len(entries) != len(partitions):
                return False
            seen.add(name)
            if sorted(partitions) != [p for p, _ in entries]:
                return False
        return True

    def __repr__(self):
        failed = sum(1 for code in self.error_codes.values() if code)
        return "OffsetCommitResult(%d partitions, %d failed, throttle_time_ms=%d)" % (
            len(self.error_codes), failed, self.throttle_time_ms)


class _Reader:
    """What kafka-python's parser asks of a response class: ``parse_header`` then ``decode`` of one answer."""

    __slots__ = ("version", "correlation_id")

    def __init__(self, version: int):
        self.version = version
        self.correlation_id = -1

    def parse_header(self, read_buffer):
        # response header v0: the correlation id
        (self.correlation_id,) = _COUNT.unpack(read_buffer.read(4))
        return self

    def decode(self, read_buffer) -> OffsetCommitResult:
        # a malformed answer raises struct.error or UnicodeDecodeError (a ValueError): the errors kafka-python's
        # parser turns into KafkaProtocolError
        return _decode(bytes(read_buffer.read()), self.version, self.correlation_id)


def _decode(data: bytes, version: int, correlation_id: int) -> OffsetCommitResult:
    pos, throttle = 0, 0
    if version >= 3:
        (throttle,) = _COUNT.unpack_from(data, pos)
        pos += 4
    (count_topics,) = _COUNT.unpack_from(data, pos)
    pos += 4
    topics: List[Tuple[str, Tuple[int, ...], Optional[Tuple[int, ...]]]] = []
    for _ in range(count_topics):
        (n,) = _NAME_LEN.unpack_from(data, pos)
        name = data[pos + 2:pos + 2 + n].decode("utf-8")
        pos += 2 + n
        (count,) = _COUNT.unpack_from(data, pos)
        pos += 4
        end = pos + count * _ANSWER.size
        if count < 0 or end > len(data):
            raise struct.error("answer truncated: %d partitions of %s announced" % (count, name))
        raw = data[pos:end]
        # every error code is 0 (the usual)
        if raw[4::6].count(0) == count and raw[5::6].count(0) == count:
            topics.append((name, _partitions(count).unpack(raw), None))
        else:
            answers = list(_ANSWER.iter_unpack(raw))
            topics.append((name, tuple(p for p, _ in answers), tuple(code for _, code in answers)))
        pos = end
    if pos != len(data):
        raise struct.error("%d bytes after the last topic" % (len(data) - pos))
    return OffsetCommitResult(correlation_id, throttle, topics)


@functools.lru_cache(maxsize=64)
def _partitions(count: int) -> struct.Struct:
    """Reads the partition ids of *count* answers, skipping their (zero) error codes."""
    return struct.Struct(">" + "i2x" * count)


def _topics(offsets_by_topic: Dict[str, List[Tuple[int, int]]]) -> list:
    return [_TOPIC(name=t, partitions=[_PARTITION(partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                                                  committed_metadata="") for p, off in entries])
            for t, entries in offsets_by_topic.items()]


def make_request(group: str, offsets: Dict[Tuple[str, int], int]) -> OffsetCommitRequest:
    """A simple-consumer commit (generation -1, no member) of ``{(topic, partition): offset}``, empty metadata,
    version 5 at most."""
    by_topic: Dict[str, List[Tuple[int, int]]] = {}
    for (t, p), off in offsets.items():
        entries = by_topic.get(t)
        if entries is None:
            entries = by_topic[t] = []
        entries.append((p, off))
    for entries in by_topic.values():
        # ints: cheap, and usually sorted already
        entries.sort()
    by_topic = dict(sorted(by_topic.items()))
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, retention_time_ms=-1, topics=[], max_version=5)
    request.offsets_by_topic = by_topic
    return request
