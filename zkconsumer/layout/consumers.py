"""Codecs for the consumer-written znodes: registration, partition owner, committed offset; consumer ids.

Kafka 1.1.1 ``ZookeeperConsumerConnector``: ``registerConsumerInZK`` (``/consumers/[g]/ids/[id]``; the id is
``consumerIdString``), ``ZKRebalancerListener.reflectPartitionOwnershipDecision`` (``/consumers/[g]/owners/[t]/[p]``
holding ``ConsumerThreadId.toString``) and ``commitOffsetToZooKeeper`` (``/consumers/[g]/offsets/[t]/[p]`` holding
the next offset as a decimal string).

Consumer registration compatibility
-----------------------------------
* 0.8.0 .. 1.1.x all write ``{"version":1,"subscription":{...},"pattern":...,"timestamp":"<ms>"}`` and read it with
  ``TopicCount.constructTopicCount``, which only needs ``pattern`` and ``subscription`` and throws "error
  constructing TopicCount" when either is missing.  (Checked against the 0.8.x ``TopicCount.scala`` source: 0.8.0
  already uses this JSON; the pre-0.8 (0.7) format was a bare ``{ "topic": n }`` map or ``*n*regex``/``!n!regex``.)
  The 0.7 forms are refused by default, like every 0.8+ reader; ``allow_legacy=True`` decodes them as version 0.
* Wildcard subscriptions are a one-entry map ``{regex: streams}`` whose key went through ``JSONEscapeString``.
  0.8.2's ``Json.encode`` does not escape, so the stored JSON key *is* ``JSONEscapeString(regex)`` and a JSON
  parser returns the original regex.  Jackson-era writers (1.1, KAFKA-5631) escape again, so parsing returns
  ``JSONEscapeString(regex)``, which 1.x readers then used as the regex.  :func:`decode_consumer_registration` keeps
  the parsed key (what every Scala reader uses); :meth:`ConsumerRegistration.wildcard_regex` can undo the extra
  escaping on request.  :func:`encode_consumer_registration` writes the 0.8.2 byte form, which both generations
  parse back to the original regex.
"""

from __future__ import annotations

import functools
import json
import re
import socket
import time
import uuid as _uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ..errors import InvalidNameError, ZnodeFormatError
from ._json import MAX_INT32, MAX_INT64, MIN_INT64, Fields, json_type, load_json, to_text
from .names import validate_consumer_id, validate_group, validate_topic

__all__ = [
    "STATIC", "WHITE_LIST", "BLACK_LIST", "PATTERNS", "json_escape_string", "json_unescape_string",
    "ConsumerRegistration", "decode_consumer_registration", "encode_consumer_registration",
    "ConsumerThreadId", "encode_owner", "decode_owner", "encode_offset", "decode_offset", "make_consumer_id",
]

STATIC = "static"
WHITE_LIST = "white_list"
BLACK_LIST = "black_list"
PATTERNS = (STATIC, WHITE_LIST, BLACK_LIST)

_LEGACY_WILDCARD = re.compile(r"([*!])([0-9]+)\1(.*)\Z")
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                 "\t": "\\t"}


def json_escape_string(s: str) -> str:
    """Port of Scala ``Utils.JSONEscapeString`` (0.8.2; ``CoreUtils`` later): escapes ``" \\ /``, the short
    escapes ``\\b \\f \\n \\r \\t``, and U+0000-U+001F / U+007F-U+009F as lowercase ``\\uXXXX``."""
    out = []
    for c in s:
        if c in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[c])
        elif c <= "\u001f" or "\u007f" <= c <= "\u009f":
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    return "".join(out)


def json_unescape_string(s: str) -> str:
    """Inverse of :func:`json_escape_string` (any valid JSON string body); raises ``ValueError``."""
    # a JSON string literal parses to a str
    text: str = json.loads('"' + s + '"')
    return text


# ---- registration (ZookeeperConsumerConnector.registerConsumerInZK) ---------------------------------------------

