"""Offsets that must not be carried from one store to the other although "never backwards" would allow it.

``copy`` and ``cutover`` write a ZooKeeper offset to Kafka where Kafka has none or a smaller one, and ``rollback``
keeps a ZooKeeper offset where Kafka has none. That is right for a group that committed there last, and wrong for:

* **a frozen ZooKeeper offset**: the group went on in Kafka (``offsets.storage=kafka``, dual commit off: ZooKeeper is
  not written any more) and its Kafka offset is gone: expired on the broker ``offsets.retention.minutes`` after the
  group stopped, or removed with its topic. The ZooKeeper value is where the group stood weeks ago;
* **an offset of an earlier topic of the same name**: the topic was deleted and created again after the offset was
  written (a new topic id, a new log that starts at 0): the old offset is beyond the new log end (the consumers reset)
  or points into unrelated records;
* **a Kafka offset set below ZooKeeper's after ZooKeeper's was last written**: a ``reset-offsets --store kafka`` to
  reprocess, or the new consumers after a cutover, moved Kafka back while ZooKeeper kept where the group had been:
  writing ZooKeeper's over it would skip the records between (:func:`frozen_ahead`). A ZooKeeper offset a member wrote
  after Kafka's was set is where the group stopped, and is copied.

Evidence, in the order it is read (each from a source of record, not a guess):

* the phase record: since a passing ``verify --phase kafka`` or a ready ``cutover`` every partition had a Kafka
  offset (:func:`~.state.kafka_only_since`); a partition without one now, whose ZooKeeper offset is older, lost it;
* ``__consumer_offsets``: the last commit of a removed Kafka offset, while the log still holds it
  (:func:`zkconsumer.offsets.expiry.read_commit_log`): a removed Kafka offset greater than ZooKeeper's;
* for a rollback, the age of the ZooKeeper offset: older than ``offsets.retention.minutes`` with no Kafka offset
  (whatever the group committed to Kafka after it has had time to expire);
* ZooKeeper's own clock: the offset node's ``mtime`` against the ``ctime`` of ``/brokers/topics/T`` (the topic was
  created after the offset was written) and the topic id the broker stored there;
* the log end (ListOffsets): an offset beyond it;
* for a Kafka offset below ZooKeeper's, since when Kafka has held it (the first commit of its run in
  ``__consumer_offsets``, :func:`kafka_offset_since`; a ``zkmigrate restore``'s run from the time its backup
  records) against when ZooKeeper's was last written (its node's ``mtime``; a node a restore wrote, the backup's).

Evidence that cannot be read counts against a write: when ``__consumer_offsets`` cannot be read (no Read right on
it, a timeout) for a ZooKeeper offset older than the retention without a Kafka offset, copy and cutover refuse
that partition as not checked (its way out: the Read right, or ``--allow-stale``), and so for a ZooKeeper offset
above Kafka's whose times are not known (``__consumer_offsets`` unread, Kafka's commit or the node's mtime not found,
a restore's backup that does not say); when ``offsets.retention.minutes``
cannot be read, the shortest default (1 day, Kafka before 2.0) is taken, so more offsets count as old, and the
report says so.

A refused partition names the group, the partition, the evidence and the ways out: ``reset-offsets`` to the
position wanted, ``--exclude-topic`` for a topic the group no longer reads, or ``--allow-stale`` to write (or
keep) the offset anyway. :func:`to_kafka_refusals` and :func:`to_zookeeper_refusals` are pure.
"""
from __future__ import annotations

import json
import time
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

from kazoo.exceptions import NoNodeError

from zkconsumer.core.layout import paths

from zkconsumer.offsets.expiry import OFFSETS_TOPIC, Retention

from .expiry import iso

__all__ = ["Evidence", "evidence", "to_kafka_refusals", "to_zookeeper_refusals", "zk_offset_mtimes",
           "frozen_ahead", "kafka_offset_since", "since_of_lower_kafka",
           "zk_mtimes_for_backup", "zk_offsets_and_versions",
           "topic_births", "check_to_kafka", "check_to_zookeeper", "StaleCheck"]

TP = Tuple[str, int]


class Evidence(NamedTuple):
    """What is known about one partition besides its two offsets (None: not known)."""
    # ms, when its ZooKeeper offset node was last written
    zk_mtime: Optional[int] = None
    # ms, when /brokers/topics/T was created
    topic_ctime: Optional[int] = None
    topic_id: Optional[str] = None
    log_end: Optional[int] = None
    # (offset, committed ms) the broker removed
    removed: Optional[Tuple[Optional[int], Optional[int]]] = None
    # the zxid of the transaction that last wrote its ZooKeeper offset node
    zk_mzxid: Optional[int] = None


