"""One consistent read of a group's state for an assignment: what Kafka 1.1.1's ``AssignmentContext`` reads
(``ZkUtils.getConsumersPerTopic``, ``getPartitionsForTopics``), read so that members that read at slightly
different moments still compute the same assignment.

Reads the member list, every member's registration, the topic list (for wildcard members) and the partition map
of every topic any member subscribes to — with parallel asynchronous reads, and watches re-armed on the nodes whose
changes must trigger a rebalance. The read is repeated until the member list did not change while what depends on
it (registrations, leave markers) was being read (the creation and ``cversion`` of ``/ids`` before and after), so every
member computing from the same ZooKeeper state gets the same answer. Members that vanish between the list and the
read are skipped.

One rule for a registration that cannot be used — not JSON, missing ``pattern``/``subscription``, a bad stream
count, a wildcard regex that cannot be evaluated (see :mod:`zkconsumer.core.subscription.topic_filter`): that
member is kept in the member list but gets no thread id (it is assigned nothing), everyone else is assigned all the
partitions of their topics, and ONE error naming the member and what it registered is logged per version of its
registration znode (its ``mzxid``), not on every rebalance attempt. A subscribed topic that is not a legal topic name (a static
subscription, or an unknown ``pattern`` kind — Kafka reads those as static) cannot exist: it has no partitions.

Members in their leave grace (:mod:`.leave_grace`) are counted as if registered ("ghosts"): they are assigned
their partitions, which nobody else claims until they are back or the grace has passed.
"""
import logging
import threading
from dataclasses import dataclass, field
from typing import Dict, Hashable, List, Optional, Set

from kazoo.exceptions import NoNodeError

from ..errors import InvalidNameError, RebalanceError, ZnodeFormatError
from ..core.layout import codecs, paths
from ..core.layout.names import validate_topic
from ..core.subscription.topic_count import UnusableRegistration, merge_thread_ids, thread_ids_per_topic
from ..kafka.internals import kazoo_watch_callbacks_run
from .leave_grace import read_ghosts

log = logging.getLogger(__name__)
# how long a pass waits for kazoo's watch thread to run the callbacks queued before the member list's answer
WATCH_RUN_WAIT_S = 5.0


@dataclass
class GroupSnapshot:
    members: Dict[str, codecs.ConsumerRegistration]
    all_topics: List[str]
    # topic -> sorted partition ids (missing topic -> [])
    partitions: Dict[str, List[int]]
    # topic -> thread ids sorted as strings
    consumers_for_topic: Dict[str, List[str]]
    broker_ids: List[int] = field(default_factory=list)
    zk_reads: int = 0
    # members in their leave grace
    ghosts: Dict[str, codecs.ConsumerRegistration] = field(default_factory=dict)
    # epoch ms when the first leave grace ends
    ghost_expiry_ms: Optional[float] = None


