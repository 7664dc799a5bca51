"""Fetch v4 request and response, encoded and read with ``struct`` (pure).

:mod:`zkconsumer.kafka.idle_watch` asks the leaders of a fetcher's caught-up partitions whether anything arrived
with these: one request per broker per wait (``fetch.idle.wait.ms``, or ``fetch.wait.max.ms``:
:func:`zkconsumer.consumer.fetcher.idle_wait_ms`), read only as far as each partition's error code, high
watermark and the length of its records (the records themselves are skipped: the fetcher's client fetches them).
Version 4 (Kafka 0.11, ``FetchRequest`` in ``clients/src/main/resources/common/message/FetchRequest.json``) is the
oldest version Kafka 4.x still answers (KIP-896) and needs no fetch session; its header is request header v1, its
answer's response header v0 (no tagged fields).

Request: ``replica_id int32, max_wait_ms int32, min_bytes int32, max_bytes int32, isolation_level int8`` and per
topic ``name string`` and per partition ``partition int32, fetch_offset int64, partition_max_bytes int32``.
Response: ``throttle_time_ms int32`` and per topic ``name string`` and per partition ``partition_index int32,
error_code int16, high_watermark int64, last_stable_offset int64, aborted_transactions [producer_id int64,
first_offset int64] (nullable), records bytes (nullable)``.
"""
from __future__ import annotations

import struct
from typing import Dict, Iterable, List, NamedTuple, Tuple

__all__ = ["API_KEY", "VERSION", "encode_request", "decode_response", "PartitionAnswer", "FetchAnswerError"]

API_KEY = 1
VERSION = 4

_HEADER = struct.Struct(">hhih")          # api key, version, correlation id, client id length
_BODY = struct.Struct(">iiiib")           # replica id, max wait, min bytes, max bytes, isolation level
_COUNT = struct.Struct(">i")
_NAME = struct.Struct(">h")
_PARTITION = struct.Struct(">iqi")        # partition, fetch offset, partition max bytes
_ANSWER = struct.Struct(">ihqq")          # partition, error code, high watermark, last stable offset
_ABORTED = 16                             # producer id int64, first offset int64


class PartitionAnswer(NamedTuple):
    error_code: int
    high_watermark: int
    records_bytes: int  # the length of its records (0 or -1: none)


class FetchAnswerError(ValueError):
    """A response that is not a well-formed Fetch v4 answer."""


def encode_request(correlation_id: int, client_id: str, max_wait_ms: int, min_bytes: int, max_bytes: int,
                   partitions: Iterable[Tuple[str, int, int]], partition_max_bytes: int,
                   isolation_level: int = 0) -> bytes:
    """A framed (length-prefixed) Fetch v4 request for *partitions* (``(topic, partition, fetch offset)``), their
    topics in first-seen order."""
    cid = client_id.encode("utf-8")
    out = [_HEADER.pack(API_KEY, VERSION, correlation_id, len(cid)), cid,
           _BODY.pack(-1, max_wait_ms, min_bytes, max_bytes, isolation_level)]
    by_topic: Dict[str, List[Tuple[int, int]]] = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append((partition, offset))
    out.append(_COUNT.pack(len(by_topic)))
    for topic, parts in by_topic.items():
        name = topic.encode("utf-8")
        out += [_NAME.pack(len(name)), name, _COUNT.pack(len(parts))]
        out += [_PARTITION.pack(p, off, partition_max_bytes) for p, off in parts]
    body = b"".join(out)
    return _COUNT.pack(len(body)) + body


def decode_response(payload: bytes) -> Tuple[int, Dict[Tuple[str, int], PartitionAnswer]]:
    """``(correlation id, {(topic, partition): PartitionAnswer})`` from a response's bytes after its length prefix;
    FetchAnswerError when they do not parse."""
    try:
        (correlation_id,) = _COUNT.unpack_from(payload, 0)
        pos = 8  # correlation id, throttle time
        (topics,) = _COUNT.unpack_from(payload, pos)
        pos += 4
        out: Dict[Tuple[str, int], PartitionAnswer] = {}
        for _ in range(topics):
            (name_len,) = _NAME.unpack_from(payload, pos)
            pos += 2
            if name_len < 0 or pos + name_len > len(payload):
                raise FetchAnswerError("a topic name runs past the answer's end")
            topic = payload[pos:pos + name_len].decode("utf-8")
            pos += name_len
            (count,) = _COUNT.unpack_from(payload, pos)
            pos += 4
            for _ in range(count):
                partition, error, high_watermark, _lso = _ANSWER.unpack_from(payload, pos)
                pos += _ANSWER.size
                (aborted,) = _COUNT.unpack_from(payload, pos)
                pos += 4 + max(aborted, 0) * _ABORTED
                (size,) = _COUNT.unpack_from(payload, pos)
                pos += 4 + max(size, 0)
                if pos > len(payload):
                    raise FetchAnswerError("a partition's records run past the answer's end")
                out[(topic, partition)] = PartitionAnswer(error, high_watermark, size)
        return correlation_id, out
    except (struct.error, UnicodeDecodeError) as e:
        raise FetchAnswerError("not a Fetch v4 answer: %s" % e) from e