def zk_offset_mtimes(zk, group: str, partitions) -> Dict[TP, int]:
    """``{tp: mtime (ms)}`` of the ZooKeeper offset nodes of *partitions* that exist."""
    return {tp: st[0] for tp, st in _zk_offset_stats(zk, group, partitions).items()}


def _zk_offset_stats(zk, group: str, partitions) -> Dict[TP, Tuple[int, int]]:
    pending = {tp: zk.exists_async(paths.partition_offset_path(group, tp[0], tp[1])) for tp in partitions}
    out = {}
    for tp, res in pending.items():
        stat = res.get()
        if stat is not None:
            out[tp] = (int(stat.mtime), int(stat.mzxid))
    return out


def zk_offsets_and_versions(zk, group: str, partitions) -> Dict[TP, Tuple[Optional[int], int]]:
    """``{tp: (offset or None when not a number, mzxid)}`` of the ZooKeeper offset nodes of *partitions* that
    exist."""
    pending = {tp: zk.get_async(paths.partition_offset_path(group, tp[0], tp[1])) for tp in partitions}
    out: Dict[TP, Tuple[Optional[int], int]] = {}
    for tp, res in pending.items():
        try:
            data, stat = res.get()
        except NoNodeError:
            continue
        try:
            off: Optional[int] = int(data.decode("utf-8").strip())
        except (ValueError, UnicodeDecodeError, AttributeError):
            off = None
        out[tp] = (off, int(stat.mzxid))
    return out


def topic_births(zk, topics) -> Dict[str, Tuple[int, Optional[str]]]:
    """``{topic: (ctime ms of /brokers/topics/T, its topic_id or None)}`` for the topics registered."""
    pending = {t: zk.get_async(paths.topic_path(t)) for t in set(topics)}
    out = {}
    for t, res in pending.items():
        try:
            data, stat = res.get()
        except NoNodeError:
            continue
        try:
            tid = json.loads(data.decode("utf-8")).get("topic_id")
        except (ValueError, AttributeError, RecursionError):
            tid = None
        out[t] = (int(stat.ctime), tid if isinstance(tid, str) else None)
    return out


def evidence(gofs, partitions, log_end: Dict[TP, int], removed=None) -> Dict[TP, Evidence]:
    """:class:`Evidence` of *partitions* from ZooKeeper (offset mtimes, topic births) and the given log ends and
    removed Kafka offsets (``{tp: LastCommit}``)."""
    partitions = list(partitions)
    stats = _zk_offset_stats(gofs.zk, gofs.group, partitions)
    births = topic_births(gofs.zk, {t for t, _ in partitions})
    out = {}
    for tp in partitions:
        born = births.get(tp[0], (None, None))
        gone = (removed or {}).get(tp)
        st = stats.get(tp, (None, None))
        out[tp] = Evidence(st[0], born[0], born[1], log_end.get(tp),
                           (gone.offset, gone.committed_ms) if gone is not None and gone.removed else None, st[1])
    return out


def _age(ms: float) -> str:
    s = ms / 1000.0
    if s < 120:
        return "%.0f s" % s
    if s < 7200:
        return "%.0f min" % (s / 60)
    if s < 172800:
        return "%.1f h" % (s / 3600)
    return "%.1f days" % (s / 86400)


def _ways(group: str, tp: TP, store: str, keep: str, first: str = "") -> str:
    return ("Ways out: %sset the position with 'zkmigrate reset-offsets --group %s --topic %s:%d --store %s "
            "--to-earliest' (or --to-offset N, --to-datetime T), '--exclude-topic %s' if the group no longer reads "
            "the topic, or %s" % (first, group, tp[0], tp[1], store, tp[0], keep))


#: the first way out of a partition whose staleness could not be checked
GRANT_READ = "grant this Kafka identity Read on topic %s and run again, " % OFFSETS_TOPIC


def _predates(group, tp, zk_off, ev: Evidence) -> Optional[str]:
    if ev.zk_mtime is None or ev.topic_ctime is None or ev.zk_mtime >= ev.topic_ctime:
        return None
    return ("group %s, %s-%d: its ZooKeeper offset %d was written %s, before topic %s was created (%s%s): it belongs "
            "to an earlier topic of that name (deleted and created again)"
            % (group, tp[0], tp[1], zk_off, iso(ev.zk_mtime), tp[0], iso(ev.topic_ctime),
               ", topic id %s" % ev.topic_id if ev.topic_id else ""))


