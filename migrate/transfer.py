"""Copying offsets between the stores: ``copy`` (ZooKeeper -> Kafka), ``rollback`` (Kafka -> ZooKeeper), ``import``.

Rules (all checked before anything is written):

* never move an offset backwards: a partition whose destination offset is greater than the source's is skipped
  (reported in ``skipped_rewind``) unless ``allow_rewind``; for a rollback that is no failure: a ZooKeeper offset
  ahead of Kafka's is kept (``kept_ahead``: the consumers that return resume where the group stopped last, in
  either store) only when a member wrote its offset node after Kafka's offset was set (``__consumer_offsets``; a
  ``restore``'s write is not a member's), else it is a skipped rewind (Kafka was set below it since, or that could
  not be checked: :func:`.stale.frozen_ahead`), also with ``allow_stale``; a kept one beyond the log end or of an
  earlier topic is refused as stale;
* refuse (:class:`GroupConflictError`) while ZooKeeper members are live (children of ``/consumers/G/ids``): they
  commit concurrently and one of the two writes would be lost; ``force`` overrides;
* ``copy``, ``rollback`` and ``import`` refuse while the broker-side group is active (broker-coordinated consumers
  commit on their own; a rollback would copy offsets they are already past and lift the cutover fence under them);
* before the first write (and for a rollback that lifts the cutover fence, also when it writes nothing), a backup
  of **both** stores (:mod:`.backup`: ExportZkOffsets files and a manifest that
  also lists the partitions without an offset, for ``zkmigrate restore``) is written to the backup directory;
* writes only the partitions that differ, so a second run (or a run after a crash half-way) changes nothing more;
* partitions of topics that no longer exist are skipped with a warning (:mod:`.leftovers`), and ``--exclude-topic``
  leaves topics out;
* an offset that would be carried over although it is stale (a frozen ZooKeeper offset whose Kafka successor was
  removed, an offset of an earlier topic of the same name, an offset beyond the log end: :mod:`.stale`) refuses the
  whole group, nothing written, unless ``allow_stale``.

:func:`copy_group`, :func:`rollback_group` and :func:`import_group` apply these rules to one group and return the
report the commands print (``--json`` prints it as it is); partitions are named ``topic-partition`` in it.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

from zkconsumer.consumer.registration import live_members
from zkconsumer.errors import GroupConflictError, OffsetStoreError

from . import state
from .expiry import expiry_warning
from .backup import write_backup
from .leftovers import skipped_report, split_gone

__all__ = ["plan_copy", "apply_copy", "write_backup", "backup_and_write", "check_no_live_members",
           "check_no_broker_consumers", "copy_group", "rollback_group", "import_group"]

TP = Tuple[str, int]
CHUNK = 500


def check_no_live_members(zk, group, force=False, what="copy"):
    members = live_members(zk, group)
    if members and not force:
        raise GroupConflictError(
            "refusing to %s offsets of group %s: %d live ZooKeeper member(s) (%s) would race with the write; stop "
            "them or pass --force" % (what, group, len(members), ", ".join(list(members)[:3])))
    return sorted(members)


def check_no_broker_consumers(gofs, what: str = "copy") -> None:
    """Refuse (:class:`GroupConflictError`) while the broker-side group of the same id is active."""
    from zkconsumer.kafka.broker_group import describe_broker_group
    broker = describe_broker_group(gofs.bootstrap_servers, gofs.group, security=gofs.security)
    if broker.active:
        raise GroupConflictError(
            "refusing to %s offsets of group %s: it is active as a broker-coordinated group (%s, state %s, %d "
            "member(s)): those consumers commit on their own, and ZooKeeper members must not join beside them; stop "
            "them first ('zkmigrate status --group %s' shows the broker-side group Empty), then run again"
            % (what, gofs.group, broker.describe_protocol(), broker.state, len(broker.members), gofs.group))


def plan_copy(source: Dict[TP, int], dest: Dict[TP, Optional[int]], allow_rewind=False) -> dict:
    """Decide per partition: ``write`` {tp: offset}, ``unchanged`` [tp], ``skipped_rewind`` {tp: (dest, src)}."""
    write, unchanged, rewind = {}, [], {}
    for tp, src in sorted(source.items()):
        cur = dest.get(tp)
        if cur == src:
            unchanged.append(tp)
        elif cur is None or cur < src:
            write[tp] = src
        elif allow_rewind:
            write[tp] = src
            rewind[tp] = (cur, src)
        else:
            rewind[tp] = (cur, src)
    return {"write": write, "unchanged": unchanged, "rewind": rewind, "allow_rewind": allow_rewind}


def apply_copy(store, offsets: Dict[TP, int], progress: Optional[Callable[[int], None]] = None) -> Dict[TP, str]:
    """Write *offsets* to *store* in chunks; returns ``{tp: error}`` for the partitions that failed."""
    failed = {}
    items = sorted(offsets.items())
    for i in range(0, len(items), CHUNK):
        chunk = dict(items[i:i + CHUNK])
        try:
            if store.name == "zookeeper":
                res = store.commit(chunk, force=True)
            else:
                res = store.commit(chunk)
        except OffsetStoreError as e:
            for tp in chunk:
                failed[tp] = str(e)
        else:
            for tp, e in res.failed.items():
                failed[tp] = str(e)
        if progress is not None:
            progress(len(chunk))
    return failed


def backup_and_write(gofs, both: Dict[TP, Tuple[Optional[int], Optional[int]]], writes: Dict[str, Dict[TP, int]],
                     backup_dir: Optional[str] = None,
                     lifts_fence: Optional[dict] = None,
                     kafka_since: Optional[Dict[TP, int]] = None) -> Tuple[list, Dict[str, Dict[TP, str]]]:
    """The write step of every command that changes offsets: back up both stores (*both*, as read before planning)
    to *backup_dir* (default: :func:`state.default_backup_dir`), then write ``writes`` (``{store name: {tp:
    offset}}``) store by store (*lifts_fence*: the fence the command lifts after, and *kafka_since*: since when Kafka
    has held its offsets below ZooKeeper's, read here where not given, both kept in the backup). Returns (the backup's paths, ``{store name: {tp:
    error}}`` for each store written)."""
    from .stale import since_of_lower_kafka, zk_mtimes_for_backup
    gofs.check_lock()
    kafka_since = since_of_lower_kafka(gofs, both, kafka_since)
    backup = write_backup(backup_dir or state.default_backup_dir(), gofs.group, both, zk_mtime=zk_mtimes_for_backup(gofs, both),
                          by="zkmigrate %s" % gofs.lock.command if gofs.lock is not None else None, writes=writes,
                          lifts_fence=lifts_fence, kafka_since=kafka_since)
    return backup, {name: apply_copy(gofs.store(name), todo) for name, todo in writes.items() if todo}


def _name(tp: TP) -> str:
    return "%s-%d" % tp


def copy_group(gofs, src: str, dst: str, execute: bool = False, allow_rewind: bool = False, force: bool = False,
               backup_dir: Optional[str] = None, topics=(), allow_stale: bool = False,
               lifts_fence: Optional[dict] = None) -> dict:
    """Copy the group's offsets from store *src* to store *dst* (``zookeeper`` or ``kafka``) under the rules above;
    a dry run unless *execute* (*lifts_fence*: what the rollback lifts after, for the backup). ``ok`` is false when
    anything was left behind (a skipped rewind, a failed write, a refused stale offset)."""
    from .stale import check_to_kafka, check_to_zookeeper
    what = "copy" if dst == "kafka" else "roll back"
    members = check_no_live_members(gofs.zk, gofs.group, force, what)
    check_no_broker_consumers(gofs, what)
    both, gone = split_gone(gofs.zk, gofs.read_all(topics, scan_all_topics=(src == "kafka")))
    i, j = (0, 1) if src == "zookeeper" else (1, 0)
    source = {tp: v[i] for tp, v in both.items() if v[i] is not None}
    decision = plan_copy(source, {tp: v[j] for tp, v in both.items()}, allow_rewind)
    todo = decision["write"]
    rewind = decision["rewind"]
    ahead: Dict[TP, Tuple[int, int]] = {}
    if dst == "zookeeper" and not allow_rewind:
        # ZooKeeper is where the group stopped last (a member on ZooKeeper storage ran after Kafka's last commit)
        ahead, rewind = rewind, {}
    out = {"group": gofs.group, "from": src, "to": dst, "execute": execute, "live_members": members,
           "to_write": {_name(tp): o for tp, o in todo.items()},
           "unchanged": len(decision["unchanged"]),
           "skipped_rewind": {} if allow_rewind else
           {_name(tp): {"destination": d, "source": s} for tp, (d, s) in rewind.items()},
           "rewound": {_name(tp): {"from": d, "to": s} for tp, (d, s) in rewind.items()} if allow_rewind else {},
           "kept_ahead": {_name(tp): {"zookeeper": d, "kafka": s} for tp, (d, s) in ahead.items()},
           "backup": [], "failed": {}, "written": 0, "refused": {}, "unreadable": gofs.unreadable_report()}
    out.update(skipped_report(gofs, gone))
    # a rollback always checks the ZooKeeper offsets it would keep ahead of Kafka's: --allow-stale lets stale
    # offsets through, not a rewind skipped over
    kafka_since: Dict[TP, int] = {}
    if not allow_stale or ahead:
        check = check_to_kafka(gofs, todo, both) if dst == "kafka" else check_to_zookeeper(gofs, both, keep_ahead=not allow_rewind)
        kafka_since = check.kafka_since
        for tp, why in check.frozen_ahead.items():
            # ZooKeeper's offset not shown to be where the group stopped last: keeping it may skip what lies between
            zk_off, kafka = ahead.pop(tp)
            out["skipped_rewind"][_name(tp)] = {"destination": zk_off, "source": kafka, "why": why}
        if not allow_stale:
            out["warnings"] += check.notes
            out["refused"] = {_name(tp): why for tp, why in check.refused.items()}
            out["unchecked"] = [_name(tp) for tp in check.unchecked]
        out["kept_ahead"] = {_name(tp): {"zookeeper": d, "kafka": s} for tp, (d, s) in ahead.items()
                             if _name(tp) not in out["refused"]}
    left_behind = out["skipped_rewind"] or out["refused"] or out["unreadable"]
    # a rollback that lifts the fence leaves a backup even when it writes nothing: its restore puts the fence back
    if execute and not out["refused"] and (todo or (lifts_fence and not left_behind)):
        out["backup"], errors = backup_and_write(gofs, both, {dst: todo}, backup_dir, lifts_fence, kafka_since)
        failed = errors.get(dst, {})
        out["failed"] = {_name(tp): e for tp, e in failed.items()}
        out["written"] = len(todo) - len(failed)
        if dst == "kafka" and out["written"]:
            out["warnings"].append(expiry_warning(gofs))
    out["ok"] = not (out["failed"] or out["skipped_rewind"] or out["refused"] or out["unreadable"])
    return out


def rollback_group(gofs, execute: bool = False, allow_rewind: bool = False, force: bool = False,
                   backup_dir: Optional[str] = None, topics=(), allow_stale: bool = False) -> dict:
    """:func:`copy_group` from Kafka to ZooKeeper. A rollback that executed and left nothing behind records the
    ``rollback`` phase and lifts the cutover fence, if any: the create right on ``/consumers/G/ids`` comes back
    (:mod:`.fence`) and ZooKeeper members may join again. The dry run says whether it would lift one."""
    from .fence import fenced_ids_node, lift_fence
    from .status import unrecorded_fence_warning
    fence = state.fence_of(state.read_phase(gofs.zk, gofs.group))
    ids = fenced_ids_node(gofs.zk, gofs.group)
    # the backup keeps the fence lifted below: restoring it (undoing this rollback) puts the fence back
    lifts = {"record": fence, "ids_acl": ids is not None} if fence is not None or ids else None
    out = copy_group(gofs, "kafka", "zookeeper", execute, allow_rewind, force, backup_dir, topics, allow_stale, lifts)
    out["fence"] = fence
    # an ACL fence without a recorded one: a cutover that stopped between its two writes; lifted all the same
    acl_only = ids if fence is None else None
    if not execute:
        if fence is not None:
            out["warnings"].append("group %s is fenced (cut over %s by %s): 'rollback --execute' lifts the fence "
                                   "once nothing is left behind" % (gofs.group, fence.get("since"), fence.get("by")))
        elif acl_only:
            out["warnings"].append(unrecorded_fence_warning(gofs.group, acl_only))
    if execute and out["ok"]:
        gofs.check_lock()
        if fence is not None or acl_only:
            out["fence_lifted"] = lift_fence(gofs.zk, gofs.group, fence.get("ids_acl") if fence else None)
        out["recorded_phase"] = state.record_phase(gofs.zk, gofs.group, "rollback", "zkmigrate rollback",
                                                   "zookeeper", fence=None, lifted=bool(fence is not None or acl_only))
    return out


def import_group(gofs, offsets: Dict[TP, int], store: str, execute: bool = False, allow_rewind: bool = False,
                 backup_dir: Optional[str] = None) -> dict:
    """Write *offsets* (one group's lines of an offsets file) into *store* under the rules above (the caller checks
    for live members and an active broker-side group first, for every group of the file); a dry run unless
    *execute*."""
    both = gofs.read(list(offsets))
    # not the partitions Kafka would not answer for
    offsets = {tp: o for tp, o in offsets.items() if tp in both}
    i = 0 if store == "zookeeper" else 1
    decision = plan_copy(offsets, {tp: v[i] for tp, v in both.items()}, allow_rewind)
    todo, failed, backup = decision["write"], {}, []
    if execute and todo:
        backup, errors = backup_and_write(gofs, both, {store: todo}, backup_dir)
        failed = errors[store]
    return {"offsets": len(offsets), "unchanged": len(decision["unchanged"]),
            "changes": {_name(tp): {"from": both[tp][i], "to": o} for tp, o in sorted(todo.items())},
            "skipped_rewind": {} if allow_rewind else
            {_name(tp): {"current": d, "file": s} for tp, (d, s) in decision["rewind"].items()},
            "written": len(todo) - len(failed) if execute else 0, "backup": backup,
            "failed": {_name(tp): e for tp, e in failed.items()}, "unreadable": gofs.unreadable_report()}
