"""``zkmigrate verify``: may the group go on to the next phase?

Phases (what the members run now) and the store the *next* phase reads:

=================  ================================  =======================================================
``--phase``        members run                       checked
=================  ================================  =======================================================
``zookeeper``      offsets.storage=zookeeper         every partition has a ZooKeeper offset and ZK >= Kafka
``dual --to kafka`` kafka + dual commit              every partition has a Kafka offset and Kafka >= ZooKeeper
``dual --to zookeeper`` kafka + dual commit          every partition has a ZooKeeper offset and ZK >= Kafka
``kafka``          kafka, dual commit off            every partition has a Kafka offset and Kafka >= ZooKeeper
=================  ================================  =======================================================

**The log range.** The offset the members of the phase read must lie in the partition's log (not beyond its end,
not below its start: deleted by retention), or they reset: ZooKeeper's in the zookeeper phase, Kafka's in the kafka
phase, the greater of the two in the dual phase (members read max(ZooKeeper, Kafka)). An offset outside the log in
the store the phase does not read (e.g. the frozen ZooKeeper offsets of the kafka phase, below the log start after
one retention period) is reported in ``notes``, not failed.

**Topics that no longer exist** (``/brokers/topics/T`` gone, offsets left behind) are listed in ``gone_topics``
and warned about, not checked; ``--exclude-topic`` leaves out topics the group no longer reads. With the
ZooKeeper store as the target, a ZooKeeper offset the stores' history shows stale (frozen while the group ran on
Kafka and its Kafka offset since removed, or written before its topic was created again: :mod:`.stale`) fails.

**Tolerance rule.** Dual commit writes both stores (Scala: Kafka first; zkconsumer: both at once while Kafka is
healthy), so at any instant the two stores may differ by commits in flight, either way.  A partition whose target store is behind the other one is therefore not failed at
once: both stores are re-read for up to ``settle`` seconds (default 10 s, more than a few
``auto.commit.interval.ms``) and the partition passes as soon as the target store has reached the value the other
store had at the first read.  A difference that does not close is a real disagreement (a member still commits
to one store only, or dual commits fail).  While the group has live members, a partition with no offset yet in
the target store is waited for the same way (their first commit may be pending).  An empty partition (log-end
offset 0) without any offset passes.

**Split brain** fails every phase: live ZooKeeper members (``/consumers/G/ids``) while the broker-side group of
the same id is active (members, not Empty/Dead).
"""
from __future__ import annotations

import time

from zkconsumer import groups as zkgroups
from zkconsumer.errors import ClusterUnavailableError

from zkconsumer.broker_group import describe_broker_group

__all__ = ["verify_group", "settle_for", "PHASES"]

PHASES = ("zookeeper", "dual", "kafka")


def _target(phase, to):
    """(the store the next phase reads, the other store). Both stores are compared in every phase: a store ahead
    of the one the members write now is as dangerous as one behind (a later dual phase reads max(ZooKeeper,
    Kafka) and would skip to it)."""
    if phase == "zookeeper":
        return "zookeeper", "kafka"
    if phase == "kafka":
        return "kafka", "zookeeper"
    return (to or "kafka"), ("zookeeper" if (to or "kafka") == "kafka" else "kafka")


#: settle for members that do not publish their auto.commit.interval.ms (JVM members: the Scala default is 60 s)
UNKNOWN_MEMBER_SETTLE = 65.0


def settle_for(zk, group) -> float:
    """The default ``--settle``: commits in flight can take one auto-commit interval (plus a dual commit's two
    writes), so twice the largest ``auto.commit.interval.ms`` the live members publish, plus 1 s; 65 s when a live
    member publishes none (JVM members); 0 without live members (nothing is in flight)."""
    from zkconsumer.group_describe import member_infos
    members = zkgroups.live_members(zk, group)
    if not members:
        return 0.0
    infos = member_infos(zk, group)
    intervals = [infos[m].auto_commit_interval_ms for m in members if m in infos]
    if len(intervals) < len(members) or any(i is None for i in intervals):
        return UNKNOWN_MEMBER_SETTLE
    return 2 * max(intervals) / 1000.0 + 1.0