def to_kafka_refusals(group: str, todo: Dict[TP, int], both: Dict[TP, tuple], ev: Dict[TP, Evidence],
                      frozen_since: Optional[int], unchecked: Optional[Dict[TP, str]] = None) -> Dict[TP, str]:
    """Of the ZooKeeper offsets *todo* that copy or cutover would write to Kafka, the ones refused, with why.
    *unchecked*: ``{tp: why}`` of the partitions whose staleness could not be checked (their ZooKeeper offset is
    older than the retention, and the removed Kafka offsets could not be read): refused unless the other evidence
    already says more (a write on unknown evidence is refused, like a stale one)."""
    out = {}
    for tp, zk_off in sorted(todo.items()):
        e = ev.get(tp, Evidence())
        kafka = both[tp][1]
        why = None
        if e.log_end is not None and zk_off > e.log_end:
            why = ("group %s, %s-%d: its ZooKeeper offset %d is beyond the log end %d (the topic was created again, "
                   "or the log truncated): the consumers would reset" % (group, tp[0], tp[1], zk_off, e.log_end))
        if why is None:
            why = _predates(group, tp, zk_off, e)
        if why is None and kafka is None and frozen_since is not None and e.zk_mtime is not None \
                and e.zk_mtime < frozen_since:
            why = ("group %s, %s-%d: Kafka holds no offset for it, although the group has kept every offset in "
                   "Kafka since %s (recorded phase); its ZooKeeper offset %d was last written %s, before that: it "
                   "is frozen, and the Kafka offset that replaced it was removed (expired after "
                   "offsets.retention.minutes, or deleted)" % (group, tp[0], tp[1], iso(frozen_since), zk_off,
                                                                iso(e.zk_mtime)))
        if why is None and kafka is None and e.removed is not None and e.removed[0] is not None \
                and e.removed[0] > zk_off:
            why = ("group %s, %s-%d: Kafka held offset %d (committed %s) until the broker removed it (expired after "
                   "offsets.retention.minutes, or deleted); its ZooKeeper offset %d is older and smaller: it is "
                   "frozen" % (group, tp[0], tp[1], e.removed[0], iso(e.removed[1]), zk_off))
        if why is None and tp in (unchecked or {}):
            why = "group %s, %s-%d: %s" % (group, tp[0], tp[1], (unchecked or {})[tp])
            out[tp] = "%s. %s" % (why, _ways(group, tp, "kafka", "--allow-stale to copy it anyway", GRANT_READ))
        elif why is not None:
            out[tp] = "%s. %s" % (why, _ways(group, tp, "kafka", "--allow-stale to copy it anyway"))
    return out


def to_zookeeper_refusals(group: str, both: Dict[TP, tuple], ev: Dict[TP, Evidence], frozen_since: Optional[int],
                          retention: Optional[Retention], now_ms: Optional[float] = None,
                          keep: str = "--allow-stale to roll back anyway",
                          restored_at: Optional[int] = None, keep_ahead: bool = False) -> Dict[TP, str]:
    """Of the partitions a rollback (Kafka -> ZooKeeper) handles, the ones refused, with why: a Kafka offset beyond
    the log end, a ZooKeeper offset kept (no Kafka offset) that is beyond the log end, frozen, older than the
    retention (when it is not known, the assumed shortest one), or of an earlier topic, and (*keep_ahead*) a ZooKeeper offset kept ahead
    of Kafka's that is beyond the log end or of an earlier topic (Kafka's own offset is smaller: ZooKeeper's is not
    frozen behind it).

    A frozen or old ZooKeeper offset is kept all the same when *ev* holds the Kafka offset the broker removed (its last
    commit in ``__consumer_offsets``) and it is that same offset: the group resumes where Kafka stood last (a cutover
    whose copies expired before any consumer committed). A smaller one may be a reset to reprocess: refused.

    *restored_at*: when a restore last put the group's offsets back (:func:`.state.restored_since`). Within one
    retention of it, a Kafka offset committed since would still be there, so a missing one did not expire and the
    ZooKeeper offset the restore left is kept whatever its age (the runbook that undoes a cutover: restore, then
    rollback)."""
    now = time.time() * 1000 if now_ms is None else now_ms
    retention_ms = retention.ms if retention is not None else None
    if retention_ms is not None and restored_at is not None and now - restored_at < retention_ms:
        retention_ms = None
    out = {}
    for tp, (zk_off, kafka) in sorted(both.items()):
        e = ev.get(tp, Evidence())
        why = None
        if kafka is not None and e.log_end is not None and kafka > e.log_end:
            why = ("group %s, %s-%d: its Kafka offset %d is beyond the log end %d (the topic was created again, or "
                   "the log truncated): the consumers would reset" % (group, tp[0], tp[1], kafka, e.log_end))
        elif keep_ahead and kafka is not None and zk_off is not None and zk_off > kafka:
            if e.log_end is not None and zk_off > e.log_end:
                why = ("group %s, %s-%d: its ZooKeeper offset %d, kept ahead of Kafka's %d, is beyond the log end %d "
                       "(the topic was created again, or the log truncated): the consumers would reset"
                       % (group, tp[0], tp[1], zk_off, kafka, e.log_end))
            else:
                why = _predates(group, tp, zk_off, e)
            if why is not None:
                out[tp] = "%s. %s" % (why, _ways(group, tp, "zookeeper", keep, "'--allow-rewind' to take Kafka's "
                                                 "offset %d, " % kafka))
                continue
        elif kafka is None and zk_off is not None:
            if e.log_end is not None and zk_off > e.log_end:
                why = ("group %s, %s-%d: Kafka holds no offset for it and its ZooKeeper offset %d is beyond the log "
                       "end %d (the topic was created again, or the log truncated): the consumers would reset"
                       % (group, tp[0], tp[1], zk_off, e.log_end))
            if why is None:
                why = _predates(group, tp, zk_off, e)
            if why is None and e.removed is not None and e.removed[0] is not None and e.removed[0] == zk_off:
                # the last Kafka commit the broker removed was ZooKeeper's offset: the group resumes where Kafka
                # stood last (one below it may have been a reset to reprocess: keeping ZooKeeper's would skip)
                pass
            elif why is None and frozen_since is not None and e.zk_mtime is not None and e.zk_mtime < frozen_since:
                why = ("group %s, %s-%d: Kafka holds no offset for it, although the group has kept every offset in "
                       "Kafka since %s (recorded phase); ZooKeeper keeps %d, last written %s: frozen since then, and "
                       "the rollback would resume there" % (group, tp[0], tp[1], iso(frozen_since), zk_off,
                                                            iso(e.zk_mtime)))
            elif why is None and retention_ms is not None and e.zk_mtime is not None \
                    and now - e.zk_mtime > retention_ms:
                why = ("group %s, %s-%d: Kafka holds no offset for it and ZooKeeper keeps %d, last written %s (%s "
                       "ago, longer than %s): if the group committed to Kafka since, that offset expired, and the "
                       "rollback would resume from the old ZooKeeper offset"
                       % (group, tp[0], tp[1], zk_off, iso(e.zk_mtime), _age(now - e.zk_mtime),
                          retention.describe() if retention is not None else "the retention"))
        if why is not None:
            out[tp] = "%s. %s" % (why, _ways(group, tp, "zookeeper", keep))
    return out


