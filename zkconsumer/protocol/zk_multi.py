"""A ZooKeeper multi-op of ``setData`` and ``check`` operations, serialized in one pass, for kazoo's connection.

Committing 1,000 offsets to ZooKeeper is one multi-op of 1,000 ``setData`` (plus a ``check`` of the owner node per
partition when fenced). Through kazoo's ``TransactionRequest`` that costs about 5 ms of client CPU: a namedtuple per
operation, each serialized field by field into a new ``bytearray``, and a ``ZnodeStat`` built for every result.
That CPU is most of a ZooKeeper commit's client time, and in a dual commit it is time Kafka's half waits for under
the interpreter lock.

:class:`SetDataMulti` is the same request (ZooKeeper's ``OpCode.multi``, 14; the wire layout of ZooKeeper's
``MultiOperationRecord``: per operation a ``MultiHeader(type, done=false, err=-1)`` then the operation's record, and
a closing ``MultiHeader(-1, true, -1)``) built from byte strings the caller caches per path. Its response is checked
in C (``struct.iter_unpack`` over the fixed-size results): when every operation succeeded it is ``[ALL_OK]`` (no
object per result; :func:`all_ok` tells); otherwise it is parsed by kazoo's own ``Transaction.deserialize``, so
errors come back exactly as kazoo reports them (one exception instance per operation).
``tests/test_zk_multi.py`` checks the bytes against kazoo's serialization and runs it against a real ZooKeeper.
"""
from __future__ import annotations

import struct
from typing import Any, List, Sequence

from kazoo.protocol.serialization import Transaction

from .. import client_internals

__all__ = ["ALL_OK", "SetDataMulti", "all_ok", "check_op", "set_data", "set_data_prefix", "submit", "supported"]

_INT = struct.Struct(">i")
# MultiHeader: type, done, err
_HEADER = struct.Struct(">iBi")
# ZooDefs.OpCode
_SET_DATA, _CHECK, _MULTI = 5, 13, 14
# Stat: 6 longs and 5 ints (ZooKeeper's data.Stat)
_STAT_SIZE = 68
_END = _HEADER.pack(-1, True, -1)
_NO_VERSION = _INT.pack(-1)
# an offset's decimal string is at most 20 bytes
_LENGTHS = [_INT.pack(n) for n in range(32)]
# a successful result's header
_OK_SET = _HEADER.pack(_SET_DATA, False, 0)
_OK_CHECK = _HEADER.pack(_CHECK, False, 0)
# one setData result
_UNFENCED = struct.Struct(">9s%dx" % _STAT_SIZE)
# a check result, then a setData result
_FENCED = struct.Struct(">9s9s%dx" % _STAT_SIZE)


class _AllOk:
    """Every operation of the multi-op succeeded."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ALL_OK"


ALL_OK = _AllOk()


def all_ok(results: Any) -> bool:
    """True for the answer of a :class:`SetDataMulti` whose every operation succeeded. (kazoo copies a multi's
    answer into a new list on its way to the caller, so the answer is a one-element list, not a shared object.)"""
    return len(results) == 1 and results[0] is ALL_OK


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _INT.pack(len(raw)) + raw


def set_data_prefix(full_path: str) -> bytes:
    """The bytes of a ``setData`` operation up to its data: header and path (*full_path* includes any chroot)."""
    return _HEADER.pack(_SET_DATA, False, -1) + _string(full_path)


def check_op(full_path: str, version: int = 0) -> bytes:
    """The whole bytes of a ``check(path, version)`` operation."""
    return _HEADER.pack(_CHECK, False, -1) + _string(full_path) + _INT.pack(version)


def set_data(prefix: bytes, data: bytes) -> bytes:
    """A ``setData(path, data, version=-1)`` operation from its cached :func:`set_data_prefix`."""
    n = len(data)
    return prefix + (_LENGTHS[n] if n < 32 else _INT.pack(n)) + data + _NO_VERSION


class SetDataMulti:
    """One multi-op request for kazoo's connection: ``parts`` are the operations' bytes, built by :func:`set_data`
    and :func:`check_op` (a part may hold several operations), ``count`` how many operations there are; ``fenced``
    says they alternate check, setData (else all are setData). ``deserialize`` returns ``[ALL_OK]``, or kazoo's
    per-operation results when anything failed."""

    type = _MULTI
    __slots__ = ("_payload", "count", "fenced")

    def __init__(self, parts: Sequence[bytes], count: int, fenced: bool):
        self._payload = b"".join(parts) + _END
        self.count = count
        self.fenced = fenced

    def serialize(self) -> bytes:
        return self._payload

    def deserialize(self, data: Any, offset: int) -> Any:
        layout, ok = (_FENCED, (_OK_CHECK, _OK_SET)) if self.fenced else (_UNFENCED, (_OK_SET,))
        n = self.count // 2 if self.fenced else self.count
        end = offset + n * layout.size
        if len(data) == end + len(_END) and bytes(data[end:]) == _END and n and \
                set(layout.iter_unpack(memoryview(data)[offset:end])) == {ok}:
            return [ALL_OK]
        results: List[Any] = Transaction.deserialize(data, offset)
        return results

    # kazoo logs requests at DEBUG: never the whole payload
    def __repr__(self) -> str:
        return "SetDataMulti(%d operations%s, %d bytes)" % (self.count, ", fenced" if self.fenced else "",
                                                             len(self._payload))


def supported(zk: Any) -> bool:
    """True when this kazoo client takes a request object (how its transactions are sent)."""
    return client_internals.kazoo_supports_call(zk)


def submit(zk: Any, request: SetDataMulti) -> Any:
    """Queue *request* on kazoo's connection like ``TransactionRequest.commit_async`` does; an IAsyncResult."""
    return client_internals.kazoo_call(zk, request)
