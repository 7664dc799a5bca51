"""What zkmigrate remembers: the phase each group is in (in ZooKeeper, beside the group) and where backups go.

The phase record is a persistent node of our own, ``/consumers/[g]/zkconsumer/migration`` (JSON), written by the
commands that move a group (``verify`` when it passes, ``copy``/``rollback``/``cutover``/``import`` when they wrote)
and shown by ``status``::

    {"version": 1, "phase": "dual", "to": "kafka", "since": "2026-11-23T06:50:00Z", "by": "zkmigrate verify",
     "history": [...the previous records, newest first, at most 20...]}

Backups go to ``--backup-dir``, else ``$ZKMIGRATE_STATE_DIR/backups``, else ``~/.zkconsumer/migrate/backups``
(never the current directory).
"""
from __future__ import annotations

import json
import os
import time
from typing import Optional

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zkconsumer.layout import paths

__all__ = ["migration_path", "read_phase", "record_phase", "default_backup_dir", "STATE_ENV"]

STATE_ENV = "ZKMIGRATE_STATE_DIR"
HISTORY = 20


def migration_path(group: str) -> str:
    return paths.group_migration_path(group)


def default_backup_dir() -> str:
    base = os.environ.get(STATE_ENV) or os.path.join(os.path.expanduser("~"), ".zkconsumer", "migrate")
    return os.path.join(base, "backups")


def read_phase(zk, group: str) -> Optional[dict]:
    """The recorded phase of *group*, or None (never recorded, or unreadable: then ``{"error": ...}``)."""
    try:
        data, _ = zk.get(migration_path(group))
    except NoNodeError:
        return None
    try:
        obj = _decode(data)
        if "phase" not in obj:
            raise ValueError("not a phase record")
        return obj
    except ValueError as e:
        return {"error": "unreadable phase record %s: %s" % (migration_path(group), e)}


def _decode(data: bytes) -> dict:
    """The record as a JSON object; ValueError for anything else (another process may have written anything)."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def record_phase(zk, group: str, phase: str, by: str, to: Optional[str] = None, clock=time.time) -> dict:
    """Record that *group* is in *phase* (unchanged phase and direction: the record is kept as it is)."""
    path = migration_path(group)
    for _ in range(5):
        try:
            data, stat = zk.get(path)
            try:
                prev = _decode(data)
            except ValueError:
                prev = {}
        except NoNodeError:
            prev, stat = {}, None
        if prev.get("phase") == phase and prev.get("to") == to:
            return prev
        history = ([{k: prev[k] for k in ("phase", "to", "since", "by") if k in prev}] if prev.get("phase") else [])
        old = prev.get("history")
        history += (old if isinstance(old, list) else [])[:HISTORY - 1]
        rec = {"version": 1, "phase": phase, "to": to, "by": by,
               "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock())), "history": history}
        body = json.dumps(rec, sort_keys=True).encode("utf-8")
        try:
            if stat is None:
                zk.create(path, body, makepath=True)
            else:
                zk.set(path, body, version=stat.version)
            return rec
        except (NodeExistsError, BadVersionError):
            continue  # another zkmigrate wrote meanwhile: read again
    raise RuntimeError("could not record the phase of group %s at %s (concurrent writers)" % (group, path))