class GroupReader:
    """Reads a group's state for one member across its rebalance attempts, re-reading only what changed.

    Reading every registration and every subscribed topic's partition map on every attempt, as Kafka 1.1.1's
    ``AssignmentContext`` does, costs O(N) reads per member and O(N^2) per rebalance of the group (the herd
    effect). Here registrations and partition maps are cached, each with a one-shot data watch armed when it is
    read: a change or deletion drops the entry (and calls *on_change*, so the member rebalances again), so an
    attempt reads only the member list, the topic, broker and leave-marker lists, and what is new or changed: a
    member's join costs the others two round trips (the lists; its registration and the list's version), a change
    that adds nothing to read one, plus the partition maps that changed and, when any member left with a leave
    grace, the member-info list and each leave marker. The member list's ``cversion`` (and creation) is compared
    before and after what was read against it (registrations, leave markers); a registration that was deleted and
    recreated under the same consumer id fires its watch (deletion) and is read again. A static registration's
    thread ids depend on its consumer id and content only (not on the topic list or ``exclude.internal.topics``):
    they are kept while its version (``mzxid``) is the one read; a wildcard's are worked out on every read. The
    reads give the assignor the same input as uncached reads would (bit-identical assignments).

    kazoo runs watch callbacks on a thread of their own: a node's change can have reached this client before the
    member list's answer while its watch callback, which drops the cached entry, has not run yet. Each pass waits
    for that thread to run the callbacks queued before the answer (:meth:`_watches_run`) and only then takes the
    cached entries, so a pass does not use an entry ZooKeeper had told it was stale (unless that thread is stuck for
    longer than ``WATCH_RUN_WAIT_S``: logged, and the callbacks, when they run, start another pass).

    A watch can fire between ZooKeeper's answer to a read and the moment the answer is stored (the node changed
    right after it was read): the answer is then stale and no watch is left on the node. Each entry has a change
    count, taken before the read and bumped by its watch; an answer is cached only if the count did not move. A
    read prunes the counts of members and topics it no longer asks about, which is safe with one ``read()`` at a
    time (the rebalancer's thread; :func:`read_group` makes a reader per call)."""

    def __init__(self, zk, group, on_change=None):
        self.zk, self.group = zk, group
        self.on_change = on_change
        self._lock = threading.Lock()
        # cid -> (registration or None, mzxid)
        self._regs: Dict[str, tuple] = {}
        # topic -> partition ids
        self._maps: Dict[str, List[int]] = {}
        # (id of _regs or _maps, key) -> watch firings seen
        self._changes: Dict[tuple, int] = {}
        # (cid, mzxid) -> thread ids per topic of a cached static registration (they depend on nothing else)
        self._threads: Dict[tuple, Dict[str, List[str]]] = {}
        self._ids_ensured = False

    def _dropper(self, table, key):
        def watcher(event):
            with self._lock:
                table.pop(key, None)
                self._changes[(id(table), key)] = self._changes.get((id(table), key), 0) + 1
            if self.on_change is not None:
                self.on_change(event)
        return watcher

    def _forget(self, table, keep):
        """Drop the entries of *table* (``_regs`` or ``_maps``) and their change counts whose keys are not in
        *keep* (call with the lock held): members that left and topics no longer asked about would otherwise stay
        for ever."""
        for key in [k for k in table if k not in keep]:
            del table[key]
        table_id = id(table)
        for key in [k for k in self._changes if k[0] == table_id and k[1] not in keep]:
            del self._changes[key]

    def _token(self, table, key):
        """The change count of an entry, taken before it is read (call with the lock held)."""
        return self._changes.get((id(table), key), 0)

    def _watches_run(self) -> None:
        """Return once kazoo's watch thread has run every callback queued so far (those of the changes ZooKeeper
        sent before the answer just read), bounded by WATCH_RUN_WAIT_S; at once when called on that thread."""
        if kazoo_watch_callbacks_run(self.zk, WATCH_RUN_WAIT_S) is False:
            log.warning("group %s: kazoo's watch thread did not run the callbacks queued before the group's member "
                        "list within %.1f s (a watch callback that blocks?); this pass may use a registration that "
                        "changed meanwhile, and the next one reads it again", self.group, WATCH_RUN_WAIT_S)

    def read(self, exclude_internal_topics=True, watch=None, max_passes=5) -> "GroupSnapshot":
        zk, group = self.zk, self.group
        ids_path = paths.group_ids_path(group)
        # once: it only goes away when empty (a tool's cleanup), then is made again below
        if not self._ids_ensured:
            zk.ensure_path(ids_path)
            self._ids_ensured = True
            # ensure_path's exists
            reads = 1
        else:
            reads = 0
        for _ in range(max_passes):
            # the member list, and with it the topic, broker and leave-marker lists (one round trip)
            ids_async = zk.get_children_async(ids_path, watch=watch, include_data=True)
            topics_async = zk.get_children_async(paths.broker_topics_path(), watch=watch)
            brokers_async = zk.get_children_async(paths.broker_ids_path(), watch=watch)
            leaving_async = zk.get_children_async(paths.group_leaving_dir(group), watch=watch)
            reads += 4
            try:
                children, stat = ids_async.get()
            except NoNodeError:
                # removed when empty (a tool's cleanup): made again, and a pass begun afresh (the other lists read
                # after it)
                zk.ensure_path(ids_path)
                reads += 1
                continue
            listed = set(children)
            self._watches_run()
            with self._lock:
                # members no longer listed (no read of theirs is awaited: a pass reads only listed ids)
                self._forget(self._regs, listed)
                # the cached entries of this pass, taken now: one whose watch fires while the pass goes on (a set of
                # the registration) is used by this pass as read, and read again by the next attempt; taken later
                # it would be missing from both the cache and this pass's reads, and the member left out
                cached = {cid: self._regs[cid] for cid in children if cid in self._regs}
                missing = [cid for cid in children if cid not in cached]
                tokens = {cid: self._token(self._regs, cid) for cid in missing}
            asyncs = {cid: zk.get_async(ids_path + "/" + cid, watch=self._dropper(self._regs, cid))
                      for cid in missing}
            # members in their leave grace: read against the list (ghosts count while every listed member has an
            # info node; a marker of a member not listed is a ghost), so before the check below
            ghost_reads = [0]
            ghosts, ghost_expiry = read_ghosts(zk, group, listed, watch=watch, names_async=leaving_async,
                                               reads=ghost_reads)
            reads += ghost_reads[0]
            # the list's version, right behind the registrations and the leave markers (ZooKeeper answers a
            # session's requests in order): unchanged, no member came or went while they were read. Only its version
            # (not its names again: 300 of them cost the server and this client), and its creation too: a list
            # deleted and made again starts its cversion afresh. Nothing read after the list, nothing to check.
            version_async = zk.exists_async(ids_path) if asyncs or ghost_reads[0] else None
            # answers of this pass (a stale one is used by this pass only: its watch asked for another)
            fresh = {}
            for cid, res in asyncs.items():
                reads += 1
                try:
                    data, reg_stat = res.get()
                except NoNodeError:
                    # left between the list and the read: the next pass or rebalance sees it
                    continue
                try:
                    reg = codecs.decode_consumer_registration(data, ids_path + "/" + cid)
                except ZnodeFormatError as e:
                    reg = None
                    _error_once(("member", group, cid, reg_stat.mzxid),
                                "group %s: member %s has a malformed registration, so it is assigned no partitions "
                                "and the others are assigned all of theirs until it registers again: %s"
                                % (group, cid, e))
                with self._lock:
                    # cached only if it did not change since the read (else it is read again next time)
                    if self._token(self._regs, cid) == tokens[cid]:
                        self._regs[cid] = (reg, reg_stat.mzxid)
                fresh[cid] = (reg, reg_stat.mzxid)
            if version_async is not None:
                stat_after = version_async.get()
                reads += 1
                if stat_after is None or (stat_after.czxid, stat_after.cversion) != (stat.czxid, stat.cversion):
                    log.debug("group %s changed while being read; reading again", group)
                    continue
            cached.update(fresh)
            members = {cid: reg for cid, (reg, _) in cached.items() if reg is not None}
            versions = {cid: mz for cid, (_, mz) in cached.items()}
            all_topics = _children_or_empty(topics_async)
            broker_ids = sorted(int(b) for b in _children_or_empty(brokers_async) if b.isdigit())
            unusable: Dict[str, UnusableRegistration] = {}
            everyone = dict(members)
            everyone.update(ghosts)
            try:
                cft = merge_thread_ids(self._thread_ids(everyone, versions, all_topics, exclude_internal_topics,
                                                        unusable))
            except RebalanceError as e:
                raise RebalanceError("cannot compute the group's subscriptions: %s" % e) from e
            for cid, unusable_error in unusable.items():
                _error_once(("member", group, cid, versions.get(cid)),
                            "group %s: %s; it is assigned no partitions and the others are assigned all of theirs "
                            "until it registers again" % (group, unusable_error))
            partitions, r = self._partition_maps(cft, watch)
            reads += r
            return GroupSnapshot(members, sorted(all_topics), partitions, cft, broker_ids, reads, ghosts, ghost_expiry)
        raise RebalanceError("group %s kept changing during %d consecutive reads" % (group, max_passes))

    def _thread_ids(self, everyone, versions, all_topics, exclude_internal_topics, unusable):
        """Each member's thread ids per topic (:func:`thread_ids_per_topic`; a member whose registration cannot be
        used goes into *unusable* instead), those of a static registration kept for as long as its version
        (``mzxid``) is the one read: an attempt of a large group otherwise spent most of its own CPU here."""
        out = []
        known, self._threads = self._threads, {}
        for cid, reg in everyone.items():
            # ghosts are not in the member list, so never in *versions*: theirs are worked out on every read
            key = (cid, versions[cid]) if cid in versions else None
            per_topic = known.get(key) if key is not None else None
            if per_topic is None:
                try:
                    per_topic = thread_ids_per_topic(cid, reg.subscription, reg.pattern, all_topics,
                                                     exclude_internal_topics)
                except UnusableRegistration as exc:
                    unusable[cid] = exc
                    continue
            if key is not None and not reg.is_wildcard:
                self._threads[key] = per_topic
            out.append(per_topic)
        return out

    def _partition_maps(self, topics, watch):
        zk, reads = self.zk, 0
        partitions: Dict[str, List[int]] = {}
        with self._lock:
            # topics nobody subscribes to any more (read again if asked again)
            self._forget(self._maps, topics)
            for t in topics:
                if t in self._maps:
                    partitions[t] = self._maps[t]
        topic_asyncs = {}
        with self._lock:
            tokens = {t: self._token(self._maps, t) for t in topics if t not in partitions}
        for t in topics:
            if t in partitions:
                continue
            try:
                path = paths.topic_path(validate_topic(t))
            except InvalidNameError as e:
                _warn_once(("badtopic", t), "subscribed topic %r can never exist (%s): it has no partitions" % (t, e))
                partitions[t] = []
                continue
            topic_asyncs[t] = zk.get_async(path, watch=self._dropper(self._maps, t))
        for t, res in topic_asyncs.items():
            reads += 1
            try:
                data, _ = res.get()
                partitions[t] = codecs.decode_topic_assignment(data, paths.topic_path(t)).partition_ids()
                with self._lock:
                    # cached only if it did not change since the read (else it is read again next time)
                    if self._token(self._maps, t) == tokens[t]:
                        self._maps[t] = partitions[t]
            except NoNodeError:
                partitions[t] = self._appeared(t, watch)
            except ZnodeFormatError as e:
                _warn_once(("topic", t, str(e)), "treating topic %s as having no partitions: %s" % (t, e))
                partitions[t] = []
        return partitions, reads


    def _appeared(self, t, watch) -> List[int]:
        """Partition ids of subscribed topic *t*, whose map was not there when read: [] while it does not exist, with
        a watch that fires when it is created. A topic created between that read and the watch fires nothing (the
        watch was armed on an existing node): it is read now, uncached, its change watched as a cached map's is."""
        path = paths.topic_path(t)
        for _ in range(3):
            if self.zk.exists(path, watch=watch) is None:
                log.warning("subscribed topic %s does not exist (no %s): no partitions to own until it is created",
                            t, path)
                return []
            try:
                data, _ = self.zk.get(path, watch=self._dropper(self._maps, t))
            except NoNodeError:
                # deleted again at once: watch for the next creation
                continue
            return codecs.decode_topic_assignment(data, path).partition_ids()
        return []


def read_group(zk, group, exclude_internal_topics=True, watch=None, max_passes=5):
    """One uncached read (tools, tests): a GroupSnapshot. ``watch`` (a kazoo watcher callable) is set on /ids
    children, /brokers/ids children, /brokers/topics children and each subscribed topic's partition map."""
    return GroupReader(zk, group, on_change=watch).read(exclude_internal_topics, watch, max_passes)


_warned: Set[Hashable] = set()


def _warn_once(key, message, level=logging.WARNING):
    """Log a problem with a znode once per distinct content / znode version, not on every rebalance attempt."""
    if key not in _warned:
        if len(_warned) > 10000:
            _warned.clear()
        _warned.add(key)
        log.log(level, "%s", message)


def _error_once(key, message):
    _warn_once(key, message, logging.ERROR)


def _children_or_empty(result):
    try:
        return result.get()
    except NoNodeError:
        return []