def frozen_ahead(group: str, both: Dict[TP, tuple], ev: Dict[TP, Evidence], kafka_since: Optional[Dict[TP, int]],
                 restore_written: Optional[Dict[TP, int]] = None, unread: Optional[str] = None,
                 keep: Optional[str] = None, restored_unknown: Optional[Set[TP]] = None,
                 restored_zk: Optional[Set[TP]] = None) -> Dict[TP, str]:
    """Of the ZooKeeper offsets ahead of Kafka's, the ones not shown to be where the group stopped last, with why
    (pure). One is kept (not returned) only when its offset node was last written after Kafka's offset became what
    it is (*kafka_since*: ``{tp: ms}``, the first of the latest run of commits of that offset in
    ``__consumer_offsets``: a keep-alive that commits it again does not count) by a member: a member on ZooKeeper
    storage ran after the group last moved its Kafka offset (back from the dual phase, or one that came back before
    the cutover fence). A write by ``zkmigrate restore`` (*restore_written*: ``{tp: mzxid}`` the restores recorded,
    :func:`~.state.restored_nodes`, compared with the node's mzxid: ZooKeeper's own order) is no such evidence: it
    put back what a backup held.

    Otherwise Kafka was set below ZooKeeper since (``reset-offsets --store kafka`` to reprocess, consumers that went
    on and were reset: keeping ZooKeeper's would skip the records between), or the evidence is missing (*unread*:
    why ``__consumer_offsets`` could not be read; *restored_unknown*: the partitions whose Kafka offset a restore put
    back from a backup that does not say since when Kafka had held it, :func:`kafka_offset_since`): a skipped rewind.
    *restored_zk*: the partitions whose ``zk_mtime`` in *ev* is the time a restore's backup gave for the offset it
    wrote back (:func:`_as_written_before`), said in the reason. ZooKeeper's mtime comes from the ZooKeeper
    servers' clock and the commit time from the broker's: clocks apart by more than the time between the two
    writes decide wrongly."""
    keep = keep or ("to keep ZooKeeper's anyway, copy it to Kafka first ('zkmigrate copy --group %s --allow-stale "
                    "--execute')" % group)
    out = {}
    for tp, (zk_off, kafka) in sorted(both.items()):
        if zk_off is None or kafka is None or zk_off <= kafka:
            continue
        e = ev.get(tp, Evidence())
        mtime = e.zk_mtime
        since = (kafka_since or {}).get(tp)
        by_restore = e.zk_mzxid is not None and (restore_written or {}).get(tp) == e.zk_mzxid
        if mtime is not None and since is not None and mtime > since and not by_restore:
            continue
        if by_restore:
            why = ("ZooKeeper's %d was written by zkmigrate restore (what its backup held, not where a "
                   "member stopped): nothing shows it is where the group stopped rather than Kafka's %d (%s)"
                   % (zk_off, kafka, keep))
        elif tp in (restored_unknown or ()):
            why = ("whether ZooKeeper's %d was written after Kafka's offset became %d (then it is where the group "
                   "stopped) could not be checked: zkmigrate restore put Kafka's %d back%s, after ZooKeeper's was "
                   "last written (%s), and whether Kafka held it before is not known; %s"
                   % (zk_off, kafka, kafka, " (%s)" % iso(since) if since is not None else "",
                      iso(mtime) if mtime is not None else "when is not known", keep))
        elif mtime is not None and since is not None:
            why = ("ZooKeeper's %d was last written %s%s, before Kafka's offset became %d (%s, the first commit of "
                   "it %s holds): Kafka was set below it since (unless compaction dropped earlier commits of %d), "
                   "and keeping ZooKeeper's would skip the records between (%s)"
                   % (zk_off, iso(mtime), " (as the backup zkmigrate restore wrote it back from says)"
                      if tp in (restored_zk or ()) else "", kafka, iso(since), OFFSETS_TOPIC, kafka, keep))
        elif unread is not None:
            why = ("whether ZooKeeper's %d was written after Kafka's offset became %d (then it is where the group "
                   "stopped) could not be checked: %s could not be read (%s); %s%s"
                   % (zk_off, kafka, OFFSETS_TOPIC, unread, _grant_if_refused(unread), keep))
        else:
            missing = ("its offset node's mtime is not known" if mtime is None else
                       "Kafka's commit of it was not found in %s (compacted away, or this Kafka identity may not "
                       "Describe and Read it)" % OFFSETS_TOPIC)
            why = ("whether ZooKeeper's %d was written after Kafka's offset became %d (then it is where the group "
                   "stopped) could not be checked: %s; %s" % (zk_off, kafka, missing, keep))
        out[tp] = why
    return out


