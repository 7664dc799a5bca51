"""``zkmigrate cutover``: hand the group to broker-coordinated consumers (KafkaConsumer with the same group id).

1. wait (bounded by ``timeout``) until no ZooKeeper owner node remains (``/consumers/G/owners``) and no member is
   registered: the old members are stopped;
2. make sure Kafka offsets >= ZooKeeper offsets for every partition: partitions where ZooKeeper is ahead or Kafka
   has nothing are copied (only with ``execute``; never backwards; topics that no longer exist are skipped, and a
   stale ZooKeeper offset refuses the group unless ``allow_stale``: :mod:`.stale`);
3. with ``execute``: look again (a member that came back during the copy: not ready, nothing fenced), then fence
   the group: ``/consumers/G/ids`` loses its create right (:mod:`.fence`: no member of any kind can register, JVM
   members included; skipped with ``acl_fence=False``) and the phase record gets the fence (zkconsumer members
   refuse to join, ``cutover.fence``); then look once more (a member that registered before the ACL changed);
4. ready = no owner, no member, nothing left to copy (and, with ``execute``, the fence in place).

A group not yet fenced in which broker-coordinated consumers run, or have run and left Kafka's offsets ahead of
ZooKeeper's, is not ready: they started before cutover said READY, so not from ZooKeeper's offsets. The second
test reads the broker-side group's protocol type, which ZooKeeper members committing to Kafka
(``offsets.storage=kafka``) never set; a group whose broker-coordinated consumers last changed it before its latest
rollback (the time of its newest group record in ``__consumer_offsets``) is not held against it: a second migration
after a rollback, whose Kafka phase moved Kafka past ZooKeeper.
"""
from __future__ import annotations

import time
from typing import Dict, Tuple

from zkconsumer.tools import groups as zkgroups
from zkconsumer.consumer.registration import live_members
from zkconsumer.kafka.broker_group import describe_broker_group
from zkconsumer.errors import ClusterUnavailableError
from zkconsumer.core.layout import paths

from . import state
from .fence import FenceError, set_fence
from .leftovers import skipped_report, split_gone
from .transfer import backup_and_write, plan_copy

__all__ = ["cutover"]


def _occupied(zk, group):
    own = zkgroups.owners(zk, group)
    members = live_members(zk, group)
    return ["%s-%d:%s" % (t, p, o) for (t, p), o in own.items()], sorted(members)