def _storage_problems(zk, group, members, phase):
    """The live members' own word on where they commit (their member info nodes; JVM members say nothing):
    ZooKeeper-only beside Kafka-only members reprocess without bound at every hand-over between them, and a member
    not yet on the verified phase means the rolling bounce is not finished."""
    from zkconsumer.group_describe import member_infos
    infos = member_infos(zk, group)
    modes = {m: infos[m].mode for m in members if m in infos}
    out = []
    on_zk = sorted(m for m, mode in modes.items() if mode == "zookeeper")
    on_kafka = sorted(m for m, mode in modes.items() if mode == "kafka")
    if on_zk and on_kafka:
        out.append("unsafe mix of offset storage: %s on ZooKeeper only and %s on Kafka only (each hand-over between "
                   "them resumes from the other store's stale offsets); bring every member to one phase"
                   % (", ".join(on_zk), ", ".join(on_kafka)))
    for m, mode in sorted(modes.items()):
        if mode != phase:
            out.append("member %s runs %s, not the %s phase being verified: finish the rolling bounce first"
                       % (m, mode, phase))
    return out


def _range_findings(tp, vals, phase, lso, leo, group="G"):
    """``(problems, notes)`` of one partition's offsets against its log range: the offset the phase's members
    read is held to it, the other store's is only reported."""
    read = {"zookeeper": vals[0], "kafka": vals[1]}
    if phase == "dual":
        top = max((v for v in vals if v is not None), default=None)
        reads = {n for n, v in read.items() if v is not None and v == top}
    else:
        reads = {phase}
    problems, notes = [], []
    for name, off in read.items():
        if off is None:
            continue
        bad = None
        if tp in leo and off > leo[tp]:
            bad = "beyond the log end %d (a rewind or recreated topic" % leo[tp]
        elif tp in lso and off < lso[tp]:
            bad = "below the log start %d (deleted by retention" % lso[tp]
        if bad is None:
            continue
        if name in reads:
            problems.append("group %s, %s-%d: %s offset %d is %s: the next start resets); set the position with "
                            "'zkmigrate reset-offsets --group %s --topic %s:%d --store %s --to-earliest' (or "
                            "--to-offset, --to-datetime)" % (group, tp[0], tp[1], name, off, bad, group, tp[0], tp[1],
                                                             name))
        else:
            notes.append("%s-%d: %s offset %d is %s; not read in the %s phase)" % (tp[0], tp[1], name, off, bad,
                                                                                    phase))
    return problems, notes


