"""``zkmigrate reset-offsets``: move a stopped group's committed offsets, as ``kafka-consumer-groups
--reset-offsets`` does for broker-coordinated groups (and ``UpdateOffsetsInZK`` did, without its dangers).

The new offset per partition (:func:`plan_reset`, pure) is one of

* ``earliest`` / ``latest``: the log start / log end;
* ``current``: the current offset; the log end where there is none, as Kafka's tool does;
* ``offset N``: N;
* ``datetime T``: the first offset whose timestamp is at or after T (ListOffsets by time); the log end when there
  is none, as Kafka's tool does;
* ``shift N``: the current offset + N (N may be negative); a partition without a current offset starts from the
  log start (N < 0) or the log end (N >= 0);
* ``file``: the offset a reset-plan file gives the partition (``--from-file``: kafka-consumer-groups' CSV or
  ExportZkOffsets lines); only the file's partitions are planned, and one the topic does not have is reported...

and is then clamped into the log's range [log start, log end] (an offset outside it would reset at the next start;
the clamp is reported per partition). Written to the stores the group uses (``auto``: the stores its recorded
phase reads, :func:`phase_stores`, and every store that holds an offset for the partition, ZooKeeper when neither
says anything: a dual-commit group reads the greater of the two, so a reset backwards must move both, and a
Kafka-phase group reads Kafka only, so a reset written to ZooKeeper alone would change nothing), after a backup of
both stores; refused while the group has live ZooKeeper members or an active broker-side group (``--force`` for the
former only): :func:`reset_group`.
"""
from __future__ import annotations

from typing import Dict, Optional, Set, Tuple, Union

__all__ = ["plan_reset", "reset_group", "phase_stores", "SPECS", "STORES"]

TP = Tuple[str, int]
SPECS = ("earliest", "latest", "current", "offset", "datetime", "shift", "file")
#: an offset, a shift, epoch milliseconds, or (``file``) the new offset per partition
Value = Union[None, int, Dict[TP, int]]
STORES = ("auto", "zookeeper", "kafka", "both")


def plan_reset(spec: str, value: Value, current: Dict[TP, Optional[int]], earliest: Dict[TP, int],
               latest: Dict[TP, int], by_time: Optional[Dict[TP, Optional[int]]] = None) -> Dict[TP, dict]:
    """``{tp: {"current", "new", "note"}}`` for every partition of *current* (its keys are the partitions)."""
    if spec not in SPECS:
        raise ValueError("reset spec %r (expected one of %s)" % (spec, ", ".join(SPECS)))
    if (spec == "file") != isinstance(value, dict):
        raise ValueError("reset spec %r takes %s" % (spec, "{partition: offset}" if spec == "file" else "a number"))
    out = {}
    for tp in sorted(current):
        cur, lo, hi = current[tp], earliest.get(tp), latest.get(tp)
        if lo is None or hi is None:
            out[tp] = {"current": cur, "new": None, "note": "no log range known for this partition: not changed"}
            continue
        note = None
        if spec == "earliest":
            new = lo
        elif spec == "latest":
            new = hi
        elif spec == "current":
            new = hi if cur is None else cur
            # Kafka 3.9 ConsumerGroupCommand.resetToCurrent: the log end
            if cur is None:
                note = "no current offset: the log end"
        elif isinstance(value, dict):
            # file
            new = value[tp]
        elif spec == "offset":
            new = int(value)  # type: ignore[arg-type]
        elif spec == "datetime":
            # value: the time, read by the caller into by_time
            found = (by_time or {}).get(tp)
            new = hi if found is None else found
            if found is None:
                note = "no message at or after the time: the log end"
        else:
            # shift
            shift = int(value or 0)
            if cur is None:
                new = lo if shift < 0 else hi
                note = "no current offset: shifted from the log %s" % ("start" if shift < 0 else "end")
            else:
                new = cur + shift
        if new < lo:
            note, new = "%d is before the log start %d: clamped" % (new, lo), lo
        elif new > hi:
            note, new = "%d is beyond the log end %d: clamped" % (new, hi), hi
        out[tp] = {"current": cur, "new": new, "note": note}
    return out