@dataclass
class ConsumerRegistration:
    """Data of ``/consumers/[group]/ids/[consumerId]``.

    ``subscription`` maps topic -> stream count (static) or holds the single ``{regex: streams}`` entry
    (wildcard).  ``pattern`` is kept as written; :attr:`is_wildcard` applies Scala's rule (white_list/black_list
    with a non-empty subscription, anything else is static).  ``timestamp`` is the string of epoch millis.
    ``version`` is 1 (0 for a legacy 0.7 registration).
    """

    subscription: Dict[str, int]
    pattern: str = STATIC
    timestamp: Optional[str] = None
    version: int = 1
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def static(cls, topic_counts: Mapping[str, int], timestamp: Union[str, int, None] = None) -> "ConsumerRegistration":
        return cls(dict(topic_counts), STATIC, None if timestamp is None else str(timestamp))

    @classmethod
    def wildcard(cls, regex: str, num_streams: int, whitelist: bool = True,
                 timestamp: Union[str, int, None] = None) -> "ConsumerRegistration":
        return cls({regex: num_streams}, WHITE_LIST if whitelist else BLACK_LIST,
                   None if timestamp is None else str(timestamp))

    @property
    def is_wildcard(self) -> bool:
        return self.pattern in (WHITE_LIST, BLACK_LIST) and bool(self.subscription)

    @property
    def num_streams(self) -> int:
        """Streams of a wildcard subscription (the first entry, like Scala's ``topMap.head``)."""
        return next(iter(self.subscription.values()))

    def wildcard_regex(self, jackson_escaped: bool = False) -> str:
        """The wildcard regex: the parsed key (what Scala readers use), or, with ``jackson_escaped=True`` for a
        registration written by a Jackson-era (1.1) consumer, the key with one ``JSONEscapeString`` undone."""
        if not self.is_wildcard:
            raise ValueError("not a wildcard subscription (pattern %r)" % self.pattern)
        key = next(iter(self.subscription))
        return json_unescape_string(key) if jackson_escaped else key


def _check_counts(f: Fields, sub: object) -> Dict[str, int]:
    if not isinstance(sub, dict):
        raise f.error("field 'subscription' must be a JSON object, got %s" % json_type(sub))
    return {k: f.check_int(v, "stream count of %r" % k, lo=1, hi=MAX_INT32) for k, v in sub.items()}


def _decode_legacy(text: str, path: str, data: object) -> Optional[ConsumerRegistration]:
    m = _LEGACY_WILDCARD.match(text)
    if m:
        digits = m.group(2).lstrip("0")
        # (int() of thousands of digits raises ValueError)
        n = int(digits) if 0 < len(digits) <= 10 else 0
        if not 1 <= n <= MAX_INT32:
            raise ZnodeFormatError(path, "legacy wildcard stream count %d out of range" % n, data)
        return ConsumerRegistration({m.group(3): n}, WHITE_LIST if m.group(1) == "*" else BLACK_LIST, None, 0)
    return None


def decode_consumer_registration(data: bytes, path: str, allow_legacy: bool = False) -> ConsumerRegistration:
    """Decode a consumer registration.

    Required (Scala "error constructing TopicCount"): ``pattern`` (string) and ``subscription`` (object of
    stream counts, each an integer 1..2**31-1; Scala asserts ``nConsumers >= 1``).  ``version`` (int, default 1)
    and ``timestamp`` (string or number) are optional because Scala never reads them; other fields go to
    ``extra``.  With ``allow_legacy``, the 0.7 forms ``{"t":n}`` (static) and ``*n*regex``/``!n!regex`` decode
    as version 0.
    """
    text = to_text(data, path)
    if allow_legacy:
        legacy = _decode_legacy(text.strip(), path, data)
        if legacy is not None:
            return legacy
    obj = load_json(data, path)
    if not isinstance(obj, dict):
        raise ZnodeFormatError(path, "consumer registration must be a JSON object, got %s" % json_type(obj), data)
    f = Fields(obj, path, data)
    if allow_legacy and "pattern" not in obj and "subscription" not in obj:
        return ConsumerRegistration(_check_counts(f, obj), STATIC, None, 0)
    if "pattern" not in obj or "subscription" not in obj:
        raise f.error("error constructing TopicCount: missing %r"
                      % ("pattern" if "pattern" not in obj else "subscription"))
    return ConsumerRegistration(
        subscription=_check_counts(f, obj["subscription"]), pattern=f.str("pattern"), timestamp=f.timestamp(),
        version=f.int("version", required=False, default=1, lo=-MAX_INT32 - 1, hi=MAX_INT32),
        extra=f.extras({"version", "subscription", "pattern", "timestamp"}))


