"""What a zkconsumer member says about itself, beside its Scala-format registration.

The registration (``/consumers/[g]/ids/[id]``) must stay byte-compatible with the Scala consumer, so anything
more lives in an ephemeral node of our own, ``/consumers/[g]/zkconsumer/members/[id]``: the member's host,
``client.id``, process id, library version and — what migration needs — where it reads and commits offsets
(``offsets.storage`` and ``dual.commit.enabled``). JVM members have no such node: tools show them as "unknown".

Format (JSON object, version 1)::

    {"version": 1, "host": "web-3", "client_id": "orders", "pid": 4711, "library": "zkconsumer 0.1.0",
     "offsets_storage": "kafka", "dual_commit": true, "auto_commit_interval_ms": 60000}
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Optional

from ..errors import ZnodeFormatError
from ._json import load_json_object

__all__ = ["MemberInfo", "encode_member_info", "decode_member_info", "storage_mode"]

VERSION = 1
STORAGES = ("zookeeper", "kafka")


@dataclass(frozen=True)
class MemberInfo:
    host: str
    client_id: str
    offsets_storage: str
    dual_commit: bool
    pid: Optional[int] = None
    library: Optional[str] = None
    # None: auto-commit off or not said
    auto_commit_interval_ms: Optional[int] = None

    @property
    def mode(self) -> str:
        """``zookeeper``, ``dual`` or ``kafka``: the migration phase this member runs."""
        return storage_mode(self.offsets_storage, self.dual_commit)


def storage_mode(offsets_storage: str, dual_commit: bool) -> str:
    """The phase a member's settings put it in: ``dual.commit.enabled`` only matters with kafka storage (as in the
    Scala consumer)."""
    if offsets_storage == "zookeeper":
        return "zookeeper"
    return "dual" if dual_commit else "kafka"


def encode_member_info(info: MemberInfo) -> bytes:
    obj: Dict[str, Any] = {"version": VERSION, "host": info.host, "client_id": info.client_id,
                           "offsets_storage": info.offsets_storage, "dual_commit": bool(info.dual_commit)}
    if info.pid is not None:
        obj["pid"] = info.pid
    if info.library is not None:
        obj["library"] = info.library
    if info.auto_commit_interval_ms is not None:
        obj["auto_commit_interval_ms"] = info.auto_commit_interval_ms
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")


def decode_member_info(data: bytes, path: str = "member info") -> MemberInfo:
    """Parse a member info node; :class:`~zkconsumer.errors.ZnodeFormatError` naming *path* and the field when it
    is not one (written by another process: any bytes may be there)."""
    obj = load_json_object(data, path, "member info")

    def bad(reason: str) -> ZnodeFormatError:
        return ZnodeFormatError(path, reason, data)
    if obj.get("version") != VERSION or isinstance(obj.get("version"), bool):
        raise bad("version %r (this zkconsumer reads version %d)" % (obj.get("version"), VERSION))
    for key in ("host", "client_id", "offsets_storage"):
        if not isinstance(obj.get(key), str):
            raise bad("%r must be a string, got %r" % (key, obj.get(key)))
    if obj["offsets_storage"] not in STORAGES:
        raise bad("offsets_storage %r (expected one of %s)" % (obj["offsets_storage"], ", ".join(STORAGES)))
    if not isinstance(obj.get("dual_commit"), bool):
        raise bad("'dual_commit' must be true or false, got %r" % (obj.get("dual_commit"),))
    pid = obj.get("pid")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool)):
        raise bad("'pid' must be an integer, got %r" % (pid,))
    library = obj.get("library")
    interval = obj.get("auto_commit_interval_ms")
    if interval is not None and (not isinstance(interval, int) or isinstance(interval, bool) or interval < 0):
        raise bad("'auto_commit_interval_ms' must be a non-negative integer, got %r" % (interval,))
    return MemberInfo(obj["host"], obj["client_id"], obj["offsets_storage"], obj["dual_commit"], pid,
                      library if isinstance(library, str) else None, interval)