def kafka_offset_since(log: Dict, both: Dict[TP, tuple], restored: Optional[Dict] = None) -> Tuple[Dict[TP, int],
                                                                                                 Set[TP]]:
    """Since when Kafka has held its offset (``{tp: ms}``) for the partitions of *both* whose offset is the last
    commit in *log* (``{tp: LastCommit}``, :func:`zkconsumer.offsets.expiry.read_commit_log`): the first commit of the
    latest run of commits of that offset. A run a ``zkmigrate restore`` started (*restored*: ``{tp: RestoredKafka}``,
    :func:`~.state.restored_kafka`, the same offset and the same first commit) is not a reset made then: it put back
    what Kafka held when the backup was taken, since the time the backup says; the partitions whose backup does not
    say (or whose restore could not read its commit back) keep the run's own first commit and are returned apart
    (the second value: a ZooKeeper offset written before it is not shown stale, only not checked). A reset to the offset Kafka already holds continues the run, like a
    keep-alive; once compaction has dropped the first commits of a run, its first commit kept is taken (later:
    more ZooKeeper offsets count as written before it)."""
    since: Dict[TP, int] = {}
    unknown: Set[TP] = set()
    for tp, c in log.items():
        if c.removed or c.committed_ms is None or tp not in both or c.offset != both[tp][1]:
            continue
        first = c.since_ms if c.since_ms is not None else c.committed_ms
        r = (restored or {}).get(tp)
        if r is not None and r.offset == c.offset and r.committed_ms == first and r.since_ms is not None:
            first = r.since_ms
        elif r is not None and r.offset == c.offset and r.committed_ms in (None, first):
            # the restore's run (or maybe, when its commit could not be read back), from a backup that does not
            # say since when: a ZooKeeper offset written after the run began is a member's all the same
            unknown.add(tp)
        since[tp] = first
    return since, unknown


def zk_mtimes_for_backup(gofs, both: Dict[TP, tuple]) -> Dict[TP, int]:
    """When each ZooKeeper offset of *both* was last written, for a backup's ``zk_mtime``: the node's mtime, or for a
    node as a restore wrote it the time that restore's backup gave (left out when it gave none)."""
    stats = _zk_offset_stats(gofs.zk, gofs.group, [tp for tp, v in both.items() if v[0] is not None])
    restored = _restored_zk(gofs, both, {tp: st[1] for tp, st in stats.items()})
    out = {}
    for tp, (mtime, mzxid) in stats.items():
        if tp in restored[0] and restored[0][tp] == mzxid:
            if tp in restored[1] and restored[1][tp][0] == mzxid:
                out[tp] = restored[1][tp][1]
        else:
            out[tp] = mtime
    return out


