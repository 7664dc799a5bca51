"""Copying offsets between the stores: ``copy`` (ZooKeeper -> Kafka), ``rollback`` (Kafka -> ZooKeeper), ``import``.

Rules (all checked before anything is written):

* never move an offset backwards: a partition whose destination offset is greater than the source's is skipped
  (reported in ``skipped_rewind``) unless ``allow_rewind``;
* refuse (:class:`GroupConflictError`) while ZooKeeper members are live (children of ``/consumers/G/ids``): they
  commit concurrently and one of the two writes would be lost; ``force`` overrides;
* before the first write, a backup of **both** stores (ExportZkOffsets format, ``backup-<group>-<store>-<time>.txt``)
  is written to the backup directory;
* writes only the partitions that differ, so a second run (or a run after a crash half-way) changes nothing more.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Dict, Optional, Tuple

from zkconsumer import groups as zkgroups
from zkconsumer.errors import GroupConflictError, OffsetStoreError

from .offsets_file import format_offsets

__all__ = ["plan_copy", "apply_copy", "write_backup", "check_no_live_members"]

TP = Tuple[str, int]
CHUNK = 500


def check_no_live_members(zk, group, force=False, what="copy"):
    members = zkgroups.live_members(zk, group)
    if members and not force:
        raise GroupConflictError(
            "refusing to %s offsets of group %s: %d live ZooKeeper member(s) (%s) would race with the write; stop "
            "them or pass --force" % (what, group, len(members), ", ".join(list(members)[:3])))
    return sorted(members)


def plan_copy(source: Dict[TP, int], dest: Dict[TP, Optional[int]], allow_rewind=False) -> dict:
    """Decide per partition: ``write`` {tp: offset}, ``unchanged`` [tp], ``skipped_rewind`` {tp: (dest, src)}."""
    write, unchanged, rewind = {}, [], {}
    for tp, src in sorted(source.items()):
        cur = dest.get(tp)
        if cur == src:
            unchanged.append(tp)
        elif cur is None or cur < src:
            write[tp] = src
        elif allow_rewind:
            write[tp] = src
            rewind[tp] = (cur, src)
        else:
            rewind[tp] = (cur, src)
    return {"write": write, "unchanged": unchanged, "rewind": rewind, "allow_rewind": allow_rewind}


def write_backup(backup_dir, group, both: Dict[TP, Tuple[Optional[int], Optional[int]]]) -> list:
    """Write ``backup-<group>-zookeeper-<ts>.txt`` and ``...-kafka-...`` (both stores) and return the paths."""
    os.makedirs(backup_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S") + "-%03d" % (int(time.time() * 1000) % 1000)
    out = []
    for i, name in enumerate(("zookeeper", "kafka")):
        offs = {tp: v[i] for tp, v in both.items() if v[i] is not None}
        path = os.path.join(backup_dir, "backup-%s-%s-%s.txt" % (group, name, stamp))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            for line in format_offsets(group, offs):
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        out.append(path)
    return out


def apply_copy(store, offsets: Dict[TP, int], progress: Optional[Callable[[int], None]] = None) -> Dict[TP, str]:
    """Write *offsets* to *store* in chunks; returns ``{tp: error}`` for the partitions that failed."""
    failed = {}
    items = sorted(offsets.items())
    for i in range(0, len(items), CHUNK):
        chunk = dict(items[i:i + CHUNK])
        try:
            if store.name == "zookeeper":
                res = store.commit(chunk, force=True)
            else:
                res = store.commit(chunk)
        except OffsetStoreError as e:
            for tp in chunk:
                failed[tp] = str(e)
        else:
            for tp, e in res.failed.items():
                failed[tp] = str(e)
        if progress is not None:
            progress(len(chunk))
    return failed
