"""``zkmigrate reset-offsets``: move a stopped group's committed offsets, as ``kafka-consumer-groups
--reset-offsets`` does for broker-coordinated groups (and ``UpdateOffsetsInZK`` did, without its dangers).

The new offset per partition (:func:`plan_reset`, pure) is one of

* ``earliest`` / ``latest``: the log start / log end;
* ``offset N``: N;
* ``datetime T``: the first offset whose timestamp is at or after T (ListOffsets by time); the log end when there
  is none, as Kafka's tool does;
* ``shift N``: the current offset + N (N may be negative); a partition without a current offset starts from the
  log start (N < 0) or the log end (N >= 0)...

and is then clamped into the log's range [log start, log end] (an offset outside it would reset at the next start;
the clamp is reported per partition). Written to the stores the group uses (``auto``: every store that holds an
offset for the partition, ZooKeeper when none does: a dual-commit group reads the greater of the two, so a reset
backwards must move both), after a backup of both stores; refused while the group has live ZooKeeper members or an
active broker-side group (``--force`` for the former only).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

__all__ = ["plan_reset", "SPECS"]

TP = Tuple[str, int]
SPECS = ("earliest", "latest", "offset", "datetime", "shift")


def plan_reset(spec: str, value: Optional[int], current: Dict[TP, Optional[int]], earliest: Dict[TP, int],
               latest: Dict[TP, int], by_time: Optional[Dict[TP, Optional[int]]] = None) -> Dict[TP, dict]:
    """``{tp: {"current", "new", "note"}}`` for every partition of *current* (its keys are the partitions)."""
    if spec not in SPECS:
        raise ValueError("reset spec %r (expected one of %s)" % (spec, ", ".join(SPECS)))
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
        elif spec == "offset":
            new = int(value)
        elif spec == "datetime":
            found = (by_time or {}).get(tp)
            new = hi if found is None else found
            if found is None:
                note = "no message at or after the time: the log end"
        else:  # shift
            if cur is None:
                new = lo if value < 0 else hi
                note = "no current offset: shifted from the log %s" % ("start" if value < 0 else "end")
            else:
                new = cur + int(value)
        if new < lo:
            note, new = "%d is before the log start %d: clamped" % (new, lo), lo
        elif new > hi:
            note, new = "%d is beyond the log end %d: clamped" % (new, hi), hi
        out[tp] = {"current": cur, "new": new, "note": note}
    return out
