"""``zkmigrate restore BACKUP``: put both stores of a group back exactly as a backup found them.

For every partition of the backup (:mod:`.backup`) and each store: an offset the backup holds is written back
(forwards or backwards: going back is the point), and an offset the store holds now where the backup says it had
**none** is deleted (``copy``, ``rollback``, ``cutover`` and ``import`` create such offsets; ``import
--allow-rewind`` cannot remove them). ZooKeeper offsets are deleted as nodes (and a topic's offsets node that is
left empty, when the backup had no ZooKeeper offset of that topic: the group would otherwise still list the topic);
Kafka offsets with OffsetDelete (KIP-496, Kafka 2.4+). Partitions the backup does not cover are left as they are
and listed (``not_in_backup``).

The rules of the other writers hold: a dry run unless *execute*; refused while ZooKeeper members are live
(``force`` overrides) or the broker-side group is active (its consumers commit on their own, and the broker
refuses to delete the offsets of topics they consume); a backup of both stores as they are now is written first
(restoring that undoes the restore); the group's lock is held by the caller.

**Commits made since the backup.** Going back is the point of a restore, but an old backup restored after the
group ran on would undo the consumers' work: a pre-cutover backup restored after the new consumers committed deletes
their Kafka offsets (they would start at ``auto.offset.reset`` and, with ``latest``, skip what arrived meanwhile),
and moving an offset back re-delivers what lies between. So every offset the restore would delete or move backwards
is checked (:func:`undone`): unless it still holds what the backed-up command itself wrote right after the backup
(the manifest's ``written``: that command's work, undone as asked), its last commit time is read (ZooKeeper: the
offset node's ``mtime``; Kafka: the commit's timestamp in the group's partition of ``__consumer_offsets``), and a
commit after the backup's ``taken_at``, or one whose time cannot be read, refuses the whole restore (nothing written)
unless *discard_newer*: each such offset is listed in ``newer`` with its time and what the restore would do to it.

The cutover fence: a backup taken by ``cutover`` (before its copy) is the state the group was cut over from;
restoring it undoes the cutover, fence included: once the offsets are back (and nothing failed), the fence that
cutover set is lifted (the create right on ``/consumers/G/ids`` and the record) and ZooKeeper members may join
again at ZooKeeper's offsets, which cutover never changed (the check of commits made since the backup has shown
that the new consumers committed nothing). A backup taken by a rollback that lifted the fence (its
``lifts_fence``) puts it back, as cutover sets it (:func:`_put_fence_back`): undoing that rollback gives the group
back to the broker-coordinated consumers, and ZooKeeper's frozen offsets it restores must not be joined by an old
member; while ZooKeeper members are registered that is refused, ``force`` or not
(:func:`_check_no_members_under_the_fence`; *no_fence* restores the offsets without the fence). A backup of any
other command leaves the fence as it is.

A restore records the phase ``restore`` when it wrote or deleted Kafka offsets or lifted the fence (the recorded
Kafka phase said that every partition has kept a Kafka offset since then, :func:`~.state.kafka_only_since`, the
stale-offset checks' evidence, which is no longer so), ``cutover`` when it only put a fence back. The ZooKeeper
offsets it is about to write are recorded before it writes them (a restore stopped half-way leaves them known:
:func:`~.state.restored_view`); then the nodes it wrote, each with the transaction (mzxid) of its write and when the backup says the offset had last
been written (``zk_mtime``), and the Kafka offsets it committed, each with the broker's time of that commit (read back
from ``__consumer_offsets``) and, where it put ZooKeeper's offset back too (or had none to put back), since when the
backup says Kafka had held it (``kafka_since``), go to
``/consumers/G/zkconsumer/restored`` (:func:`~.state.add_restored_nodes`): while they are unchanged, the stale checks
of a later copy, cutover or rollback judge them as of the backup's times (:func:`.stale.kafka_offset_since`,
:func:`.stale.frozen_ahead`), not as writes made at the restore; one whose time the backup does not give is no
evidence. The fence of a cutover is not lifted while partitions the backup does not
cover hold Kafka offsets (the new consumers ran: roll back instead), and the restore's own backup records the fence
it lifts, so that restoring it puts the fence back.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from kazoo.exceptions import NoNodeError, NotEmptyError

from zkconsumer.consumer.registration import live_members
from zkconsumer.core.layout import paths
from zkconsumer.errors import GroupConflictError

from . import state
from .backup import STORES, Backup, write_backup
from .stale import since_of_lower_kafka, zk_mtimes_for_backup, zk_offsets_and_versions
from .transfer import apply_copy, check_no_broker_consumers, check_no_live_members

__all__ = ["plan_restore", "restore_group", "undone", "newer_commits"]

TP = Tuple[str, int]
Both = Dict[TP, Tuple[Optional[int], Optional[int]]]


def _name(tp: TP) -> str:
    return "%s-%d" % tp


def plan_restore(saved: Both, current: Both) -> Dict[str, dict]:
    """Per store: ``{"set": {tp: offset}, "delete": [tp], "unchanged": n}`` to turn *current* into *saved* on the
    partitions of *saved* (pure)."""
    out: Dict[str, dict] = {}
    for i, store in enumerate(STORES):
        todo: Dict[TP, int] = {}
        delete: List[TP] = []
        unchanged = 0
        for tp, vals in sorted(saved.items()):
            want, now = vals[i], current.get(tp, (None, None))[i]
            if want == now:
                unchanged += 1
            elif want is None:
                delete.append(tp)
            else:
                todo[tp] = want
        out[store] = {"set": todo, "delete": delete, "unchanged": unchanged}
    return out


def undone(plan: Dict[str, dict], current: Both, written: Optional[Dict[str, Dict[TP, int]]]) -> Dict[str, List[TP]]:
    """Per store, the partitions whose offset the restore of *plan* would delete or move backwards, except those
    that still hold what the backed-up command wrote right after the backup (*written*; None: not known) (pure)."""
    out = {}
    for i, store in enumerate(STORES):
        mine = (written or {}).get(store, {})
        back = [tp for tp, o in plan[store]["set"].items() if current[tp][i] is not None and o < current[tp][i]]
        out[store] = sorted(tp for tp in list(plan[store]["delete"]) + back
                            if tp not in mine or mine[tp] != current[tp][i])
    return out


def newer_commits(gofs, backup: Backup, plan: Dict[str, dict], current: Both) -> Dict[str, str]:
    """``{"store:topic-partition": why}`` of the offsets of :func:`undone` committed after the backup was taken (or
    whose commit time cannot be read)."""
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.offsets.expiry import OFFSETS_TOPIC, read_commit_log

    from .expiry import iso
    from .stale import zk_offset_mtimes
    todo = undone(plan, current, backup.written)
    taken = state.epoch_ms(backup.taken_at)
    times: Dict[str, Dict[TP, int]] = {"zookeeper": zk_offset_mtimes(gofs.zk, gofs.group, todo["zookeeper"]),
                                       "kafka": {}}
    unknown = "not in %s" % OFFSETS_TOPIC
    if todo["kafka"]:
        try:
            log = read_commit_log(gofs.bootstrap_servers, gofs.group, todo["kafka"], security=gofs.security)
            times["kafka"] = {tp: c.committed_ms for tp, c in log.items()
                              if not c.removed and c.committed_ms is not None}
        except ClusterUnavailableError as e:
            unknown = "%s (this Kafka identity needs Read on topic %s)" % (e, OFFSETS_TOPIC)
    out = {}
    for i, store in enumerate(STORES):
        for tp in todo[store]:
            t = times[store].get(tp)
            if t is not None and taken is not None and t < taken:
                # committed before the backup was taken
                continue
            now, want = current[tp][i], plan[store]["set"].get(tp)
            if t is None:
                when = "its commit time cannot be read: %s" % (unknown if store == "kafka" else "no offset node")
            elif taken is None:
                when = "committed %s; when the backup was taken is not known (no manifest)" % iso(t)
            else:
                when = "committed %s, after the backup was taken (%s%s)" % (
                    iso(t), backup.taken_at, (" before '%s'" % backup.by) if backup.by else "")
            does = ("the restore would delete it (the backup has no %s offset for it: the group would start there "
                    "at auto.offset.reset, and with 'largest' skip what arrived since)" % store if want is None else
                    "the restore would move it back to %d (what lies between is consumed again)" % want)
            out["%s:%s" % (store, _name(tp))] = (
                "group %s, %s offset of %s: %d, %s; %s. Ways out: restore a newer backup (every writing command "
                "leaves one), or --discard-newer to restore this one anyway" % (gofs.group, store, _name(tp), now,
                                                                                when, does))
    return out


def restore_group(gofs, backup: Backup, execute: bool = False, force: bool = False,
                  backup_dir: Optional[str] = None, discard_newer: bool = False, no_fence: bool = False) -> dict:
    """Restore *backup* into the group's stores (see the module docstring); returns the report the command prints.
    ``ok`` is false when a write or delete failed, or offsets committed since the backup refused it (nothing
    written; *discard_newer* restores them all the same)."""
    if backup.group != gofs.group:
        raise ValueError("backup %s is of group %s, not %s" % (backup.path, backup.group, gofs.group))
    refence = None if no_fence else _fence_to_put_back(gofs, backup)
    if refence:
        _check_no_members_under_the_fence(gofs, backup)
    members = check_no_live_members(gofs.zk, gofs.group, force, "restore")
    check_no_broker_consumers(gofs, "restore")
    # every partition either store holds (Kafka's too: a topic the new consumers took up), for not_in_backup and the
    # fence checks below
    extra = sorted(set(gofs.partitions(scan_all_topics=True)) - set(backup.partitions))
    current = gofs.read(list(backup.partitions) + extra)
    extra = [tp for tp in extra if tp in current]
    # a partition whose Kafka offset cannot be read now is not restored (in neither store): reported
    saved = {tp: v for tp, v in backup.partitions.items() if tp in current}
    plan = plan_restore(saved, current)
    out = {"group": gofs.group, "from_backup": backup.path, "taken_at": backup.taken_at, "by": backup.by,
           "exact": backup.exact, "execute": execute, "live_members": members,
           "changes": {s: dict({_name(tp): {"from": current[tp][i], "to": o} for tp, o in plan[s]["set"].items()},
                               **{_name(tp): {"from": current[tp][i], "to": None} for tp in plan[s]["delete"]})
                       for i, s in enumerate(STORES)},
           "unchanged": {s: plan[s]["unchanged"] for s in STORES},
           "not_in_backup": {_name(tp): {"zookeeper": current[tp][0], "kafka": current[tp][1]}
                             for tp in extra if current[tp] != (None, None)},
           "backup": [], "written": 0, "deleted": 0, "failed": {}, "warnings": [],
           "unreadable": gofs.unreadable_report(), "newer": newer_commits(gofs, backup, plan, current),
           "discard_newer": discard_newer}
    if not backup.exact:
        out["warnings"].append("%s has no manifest (written before zkmigrate restore existed): only the partitions "
                               "it lists are restored, and offsets of partitions it does not list are not deleted"
                               % backup.path)
    from .fence import fenced_ids_node, lift_fence
    fence_now = state.fence_of(state.read_phase(gofs.zk, gofs.group))
    acl_now = fenced_ids_node(gofs.zk, gofs.group)
    # undoing a cutover undoes its fence too: ZooKeeper members resume at the offsets restored
    unfence = backup.by == "zkmigrate cutover" and (fence_now is not None or acl_now is not None)
    # Kafka offsets of partitions the backup does not know (created since, or of a topic added): the new consumers
    # ran; ZooKeeper members would start those at auto.offset.reset
    ran = sorted(t for t, v in out["not_in_backup"].items() if v["kafka"] is not None)
    if unfence and (ran or out["unreadable"]):
        unfence = False
        out["warnings"].append(
            "group %s: the backup was taken by the cutover that fenced it, but the fence stays: %s; roll back instead "
            "('zkmigrate rollback --group %s --execute' copies Kafka's offsets to ZooKeeper)"
            % (gofs.group, "partitions the backup does not cover hold Kafka offsets (the new consumers may have run "
               "there: %s)" % ", ".join(ran[:5]) if ran else
               "the Kafka offsets of some partitions cannot be read", gofs.group))
    # the other way: a fence put back hands the group to broker-coordinated consumers, which would start partitions
    # with only a ZooKeeper offset at auto.offset.reset
    zk_only = sorted(t for t, v in out["not_in_backup"].items() if v["zookeeper"] is not None and v["kafka"] is None)
    if refence and (zk_only or out["unreadable"]):
        raise GroupConflictError(
            "refusing to restore %s: it was taken by '%s', which lifted the cutover fence of group %s, and restoring "
            "it puts the fence back, but %s; nothing written"
            % (backup.path, backup.by, gofs.group, "partitions the backup does not cover hold ZooKeeper offsets and "
               "no Kafka ones (%s), which the broker-coordinated consumers would start at auto.offset.reset: copy "
               "them to Kafka first ('zkmigrate copy --group %s --execute'), then restore again"
               % (", ".join(zk_only[:5]), gofs.group) if zk_only else
               "the Kafka offsets of some partitions cannot be read"))
    if unfence and not execute:
        out["warnings"].append("group %s: the backup was taken by the cutover that fenced it; --execute also lifts "
                               "the cutover fence (ZooKeeper members may join again, at the offsets restored)"
                               % gofs.group)
    refused = bool(out["newer"]) and not discard_newer
    if no_fence and backup.lifts_fence:
        out["warnings"].append("group %s: the backup was taken by '%s', which lifted the cutover fence; "
                               "--no-fence: it is not put back (ZooKeeper members may join at the offsets restored)"
                               % (gofs.group, backup.by))
    if refence:
        out["fence_put_back"] = {"execute": execute, "ids_acl": refence["ids_acl"], "record": refence["record"]}
        if not execute:
            out["warnings"].append("group %s: the backup was taken by '%s', which lifted the cutover fence; "
                                   "--execute puts it back (%s); --no-fence restores the offsets without it"
                                   % (gofs.group, backup.by, _halves(gofs.group, refence)))
    if execute and not refused and refence:
        gofs.check_lock()
        # fenced before the offsets go back: no member may join at the offsets being restored
        out["fence_put_back"].update(_put_fence_back(gofs, backup, refence))
    kafka_changed = False
    # {tp: mzxid} of the ZooKeeper offset nodes it writes, read before
    before: Dict[TP, int] = {}
    # the backup of what is there now also keeps the fence this lifts: restoring it puts the fence back
    lifts = {"record": fence_now, "ids_acl": acl_now is not None} if unfence else None
    if execute and not refused and (unfence or any(plan[s]["set"] or plan[s]["delete"] for s in STORES)):
        gofs.check_lock()
        out["backup"] = write_backup(backup_dir or state.default_backup_dir(), gofs.group, current,
                                     by="zkmigrate restore", writes={s: plan[s]["set"] for s in STORES},
                                     lifts_fence=lifts, kafka_since=since_of_lower_kafka(gofs, current),
                                     zk_mtime=zk_mtimes_for_backup(gofs, current))
        if plan["zookeeper"]["set"]:
            # what it is about to write, first: a restore stopped before it records its writes leaves them known; the
            # nodes an earlier restore wrote and left pending (it stopped) are confirmed first, as that restore's
            seen = zk_offsets_and_versions(gofs.zk, gofs.group, list(plan["zookeeper"]["set"]))
            before.update({tp: mz for tp, (_, mz) in seen.items()})
            theirs, times = state.restored_view(gofs.zk, gofs.group, {tp: seen.get(tp, (None, None))
                                                                       for tp in plan["zookeeper"]["set"]})
            state.add_restored_nodes(
                gofs.zk, gofs.group, {tp: mz for tp, mz in theirs.items() if tp in seen},
                mtimes={tp: ms for tp, (_, ms) in times.items()},
                pending={tp: (o, before.get(tp), backup.zk_mtime.get(tp)) for tp, o in plan["zookeeper"]["set"].items()})
        for i, s in enumerate(STORES):
            store = gofs.store(s)
            failed = {}
            if plan[s]["set"]:
                failed.update(apply_copy(store, plan[s]["set"]))
                out["written"] += len(plan[s]["set"]) - len(failed)
            if plan[s]["delete"]:
                res = store.delete_offsets(plan[s]["delete"])
                failed.update({tp: str(e) for tp, e in res.failed.items()})
                out["deleted"] += len(res.committed)
                kafka_changed = kafka_changed or (s == "kafka" and bool(res.committed))
            if s == "kafka" and set(plan[s]["set"]) - set(failed):
                kafka_changed = True
            out["failed"].update({"%s:%s" % (s, _name(tp)): e for tp, e in failed.items()})
        _remove_empty_topic_nodes(gofs, backup)
    planned = plan["zookeeper"]["set"]
    written: Dict[TP, int] = {}
    kafka_written = {tp: o for tp, o in plan["kafka"]["set"].items() if "kafka:%s" % _name(tp) not in out["failed"]}
    if execute and not refused and planned:
        # a later stale check does not take these ZooKeeper writes for a member's (:func:`.stale.frozen_ahead`): a
        # node holding the offset planned, written since it was read, is the restore's (a write reported failed may
        # have been applied); the pending entries of the others end (never written)
        earlier = state.restored_nodes(gofs.zk, gofs.group)
        now = zk_offsets_and_versions(gofs.zk, gofs.group, sorted(set(planned) | set(earlier)))
        written = {tp: mz for tp, (off, mz) in now.items() if tp in planned
                   and off == planned[tp] and (before.get(tp) is None or mz > before[tp])}
        state.add_restored_nodes(gofs.zk, gofs.group, written, {tp: mz for tp, (_, mz) in now.items()},
                                 mtimes={tp: backup.zk_mtime[tp] for tp in written if tp in backup.zk_mtime},
                                 drop_pending=list(planned))
    if execute and not refused and kafka_written:
        # nor these Kafka commits for a reset made now (:func:`.stale.kafka_offset_since`); the backup's since holds
        # only where ZooKeeper is as the backup had it too
        as_backup = {tp for tp in kafka_written if tp in written or (
            tp not in planned and "zookeeper:%s" % _name(tp) not in out["failed"])}
        state.add_restored_nodes(gofs.zk, gofs.group, {},
                                 kafka=_read_back(gofs, backup, kafka_written, out["warnings"], as_backup))
    lifted = None
    if execute and not refused and unfence and not out["failed"]:
        gofs.check_lock()
        lifted = out["fence_lifted"] = lift_fence(gofs.zk, gofs.group, (fence_now or {}).get("ids_acl"))
    put_back = execute and not refused and refence and refence["record"]
    if kafka_changed or put_back or lifted:
        # the Kafka offsets put back (written or deleted), or the cutover undone, end the recorded Kafka-only run
        # ("restore"); a fence put back alone is recorded as cutover set it, after the offsets were written: the run
        # of Kafka-only records starts after ZooKeeper's last write (ZooKeeper offsets written before it, without a
        # Kafka one, count as frozen)
        out["recorded_phase"] = state.record_phase(
            gofs.zk, gofs.group, "restore" if kafka_changed or lifted else "cutover", "zkmigrate restore",
            fence=out["fence_put_back"]["fence"] if put_back else None if lifted else state.KEEP)
    out["ok"] = not (out["failed"] or out["unreadable"] or refused)
    return out


def _read_back(gofs, backup: Backup, written: Dict[TP, int], warnings: List[str],
               as_backup: Set[TP]) -> Dict[TP, state.RestoredKafka]:
    """The Kafka commits the restore just made (*written*), read back from ``__consumer_offsets`` for the broker's
    time of each, with since when the backup says Kafka had held that offset (for the partitions *as_backup*, whose
    ZooKeeper offset is as the backup had it: the time describes the two together); a warning when they cannot be
    read."""
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.offsets.expiry import read_commit_log
    if not written:
        return {}
    try:
        log = read_commit_log(gofs.bootstrap_servers, gofs.group, list(written), security=gofs.security)
    except ClusterUnavailableError as e:
        log, why = {}, str(e)
    else:
        why = "not found"
    out = {}
    lost = []
    for tp, off in written.items():
        c = log.get(tp)
        if c is not None and not c.removed and c.offset == off and c.committed_ms is not None:
            at = c.since_ms if c.since_ms is not None else c.committed_ms
            out[tp] = state.RestoredKafka(off, at, backup.kafka_since.get(tp) if tp in as_backup else None)
        else:
            out[tp] = state.RestoredKafka(off, None, None)
            lost.append(tp)
    if lost:
        warnings.append("group %s: the Kafka commits of this restore could not be read back from %s (%s: %s): a later "
                        "copy, cutover or rollback cannot check whether a ZooKeeper offset ahead of them, written "
                        "before, is where the group stopped (it refuses to copy or keep it, as not checked)"
                        % (gofs.group, "__consumer_offsets", ", ".join(_name(tp) for tp in sorted(lost)[:5]), why))
    return out


def _check_no_members_under_the_fence(gofs, backup: Backup) -> None:
    """Refuse (:class:`GroupConflictError`, ``--force`` or not) to put a rollback's fence back over ZooKeeper members
    that are registered: they consume the group (it came back to them, or the backup is of another rollback than the
    operator thinks), and the fence would shut out each one that restarts or loses its session."""
    members = sorted(live_members(gofs.zk, gofs.group))
    if members:
        raise GroupConflictError(
            "refusing to restore %s: it was taken by '%s', which lifted the cutover fence of group %s, and "
            "restoring it puts the fence back, but %d ZooKeeper member(s) are registered (%s): stop them first (the "
            "group goes back to the broker-coordinated consumers), or pass --no-fence to restore the offsets without "
            "the fence (with --force while they are live: their commits race the restore); nothing written"
            % (backup.path, backup.by, gofs.group, len(members), ", ".join(members[:3])))


def _fence_to_put_back(gofs, backup: Backup) -> Optional[dict]:
    """The halves of the fence the backed-up rollback lifted that the group lacks now: ``{"ids_acl": bool,
    "record": bool}``, or None."""
    from .fence import fenced_ids_node
    lifted = backup.lifts_fence
    if not lifted:
        return None
    want = {"ids_acl": bool(lifted["ids_acl"]) and fenced_ids_node(gofs.zk, gofs.group) is None,
            "record": lifted["record"] is not None and state.fence_of(state.read_phase(gofs.zk, gofs.group)) is None}
    return want if any(want.values()) else None


def _halves(group: str, want: dict) -> str:
    return " and ".join(h for h, on in (("the create right taken off /consumers/%s/ids" % group, want["ids_acl"]),
                                         ("the fence recorded", want["record"])) if on)


def _put_fence_back(gofs, backup: Backup, want: dict) -> dict:
    """Take the create right off ``ids`` (if the backup says it was off) and return the fence to record: the one
    the rollback lifted, with the ACL saved now when this changed it. FenceError when ZooKeeper refuses."""
    from .fence import set_fence
    fence = dict(backup.lifts_fence["record"] or {})
    out = {"path": None, "changed": False}
    if want["ids_acl"]:
        acl = set_fence(gofs.zk, gofs.group)
        out.update(path=acl["path"], changed=acl["changed"])
        if acl["ids_acl"] is not None:
            fence["ids_acl"] = acl["ids_acl"]
    out["fence"] = fence or None
    return out


def _remove_empty_topic_nodes(gofs, backup: Backup) -> None:
    """``/consumers/G/offsets/T`` left empty by the deletes, for topics the backup had no ZooKeeper offset of."""
    had = {t for (t, _), (z, _) in backup.partitions.items() if z is not None}
    for t in sorted({t for t, _ in backup.partitions} - had):
        try:
            gofs.zk.delete(paths.topic_offsets_path(gofs.group, t))
        except (NoNodeError, NotEmptyError):
            pass
