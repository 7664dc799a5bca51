"""Shared helpers for the znode codecs: strict UTF-8/JSON decoding and typed field access.

All znode data is a UTF-8 string (Kafka's ``ZKStringSerializer``, in ``kafka/utils/ZkUtils.scala``);
JSON field order follows Scala ``Map`` iteration order and is not guaranteed, so decoders never depend on it.
Every helper raises :class:`~zkconsumer.errors.ZnodeFormatError` naming the znode path.
"""

from __future__ import annotations

import builtins
import json
from typing import AbstractSet, Any, Dict, List, Literal, NoReturn, Optional, overload

from ..errors import ZnodeFormatError

_MISSING = object()
MIN_INT64 = -(2 ** 63)
MAX_INT64 = 2 ** 63 - 1
MAX_INT32 = 2 ** 31 - 1
MIN_INT32 = -(2 ** 31)


def to_text(data: object, path: str) -> str:
    """Decode znode bytes as strict UTF-8 (``str`` is passed through).  Empty or ``None`` data is an error."""
    if data is None:
        raise ZnodeFormatError(path, "no data", data)
    if isinstance(data, str):
        text = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ZnodeFormatError(path, "not valid UTF-8 (%s)" % e, bytes(data)) from e
    else:
        raise ZnodeFormatError(path, "data must be bytes, not %s" % type(data).__name__)
    if not text.strip():
        raise ZnodeFormatError(path, "empty data", data)
    return text


def _reject_constant(name: str) -> NoReturn:
    raise ValueError("non-standard JSON constant %s" % name)


def load_json(data: object, path: str) -> Any:
    """Parse znode data as JSON (no NaN/Infinity)."""
    text = to_text(data, path)
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise ZnodeFormatError(path, "not valid JSON (%s)" % e, data) from e
    except RecursionError:
        # json's C scanner recurses per nesting level: '[' * 5000 is not a registration
        raise ZnodeFormatError(path, "not valid JSON (nested too deeply)", data) from None


def load_json_object(data: object, path: str, what: str) -> Dict[str, Any]:
    """Parse znode data as a JSON object (``dict``)."""
    obj = load_json(data, path)
    if not isinstance(obj, dict):
        raise ZnodeFormatError(path, "%s must be a JSON object, got %s" % (what, json_type(obj)), data)
    return obj