def _restored_zk(gofs, both: Dict[TP, tuple], mzxids: Dict[TP, Optional[int]]) -> Tuple[Dict[TP, int],
                                                                                         Dict[TP, Tuple[int, int]]]:
    """:func:`~.state.restored_view` of the partitions of *both* (their ZooKeeper offsets) with *mzxids* now."""
    from . import state
    return state.restored_view(gofs.zk, gofs.group, {tp: (v[0], mzxids.get(tp)) for tp, v in both.items()})


def _as_written_before(ev: Dict[TP, Evidence], restore_written: Dict[TP, int],
                       node_mtimes: Dict[TP, Tuple[int, int]]) -> Tuple[Dict[TP, Evidence], Dict[TP, int], Set[TP]]:
    """*ev* with the mtime of each node as a restore wrote it replaced by the time its backup gave (when the offset
    put back had last been written), *restore_written* without those nodes (only the restored nodes whose time is
    not known stay no evidence of a member), and those nodes."""
    ev = dict(ev)
    rest = dict(restore_written)
    done = set()
    for tp, (mzxid, mtime) in node_mtimes.items():
        e = ev.get(tp)
        if e is not None and e.zk_mzxid == mzxid and rest.get(tp) == mzxid:
            ev[tp] = e._replace(zk_mtime=mtime)
            del rest[tp]
            done.add(tp)
    return ev, rest, done


def since_of_lower_kafka(gofs, both: Dict[TP, tuple], known: Optional[Dict[TP, int]] = None) -> Dict[TP, int]:
    """*known* and, for the other partitions of *both* whose Kafka offset is below ZooKeeper's, since when Kafka has
    held it (:func:`kafka_offset_since`, one read of ``__consumer_offsets``), for a backup's ``kafka_since``: what a
    restore of it needs to tell the offset it puts back from a reset. A partition whose time cannot be read is left
    out (a later check after that restore refuses it as not checked)."""
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.offsets.expiry import read_commit_log
    from . import state
    out = dict(known or {})
    lower = [tp for tp, (z, k) in both.items() if z is not None and k is not None and z > k and tp not in out]
    if lower:
        try:
            log = read_commit_log(gofs.bootstrap_servers, gofs.group, lower, security=gofs.security)
        except ClusterUnavailableError:
            return out
        since, unknown = kafka_offset_since(log, {tp: both[tp] for tp in lower},
                                            state.restored_kafka(gofs.zk, gofs.group))
        out.update({tp: ms for tp, ms in since.items() if tp not in unknown})
    return out


def _grant_if_refused(error: str) -> str:
    """The first way out of an unread ``__consumer_offsets``: the Read right when that was refused, else running
    again."""
    return GRANT_READ if "AUTHORIZATION" in error.upper() else "run again (the read failed or timed out), "


class StaleCheck(NamedTuple):
    """What :func:`check_to_kafka` and :func:`check_to_zookeeper` found: ``refused`` {tp: why}, ``notes`` for the
    report, ``unchecked``: the refused partitions whose staleness could not be checked (not shown stale), and
    (rollback) ``frozen_ahead`` {tp: why}: ZooKeeper offsets ahead of Kafka's that are not kept (skipped rewinds)."""
    refused: Dict[TP, str]
    notes: list
    unchecked: list
    frozen_ahead: Dict[TP, str] = {}
    #: ``{tp: ms}`` since when Kafka has held the offsets below ZooKeeper's that were checked, for the backup
    kafka_since: Dict[TP, int] = {}


def _retention(gofs) -> Retention:
    from zkconsumer.offsets.expiry import read_offsets_retention
    return read_offsets_retention(gofs.bootstrap_servers, security=gofs.security)


def _retention_note(retention: Retention) -> List[str]:
    if retention.known:
        return []
    return ["%s for the stale-offset check (a ZooKeeper offset older than that, without a Kafka offset, may be "
            "frozen)" % retention.describe()]


