"""The one small interface every offset store implements, its result type and the ownership fence.

A store is bound to one consumer group at construction; offsets are always the *next* offset to consume (what
Kafka 1.1.1 ``ZookeeperConsumerConnector.commitOffsets`` commits: ``PartitionTopicInfo.getConsumeOffset``), keyed
by ``(topic, partition)``. The fence makes a commit for a partition this consumer no longer owns fail instead of
overwriting its next owner's progress; a commit's sequence (:class:`CommitOrder`) keeps one that read its positions
before another from overwriting the newer one's offset.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
from typing import Dict, Iterable, Mapping, Optional, Set, Tuple, Type, Union

from ..errors import OffsetStoreError, OwnershipLostError
from ..core.layout._json import MAX_INT64

__all__ = ["TopicPartitionKey", "OffsetStore", "CommitResult", "OwnershipFence", "CommitOrder", "CommitTicket",
           "NormalizedOffsets", "normalize_offsets", "normalize_partitions"]

log = logging.getLogger(__name__)

TopicPartitionKey = Tuple[str, int]


def normalize_partitions(partitions: Iterable) -> list:
    """``[(topic, int(partition))]`` without duplicates, in input order (accepts kafka ``TopicPartition`` too)."""
    seen, out = set(), []
    for tp in partitions:
        key = (tp[0], int(tp[1]))
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


class NormalizedOffsets(dict):
    """A ``{(topic, partition): offset}`` that :func:`normalize_offsets` has checked: checking it again (a store
    handing its offsets to another, as the dual store does) is only a copy."""

    __slots__ = ()


def normalize_offsets(offsets: Mapping) -> Dict[TopicPartitionKey, int]:
    """``{(topic, int(partition)): int(offset)}`` (a new :class:`NormalizedOffsets`); an offset that is not an
    integer from 0 to 2^63-1 (a Java ``Long``) is a ``ValueError``."""
    if type(offsets) is NormalizedOffsets:
        return NormalizedOffsets(offsets)
    out = NormalizedOffsets()
    for tp, off in offsets.items():
        if type(off) is not int or off < 0 or off > MAX_INT64:
            if isinstance(off, bool) or not isinstance(off, int) or off < 0 or off > MAX_INT64:
                raise ValueError("offset for %s-%s must be an integer from 0 to 2^63-1 (the next offset to "
                                 "consume), not %r" % (tp[0], tp[1], off))
            off = int(off)
        if type(tp) is tuple and len(tp) == 2 and type(tp[1]) is int:
            out[tp] = off
        else:
            out[(tp[0], int(tp[1]))] = off
    return out


@dataclasses.dataclass
class CommitResult:
    """Outcome of one ``commit``: which partitions are durably stored and which failed, with the reason.

    * ``committed`` - ``{(t, p): offset}`` stored (or already stored: see ``unchanged``);
    * ``unchanged`` - subset of ``committed`` skipped because the store already held that value (the ZooKeeper
      store, as Kafka 1.1.1 ``ZookeeperConsumerConnector.commitOffsetToZooKeeper`` skips them);
    * ``failed`` - ``{(t, p): exception}``: :class:`OwnershipLostError` when a fence refused the partition,
      :class:`OffsetStoreError` (or a Kafka error class instance) otherwise;
    * ``superseded`` - partitions not written because the store has confirmed the write of a commit with a newer
      sequence for them (see :class:`CommitOrder`): that commit read the positions later, its offset is stored and
      covers this one. They are neither committed nor failed. (A partition written with a newer commit's offset, that
      commit's outcome being unknown, is in ``committed`` with that offset.)
    """

    committed: Dict[TopicPartitionKey, int] = dataclasses.field(default_factory=dict)
    failed: Dict[TopicPartitionKey, Exception] = dataclasses.field(default_factory=dict)
    unchanged: Set[TopicPartitionKey] = dataclasses.field(default_factory=set)
    superseded: Set[TopicPartitionKey] = dataclasses.field(default_factory=set)
    #: the dual store committed to ZooKeeper alone (Kafka down past dual.commit.kafka.outage.ms): the reason
    degraded: Optional[str] = None

    @property
    def ok(self) -> bool:
        return not self.failed

    def merge(self, other: "CommitResult") -> "CommitResult":
        """Add *other*'s outcome (of the same partitions in another store, or of others): a failure in either
        wins, then a superseded write in either (a newer commit covers that store), then committed."""
        self.committed.update(other.committed)
        self.unchanged |= other.unchanged
        self.failed.update(other.failed)
        self.superseded |= other.superseded
        for tp in self.superseded:
            self.committed.pop(tp, None)
            self.unchanged.discard(tp)
        for tp in other.failed:
            self.committed.pop(tp, None)
            self.unchanged.discard(tp)
            self.superseded.discard(tp)
        return self

    def fail(self, tp: TopicPartitionKey, exc: Exception) -> None:
        self.committed.pop(tp, None)
        self.unchanged.discard(tp)
        self.superseded.discard(tp)
        self.failed[tp] = exc

    def supersede(self, tp: TopicPartitionKey) -> None:
        """*tp* was not written: a commit with a newer sequence covers it (a failure already recorded stays)."""
        if tp not in self.failed:
            self.committed.pop(tp, None)
            self.unchanged.discard(tp)
            self.superseded.add(tp)

    def raise_for_errors(self) -> "CommitResult":
        """Return self when nothing failed.  Otherwise raise :class:`OwnershipLostError` if every failure is a
        fence refusal, else :class:`OffsetStoreError`; the message names the failed partitions and the first
        reason, the exception's ``result`` attribute is this object."""
        if not self.failed:
            return self
        items = sorted(self.failed.items())
        shown = ", ".join("%s-%d" % tp for tp, _ in items[:10]) + (" ..." if len(items) > 10 else "")
        first = items[0][1]
        only_fenced = all(isinstance(e, OwnershipLostError) for _, e in items)
        cls: Union[Type[OwnershipLostError], Type[OffsetStoreError]] = \
            OwnershipLostError if only_fenced else OffsetStoreError
        exc = cls("offset commit failed for %d partition(s) (%s): %s" % (len(items), shown, first))
        exc.result = self
        raise exc from (first if isinstance(first, BaseException) else None)


class OwnershipFence:
    """What the consumer owns right now: the ZooKeeper session its owner nodes were created under and the owner
    node path of every partition (``/consumers/[g]/owners/[t]/[p]``).

    A fenced commit for a partition is refused (an :class:`OwnershipLostError` in ``CommitResult.failed``, the
    other partitions still commit) when

    * the partition is not in ``owner_paths``;
    * the kazoo client's current session id differs from ``zk_session_id`` (kazoo silently opens a new session
      after LOST: writes would otherwise succeed under it);
    * the owner node no longer exists, or is owned by another session (``ephemeralOwner``): pre-checked with
      one pipelined round of ``exists`` (:meth:`precheck`);
    * the owner node vanished between that pre-check and the write: the ZooKeeper store pairs each write with
      ``check(owner_path, 0)`` in the same multi-op (owner nodes are never ``set``, so version 0 = "still there").

    The ``ephemeralOwner`` read costs one pipelined ``exists`` per partition (about 0.3 ms each with kazoo), so it
    is done once per partition per fence object: a partition verified once is then guarded by the session-id
    comparison and the in-multi check only.  Build a new fence for every generation (after every rebalance) and
    never commit through a fence whose owner nodes you deleted yourself; :meth:`verify` can be called right after
    claiming so the first commit is as fast as the others.

    Known residual window: our session expires *and* a successor creates the node between the verification and
    the multi-op; the in-multi check cannot tell the two version-0 nodes apart (the session-id comparison made
    just before the multi-op narrows this to milliseconds).
    """

    def __init__(self, zk_session_id: int, owner_paths: Mapping):
        self.zk_session_id = zk_session_id
        self.owner_paths: Dict[TopicPartitionKey, str] = {(t, int(p)): path for (t, p), path in owner_paths.items()}
        self._verified: Set[TopicPartitionKey] = set()

    def verify(self, zk) -> Dict[TopicPartitionKey, Exception]:
        """Verify every owner node now (see :meth:`precheck`); returns the refusals."""
        return self.precheck(zk, list(self.owner_paths))

    def __repr__(self):
        return "OwnershipFence(session=0x%x, %d partitions)" % (self.zk_session_id or 0, len(self.owner_paths))

    def session_matches(self, zk) -> bool:
        cid = zk.client_id
        return cid is not None and cid[0] == self.zk_session_id

    def withdraw(self, partitions: Iterable[TopicPartitionKey]) -> None:
        """The consumer is about to delete these owner nodes itself (a rebalance): from now on this fence refuses
        them, so a commit still in flight with it (a Kafka store retrying) cannot write over a successor's offset.
        Copy-on-write: a concurrent :meth:`precheck` sees the old or the new mapping, never a half-changed one."""
        gone = {(t, int(p)) for t, p in partitions}
        self.owner_paths = {tp: path for tp, path in self.owner_paths.items() if tp not in gone}
        self._verified = self._verified - gone

    def precheck(self, zk, partitions: Iterable[TopicPartitionKey],
                 fresh: bool = False) -> Dict[TopicPartitionKey, Exception]:
        """``{tp: OwnershipLostError}`` for every partition of *partitions* the fence refuses now. With *fresh*,
        every owner node is read again, verified before or not (a retry after a wait)."""
        partitions = list(partitions)
        refused: Dict[TopicPartitionKey, Exception] = {}
        if not partitions:
            return refused
        if not self.session_matches(zk):
            cur = zk.client_id[0] if zk.client_id else None
            for tp in partitions:
                refused[tp] = OwnershipLostError(
                    "commit for %s-%d refused: ZooKeeper session changed (owned under 0x%x, now %s)"
                    % (tp[0], tp[1], self.zk_session_id or 0, "0x%x" % cur if cur is not None else "none"))
            return refused
        pending = {}
        owner_paths = self.owner_paths
        for tp in partitions:
            path = owner_paths.get(tp)
            if path is None:
                refused[tp] = OwnershipLostError("commit for %s-%d refused: partition not owned in this generation"
                                                 % tp)
            elif fresh or tp not in self._verified:
                pending[tp] = (path, zk.exists_async(path))
        for tp, (path, res) in pending.items():
            try:
                stat = res.get()
            except Exception as e:
                # connection loss etc.: we cannot prove ownership
                refused[tp] = OwnershipLostError("commit for %s-%d refused: cannot read owner node %s: %r"
                                                 % (tp[0], tp[1], path, e))
                continue
            if stat is None:
                refused[tp] = OwnershipLostError("commit for %s-%d refused: owner node %s no longer exists"
                                                 % (tp[0], tp[1], path))
            elif stat.ephemeralOwner != self.zk_session_id:
                refused[tp] = OwnershipLostError(
                    "commit for %s-%d refused: owner node %s belongs to session 0x%x, not ours (0x%x)"
                    % (tp[0], tp[1], path, stat.ephemeralOwner, self.zk_session_id))
            else:
                self._verified.add(tp)
        for tp in refused:
            self._verified.discard(tp)
        return refused


class _Record:
    """A partition's newest admitted commit: its sequence, the offset it writes, whether the store knows it
    landed."""
    __slots__ = ("sequence", "offset", "confirmed")

    def __init__(self, sequence: int, offset: int, confirmed: bool = False):
        self.sequence, self.offset, self.confirmed = sequence, offset, confirmed

    def __repr__(self):
        return "_Record(%d, %d%s)" % (self.sequence, self.offset, ", confirmed" if self.confirmed else "")


class CommitTicket:
    """One call's plan (:meth:`CommitOrder.begin`): ``write`` ``{tp: offset}`` to send, ``superseded`` the
    partitions left out. Settled once with :meth:`CommitOrder.settle`."""
    __slots__ = ("sequence", "write", "superseded", "sequences", "before")

    def __init__(self, sequence: Optional[int]):
        self.sequence = sequence
        #: {tp: offset} to send: the call's own, or the newest admitted commit's (see CommitOrder)
        self.write: Dict[TopicPartitionKey, int] = {}
        self.superseded: Set[TopicPartitionKey] = set()
        # {tp: the sequence whose offset is in write}
        self.sequences: Dict[TopicPartitionKey, int] = {}
        # {tp: the record this call's admission replaced (None: there was none)}
        self.before: Dict[TopicPartitionKey, Optional[_Record]] = {}


class CommitOrder:
    """Per partition, the newest commit a store has admitted (sequence, offset, confirmed or not): what keeps
    commits made by several threads from landing out of order, and from being lost to a newer one that failed.

    A member numbers its commits (the sequence is taken with the consumed positions, under its ownership lock), so a
    higher sequence carries positions read later. Committers reach the store's lock in any order. For a call with
    sequence S and a partition whose newest admitted sequence N is higher:

    * N is *confirmed* (the store knows its offset landed): the partition is ``superseded``, not written; the store
      holds a position read later than S's;
    * N is not confirmed (in flight, or its outcome unknown: a lost connection): the call writes N's offset instead
      of its own, fenced as its own. Whichever lands, the store ends with the newest position; a newer write that
      fails cannot make the older one be dropped.

    Otherwise the call's own offset is admitted (recorded, unconfirmed) and written. Sequences, not offset values,
    are compared: a position that moved back legitimately (a reset point, a partition claimed again from the store's
    offset) comes with a newer sequence and is written. A write without a sequence (tools, ``force``) is not
    ordered and leaves the record alone.

    The store calls it under the lock that serializes its writes: :meth:`begin` before sending, :meth:`replan`
    before a retry, :meth:`settle` once the outcome is known (in a ``finally``): a write that landed is confirmed,
    the record of one the store knows did not happen (not sent, refused, rolled back) is withdrawn, one whose
    outcome is unknown stays unconfirmed. Not thread-safe by itself.
    """

    def __init__(self) -> None:
        self._records: Dict[TopicPartitionKey, _Record] = {}

    def newest(self, tp: TopicPartitionKey) -> Optional[Tuple[int, int, bool]]:
        """``(sequence, offset, confirmed)`` of the newest commit admitted for *tp*, or None."""
        rec = self._records.get(tp)
        return None if rec is None else (rec.sequence, rec.offset, rec.confirmed)

    def begin(self, offsets: Mapping[TopicPartitionKey, int], sequence: Optional[int]) -> CommitTicket:
        """Plan a call writing *offsets* with *sequence*, admitting those it writes as the newest."""
        ticket = CommitTicket(sequence)
        if sequence is None:
            ticket.write = dict(offsets)
            return ticket
        records = self._records
        for tp, offset in offsets.items():
            rec = records.get(tp)
            if rec is None or rec.sequence <= sequence:
                ticket.write[tp] = offset
                ticket.sequences[tp] = sequence
                ticket.before[tp] = rec
                records[tp] = _Record(sequence, offset)
            elif rec.confirmed:
                ticket.superseded.add(tp)
            else:
                ticket.write[tp] = rec.offset
                ticket.sequences[tp] = rec.sequence
        return ticket

    def replan(self, ticket: CommitTicket,
               pending: Iterable[TopicPartitionKey]) -> Tuple[Dict[TopicPartitionKey, int], Set[TopicPartitionKey]]:
        """Before a retry of *pending*: ``({tp: offset to send now}, {tp superseded now})``, as :meth:`begin`
        would decide against the commits admitted meanwhile; *ticket* follows."""
        write: Dict[TopicPartitionKey, int] = {}
        superseded: Set[TopicPartitionKey] = set()
        for tp in pending:
            rec = self._records.get(tp)
            if ticket.sequence is not None and rec is not None:
                if rec.confirmed and rec.sequence > ticket.sequence:
                    superseded.add(tp)
                    continue
                if rec.sequence > ticket.sequences[tp]:
                    ticket.write[tp] = rec.offset
                    ticket.sequences[tp] = rec.sequence
            write[tp] = ticket.write[tp]
        return write, superseded

    def settle(self, ticket: CommitTicket, written: Mapping[TopicPartitionKey, int],
               uncertain: Iterable[TopicPartitionKey] = ()) -> None:
        """The outcome of *ticket*'s writes: *written* ``{tp: offset}`` landed (the store knows it), *uncertain*
        may have; the others did not happen (not sent, refused, rolled back): this call's admission of them is
        withdrawn (the record before it counts again, unless a newer commit was admitted since)."""
        if ticket.sequence is None:
            return
        records = self._records
        uncertain = set(uncertain)
        for tp, seq in ticket.sequences.items():
            rec = records.get(tp)
            if tp in written and written[tp] == ticket.write[tp]:
                if rec is not None and rec.sequence == seq and rec.offset == written[tp]:
                    rec.confirmed = True
            elif tp not in uncertain and tp in ticket.before and rec is not None \
                    and rec.sequence == ticket.sequence and not rec.confirmed:
                before = ticket.before[tp]
                if before is None:
                    del records[tp]
                else:
                    records[tp] = before


class OffsetStore(abc.ABC):
    """Interface of the ZooKeeper, Kafka and dual offset stores (``offsets.storage``, ``dual.commit.enabled``).

    * :meth:`fetch` - ``{(t, p): next_offset}``; partitions without a committed offset are absent;
    * :meth:`commit` - a :class:`CommitResult`; never raises for per-partition failures;
    * :meth:`close`.

    ``name`` is ``"zookeeper"``, ``"kafka"`` or ``"dual"``; ``group`` the group the store is bound to. A consumer
    calls its store from several threads (the auto-commit thread, the rebalancer, the application's commits); the
    ZooKeeper and Kafka stores each hold a lock of their own around a call's requests, and check a commit's
    sequence against their :class:`CommitOrder` under it.
    """

    #: which store: "zookeeper", "kafka" or "dual" (the member counts its commits per store by it)
    name: str = "abstract"
    group: str
    #: True while a dual store commits to ZooKeeper alone (Kafka down past dual.commit.kafka.outage.ms)
    zookeeper_only: bool = False

    @abc.abstractmethod
    def fetch(self, partitions) -> Dict[TopicPartitionKey, int]:
        """The group's committed offsets of *partitions*.

        :param partitions: ``(topic, partition)`` pairs (kafka-python ``TopicPartition`` too).
        :returns: ``{(topic, partition): next offset to consume}``; a partition without a committed offset is
            absent.
        :raises OffsetStoreError: the store cannot be read (:class:`OffsetManagerUnavailableError` when Kafka's
            offset manager cannot be reached); the message names the group and what failed.
        """

    @abc.abstractmethod
    def commit(self, offsets, fence: Optional[OwnershipFence] = None, *,
               sequence: Optional[int] = None) -> CommitResult:
        """Store *offsets* for the group.

        :param offsets: ``{(topic, partition): next offset to consume}`` (kafka-python ``TopicPartition`` keys too).
        :param fence: when given, partitions whose ownership it does not confirm are refused, not written.
        :param sequence: the commit's number, taken with the positions (see :class:`CommitOrder`): a partition for
            which this store has confirmed a commit with a higher one is not written (``superseded``); one for which
            such a commit is in flight or of unknown outcome is written with that commit's offset. None: the write is
            not ordered (tools).
        :returns: a :class:`CommitResult`: what was stored, what a newer commit covers, and per partition what
            failed and why.
        :raises ValueError: an offset is not an integer from 0 to 2^63-1 (nothing is written).
        :raises OffsetStoreError: the store cannot be used at all (the Kafka store: no broker answered); the
            ZooKeeper and dual stores report every failure in the result instead.
        """

    def close(self) -> None:
        """Release what the store holds (its Kafka connection); a ZooKeeper client passed in stays open."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