def json_type(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def dumps(obj: object) -> bytes:
    """Compact JSON (``{"a":1}``), non-ASCII kept as is, UTF-8 encoded, in the dict's insertion order."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


class Fields:
    """Typed access to a decoded JSON object, raising ZnodeFormatError naming the path and field.

    The methods named after JSON types shadow the builtins inside this class, hence ``builtins.int`` etc. in the
    annotations.  A required field that is not nullable always gives a value of the type (the overloads say so).
    """

    def __init__(self, obj: Dict[builtins.str, Any], path: builtins.str, data: object) -> None:
        self.obj = obj
        self.path = path
        self.data = data

    def error(self, reason: builtins.str) -> ZnodeFormatError:
        return ZnodeFormatError(self.path, reason, self.data)

    def raw(self, key: builtins.str, required: bool = True, default: object = None) -> object:
        v = self.obj.get(key, _MISSING)
        if v is _MISSING:
            if required:
                raise self.error("missing required field %r" % key)
            return default
        return v

    @overload
    def int(self, key: builtins.str, required: Literal[True] = True, default: None = None,
            nullable: Literal[False] = False, lo: builtins.int = MIN_INT64, hi: builtins.int = MAX_INT64
            ) -> builtins.int: ...

    @overload
    def int(self, key: builtins.str, required: bool, default: builtins.int, nullable: Literal[False] = False,
            lo: builtins.int = MIN_INT64, hi: builtins.int = MAX_INT64) -> builtins.int: ...

    @overload
    def int(self, key: builtins.str, required: bool = True, default: Optional[builtins.int] = None,
            nullable: bool = False, lo: builtins.int = MIN_INT64, hi: builtins.int = MAX_INT64
            ) -> Optional[builtins.int]: ...

    def int(self, key: builtins.str, required: bool = True, default: Optional[builtins.int] = None,
            nullable: bool = False, lo: builtins.int = MIN_INT64, hi: builtins.int = MAX_INT64
            ) -> Optional[builtins.int]:
        v = self.raw(key, required, _MISSING)
        if v is _MISSING:
            return default
        if v is None and nullable:
            return None
        return self.check_int(v, "field %r" % key, lo, hi)

    def check_int(self, v: object, what: builtins.str, lo: builtins.int = MIN_INT64,
                  hi: builtins.int = MAX_INT64) -> builtins.int:
        if isinstance(v, bool) or not isinstance(v, builtins.int):
            raise self.error("%s must be an integer, got %s %r" % (what, json_type(v), v))
        if not lo <= v <= hi:
            raise self.error("%s value %d is out of range %d..%d" % (what, v, lo, hi))
        return v

    @overload
    def str(self, key: builtins.str, required: Literal[True] = True, default: None = None,
            nullable: Literal[False] = False) -> builtins.str: ...

    @overload
    def str(self, key: builtins.str, required: bool = True, default: Optional[builtins.str] = None,
            nullable: bool = False) -> Optional[builtins.str]: ...

    def str(self, key: builtins.str, required: bool = True, default: Optional[builtins.str] = None,
            nullable: bool = False) -> Optional[builtins.str]:
        v = self.raw(key, required, _MISSING)
        if v is _MISSING:
            return default
        if v is None and nullable:
            return None
        if not isinstance(v, builtins.str):
            raise self.error("field %r must be a string, got %s %r" % (key, json_type(v), v))
        return v

    def timestamp(self, key: builtins.str = "timestamp") -> Optional[builtins.str]:
        """Optional epoch-millis timestamp; Kafka writes it as a *string*, tolerate a number; keep as str."""
        v = self.raw(key, False, None)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (builtins.str, builtins.int)):
            raise self.error("field %r must be a string of epoch milliseconds, got %s %r" % (key, json_type(v), v))
        return builtins.str(v)

    @overload
    def int_list(self, key: builtins.str, required: Literal[True] = True, default: None = None,
                 lo: builtins.int = MIN_INT32, hi: builtins.int = MAX_INT32) -> List[builtins.int]: ...

    @overload
    def int_list(self, key: builtins.str, required: bool = True, default: Optional[List[builtins.int]] = None,
                 lo: builtins.int = MIN_INT32, hi: builtins.int = MAX_INT32) -> Optional[List[builtins.int]]: ...

    def int_list(self, key: builtins.str, required: bool = True, default: Optional[List[builtins.int]] = None,
                 lo: builtins.int = MIN_INT32, hi: builtins.int = MAX_INT32) -> Optional[List[builtins.int]]:
        v = self.raw(key, required, _MISSING)
        if v is _MISSING:
            return default
        return self.check_int_list(v, "field %r" % key, lo, hi)

    def check_int_list(self, v: object, what: builtins.str, lo: builtins.int = MIN_INT32,
                       hi: builtins.int = MAX_INT32) -> List[builtins.int]:
        if not isinstance(v, list):
            raise self.error("%s must be an array of integers, got %s" % (what, json_type(v)))
        return [self.check_int(x, "element of %s" % what, lo, hi) for x in v]

    def dict(self, key: builtins.str, required: bool = True, default: Optional[Dict[builtins.str, Any]] = None,
             nullable: bool = False) -> Optional[Dict[builtins.str, Any]]:
        v = self.raw(key, required, _MISSING)
        if v is _MISSING:
            return default
        if v is None and nullable:
            return None
        if not isinstance(v, builtins.dict):
            raise self.error("field %r must be a JSON object, got %s" % (key, json_type(v)))
        return v

    def extras(self, known: AbstractSet[builtins.str]) -> Dict[builtins.str, Any]:
        return {k: v for k, v in self.obj.items() if k not in known}