def phase_stores(rec: Optional[dict]) -> Tuple[str, ...]:
    """The stores the members of a group read, by its phase record: ZooKeeper in the zookeeper phase, both in the
    dual phase and after a rollback (the next members read both, or ZooKeeper alone), Kafka in the kafka phase and
    once cut over (or fenced); nothing without a readable record."""
    from .state import fence_of
    if not isinstance(rec, dict) or "error" in rec:
        return ()
    if fence_of(rec) is not None:
        return ("kafka",)
    return {"zookeeper": ("zookeeper",), "dual": ("zookeeper", "kafka"), "rollback": ("zookeeper", "kafka"),
            "kafka": ("kafka",), "cutover": ("kafka",)}.get(rec.get("phase"), ())


def _targets(store: str, zk_offset: Optional[int], kafka_offset: Optional[int], reads: Tuple[str, ...] = ()) -> list:
    if store == "auto":
        held = {n for n, v in (("zookeeper", zk_offset), ("kafka", kafka_offset)) if v is not None}
        return [n for n in ("zookeeper", "kafka") if n in held or n in reads] or ["zookeeper"]
    return ["zookeeper", "kafka"] if store == "both" else [store]


def reset_group(gofs, spec: str, value: Value, scope: Dict[str, Optional[Set[int]]], all_topics: bool,
                store: str = "auto", execute: bool = False, force: bool = False,
                backup_dir: Optional[str] = None) -> dict:
    """Reset one group's offsets: *scope* is ``{topic: None (every partition) or {partitions}}`` (or every topic the
    group has with *all_topics*; with ``file``, the partitions of *value*), *value* the offset, shift, epoch
    milliseconds or ``{tp: offset}`` of *spec*; writes to *store* (one of :data:`STORES`) after a backup of both
    stores, a dry run unless *execute*. Returns the report the command prints; ``ok`` is false when a write failed
    or (``file``) a partition of the file could not be planned (its topic lacks it, or no log range)."""
    from zkconsumer.groups import log_ranges

    from .state import read_phase
    from .transfer import backup_and_write, check_no_broker_consumers, check_no_live_members
    if store not in STORES:
        raise ValueError("reset store %r (expected one of %s)" % (store, ", ".join(STORES)))
    members = check_no_live_members(gofs.zk, gofs.group, force, "reset")
    check_no_broker_consumers(gofs, "reset")
    from .leftovers import skipped_report, split_gone
    # file: its partitions (one its topic does not have is gone: reported, exit 1)
    if isinstance(value, dict):
        both, gone = split_gone(gofs.zk, gofs.read(sorted(value)))
        parts = sorted(both)
    else:
        both, gone = split_gone(gofs.zk, gofs.read_all(list(scope)))
        parts = [tp for tp in both if all_topics or (tp[0] in scope and (scope[tp[0]] is None
                                                                           or tp[1] in scope[tp[0]]))]
    start, end, at = log_ranges(gofs.bootstrap_servers, parts, value if spec == "datetime" else None,
                                security=gofs.security)
    current = {tp: max((v for v in both[tp] if v is not None), default=None) for tp in parts}
    planned = plan_reset(spec, value, current, start, end, at)
    writes: Dict[str, Dict[TP, int]] = {"zookeeper": {}, "kafka": {}}
    reads = phase_stores(read_phase(gofs.zk, gofs.group))
    for tp, d in planned.items():
        if d["new"] is None:
            continue
        d["stores"] = _targets(store, both[tp][0], both[tp][1], reads)
        for name in d["stores"]:
            if both[tp][0 if name == "zookeeper" else 1] != d["new"]:
                writes[name][tp] = d["new"]
    out = {"group": gofs.group, "execute": execute, "live_members": members, "reset": spec, "phase_reads": list(reads),
           "partitions": [dict(topic=tp[0], partition=tp[1], zookeeper_offset=both[tp][0],
                               kafka_offset=both[tp][1], **planned[tp]) for tp in sorted(planned)],
           "backup": [], "failed": {}, "written": 0, "unreadable": gofs.unreadable_report(),
           **skipped_report(gofs, gone)}
    if execute and any(writes.values()):
        out["backup"], errors = backup_and_write(gofs, both, writes, backup_dir)
        for name, failed in errors.items():
            out["failed"].update({"%s:%s-%d" % (name, tp[0], tp[1]): e for tp, e in failed.items()})
            out["written"] += len(writes[name]) - len(failed)
    out["ok"] = not (out["failed"] or out["unreadable"]) and not (
        spec == "file" and (gone or any(d["new"] is None for d in planned.values())))
    return out