def encode_consumer_registration(reg: ConsumerRegistration, now_ms: Optional[int] = None) -> bytes:
    """Encode exactly as 0.8.2 ``registerConsumerInZK``:
    ``{"version":1,"subscription":{...},"pattern":"static","timestamp":"<ms>"}`` (compact).

    Static topics must be legal topic names; a wildcard subscription must have exactly one entry and its regex
    key is written as ``JSONEscapeString(regex)``.  A missing timestamp becomes *now_ms* (default: the clock).
    """
    if reg.pattern not in PATTERNS:
        raise ValueError("pattern must be one of %s, not %r" % (", ".join(PATTERNS), reg.pattern))
    entries = []
    if reg.pattern == STATIC:
        for topic, n in reg.subscription.items():
            entries.append((validate_topic(topic), n))
    else:
        if len(reg.subscription) != 1:
            raise ValueError("a wildcard subscription has exactly one regex entry, got %d" % len(reg.subscription))
        (regex, n), = reg.subscription.items()
        if not isinstance(regex, str) or not regex:
            raise ValueError("wildcard regex must be a non-empty string")
        entries.append((json_escape_string(regex), n))
    for key, n in entries:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_INT32:
            raise ValueError("stream count for %r must be an integer 1..%d, not %r" % (key, MAX_INT32, n))
    ts = reg.timestamp if reg.timestamp is not None else str(now_ms if now_ms is not None else int(time.time() * 1000))
    if not re.match(r"-?[0-9]+\Z", str(ts)):
        raise ValueError("timestamp must be epoch milliseconds, not %r" % (ts,))
    sub = ",".join('"%s":%d' % (k, n) for k, n in entries)
    return ('{"version":1,"subscription":{%s},"pattern":"%s","timestamp":"%s"}' % (sub, reg.pattern, ts)
            ).encode("utf-8")


# ---- owners (ZKRebalancerListener.reflectPartitionOwnershipDecision) ---------------------------------------------

@functools.total_ordering
@dataclass(frozen=True, eq=True)
class ConsumerThreadId:
    """Scala ``ConsumerThreadId(consumer, threadId)``: ``str()`` is ``"<consumer>-<threadId>"`` and ordering is by
    that string, compared in UTF-16 code units like ``java.lang.String.compareTo`` (so ``c-10 < c-2``)."""

    consumer: str
    thread_id: int

    def __str__(self) -> str:
        return "%s-%d" % (self.consumer, self.thread_id)

    def _key(self) -> bytes:
        return str(self).encode("utf-16-be", "surrogatepass")

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConsumerThreadId):
            return NotImplemented
        return self._key() < other._key()

    def encode(self) -> bytes:
        return str(self).encode("utf-8")

    @classmethod
    def parse(cls, value: object, path: str = "<owner value>") -> "ConsumerThreadId":
        return cls(*decode_owner(value, path))


def encode_owner(consumer_id: str, thread_index: int) -> bytes:
    """Owner znode data ``b"<consumerId>-<n>"`` (``ConsumerThreadId.toString``)."""
    validate_consumer_id(consumer_id)
    if isinstance(thread_index, bool) or not isinstance(thread_index, int) or not 0 <= thread_index <= MAX_INT32:
        raise ValueError("thread index must be an integer 0..%d, not %r" % (MAX_INT32, thread_index))
    return ("%s-%d" % (consumer_id, thread_index)).encode("utf-8")


def decode_owner(data: object, path: str = "<owner value>") -> Tuple[str, int]:
    """Split owner data (bytes or str) on the LAST ``-`` into ``(consumer_id, thread_index)``.

    The suffix must be a canonical non-negative decimal int and the prefix a valid consumer id
    (:func:`~zkconsumer.layout.names.validate_consumer_id`); otherwise ZnodeFormatError naming *path*.
    """
    text = to_text(data, path)
    consumer_id, sep, n = text.rpartition("-")
    if not sep or not re.match(r"(0|[1-9][0-9]{0,9})\Z", n, re.ASCII) or int(n) > MAX_INT32:
        raise ZnodeFormatError(path, "owner value must be <consumerId>-<threadIndex>", data)
    try:
        validate_consumer_id(consumer_id)
    except InvalidNameError as e:
        raise ZnodeFormatError(path, "owner value has an illegal consumer id: %s" % e.reason, data) from e
    return consumer_id, int(n)


