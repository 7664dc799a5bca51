"""Spark offsets of the source: ``{"topic": {"partition": next_offset}}`` (Spark's Kafka source shape).

Spark compares offsets as JSON *text*, so they are always built canonically: topics sorted, partitions sorted
numerically, partition keys strings (they come back as strings after the JSON round trip anyway).
The keys of the dict are exactly the partitions the group member owned when the batch was planned.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

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


def split_ranges(ranges: Mapping[TP, Tuple[int, int]], min_partitions: Optional[int] = None,
                 max_records: Optional[int] = None) -> List[Tuple[TP, int, int]]:
    """Spark tasks for ``{tp: (start, end)}``: ``[(tp, start, end), ...]`` sorted, empty ranges left out.

    One task per Kafka partition by default. ``max_records`` (``maxRecordsPerPartition``) splits a range into
    ``ceil(size / max_records)`` contiguous pieces; ``min_partitions`` (``minPartitions``) then, if there are fewer
    tasks than that, gives the ranges more pieces in proportion to their size (never more pieces than offsets).
    Pieces of one range differ in size by at most one offset."""
    sizes = {tp: e - s for tp, (s, e) in ranges.items() if e > s}
    parts = {tp: -(-n // max_records) if max_records else 1 for tp, n in sizes.items()}
    total = sum(sizes.values())
    if min_partitions and total and sum(parts.values()) < min_partitions:
        share = {tp: min_partitions * n / total for tp, n in sizes.items()}
        want = {tp: max(parts[tp], min(sizes[tp], int(share[tp]))) for tp in sizes}
        left = min_partitions - sum(want.values())
        for tp in sorted(sizes, key=lambda tp: (-(share[tp] - int(share[tp])), tp)):
            if left <= 0:
                break
            if want[tp] < sizes[tp]:
                want[tp] += 1
                left -= 1
        # rounding left some over: the largest pieces are split further
        while left > 0:
            room = [tp for tp in sizes if want[tp] < sizes[tp]]
            if not room:
                break
            tp = max(room, key=lambda tp: (sizes[tp] / want[tp], tp))
            want[tp] += 1
            left -= 1
        parts = want
    out: list = []
    for tp in sorted(sizes, key=lambda tp: (tp[0], int(tp[1]))):
        s, e = ranges[tp]
        n, k = e - s, parts[tp]
        out.extend((tp, s + n * i // k, s + n * (i + 1) // k) for i in range(k))
    return out
