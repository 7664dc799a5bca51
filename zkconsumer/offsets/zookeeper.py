"""Offsets in ZooKeeper: ``/consumers/[g]/offsets/[t]/[p]`` holding the next offset as a decimal string.

What the Scala consumer did, in Kafka 1.1.1 ``ZookeeperConsumerConnector``: ``commitOffsetToZooKeeper`` writes the
offset as ``offset.toString``, and only when it differs from the value in ``checkpointedZkOffsets`` (the last one
read or written); ``fetchOffsetFromZooKeeper`` reads a missing node as "no offset". Differences, by design:

* many partitions are read with pipelined ``get_async`` calls and written with a few multi-ops (chunked below
  ZooKeeper's 1 MB ``jute.maxbuffer``) instead of one round trip per partition;
* a commit can be fenced (:class:`~.base.OwnershipFence`): the write is paired with ``check(owner, 0)`` in the same
  multi-op, so a consumer that lost a partition cannot overwrite its successor's progress;
* a failing op inside a multi-op is identified from the results; its partition is reported (or re-tried as
  ``create``/``set`` when the node appeared/vanished concurrently) and the rest of the chunk is re-sent.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Dict, List, Optional, Set, Tuple

from kazoo.exceptions import (BadVersionError, KazooException, NodeExistsError, NoNodeError, RolledBackError,
                              RuntimeInconsistency)
from kazoo.protocol.serialization import CheckVersion, SetData

from ..errors import OffsetStoreError, OwnershipLostError, ZnodeFormatError
from ..core.layout import decode_offset, encode_offset, partition_offset_path, topic_offsets_path, validate_group
from ..kafka.internals import kazoo_transaction_requests
from ..zookeeper import multi as zk_multi
from .base import CommitOrder, CommitResult, OffsetStore, OwnershipFence, normalize_offsets, normalize_partitions

__all__ = ["ZooKeeperOffsetStore"]

log = logging.getLogger(__name__)

# jute.maxbuffer defaults to 1 MiB (0xfffff); stay well below it per multi-op.
_MAX_TXN_BYTES = 512 * 1024
_MAX_TXN_OPS = 4000
# per-op header + lengths, generous
_OP_OVERHEAD = 32

# cache marker: we know the node does not exist
_ABSENT = object()


class _Once:
    """Calls a function (or nothing) the first time it is called, and never again."""
    __slots__ = ("fn",)

    def __init__(self, fn: Optional[Callable[[], None]]):
        self.fn = fn

    def __call__(self) -> None:
        fn, self.fn = self.fn, None
        if fn is not None:
            fn()


class ZooKeeperOffsetStore(OffsetStore):
    """ZooKeeper offset storage for one group (``offsets.storage=zookeeper``).

    :param zk: a started kazoo client (owned by the caller, not closed by :meth:`close`).
    :param group: the group id (checked: :class:`~zkconsumer.errors.InvalidNameError` when it is not a legal name).
    :param strict: on a malformed offset node, ``fetch`` raises :class:`OffsetStoreError` naming the path (tools);
        with ``strict=False`` it logs a warning and treats the partition as having no offset (the consumer then
        applies ``auto.offset.reset``, like a missing node).  A negative stored value (e.g. ``-1`` written by
        tools) always counts as "no offset", as the Scala fetcher resets a negative start offset (Kafka 1.1.1
        ``AbstractFetcherThread.addPartitions``).
    """

    name = "zookeeper"

    def __init__(self, zk, group: str, strict: bool = True):
        self.zk = zk
        self.group = validate_group(group)
        self.strict = strict
        self._lock = threading.RLock()
        # (t, p) -> last value read/written (int; -1 for a node holding an invalid/negative value), or _ABSENT.
        self._checkpoint: Dict = {}
        self._topics_ensured: Set[str] = set()
        self.stats = {"transactions": 0, "writes": 0}
        # (t, p) -> its offset node's path (validated once: 35% of a 10k-partition commit)
        self._paths: Dict = {}
        # (t, p) -> its setData operation's bytes up to the data (zk_multi)
        self._set_prefixes: Dict = {}
        # owner node path -> its check(path, 0) operation's bytes
        self._check_ops: Dict = {}
        # per partition, the newest commit admitted (under _lock)
        self._order = CommitOrder()

    def _path(self, tp) -> str:
        path = self._paths.get(tp)
        if path is None:
            path = self._paths[tp] = partition_offset_path(self.group, *tp)
        return path

    # ---- fetch ------------------------------------------------------------------------------------------------

    def fetch(self, partitions) -> Dict:
        """The committed offsets of *partitions*.

        One ``get_children`` per topic finds the existing nodes, then all their reads are issued at once
        (``get_async``) and collected.  Seeds the only-changed cache.

        :param partitions: ``(topic, partition)`` pairs (``TopicPartition`` too).
        :returns: ``{(topic, partition): next offset to consume}`` for the partitions that have a valid committed
            offset; a missing node, a negative value and (not strict) a malformed one are absent.
        :raises OffsetStoreError: ZooKeeper cannot be read, or (strict) a node is malformed (naming its path).
        """
        parts = normalize_partitions(partitions)
        out, error = {}, None
        with self._lock:
            try:
                present = self._list_children({tp[0] for tp in parts})
            except Exception as e:
                raise OffsetStoreError("cannot list offsets of group %s in ZooKeeper: %r" % (self.group, e)) from e
            for tp in parts:
                if str(tp[1]) not in present[tp[0]]:
                    self._checkpoint[tp] = _ABSENT
            pending = [(tp, path, self.zk.get_async(path))
                       for tp, path in ((tp, self._path(tp)) for tp in parts
                                        if str(tp[1]) in present[tp[0]])]
            for tp, path, res in pending:
                try:
                    data, _stat = res.get()
                except NoNodeError:
                    self._checkpoint[tp] = _ABSENT
                    continue
                except Exception as e:
                    # connection loss, session expiry, timeout
                    error = error or OffsetStoreError("cannot read offset node %s from ZooKeeper: %r" % (path, e))
                    continue
                try:
                    value = decode_offset(data, path)
                except ZnodeFormatError as e:
                    self._checkpoint[tp] = -1
                    if self.strict:
                        error = error or OffsetStoreError(str(e))
                    else:
                        log.warning("ignoring malformed offset node (treated as no offset): %s", e)
                    continue
                self._checkpoint[tp] = value if value >= 0 else -1
                if value >= 0:
                    out[tp] = value
        if error is not None:
            raise error
        return out

    # ---- commit -----------------------------------------------------------------------------------------------

    def commit(self, offsets, fence: Optional[OwnershipFence] = None, force: bool = False,
               sent: Optional[Callable[[], None]] = None, *, sequence: Optional[int] = None) -> CommitResult:
        """Write the changed offsets in a few multi-ops, optionally fenced and ordered.

        :param offsets: ``{(topic, partition): next offset to consume}`` (``TopicPartition`` keys too).
        :param fence: an :class:`OwnershipFence`: each write is paired with a check of the partition's owner node,
            and partitions it refuses are not written.
        :param force: write even values the cache says are already stored (tools).
        :param sent: called once, as soon as the first requests are handed to the client (before their answers),
            or before returning when nothing was sent: the dual store starts Kafka's OffsetCommit there, so that
            ZooKeeper's longer path starts first.
        :param sequence: the commit's number (:class:`~.base.CommitOrder`): under the store's lock, a partition
            this store has written with a higher one (ZooKeeper confirmed it) is left out, as ``superseded``; one
            whose newer write's outcome is unknown (the answer was lost) is written with that write's offset. A
            write ZooKeeper refused or rolled back, or that was never handed to the client, does not count.
        :returns: a :class:`CommitResult`: values already stored are in ``committed`` and ``unchanged``; ZooKeeper
            errors and fence refusals are in ``failed``, per partition, never raised; partitions a newer commit
            covers in ``superseded``.
        :raises ValueError: an offset is not an integer from 0 to 2^63-1 (nothing is written).
        """
        once = _Once(sent)
        try:
            return self._commit(offsets, fence, force, once, sequence)
        finally:
            once()

    def _commit(self, offsets, fence: Optional[OwnershipFence], force: bool, sent: _Once,
                sequence: Optional[int]) -> CommitResult:
        offsets = normalize_offsets(offsets)
        result = CommitResult()
        with self._lock:
            ticket = self._order.begin(offsets, sequence)
            result.superseded |= ticket.superseded
            uncertain: Set = set()
            try:
                if fence is not None and ticket.superseded:
                    # a partition we no longer own is refused, not reported as covered by a newer commit
                    for tp, exc in fence.precheck(self.zk, sorted(ticket.superseded)).items():
                        result.fail(tp, exc)
                self._commit_planned(ticket.write, fence, force, sent, result, uncertain)
            finally:
                self._order.settle(ticket, result.committed, uncertain)
        return result

    def _commit_planned(self, offsets: Dict, fence: Optional[OwnershipFence], force: bool, sent: _Once,
                        result: CommitResult, uncertain: Set) -> None:
        todo = {}
        for tp, off in offsets.items():
            if not force and self._checkpoint.get(tp) == off:
                result.committed[tp] = off
                result.unchanged.add(tp)
            else:
                todo[tp] = off
        if fence is not None:
            if not fence.session_matches(self.zk):
                # a changed session also refuses the unchanged ones: we must not claim them as ours
                refused = fence.precheck(self.zk, list(offsets))
            else:
                refused = fence.precheck(self.zk, list(todo))
            for tp, exc in refused.items():
                result.fail(tp, exc)
                todo.pop(tp, None)
        if todo:
            self._write(todo, fence, result, sent, uncertain)

    def _write(self, todo: Dict, fence: Optional[OwnershipFence], result: CommitResult, sent: _Once,
               uncertain: Set) -> None:
        """Write *todo*; *uncertain* holds the partitions whose outcome cannot be known: a multi-op handed to the
        client and not answered (the connection lost with it on its way, or an exception escaping meanwhile)."""
        # Decide set vs create: the cache knows for nodes we read or wrote; otherwise one get_children per topic.
        exists = {tp: self._checkpoint[tp] is not _ABSENT for tp in todo if tp in self._checkpoint}
        unknown = [tp for tp in todo if tp not in exists]
        if unknown:
            try:
                present = self._list_children({tp[0] for tp in unknown})
            except Exception as e:
                for tp in unknown:
                    result.fail(tp, OffsetStoreError("cannot list offset nodes of %s in ZooKeeper: %r"
                                                     % (topic_offsets_path(self.group, tp[0]), e)))
                    todo.pop(tp)
            else:
                for tp in unknown:
                    exists[tp] = str(tp[1]) in present[tp[0]]
        for topic in sorted({tp[0] for tp in todo if not exists[tp]}):
            if topic not in self._topics_ensured:
                try:
                    self.zk.ensure_path(topic_offsets_path(self.group, topic))
                    self._topics_ensured.add(topic)
                except Exception as e:
                    for tp in [tp for tp in todo if tp[0] == topic]:
                        result.fail(tp, OffsetStoreError("cannot create %s: %r"
                                                         % (topic_offsets_path(self.group, topic), e)))
                        todo.pop(tp)
        # partitions already re-tried once as create<->set
        switched = set()
        pending = dict(todo)
        fast = zk_multi.supported(self.zk)
        while pending:
            inflight = []
            slow = [tp for tp in pending if not exists[tp]] if fast else list(pending)
            # nodes that exist: setData multi-ops serialized in one pass (zk_multi)
            if fast:
                for chunk, request in self._set_data_multis([tp for tp in pending if exists[tp]], pending, fence):
                    inflight.append((chunk, zk_multi.submit(self.zk, request)))
                    uncertain.update(chunk)
                    self.stats["transactions"] += 1
            # nodes to create: kazoo's transactions
            for chunk in self._chunks(slow, fence):
                inflight.append((chunk, self._transaction(chunk, pending, exists, fence).commit_async()))
                uncertain.update(chunk)
                self.stats["transactions"] += 1
            # the first requests are on their way (a no-op after the first time)
            sent()
            retry = {}
            for chunk, res in inflight:
                try:
                    results = res.get()
                except Exception as e:
                    # connection loss: the outcome is unknown (the chunk stays in uncertain)
                    for tp in chunk:
                        self._checkpoint.pop(tp, None)
                        result.fail(tp, OffsetStoreError("ZooKeeper multi-op failed for offset node %s: %r"
                                                         % (self._path(tp), e)))
                    continue
                # answered: applied as a whole or not at all
                uncertain.difference_update(chunk)
                if zk_multi.all_ok(results):
                    done = {tp: pending[tp] for tp in chunk}
                    self._checkpoint.update(done)
                    result.committed.update(done)
                    self.stats["writes"] += len(done)
                    continue
                kinds = ("check", "write") if fence is not None else ("write",)
                ops = [(tp, kind) for tp in chunk for kind in kinds]
                bad = {}
                for (tp, kind), r in zip(ops, results):
                    if isinstance(r, (RolledBackError, RuntimeInconsistency)) or not isinstance(r, Exception):
                        continue
                    bad[tp] = (kind, r)
                if not bad and not any(isinstance(r, Exception) for r in results):
                    for tp in chunk:
                        self._checkpoint[tp] = pending[tp]
                        result.committed[tp] = pending[tp]
                        self.stats["writes"] += 1
                    continue
                # rolled back without a culprit (should not happen): report the chunk
                if not bad:
                    bad = {tp: ("write", OffsetStoreError("multi-op rolled back")) for tp in chunk}
                for tp in chunk:
                    if tp not in bad:
                        retry[tp] = pending[tp]
                        continue
                    kind, err = bad[tp]
                    path = self._path(tp)
                    if kind == "check" and isinstance(err, (NoNodeError, BadVersionError)):
                        # "check" ops are only sent with a fence
                        assert fence is not None
                        result.fail(tp, OwnershipLostError("commit for %s-%d refused: owner node %s %s"
                                                           % (tp[0], tp[1], fence.owner_paths[tp],
                                                              "vanished" if isinstance(err, NoNodeError)
                                                              else "was replaced or modified")))
                    elif kind == "write" and isinstance(err, (NoNodeError, NodeExistsError)) \
                            and tp not in switched:
                        # raced with a delete/create: flip create<->set once
                        switched.add(tp)
                        exists[tp] = isinstance(err, NodeExistsError)
                        if not exists[tp]:
                            self._topics_ensured.discard(tp[0])
                            try:
                                self.zk.ensure_path(topic_offsets_path(self.group, tp[0]))
                            except KazooException:
                                pass
                        retry[tp] = pending[tp]
                    else:
                        self._checkpoint.pop(tp, None)
                        result.fail(tp, OffsetStoreError("cannot write offset node %s: %r" % (path, err)))
            pending = retry

    def _set_data_multis(self, tps, pending: Dict, fence: Optional[OwnershipFence]):
        """``(chunk, SetDataMulti)`` pairs writing *tps* (each setData after a ``check`` of its owner node when
        fenced), cut below the size and operation limits; built from byte strings cached per path."""
        root = self.zk.chroot or ""
        prefixes, checks = self._set_prefixes, self._check_ops
        nops = 1 if fence is None else 2
        chunk: List[Tuple[str, int]] = []
        parts: List[bytes] = []
        size = 0
        for tp in tps:
            prefix = prefixes.get(tp)
            if prefix is None:
                prefix = prefixes[tp] = zk_multi.set_data_prefix(root + self._path(tp))
            # offsets are checked ints (normalize_offsets)
            op = zk_multi.set_data(prefix, b"%d" % pending[tp])
            if fence is not None:
                owner = fence.owner_paths[tp]
                check = checks.get(owner)
                if check is None:
                    check = checks[owner] = zk_multi.check_op(root + owner, 0)
                op = check + op
            if chunk and (size + len(op) > _MAX_TXN_BYTES or (len(chunk) + 1) * nops > _MAX_TXN_OPS):
                yield chunk, zk_multi.SetDataMulti(parts, len(chunk) * nops, fence is not None)
                chunk, parts, size = [], [], 0
            chunk.append(tp)
            parts.append(op)
            size += len(op)
        if chunk:
            yield chunk, zk_multi.SetDataMulti(parts, len(chunk) * nops, fence is not None)

    def _transaction(self, chunk, pending: Dict, exists: Dict, fence: Optional[OwnershipFence]):
        """kazoo's transaction for a chunk that creates nodes (or when this kazoo has no ``_call``)."""
        txn = self.zk.transaction()
        # kazoo's request list: our paths are built normalized and absolute, so kazoo's per-operation normalization
        # (a third of a 10,000-offset commit's client time) is skipped; None: this kazoo's own methods are used
        raw = kazoo_transaction_requests(txn)
        root = self.zk.chroot or ""
        for tp in chunk:
            path = self._path(tp)
            if fence is not None:
                if raw is not None:
                    raw.append(CheckVersion(root + fence.owner_paths[tp], 0))
                else:
                    txn.check(fence.owner_paths[tp], 0)
            data = encode_offset(pending[tp])
            if exists[tp]:
                if raw is not None:
                    raw.append(SetData(root + path, data, -1))
                else:
                    txn.set_data(path, data)
            else:
                txn.create(path, data)
        return txn

    def _list_children(self, topics) -> Dict[str, set]:
        """``{topic: {partition names with an offset node}}`` with one pipelined ``get_children`` per topic."""
        calls = [(t, self.zk.get_children_async(topic_offsets_path(self.group, t))) for t in sorted(topics)]
        present = {}
        for t, res in calls:
            try:
                present[t] = set(res.get())
                self._topics_ensured.add(t)
            except NoNodeError:
                present[t] = set()
        return present

    def _chunks(self, tps, fence) -> list:
        chunks: List[List[Tuple[str, int]]]
        cur: List[Tuple[str, int]]
        chunks, cur, size = [], [], 0
        for tp in sorted(tps):
            cost = len(self._path(tp)) + 20 + _OP_OVERHEAD
            nops = 1
            if fence is not None:
                cost += len(fence.owner_paths[tp]) + _OP_OVERHEAD
                nops = 2
            if cur and (size + cost > _MAX_TXN_BYTES or (len(cur) + 1) * nops > _MAX_TXN_OPS):
                chunks.append(cur)
                cur, size = [], 0
            cur.append(tp)
            size += cost
        if cur:
            chunks.append(cur)
        return chunks

    # ---- tools ------------------------------------------------------------------------------------------------

    def delete_offsets(self, partitions) -> CommitResult:
        """Delete the offset nodes of *partitions* (pipelined); a missing node counts as deleted.

        ``committed`` lists the deleted partitions (value -1), ``failed`` the others with the reason.
        """
        parts = normalize_partitions(partitions)
        result = CommitResult()
        with self._lock:
            pending = [(tp, path, self.zk.delete_async(path))
                       for tp, path in ((tp, self._path(tp)) for tp in parts)]
            for tp, path, res in pending:
                try:
                    res.get()
                except NoNodeError:
                    pass
                except Exception as e:
                    self._checkpoint.pop(tp, None)
                    result.fail(tp, OffsetStoreError("cannot delete offset node %s: %r" % (path, e)))
                    continue
                self._checkpoint[tp] = _ABSENT
                result.committed[tp] = -1
        return result

    def forget(self, partitions=None) -> None:
        """Drop the only-changed cache (all of it, or for *partitions*): the next commit writes them again."""
        with self._lock:
            if partitions is None:
                self._checkpoint.clear()
            else:
                for tp in normalize_partitions(partitions):
                    self._checkpoint.pop(tp, None)

    def close(self) -> None:
        """Nothing to release: the kazoo client belongs to the caller."""
        with self._lock:
            self._checkpoint.clear()