# ---- offsets (ZookeeperConsumerConnector.commitOffsetToZooKeeper) -----------------------------------------------

def encode_offset(offset: int) -> bytes:
    """``str(offset)`` as bytes (Scala ``offset.toString``).  Any Java ``Long`` is accepted, including -1."""
    if isinstance(offset, bool) or not isinstance(offset, int) or not MIN_INT64 <= offset <= MAX_INT64:
        raise ValueError("offset must be an integer in the Java Long range, not %r" % (offset,))
    return str(offset).encode("ascii")


def decode_offset(data: bytes, path: str) -> int:
    """Decode a committed offset: the *next* offset to consume as a decimal string.

    Surrounding whitespace is stripped (hand-edited / ImportZkOffsets nodes).  Like Java ``Long.parseLong`` an
    optional sign is accepted and the value must fit a Long; negative values are returned as is (Scala writes
    ``offset.toString`` and tools can store ``-1``) and callers treat ``< 0`` as "no valid offset", as Scala's
    ``InvalidOffset`` (-1) is.  Anything else (empty, ``1.5``, ``1_000``, non-ASCII digits) raises
    ZnodeFormatError.
    """
    text = to_text(data, path).strip()
    m = re.match(r"[+-]?0*([0-9]+)\Z", text, re.ASCII)
    if not m:
        raise ZnodeFormatError(path, "offset must be a decimal integer", data)
    # (and int() of thousands of digits would raise ValueError)
    if len(m.group(1)) > 19:
        raise ZnodeFormatError(path, "offset is outside the Java Long range", data)
    value = -int(m.group(1)) if text.startswith("-") else int(m.group(1))
    if not MIN_INT64 <= value <= MAX_INT64:
        raise ZnodeFormatError(path, "offset is outside the Java Long range", data)
    return value


# ---- consumer id (ZookeeperConsumerConnector.consumerIdString) --------------------------------------------------

def _uuid_hex8(u: _uuid.UUID) -> str:
    """``uuid.getMostSignificantBits().toHexString.substring(0,8)``.  ``Long.toHexString`` renders the 64-bit
    two's complement as unsigned hex without leading zeros, so a negative MSB gives 16 digits starting 8-f and a
    MSB < 0x10000000 gives fewer than 8 digits, where Java's ``substring(0,8)`` throws."""
    hexstr = "%x" % (u.int >> 64)
    if len(hexstr) < 8:
        raise ValueError("UUID %s: most significant bits %s have fewer than 8 hex digits; Java's substring(0,8) "
                         "would throw StringIndexOutOfBoundsException" % (u, hexstr))
    return hexstr[:8]


def make_consumer_id(group: str, consumer_id: Optional[str] = None, host: Optional[str] = None,
                     now_ms: Optional[int] = None, uuid: Optional[_uuid.UUID] = None) -> str:
    """Form the consumer id like ``ZookeeperConsumerConnector.consumerIdString``:
    ``<group>_<consumer_id>`` if *consumer_id* (``consumer.id``) is given, else
    ``<group>_<host>-<now_ms>-<uuid8>`` with host = ``socket.gethostname()``, now = the clock in ms, uuid = a
    random UUID4 (redrawn in the ~2**-32 case Java would crash on; an explicit such *uuid* raises ValueError).
    The result is checked with :func:`~zkconsumer.layout.names.validate_consumer_id`.
    """
    validate_group(group)
    if consumer_id is not None:
        return validate_consumer_id("%s_%s" % (group, consumer_id))
    if host is None:
        host = socket.gethostname()
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    if uuid is not None:
        hex8 = _uuid_hex8(uuid)
    else:
        while True:
            try:
                hex8 = _uuid_hex8(_uuid.uuid4())
                break
            except ValueError:  # pragma: no cover - probability 2**-32
                continue
    return validate_consumer_id("%s_%s-%d-%s" % (group, host, now_ms, hex8))
