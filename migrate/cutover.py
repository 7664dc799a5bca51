"""``zkmigrate cutover``: hand the group to broker-coordinated consumers (KafkaConsumer with the same group id).

1. wait (bounded by ``timeout``) until no ZooKeeper owner node remains (``/consumers/G/owners``) and no member is
   registered: the old members are stopped;
2. make sure Kafka offsets >= ZooKeeper offsets for every partition: partitions where ZooKeeper is ahead or Kafka
   has nothing are copied (only with ``execute``; never backwards);
3. ready = no owner, no member and nothing left to copy.
"""
from __future__ import annotations

import time

from zkconsumer import groups as zkgroups
from zkconsumer.broker_group import describe_broker_group
from zkconsumer.errors import ClusterUnavailableError

from .transfer import backup_and_write, plan_copy

__all__ = ["cutover"]


def cutover(gofs, execute=False, timeout=30.0, backup_dir=None, topics=(), poll=0.5, progress=None,
            clock=time.monotonic, sleep=time.sleep) -> dict:
    """See the module docstring. The rolling path: members are stopped one at a time while this waits (give it a
    *timeout* long enough for the whole bounce); each departure is reported to *progress* (a callable taking a
    message), and between departures the broker-side group is checked: broker-coordinated consumers that start
    while ZooKeeper members still consume are a split brain, and the cutover stops at once (not ready)."""
    zk, group = gofs.zk, gofs.group
    deadline = clock() + timeout
    seen_members = None
    next_guard = 0.0
    while True:
        own = zkgroups.owners(zk, group)
        members = zkgroups.live_members(zk, group)
        if seen_members is not None and progress is not None:
            for m in sorted(set(seen_members) - set(members)):
                progress("member %s left; %d ZooKeeper member(s) still live" % (m, len(members)))
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
           "zookeeper_members": sorted(members), "copied": {}, "to_copy": {}, "backup": [], "failed": {}}
    if own or members:
        out["ready"] = False
        out["reason"] = "ZooKeeper members still own partitions after %.0f s; stop them first" % timeout
        return out
    both = gofs.read_all(topics)
    out["unreadable"] = gofs.unreadable_report()
    source = {tp: z for tp, (z, k) in both.items() if z is not None}
    plan = plan_copy(source, {tp: k for tp, (z, k) in both.items()}, allow_rewind=False)
    todo = plan["write"]
    out["to_copy"] = {"%s-%d" % tp: off for tp, off in todo.items()}
    if todo and execute:
        out["backup"], errors = backup_and_write(gofs, both, {"kafka": todo}, backup_dir or ".")
        failed = errors["kafka"]
        out["failed"] = {"%s-%d" % tp: e for tp, e in failed.items()}
        out["copied"] = {"%s-%d" % tp: off for tp, off in todo.items() if tp not in failed}
        todo = {tp: o for tp, o in todo.items() if tp in failed}
    out["ready"] = not todo and not out["unreadable"]
    if todo:
        out["reason"] = ("%d partition(s) have ZooKeeper offsets ahead of Kafka; run again with --execute"
                         % len(todo)) if not execute else "%d partition(s) failed to copy" % len(todo)
    elif out["unreadable"]:
        out["reason"] = "the Kafka offsets of %d partition(s) cannot be read: %s" % (
            len(out["unreadable"]), "; ".join(list(out["unreadable"].values())[:3]))
    return out
