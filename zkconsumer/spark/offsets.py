"""Spark offsets of the source: ``{"topic": {"partition": next_offset}}`` (Spark's Kafka source shape).

Spark compares offsets as JSON *text*, so they are always built canonically: topics sorted, partitions sorted
numerically, partition keys strings (they come back as strings after the JSON round trip anyway).
The keys of the dict are exactly the partitions the group member owned when the batch was planned.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

TP = Tuple[str, int]


def to_spark(offsets: Mapping[TP, int]) -> dict:
    """{(t, p): off} -> canonical nested dict (insertion-ordered: json.dumps keeps this order)."""
    out: Dict[str, Dict[str, int]] = {}
    for (t, p) in sorted(offsets, key=lambda tp: (tp[0], int(tp[1]))):
        out.setdefault(t, {})[str(int(p))] = int(offsets[(t, p)])
    return out


def from_spark(obj: Optional[Mapping]) -> Dict[TP, int]:
    """Nested dict (or JSON text) -> {(t, p): off}."""
    if obj is None:
        return {}
    if isinstance(obj, (str, bytes)):
        import json
        obj = json.loads(obj)
    return {(t, int(p)): int(off) for t, parts in obj.items() for p, off in parts.items()}


def rate_limit(start: Mapping[TP, int], latest: Mapping[TP, int], limit: int) -> Dict[TP, int]:
    """Cap the total ``sum(end - start)`` at ``limit``, split across partitions in proportion to what each has
    available (Spark's ``KafkaMicroBatchStream.rateLimit``), but strictly: floors first, then the remaining units to
    the largest fractional parts, so the total never exceeds ``limit`` (Spark's ceil-when-<1 could)."""
    avail = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(avail.values())
    if total <= limit:
        return dict(latest)
    share = {tp: limit * n / total for tp, n in avail.items()}
    take = {tp: int(s) for tp, s in share.items()}
    left = limit - sum(take.values())
    for tp in sorted(avail, key=lambda tp: (-(share[tp] - take[tp]), tp))[:max(0, left)]:
        if take[tp] < avail[tp]:
            take[tp] += 1
    return {tp: start.get(tp, latest[tp]) + take[tp] if tp in start else latest[tp] for tp in latest}
