"""How ``zkconsumer consume`` prints a record: ``jsonl`` (one JSON object per record) or ``value``, the text of
Kafka's console consumer, whose ``--property`` formatter options it takes (Kafka 3.9
``kafka.tools.DefaultMessageFormatter.configure`` and ``writeTo``): ``print.timestamp``, ``print.key``,
``print.partition``, ``print.offset``, ``print.headers``, ``print.value`` (true/false), ``key.separator`` (a tab),
``line.separator`` (a newline), ``headers.separator`` (``,``) and ``null.literal`` (``null``). Fields are printed
in Kafka's order: ``CreateTime:1700000000000``, ``Partition:3``, ``Offset:42``, headers ``k:v,k2:v2`` (or
``NO_HEADERS``), key, value; each followed by the key separator, the last by the line separator."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

__all__ = ["FORMATTER_KEYS", "TextFormatter", "format_jsonl", "timestamp_type_name"]

_BOOL_KEYS = ("print.timestamp", "print.key", "print.partition", "print.offset", "print.headers", "print.value")
_TEXT_KEYS = ("key.separator", "line.separator", "headers.separator", "null.literal")
#: the DefaultMessageFormatter options ``--property`` sets (Kafka's deserializer options are not supported: the
#: bytes are printed as UTF-8 text)
FORMATTER_KEYS = _BOOL_KEYS + _TEXT_KEYS

# kafka-python's ConsumerRecord.timestamp_type: 0 CreateTime, 1 LogAppendTime, None/-1 none (message format v0)
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def timestamp_type_name(record: Any) -> Optional[str]:
    """``CreateTime``, ``LogAppendTime``, or None when the record has no timestamp (Kafka's TimestampType)."""
    ts = getattr(record, "timestamp", None)
    if ts is None or ts < 0:
        return None
    ttype = getattr(record, "timestamp_type", None)
    return _TIMESTAMP_TYPES.get(ttype) if isinstance(ttype, int) else None


def _text(b: Optional[bytes]) -> Tuple[Optional[str], Optional[str]]:
    if b is None:
        return None, None
    try:
        return b.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii"), "base64"


def format_jsonl(msg: Any) -> str:
    """``{"topic","partition","offset","timestamp","timestamp_type","key","value"}`` (+ ``headers``); key, value and
    header values as UTF-8 text, or base64 with ``"encoding":"base64"``."""
    key, kenc = _text(msg.key)
    value, venc = _text(msg.value)
    ttype = timestamp_type_name(msg)
    out: Dict[str, Any] = {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset,
                           "timestamp": msg.timestamp if ttype else None, "timestamp_type": ttype,
                           "key": key, "value": value}
    headers = getattr(msg, "headers", None)
    # record headers (message format v2), values as text or base64 like key and value
    if headers:
        out["headers"] = [[k, _text(v)[0]] for k, v in headers]
    if kenc or venc:
        out["encoding"] = "base64"
        # one is text, the other not: say which
        if kenc != venc:
            out["key_encoding"], out["value_encoding"] = kenc or "utf-8", venc or "utf-8"
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class TextFormatter:
    """Kafka's DefaultMessageFormatter: by default the value alone, one per line."""

    print_timestamp: bool = False
    print_key: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, props: Dict[str, str]) -> "TextFormatter":
        """From ``--property`` options (only :data:`FORMATTER_KEYS`; booleans are true when the text is ``true``,
        as in Kafka)."""
        kw: Dict[str, Any] = {}
        for k, v in props.items():
            if k in _BOOL_KEYS:
                kw[k.replace(".", "_")] = v.strip().lower() == "true"
            elif k in _TEXT_KEYS:
                kw[k.replace(".", "_")] = v
            else:
                raise ValueError("%r is not a formatter property (one of %s)" % (k, ", ".join(FORMATTER_KEYS)))
        return cls(**kw)

    def _bytes(self, b: Optional[bytes]) -> str:
        return self.null_literal if b is None else b.decode("utf-8", "replace")

    def format(self, msg: Any) -> str:
        """The record's text, ending with the line separator."""
        fields = []
        if self.print_timestamp:
            ttype = timestamp_type_name(msg)
            fields.append("%s:%d" % (ttype, msg.timestamp) if ttype else "NO_TIMESTAMP")
        if self.print_partition:
            fields.append("Partition:%d" % msg.partition)
        if self.print_offset:
            fields.append("Offset:%d" % msg.offset)
        if self.print_headers:
            headers = getattr(msg, "headers", None) or []
            fields.append(self.headers_separator.join("%s:%s" % (k, self._bytes(v)) for k, v in headers)
                          if headers else "NO_HEADERS")
        if self.print_key:
            fields.append(self._bytes(msg.key))
        if self.print_value:
            fields.append(self._bytes(msg.value))
        return self.key_separator.join(fields) + self.line_separator
