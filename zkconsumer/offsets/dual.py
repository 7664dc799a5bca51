"""Dual commit: Kafka's offset manager and ZooKeeper; read = max of both.

Used when ``offsets.storage=kafka`` and ``dual.commit.enabled=true``, the first step of the Kafka documentation's
"Migrating offsets from ZooKeeper to Kafka". What the Scala consumer did, in Kafka 1.1.1
``ZookeeperConsumerConnector``: ``commitOffsets`` sends one OffsetCommit for all partitions, then writes ZooKeeper
for each partition Kafka acknowledged; ``fetchOffsets`` takes the greater of the two offsets of each partition, so
a missing one (-1) never wins over a real one.

Order. The Scala consumer writes Kafka, then ZooKeeper. Here that order holds until Kafka has acknowledged a
whole commit. From then on (Kafka healthy) the two writes overlap: the ZooKeeper multi-op is built and handed to
kazoo first (its path is the longer one: the client builds it, the server syncs its log), then the OffsetCommit is
handed to the Kafka client's IO thread, and both answers are awaited, so a dual commit costs about the slower
store's time, not the sum. That is safe because every value written is a consumed position and reads take the
maximum: a partition Kafka refuses
while ZooKeeper took it is reported failed (it is ``committed`` only when both stores hold it) and is sent to both
again at the next commit, ZooKeeper being ahead for that moment, which is a state the sequential order reaches
too when Kafka fails just after a commit. After any Kafka failure the order is sequential again (Kafka first,
ZooKeeper only for what Kafka acknowledged) until Kafka acknowledges a whole commit, so during an outage
ZooKeeper is not written ahead (``dual.commit.kafka.outage.ms`` decides when it is).

Order among commits. A commit's sequence (:class:`~.base.CommitOrder`) is checked by each store under its own
lock, just before its write: neither store takes an older commit's value after a newer one's, whichever path each
commit took. A partition one store left out as superseded is reported superseded (a failure in the other store
still wins): that store confirmed a newer value, and reads take the maximum. In the sequential order a partition
Kafka left out as superseded is still given to ZooKeeper, which decides by its own record (Kafka holding a newer
value, ZooKeeper is not written ahead).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Callable, Dict, List, NoReturn, Optional, Tuple

from zkconsumer.errors import OffsetStoreError, OwnershipLostError
from zkconsumer.offsets.base import CommitResult, OffsetStore, OwnershipFence, normalize_offsets, \
    normalize_partitions

__all__ = ["DualOffsetStore"]

log = logging.getLogger(__name__)


class DualOffsetStore(OffsetStore):
    """Commit to both stores (Kafka first while Kafka is failing); fetch the per-partition maximum.

    :param zk_store: a :class:`~zkconsumer.offsets.ZooKeeperOffsetStore` of the same group.
    :param kafka_store: a :class:`~zkconsumer.offsets.kafka.KafkaOffsetStore` of the same group.
    :param kafka_outage_ms: ``dual.commit.kafka.outage.ms``: how long Kafka may fail every commit before commits go
        to ZooKeeper alone (< 0: never, as the Scala consumer).
    :param clock: the monotonic clock that outage is measured with (seconds).
    :raises ValueError: the two stores are bound to different groups.
    """

    name = "dual"

    def __init__(self, zk_store, kafka_store, kafka_outage_ms: int = 60000, clock=time.monotonic):
        if zk_store.group != kafka_store.group:
            raise ValueError("dual store needs one group, got %r (ZooKeeper) and %r (Kafka)"
                             % (zk_store.group, kafka_store.group))
        self.zk_store = zk_store
        self.kafka_store = kafka_store
        self.group = zk_store.group
        # < 0: never commit ZooKeeper alone (the Scala behaviour)
        self.kafka_outage_ms = kafka_outage_ms
        self._clock = clock
        self._kafka_failing_since: Optional[float] = None
        # True while commits go to ZooKeeper alone (visible to the member and tools)
        self.zookeeper_only = False
        # the last Kafka commit was acknowledged in full: overlap the two writes
        self._kafka_healthy = False
        self.stats = {"overlapped": 0, "sequential": 0}

    def _kafka_failed(self, why) -> bool:
        """Record a Kafka-side failure; True when the outage has lasted past ``dual.commit.kafka.outage.ms``."""
        now = self._clock()
        if self._kafka_failing_since is None:
            self._kafka_failing_since = now
        if self.kafka_outage_ms < 0 or (now - self._kafka_failing_since) * 1000 < self.kafka_outage_ms:
            return False
        if not self.zookeeper_only:
            self.zookeeper_only = True
            log.warning("group %s: Kafka's offset manager has failed every commit for %.0f s (%s): committing to "
                        "ZooKeeper alone until it is back (dual.commit.kafka.outage.ms=%d; reads take the greater "
                        "of the two stores, so nothing is lost)", self.group, now - self._kafka_failing_since, why,
                        self.kafka_outage_ms)
        return True

    def _kafka_ok(self) -> None:
        if self.zookeeper_only:
            log.warning("group %s: Kafka's offset manager is back: dual commit again", self.group)
        self.zookeeper_only = False
        self._kafka_failing_since = None

    def commit(self, offsets, fence: Optional[OwnershipFence] = None, *,
               sequence: Optional[int] = None) -> CommitResult:
        """One Kafka OffsetCommit for all partitions, and ZooKeeper (only what changed, fenced).

        The fence is checked *before* Kafka (the Scala consumer had no fence) so a consumer that lost a partition
        writes neither store; every retry of the Kafka write is fenced again (ownership may have moved while it
        waited), and the ZooKeeper write is fenced again in its multi-op.  While Kafka is healthy the two
        writes overlap (see the module's docstring); otherwise Kafka goes first and ZooKeeper gets what Kafka
        acknowledged.  When Kafka cannot be reached, every partition fails with that cause and ZooKeeper is not
        written (until ``dual.commit.kafka.outage.ms`` has passed).

        :param offsets: ``{(topic, partition): next offset to consume}`` (``TopicPartition`` keys too).
        :param fence: an :class:`OwnershipFence`; partitions it refuses are written to neither store.
        :param sequence: the commit's number: each store leaves out a partition for which it confirmed a newer one
            (see the module's docstring).
        :returns: a :class:`CommitResult`: a partition is in ``committed`` only when both stores hold it; errors of
            either store (Kafka unreachable included) are in ``failed``, never raised; a partition either store
            left out for a newer commit it confirmed is in ``superseded``; ``degraded`` says why when ZooKeeper
            alone was written.
        :raises ValueError: an offset is not an integer from 0 to 2^63-1 (nothing is written).
        """
        offsets = normalize_offsets(offsets)
        result = CommitResult()
        if fence is not None:
            for tp, exc in fence.precheck(self.zk_store.zk, list(offsets)).items():
                result.fail(tp, exc)
                offsets.pop(tp)
        if not offsets:
            return result
        if self._kafka_healthy and not self.zookeeper_only:
            return self._overlapped(offsets, fence, result, sequence)
        self.stats["sequential"] += 1
        try:
            kafka_result = self.kafka_store.commit(offsets, fence=fence, **_ordered(sequence))
        except OffsetStoreError as e:
            self._kafka_healthy = False
            if self._kafka_failed(e):
                return self._zookeeper_alone(offsets, fence, result, e, sequence)
            for tp in offsets:
                result.fail(tp, OffsetStoreError("not committed (Kafka first, ZooKeeper skipped): %s" % e))
            return result
        if self._kafka_outcome(kafka_result):
            return self._zookeeper_alone(offsets, fence, result, next(iter(kafka_result.failed.values())),
                                         sequence)
        for tp, exc in kafka_result.failed.items():
            result.fail(tp, exc)
        for tp in kafka_result.superseded:
            result.supersede(tp)
        # this commit's own offsets (Kafka may have sent a newer commit's in their place): ZooKeeper's order decides
        acked = {tp: offsets[tp] for tp in kafka_result.committed}
        acked.update((tp, offsets[tp]) for tp in kafka_result.superseded)
        if acked:
            result.merge(self.zk_store.commit(acked, fence=fence, **_ordered(sequence)))
        return result

    def _kafka_outcome(self, kafka_result: CommitResult) -> bool:
        """Book a Kafka commit's outcome; True when it failed for the whole outage window (ZooKeeper alone)."""
        self._kafka_healthy = not kafka_result.failed
        if kafka_result.committed or not kafka_result.failed:
            self._kafka_ok()
            return False
        return not any(isinstance(e, OwnershipLostError) for e in kafka_result.failed.values()) and \
            self._kafka_failed(next(iter(kafka_result.failed.values())))

    def _overlapped(self, offsets, fence, result, sequence: Optional[int]) -> CommitResult:
        """ZooKeeper's multi-op handed to its client first, Kafka's OffsetCommit sent while ZooKeeper works."""
        self.stats["overlapped"] += 1
        started: List[Callable[[], CommitResult]] = []

        # called by the ZooKeeper store once its requests are on their way
        def start_kafka() -> None:
            try:
                started.append(self.kafka_store.begin_commit(offsets, fence=fence, **_ordered(sequence)))
            except Exception as e:
                # raised from finish() below, after ZooKeeper's answers are in
                started.append(functools.partial(_reraise, e))
        zk_result = self.zk_store.commit(offsets, fence=fence, sent=start_kafka, **_ordered(sequence))
        finish = started[0]
        try:
            kafka_result = finish()
        except OffsetStoreError as e:
            self._kafka_healthy = False
            self._kafka_failed(e)
            for tp in offsets:
                result.fail(tp, OffsetStoreError("not committed to Kafka (ZooKeeper %s): %s" % (
                    "written" if tp in zk_result.committed else "failed too", e)))
            return result
        self._kafka_outcome(kafka_result)
        result.merge(zk_result)
        for tp, exc in kafka_result.failed.items():
            result.fail(tp, exc)
        for tp in kafka_result.superseded:
            result.supersede(tp)
        return result

    def _zookeeper_alone(self, offsets, fence, result, why, sequence: Optional[int] = None) -> CommitResult:
        result.merge(self.zk_store.commit(offsets, fence=fence, **_ordered(sequence)))
        result.degraded = "committed to ZooKeeper alone: Kafka's offset manager down (%s)" % why
        return result

    def fetch(self, partitions) -> Dict:
        """The greater of the two stores' offsets of each partition.

        :param partitions: ``(topic, partition)`` pairs (``TopicPartition`` too).
        :returns: ``{(topic, partition): next offset to consume}``: ``max(ZooKeeper, Kafka)``; a partition absent
            from one store takes the other's value, and is absent only when both lack it.
        :raises OffsetStoreError: either store cannot be read (see :meth:`KafkaOffsetStore.fetch
            <zkconsumer.offsets.kafka.KafkaOffsetStore.fetch>` and :meth:`ZooKeeperOffsetStore.fetch
            <zkconsumer.offsets.zookeeper.ZooKeeperOffsetStore.fetch>`).
        """
        out = {}
        for tp, (z, k) in self.fetch_both(partitions).items():
            vals = [v for v in (z, k) if v is not None]
            if vals:
                out[tp] = max(vals)
        return out

    def fetch_both(self, partitions) -> Dict[Tuple[str, int], Tuple[Optional[int], Optional[int]]]:
        """``{(t, p): (zookeeper_offset_or_None, kafka_offset_or_None)}`` for every requested partition (tools)."""
        parts = normalize_partitions(partitions)
        kafka = self.kafka_store.fetch(parts)
        zk = self.zk_store.fetch(parts)
        return {tp: (zk.get(tp), kafka.get(tp)) for tp in parts}

    def close(self) -> None:
        """Close both stores (the ZooKeeper store's kazoo client belongs to the caller and stays open)."""
        try:
            self.kafka_store.close()
        finally:
            self.zk_store.close()


def _reraise(e: BaseException) -> NoReturn:
    raise e


def _ordered(sequence: Optional[int]) -> Dict[str, int]:
    """The keyword a store's commit is given for *sequence*: none for an unordered commit, so that a store (or a
    wrapper of one) that predates sequences is called as before."""
    return {} if sequence is None else {"sequence": sequence}
