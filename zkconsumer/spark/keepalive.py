"""Keeping the Spark source's offsets in Kafka's offset manager alive.

The broker deletes a committed offset ``offsets.retention.minutes`` after its last commit: a ZooKeeper-coordinated
group commits without joining a broker-side group, so each offset expires by its own commit time
(:mod:`zkconsumer.offsets.expiry`). A Scala member re-commits every offset each ``auto.commit.interval.ms``; the Spark
source commits only offsets that moved (and Spark calls its ``commit`` only when a batch is planned), so the offset
of a partition that receives nothing would expire while the query runs. :class:`OffsetKeepAlive` re-commits the
stored offsets of such partitions (unchanged) once their last write is older than the refresh interval:
``auto.commit.interval.ms``, and at most half the brokers' retention.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple

log = logging.getLogger("zkconsumer.spark")

TP = Tuple[str, int]


def refresh_interval_ms(auto_commit_interval_ms: int, retention_ms: int) -> int:
    """How often an unchanged offset is written again: the legacy consumer's commit cadence, at most half the
    retention (so two chances before it expires)."""
    return max(1, min(auto_commit_interval_ms, retention_ms // 2))


def for_config(config, bootstrap: str, clock: Callable[[], float] = time.monotonic) -> "OffsetKeepAlive":
    """The keep-alive of a member with ``config`` (``auto.commit.interval.ms``), the brokers' retention read at
    ``bootstrap`` (DescribeConfigs)."""
    from ..offsets.expiry import offsets_retention_ms
    retention = offsets_retention_ms(bootstrap, security=config.kafka_security)
    keepalive = OffsetKeepAlive(refresh_interval_ms(config.auto_commit_interval_ms, retention), clock=clock)
    log.info("group %s: unchanged offsets are re-committed to Kafka every %.0f s (offsets.retention.minutes: %d)",
             config.group_id, keepalive.interval_s, retention // 60000)
    return keepalive


class OffsetKeepAlive:
    """Which partitions' offsets are due for a refresh (``clock``: seconds, injectable)."""

    def __init__(self, interval_ms: int, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_ms / 1000.0
        self.clock = clock
        self._written: Dict[TP, float] = {}

    def wrote(self, tps: Iterable[TP]) -> None:
        now = self.clock()
        for tp in tps:
            self._written[tp] = now

    def forget(self, tps: Iterable[TP]) -> None:
        for tp in tps:
            self._written.pop(tp, None)

    def due(self, tps: Iterable[TP]) -> List[TP]:
        """Partitions never written by us (their last commit may be old: refreshed at once) or not for an
        interval."""
        now = self.clock()
        return sorted(tp for tp in tps if now - self._written.get(tp, float("-inf")) >= self.interval_s)

    def refresh(self, store, tps: Iterable[TP], fence=None) -> Optional[object]:
        """Commit the stored offsets of the due partitions of ``tps`` again, unchanged (through ``fence`` if
        given); returns the store's CommitResult, or None when nothing was due."""
        due = self.due(tps)
        if not due:
            return None
        stored = store.fetch(due)
        again = {tp: stored[tp] for tp in due if stored.get(tp) is not None}
        # nothing stored: nothing can expire; asked again an interval later
        self.wrote(set(due) - set(again))
        if not again:
            return None
        result = store.commit(again, fence=fence) if fence is not None else store.commit(again)
        self.wrote(tp for tp in again if tp in result.committed)
        if result.failed:
            log.warning("re-committing the unchanged offsets of %s (they expire %s after their last commit) failed "
                        "for %s", ", ".join("%s-%d" % tp for tp in sorted(again)), "offsets.retention.minutes",
                        ", ".join("%s-%d" % tp for tp in sorted(result.failed)))
        else:
            log.info("re-committed the unchanged offsets of %d idle partition(s) (Kafka deletes an offset "
                     "offsets.retention.minutes after its last commit)", len(again))
        return result