def check_to_kafka(gofs, todo: Dict[TP, int], both: Dict[TP, tuple]) -> StaleCheck:
    """The refusals of the ZooKeeper offsets *todo* that copy or cutover would write to Kafka. Reads the log ends
    of *todo*, ZooKeeper's stats, the phase record and the group's partition of ``__consumer_offsets``: when a
    ZooKeeper offset would be written over a lower Kafka offset (:func:`_over_lower_kafka`: was Kafka's set after
    it?), and when a partition without a Kafka offset has a ZooKeeper offset older than the retention (so a removed
    Kafka offset could be behind it), once for each. When that cannot be read, those partitions are refused as not checked (unless the
    other evidence refuses them already): the way out is the Read right, or ``--allow-stale``. When the retention
    cannot be read, the shortest default is taken (more offsets count as old) and a note says so."""
    from zkconsumer.tools import groups as zkgroups
    from zkconsumer.errors import ClusterUnavailableError
    from . import state
    if not todo:
        return StaleCheck({}, [], [])
    _, end, _ = zkgroups.log_ranges(gofs.bootstrap_servers, list(todo), security=gofs.security)
    frozen_since = state.kafka_only_since(state.read_phase(gofs.zk, gofs.group))
    ev = evidence(gofs, todo, end)
    notes: List[str] = []
    unchecked: Dict[TP, str] = {}
    candidates = [tp for tp in todo if both[tp][1] is None and ev[tp].zk_mtime is not None]
    over, over_unchecked, since = _over_lower_kafka(gofs, todo, both, ev)
    if candidates:
        retention = _retention(gofs)
        notes += _retention_note(retention)
        now = time.time() * 1000
        old = [tp for tp in candidates if now - (ev[tp].zk_mtime or 0) > retention.ms]
        if old:
            from zkconsumer.offsets.expiry import read_commit_log
            try:
                removed = read_commit_log(gofs.bootstrap_servers, gofs.group, candidates, security=gofs.security)
                ev = evidence(gofs, todo, end, removed)
            except ClusterUnavailableError as e:
                for tp in old:
                    mtime = ev[tp].zk_mtime or 0
                    unchecked[tp] = (
                        "Kafka holds no offset for it and its ZooKeeper offset %d was last written %s (%s ago, longer "
                        "than %s): if the group committed to Kafka since, that offset expired and %d is frozen; "
                        "whether it did could not be checked: %s could not be read (%s)"
                        % (todo[tp], iso(mtime), _age(now - mtime), retention.describe(), todo[tp], OFFSETS_TOPIC,
                           e))
    shown = to_kafka_refusals(gofs.group, todo, both, ev, frozen_since)
    # the evidence says more already
    unchecked = {tp: why for tp, why in unchecked.items() if tp not in shown}
    refused = to_kafka_refusals(gofs.group, todo, both, ev, frozen_since, unchecked)
    for tp, why in over.items():
        if tp not in refused:
            refused[tp] = "group %s, %s-%d: %s" % (gofs.group, tp[0], tp[1], why)
            if tp in over_unchecked:
                unchecked[tp] = why
    return StaleCheck(refused, notes, sorted(unchecked), kafka_since=since)


def _judged_ahead(gofs, ahead: Dict[TP, tuple], both: Dict[TP, tuple], ev: Dict[TP, Evidence], log: Dict,
                  unread: Optional[str], **kw) -> Tuple[Dict[TP, str], Dict[TP, int], Set[TP], Dict[TP, Evidence],
                                                        Dict[TP, int]]:
    """:func:`frozen_ahead` of the ZooKeeper offsets *ahead* of Kafka's (``{tp: (zk, kafka)}``, of *both*), with the
    times a ``zkmigrate restore`` recorded: since when Kafka has held its offset (:func:`kafka_offset_since`, from
    *log*, the group's commits) and when ZooKeeper's was written (a node a restore wrote: the backup's time,
    :func:`_as_written_before`). Returns the frozen ones with why, since, the partitions whose restore did not say
    (``unknown``), the evidence as judged and the mzxids of the nodes a restore wrote. Nothing is read when *ahead* is
    empty."""
    from . import state
    if not ahead:
        since, unknown = kafka_offset_since(log, both, {})
        return {}, since, unknown, ev, {}
    since, unknown = kafka_offset_since(log, both, state.restored_kafka(gofs.zk, gofs.group))
    ev, restore_written, rewritten = _as_written_before(ev, *_restored_zk(gofs, both, {tp: e.zk_mzxid
                                                                                     for tp, e in ev.items()}))
    frozen = frozen_ahead(gofs.group, ahead, ev, since, restore_written, unread, restored_unknown=unknown,
                          restored_zk=rewritten, **kw)
    return frozen, since, unknown, ev, restore_written


def _over_lower_kafka(gofs, todo: Dict[TP, int], both: Dict[TP, tuple],
                      ev: Dict[TP, Evidence]) -> Tuple[Dict[TP, str], Set[TP], Dict[TP, int]]:
    """Of the ZooKeeper offsets *todo* that would be written over a LOWER Kafka offset, the ones not shown to be
    where the group stopped (:func:`frozen_ahead`: a member wrote ZooKeeper after Kafka's offset was set), with why:
    Kafka was set below a frozen ZooKeeper offset (a reset to reprocess, the new consumers after a cutover), and
    copying ZooKeeper's would skip the records between. Returns those, the ones of them that could not be checked
    (``__consumer_offsets`` unread, a commit or an mtime not found, a restore's backup that does not say) and since
    when Kafka has held each lower offset (:func:`kafka_offset_since`). Reads the group's partition of
    ``__consumer_offsets`` once, when there is such a partition."""
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.offsets.expiry import read_commit_log
    over = {tp: both[tp] for tp in todo if both[tp][1] is not None and both[tp][0] is not None
            and both[tp][0] > both[tp][1]}
    if not over:
        return {}, set(), {}
    unread = None
    log: Dict = {}
    try:
        log = read_commit_log(gofs.bootstrap_servers, gofs.group, list(over), security=gofs.security)
    except ClusterUnavailableError as e:
        unread = str(e)
    frozen, since, unknown, ev, restore_written = _judged_ahead(gofs, over, both, ev, log, unread,
                                                                keep="Kafka's offset stays where it is")
    # shown stale: ZooKeeper's written (by a member) before Kafka's offset was set; the others are not checked
    unchecked = {tp for tp in frozen if since.get(tp) is None or ev[tp].zk_mtime is None or tp in unknown
                 or (ev[tp].zk_mzxid is not None and restore_written.get(tp) == ev[tp].zk_mzxid)}
    refusals = {tp: "%s. %s" % (why.replace("keeping ZooKeeper's would skip", "copying ZooKeeper's to Kafka would skip"),
                                _ways(gofs.group, tp, "kafka", "--allow-stale to copy it anyway"))
                for tp, why in frozen.items()}
    return refusals, unchecked, {tp: ms for tp, ms in since.items() if tp not in unknown}