def cutover(gofs, execute=False, timeout=30.0, backup_dir=None, topics=(), poll=0.5, progress=None,
            clock=time.monotonic, sleep=time.sleep, allow_stale=False, acl_fence=True) -> dict:
    """See the module docstring. The rolling path: members are stopped one at a time while this waits (give it a
    *timeout* long enough for the whole bounce); each departure is reported to *progress* (a callable taking a
    message), and between departures the broker-side group is checked: broker-coordinated consumers that start
    while ZooKeeper members still consume are a split brain, and the cutover stops at once (not ready)."""
    zk, group = gofs.zk, gofs.group
    say = progress or (lambda msg: None)
    deadline = clock() + timeout
    seen_members = None
    next_guard = 0.0
    while True:
        own = zkgroups.owners(zk, group)
        members = live_members(zk, group)
        if seen_members is not None:
            for m in sorted(set(seen_members) - set(members)):
                say("member %s left; %d ZooKeeper member(s) still live" % (m, len(members)))
        seen_members = members
        if members and clock() >= next_guard and gofs.bootstrap_servers:
            next_guard = clock() + 2.0
            try:
                broker = describe_broker_group(gofs.bootstrap_servers, group, security=gofs.security)
            except ClusterUnavailableError:
                broker = None
            if broker is not None and broker.active:
                return {"group": group, "ready": False, "owners": ["%s-%d:%s" % (t, p, o) for (t, p), o in own.items()],
                        "zookeeper_members": sorted(members), "copied": {}, "to_copy": {}, "backup": [], "failed": {},
                        "reason": "split brain: broker-coordinated consumers joined (%s, state %s, %d member(s)) "
                                  "while %d ZooKeeper member(s) still consume; start them only after cutover is READY"
                                  % (broker.describe_protocol(), broker.state, len(broker.members), len(members))}
        if (not own and not members) or clock() >= deadline:
            break
        sleep(poll)
    out = {"group": group, "owners": ["%s-%d:%s" % (t, p, o) for (t, p), o in own.items()],
           "zookeeper_members": sorted(members), "copied": {}, "to_copy": {}, "backup": [], "failed": {},
           "refused": {}, "warnings": []}
    if own or members:
        out["ready"] = False
        out["reason"] = "ZooKeeper members still own partitions after %.0f s; stop them first" % timeout
        return out
    # the new consumers must start only once this is READY: running already (and the group not yet cut over), they
    # began where Kafka's offsets said, or at auto.offset.reset where it had none, not where ZooKeeper's say
    broker = None
    if gofs.bootstrap_servers and _not_fenced_yet(zk, group):
        broker = describe_broker_group(gofs.bootstrap_servers, group, security=gofs.security)
        if broker.active:
            out["ready"] = False
            out["reason"] = ("broker-coordinated consumers already run in group %s (%s, state %s, %d member(s)) "
                             "although it is not cut over: they started before cutover was READY, from Kafka's "
                             "offsets or auto.offset.reset, not from ZooKeeper's; nothing was written. Stop them, "
                             "run 'zkmigrate copy --group %s --allow-rewind --execute' (Kafka's offsets set to "
                             "ZooKeeper's, also backwards: records they skipped are read, what they read is read "
                             "again), then cutover again"
                             % (group, broker.describe_protocol(), broker.state, len(broker.members), group))
            return out
    both, gone = split_gone(zk, gofs.read_all(topics))
    out.update(skipped_report(gofs, gone))
    out["unreadable"] = gofs.unreadable_report()
    # stopped since, they left Kafka's offsets past ZooKeeper's: a cutover now would fence and hand the group over
    # at the records they skipped
    early = {tp: (z, k) for tp, (z, k) in both.items() if z is not None and k is not None and k > z}
    if broker is not None and broker.consumers_joined and early and not _left_before_a_rollback(gofs, out):
        out["ready"] = False
        out["kafka_ahead"] = {"%s-%d" % tp: {"zookeeper": z, "kafka": k} for tp, (z, k) in sorted(early.items())}
        out["reason"] = ("broker-coordinated consumers have run in group %s (%s, state %s now) although it is not cut "
                         "over, and Kafka's offsets of %d partition(s) are ahead of ZooKeeper's (%s): they started "
                         "before cutover was READY, from Kafka's offsets or auto.offset.reset, not from ZooKeeper's, "
                         "and may have skipped records; nothing was written. Keep them stopped, run 'zkmigrate copy "
                         "--group %s --allow-rewind --execute' (Kafka's offsets set to ZooKeeper's, also backwards: "
                         "records they skipped are read, what they read is read again), then cutover again"
                         % (group, broker.describe_protocol(), broker.state, len(early), ", ".join(
                             "%s-%d: Kafka %d, ZooKeeper %d" % (tp + (k, z)) for tp, (z, k) in sorted(early.items())[:3]),
                            group))
        return out
    source = {tp: z for tp, (z, k) in both.items() if z is not None}
    plan = plan_copy(source, {tp: k for tp, (z, k) in both.items()}, allow_rewind=False)
    todo = plan["write"]
    out["to_copy"] = {"%s-%d" % tp: off for tp, off in todo.items()}
    kafka_since: Dict[Tuple[str, int], int] = {}
    if not allow_stale:
        from .stale import check_to_kafka
        check = check_to_kafka(gofs, todo, both)
        kafka_since = check.kafka_since
        out["warnings"] += check.notes
        if check.refused:
            out["refused"] = {"%s-%d" % tp: why for tp, why in check.refused.items()}
            out["unchecked"] = ["%s-%d" % tp for tp in check.unchecked]
            out["ready"] = False
            why = []
            stale = len(check.refused) - len(check.unchecked)
            if stale:
                why.append("%d partition(s) have stale ZooKeeper offsets that must not be copied to Kafka" % stale)
            if check.unchecked:
                why.append("could not check whether the ZooKeeper offsets of %d partition(s) are stale (%s)"
                           % (len(check.unchecked), ", ".join(out["unchecked"][:5])))
            out["reason"] = "; ".join(why) + " (see 'refused', each with its way out; nothing was written)"
            return out
    # Kafka >= ZooKeeper cannot be shown for them: not ready, nothing written
    if out["unreadable"]:
        out["ready"] = False
        out["reason"] = "the Kafka offsets of %d partition(s) cannot be read (nothing was written): %s" % (
            len(out["unreadable"]), "; ".join(list(out["unreadable"].values())[:3]))
        return out
    if todo and execute:
        out["backup"], errors = backup_and_write(gofs, both, {"kafka": todo}, backup_dir or ".",
                                                   kafka_since=kafka_since)
        failed = errors["kafka"]
        out["failed"] = {"%s-%d" % tp: e for tp, e in failed.items()}
        out["copied"] = {"%s-%d" % tp: off for tp, off in todo.items() if tp not in failed}
        todo = {tp: o for tp, o in todo.items() if tp in failed}
        say("copied %d offset(s) to Kafka" % len(out["copied"]))
    if todo:
        out["ready"] = False
        out["reason"] = ("%d partition(s) have ZooKeeper offsets ahead of Kafka; run again with --execute"
                         % len(todo)) if not execute else "%d partition(s) failed to copy" % len(todo)
        return out
    if not execute:
        out["ready"] = True
        # ready to be cut over: only --execute fences it (a re-run after a completed cutover finds it fenced)
        from .fence import fenced_ids_node
        out["dry_run"] = True
        out["fenced"] = state.fence_of(state.read_phase(zk, group)) is not None or \
            (acl_fence and fenced_ids_node(zk, group) is not None)
        return out
    # members that came back while the offsets were copied: their commits since are not in Kafka
    if _came_back(zk, group, out, "during the copy; nothing was fenced"):
        return out
    # a lock lost (session expired) may be held by another operator now: no fence, no record
    gofs.check_lock()
    prev = state.fence_of(state.read_phase(zk, group))
    fence = dict(prev) if prev else {"since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     "by": "zkmigrate cutover"}
    if acl_fence:
        say("fencing %s (no create right: no member can register)" % paths.group_ids_path(group))
        try:
            acl = set_fence(zk, group)
        except FenceError as e:
            out["ready"] = False
            out["reason"] = str(e)
            return out
        if acl["changed"]:
            fence["ids_acl"] = acl["ids_acl"]
        out["acl_fence"] = acl["path"]
    out["recorded_phase"] = state.record_phase(zk, group, "cutover", "zkmigrate cutover", fence=fence)
    say("recorded the cutover fence")
    # a member that registered between the last look and the fence is still there: it must stop
    if _came_back(zk, group, out, "before the fence was in place (the fence stays: stop them, then run cutover "
                                  "again)"):
        return out
    out["ready"] = True
    return out


def _left_before_a_rollback(gofs, out) -> bool:
    """The broker-side group's consumers last changed it (:func:`~zkconsumer.offsets.expiry.read_group_activity`)
    before the group's latest ``rollback`` (which set ZooKeeper to Kafka's offsets, or kept it ahead): Kafka offsets
    above ZooKeeper's were committed since by others (ZooKeeper members on ``offsets.storage=kafka``, a second
    migration's Kafka phase). False when there was no rollback or that cannot be read (a warning says why)."""
    from zkconsumer.offsets.expiry import read_group_activity
    rolled = state.rolled_back_since(state.read_phase(gofs.zk, gofs.group))
    if rolled is None:
        return False
    try:
        last = read_group_activity(gofs.bootstrap_servers, gofs.group, security=gofs.security)
    except ClusterUnavailableError as e:
        out["warnings"].append("could not read %s to tell whether the broker-coordinated consumers of group %s ran "
                               "before its rollback: %s" % ("__consumer_offsets", gofs.group, e))
        return False
    return last is not None and last < rolled


def _not_fenced_yet(zk, group) -> bool:
    """Neither the recorded fence nor the ACL one (a re-run of a cutover that finished, or stopped between its two
    writes, finds the new consumers running, as it should)."""
    from .fence import fenced_ids_node
    return state.fence_of(state.read_phase(zk, group)) is None and fenced_ids_node(zk, group) is None


def _came_back(zk, group, out, when) -> bool:
    owners, members = _occupied(zk, group)
    if not owners and not members:
        return False
    out["owners"], out["zookeeper_members"] = owners, members
    out["ready"] = False
    out["reason"] = ("ZooKeeper member(s) %s came back %s" % (", ".join(members or owners)[:300], when))
    return True