def verify_group(gofs, phase, to=None, topics=(), settle=10.0, poll=0.5, expiry_margin=86400.0) -> dict:
    from .leftovers import skipped_report, split_gone
    from . import state
    zk, group = gofs.zk, gofs.group
    target, other = _target(phase, to)
    idx = {"zookeeper": 0, "kafka": 1}
    problems, notes = [], []
    both, gone = split_gone(zk, gofs.read_all(topics, scan_all_topics=(phase == "kafka")))
    skipped = skipped_report(gofs, gone)
    lso, leo, _ = zkgroups.log_ranges(gofs.bootstrap_servers, list(both), security=gofs.security) if both else ({}, {}, None)
    warnings = []
    if not both and not gone and not gofs.unreadable:
        problems.append("group %s has no partitions (no topics in ZooKeeper and none given with --topic)" % group)
    missing, behind = [], {}
    for tp, vals in sorted(both.items()):
        more, also = _range_findings(tp, vals, phase, lso, leo, group)
        problems += more
        notes += also
        t_off = vals[idx[target]]
        if t_off is None:
            if all(v is None for v in vals) and leo.get(tp) == 0:
                # empty partition: nothing to lose
                continue
            missing.append(tp)
            continue
        if other is not None:
            o_off = vals[idx[other]]
            if o_off is not None and t_off < o_off:
                behind[tp] = (t_off, o_off)
    members = zkgroups.live_members(zk, group)
    problems.extend(_storage_problems(zk, group, members, phase))
    deadline = time.monotonic() + settle
    # live members may simply not have committed yet (first auto-commit pending): wait for those offsets too
    waiting_missing = bool(members)
    while (behind or (missing and waiting_missing)) and time.monotonic() < deadline:
        time.sleep(poll)
        now = gofs.read(list(behind) + (missing if waiting_missing else []))
        # a partition Kafka stopped answering for (reported as unreadable) is not settled
        unread = (None, None)
        behind = {tp: (now.get(tp, unread)[idx[target]], o0) for tp, (_, o0) in behind.items()
                  if now.get(tp, unread)[idx[target]] is None or now.get(tp, unread)[idx[target]] < o0}
        if waiting_missing:
            missing = [tp for tp in missing if now.get(tp, unread)[idx[target]] is None]
    for tp in missing:
        problems.append("%s-%d has no offset in %s (the store the next phase reads; if the group no longer reads "
                        "topic %s: --exclude-topic %s, or 'zkmigrate forget-topic --group %s --topic %s')"
                        % (tp[0], tp[1], target, tp[0], tp[0], group, tp[0]))
    if target == "zookeeper" and both:
        from .stale import evidence, to_zookeeper_refusals
        frozen_since = state.kafka_only_since(state.read_phase(zk, group))
        kept = {tp: v for tp, v in both.items() if v[0] is not None and v[1] is None}
        if kept:
            stale = to_zookeeper_refusals(group, kept, evidence(gofs, kept, leo), frozen_since, None,
                                          keep="accept it ('zkmigrate rollback --execute --allow-stale')")
            problems.extend(stale[tp] for tp in sorted(stale))
    way = {"kafka": "copy", "zookeeper": "rollback"}[target]
    for tp, (t_off, o_off) in sorted(behind.items()):
        problems.append("%s-%d: %s offset %s stays behind %s offset %d after %.0f s (not explained by in-flight "
                        "dual commits); with the members stopped, 'zkmigrate %s --group %s --execute' brings it up"
                        % (tp[0], tp[1], target, t_off, other, o_off, settle, way, group))
    try:
        broker = describe_broker_group(gofs.bootstrap_servers, group, security=gofs.security)
        broker_d = broker.as_dict()
        if broker.active and members:
            problems.append("split brain: group %s is active both in ZooKeeper (%d live member(s)) and as a "
                            "broker-coordinated group (%s, state %s, %d member(s))"
                            % (group, len(members), broker.describe_protocol(), broker.state, len(broker.members)))
    except ClusterUnavailableError as e:
        broker_d = {"error": str(e)}
        problems.append("cannot check the broker-side group: %s" % e)
    expiry = None
    if phase in ("dual", "kafka") and expiry_margin is not None and both:
        from .expiry import expiry_problems
        try:
            more, expiry = expiry_problems(gofs, gofs.read(list(both)), expiry_margin)
            problems.extend(more)
            if expiry.get("unknown"):
                warnings.append(expiry["unknown"])
        except ClusterUnavailableError as e:
            problems.append("cannot check when the Kafka offsets expire: %s" % e)
    # those Kafka would not answer for, also while settling
    problems.extend(gofs.unreadable.values())
    fence = state.fence_of(state.read_phase(zk, group))
    if fence is not None and phase != "kafka":
        notes.append("group %s is fenced (cut over %s by %s): ZooKeeper members cannot join until 'zkmigrate rollback "
                     "--execute'" % (group, fence.get("since"), fence.get("by")))
    return {"group": group, "phase": phase, "to": to, "target_store": target, "ok": not problems, "expiry": expiry,
            "problems": problems, "notes": notes, "partitions": len(both), "zookeeper_members": sorted(members),
            "broker_group": broker_d, "fence": fence, "unreadable": gofs.unreadable_report(),
            **dict(skipped, warnings=skipped["warnings"] + warnings)}