def check_to_zookeeper(gofs, both: Dict[TP, tuple], keep_ahead: bool = True) -> StaleCheck:
    """The refusals of a rollback of the partitions *both* (Kafka -> ZooKeeper; *keep_ahead*: ZooKeeper offsets
    ahead of Kafka's are kept, without ``--allow-rewind``, where :func:`frozen_ahead` finds them written after Kafka's
    last commit; the others are returned in ``frozen_ahead``, skipped rewinds); when the retention cannot be read, the
    shortest default is taken (more ZooKeeper offsets count as too old to keep) and a note says so. The group's
    partition of ``__consumer_offsets`` is read once, for the partitions ahead and those a removed Kafka offset may
    clear."""
    from zkconsumer.tools import groups as zkgroups
    from . import state
    if not both:
        return StaleCheck({}, [], [])
    _, end, _ = zkgroups.log_ranges(gofs.bootstrap_servers, list(both), security=gofs.security)
    rec = state.read_phase(gofs.zk, gofs.group)
    ev = evidence(gofs, both, end)
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.offsets.expiry import read_commit_log
    frozen_since = state.kafka_only_since(rec)
    restored_at = state.restored_since(rec)
    notes: List[str] = []
    ahead = [tp for tp, (z, k) in both.items() if keep_ahead and z is not None and k is not None and z > k]
    rest = {tp: v for tp, v in both.items() if tp not in ahead}
    kept = [tp for tp, (z, k) in both.items() if k is None and z is not None]
    retention = _retention(gofs) if kept else None
    args = (frozen_since, retention)
    kw = dict(restored_at=restored_at, keep_ahead=False)
    refused = to_zookeeper_refusals(gofs.group, rest, ev, *args, **kw)
    doubted = [tp for tp in kept if tp in refused]
    log: Dict = {}
    unread: Optional[str] = None
    if ahead or doubted:
        # ahead: Kafka's last commit says whether ZooKeeper was written after it; doubted: the Kafka offset the broker
        # removed may show that Kafka stood at ZooKeeper's offset last
        try:
            log = read_commit_log(gofs.bootstrap_servers, gofs.group, sorted(set(ahead) | set(doubted)),
                                  security=gofs.security)
        except ClusterUnavailableError as e:
            unread = str(e)
    unchecked: List[TP] = []
    if doubted and unread is not None:
        for tp in doubted:
            refused[tp] = refused[tp].replace(
                ". Ways out: ", "; whether Kafka ever went past it could not be checked: %s could not be read "
                "(%s). Ways out: %s" % (OFFSETS_TOPIC, unread, _grant_if_refused(unread)), 1)
        unchecked = sorted(doubted)
    elif doubted and any(log[tp].removed and log[tp].offset is not None for tp in doubted if tp in log):
        refused = to_zookeeper_refusals(gofs.group, rest, evidence(gofs, rest, end, log), *args, **kw)
    frozen, since, unknown = _judged_ahead(gofs, {tp: both[tp] for tp in ahead}, both, ev, log, unread)[:3]
    # kept ahead: ZooKeeper's offset must still fit the log; not kept: ZooKeeper stays as it is, Kafka's is checked
    kw["keep_ahead"] = True
    refused.update(to_zookeeper_refusals(gofs.group, {tp: both[tp] for tp in ahead if tp not in frozen}, ev, *args,
                                         **kw))
    kw["keep_ahead"] = False
    refused.update(to_zookeeper_refusals(gofs.group, {tp: both[tp] for tp in frozen}, ev, *args, **kw))
    notes += _retention_note(retention) if retention is not None else []
    return StaleCheck(refused, notes, unchecked, frozen, {tp: ms for tp, ms in since.items() if tp not in unknown})
