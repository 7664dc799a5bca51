"""What a member knows of one partition it owns, in one object (Kafka 1.1.1 ``kafka.consumer.PartitionTopicInfo``,
kafka-python's ``TopicPartitionState``).

The rebalancer makes a :class:`PartitionTopicInfo` when the partition is claimed and drops it when the partition is
released or lost; a partition kept across rebalances keeps its object. Everything else reaches a partition through
it: the fetcher puts chunks carrying it on its queue, the stream records the consumed position on it as it hands a
record out, a reset records the new position on it, a commit reads it. Something that still holds the object of an
ownership that has ended (a chunk of an old generation) writes to an object nobody reads any more, never to the
successor's. Keys are ``(topic, partition)`` tuples (kafka-python's ``TopicPartition`` is a tuple of the same
fields, so either finds the same entry).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

__all__ = ["PartitionTopicInfo", "ResetTo", "OwnedThreads", "TopicPartitionKey"]

TopicPartitionKey = Tuple[str, int]


class PartitionTopicInfo:
    """One owned partition.

    * ``tp``, ``thread_id`` - the owner node ``/consumers/[g]/owners/[t]/[p]`` and its data;
    * ``start_offset`` - the committed offset read right after the claim (None: none was committed, or not read
      yet: ``offset_read`` says which);
    * ``consumed`` - the next offset to deliver, what a commit writes: the start offset, the reset point, then the
      offset after each record a stream hands out (None until known);
    * ``fetched`` - the next offset the fetcher hands to the queue (the fetcher's thread only);
    * ``reset_to`` - a reset point the fetcher queued behind records fetched before the reset (the stream records
      it when it gets there; if those records are dropped instead, :meth:`apply_reset` records it);
    * ``range_suspect`` - a fetch position ListOffsets found outside the log at the fetcher's last check (the
      fetcher's thread only: it resets the partition when the next check finds the same position outside again);
    * ``reset_unresolved`` - the fetcher's client was told to reset the partition and its new position is not known
      yet (no leader, say: the fetcher's thread only; it records the reset point when the position is known, and
      neither rewinds nor range-checks the partition meanwhile);
    * ``queue`` - the queue of the stream this partition's thread id feeds.
    """

    __slots__ = ("tp", "thread_id", "start_offset", "offset_read", "consumed", "fetched", "reset_to",
                 "range_suspect", "reset_unresolved", "queue")

    def __init__(self, tp: TopicPartitionKey, thread_id: str) -> None:
        self.tp = (tp[0], int(tp[1]))
        self.thread_id = thread_id
        self.start_offset: Optional[int] = None
        self.offset_read = False
        self.consumed: Optional[int] = None
        self.fetched: Optional[int] = None
        self.reset_to: Optional[int] = None
        self.range_suspect: Optional[int] = None
        self.reset_unresolved = False
        self.queue: Any = None

    def apply_reset(self) -> None:
        """Record a queued reset point whose marker will not reach the stream (its queue was cleared)."""
        reset_to = self.reset_to
        if reset_to is not None:
            self.consumed = reset_to
            self.reset_to = None

    def __repr__(self) -> str:
        return "PartitionTopicInfo(%s-%d, %s, consumed=%s, fetched=%s)" % (
            self.tp[0], self.tp[1], self.thread_id, self.consumed, self.fetched)


class ResetTo:
    """The records of a chunk that marks a reset (in queue order, behind what was fetched before it): the stream
    records ``offset`` as the partition's consumed position when it gets there, then calls ``recorded(part)`` (the
    connector commits the reset point then)."""

    __slots__ = ("offset", "recorded")

    def __init__(self, offset: int, recorded: Optional[Callable[["PartitionTopicInfo"], None]] = None) -> None:
        self.offset = offset
        self.recorded = recorded

    # no records (metrics count len(records) per chunk)
    def __len__(self) -> int:
        return 0


class OwnedThreads(Mapping):
    """A read-only ``{(topic, partition): thread id}`` view of a registry ``{(topic, partition):
    PartitionTopicInfo}`` (what the rebalancer owns, as tools, metrics and the Spark member read it)."""

    __slots__ = ("_parts",)

    def __init__(self, parts: Dict[TopicPartitionKey, PartitionTopicInfo]) -> None:
        self._parts = parts

    def __getitem__(self, tp: Any) -> str:
        return self._parts[tp].thread_id

    def __contains__(self, tp: Any) -> bool:
        return tp in self._parts

    def __iter__(self) -> Iterator[TopicPartitionKey]:
        return iter(list(self._parts))

    def __len__(self) -> int:
        return len(self._parts)

    def __repr__(self) -> str:
        return repr(dict(self))
