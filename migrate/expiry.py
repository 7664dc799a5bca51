"""Offsets expiring on the broker during a migration: when each Kafka offset of a group was committed, when the
broker will drop it, and ``zkmigrate refresh`` to re-commit them unchanged (see
:mod:`zkconsumer.offsets.expiry` for where the times come from and the broker's rule)."""
from __future__ import annotations

import time
from typing import Dict, Optional, Tuple

from zkconsumer import groups as zkgroups
from zkconsumer.broker_group import describe_broker_group
from zkconsumer.errors import ClusterUnavailableError, GroupConflictError
from zkconsumer.offsets.expiry import OFFSETS_TOPIC, read_commit_times, read_offsets_retention

__all__ = ["kafka_expiry", "iso", "refresh_group", "expiry_problems", "expiry_warning", "unknown_expiry"]

TP = Tuple[str, int]


def iso(ms: Optional[float]) -> Optional[str]:
    if ms is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000.0))


def kafka_expiry(gofs, partitions) -> Tuple[int, Dict[TP, Tuple[int, int]]]:
    """``(retention ms, {tp: (committed at ms, expires at ms)})`` for the group's Kafka offsets among *partitions*;
    :class:`ClusterUnavailableError` when the commit times or the retention cannot be read (an expiry computed from
    an assumed retention would be a guess: the callers report it as unknown)."""
    retention = read_offsets_retention(gofs.bootstrap_servers, security=gofs.security)
    if not retention.known:
        raise ClusterUnavailableError("offsets.retention.minutes could not be read (%s)" % retention.why)
    times = read_commit_times(gofs.bootstrap_servers, gofs.group, partitions, security=gofs.security)
    return retention.ms, {tp: (ts, ts + retention.ms) for tp, ts in times.items()}


def unknown_expiry(gofs, error: Exception) -> str:
    """Why the expiry of the group's Kafka offsets is unknown (the commit times or the retention could not be
    read), and what the check needs."""
    text = "when the Kafka offsets of group %s expire is unknown: %s" % (gofs.group, error)
    if "offsets.retention.minutes" in str(error):
        text += (" (the expiry check reads the brokers' offsets.retention.minutes: this Kafka identity needs "
                 "DescribeConfigs on the cluster; --no-expiry-check skips the check)")
    elif "Authorization" in str(error):
        text += (" (the expiry check reads the group's partition of %s: this Kafka identity needs Read on %s; "
                 "--no-expiry-check skips the check)" % (OFFSETS_TOPIC, OFFSETS_TOPIC))
    return text


def expiry_problems(gofs, both, margin_s: float, now_ms: Optional[float] = None):
    """``(problems, report)``: a problem for every Kafka offset the broker drops within *margin_s* (offsets already
    dropped read as missing, which verify reports on its own); the report has each offset's commit and expiry
    time, or ``unknown`` (why) when the commit times cannot be read (no problem then: one identity without Read on
    ``__consumer_offsets`` must not fail a whole fleet run)."""
    parts = [tp for tp, (_, k) in both.items() if k is not None]
    if not parts:
        return [], {}
    try:
        retention, exp = kafka_expiry(gofs, parts)
    except ClusterUnavailableError as e:
        return [], {"unknown": unknown_expiry(gofs, e)}
    now = time.time() * 1000 if now_ms is None else now_ms
    problems = []
    for tp in sorted(exp):
        left = (exp[tp][1] - now) / 1000.0
        if left < margin_s:
            problems.append("%s-%d: its Kafka offset expires in %.0f s (%s; committed %s, offsets.retention.minutes="
                            "%d): the broker drops it unless a member commits or 'zkmigrate refresh --execute' runs "
                            "before the next phase (--expiry-margin %.0f s)"
                            % (tp[0], tp[1], max(0.0, left), iso(exp[tp][1]), iso(exp[tp][0]), retention // 60000,
                               margin_s))
    return problems, {"retention_ms": retention,
                      "partitions": {"%s-%d" % tp: {"committed_at": iso(c), "expires_at": iso(e)}
                                     for tp, (c, e) in sorted(exp.items())}}


def refresh_group(gofs, execute: bool, force: bool = False, topics=()) -> dict:
    """Re-commit the group's Kafka offsets with their current values (the broker restarts their retention).
    Refused while ZooKeeper members are live (they commit, and a refresh racing a newer commit could move an offset
    back) or the broker-side group is active, unless *force* (members only)."""
    members = zkgroups.live_members(gofs.zk, gofs.group)
    if members and not force:
        raise GroupConflictError("refusing to refresh group %s: %d live ZooKeeper member(s) commit on their own (and a "
                                 "refresh racing a newer commit could move an offset back); --force to do it anyway"
                                 % (gofs.group, len(members)))
    broker = describe_broker_group(gofs.bootstrap_servers, gofs.group, security=gofs.security)
    if broker.active:
        raise GroupConflictError("refusing to refresh group %s: it is active as a broker-coordinated group (state %s): "
                                 "its consumers commit on their own" % (gofs.group, broker.state))
    both = gofs.read_all(topics, scan_all_topics=True)
    offs = {tp: k for tp, (_, k) in both.items() if k is not None}
    out = {"group": gofs.group, "execute": execute, "offsets": {"%s-%d" % tp: o for tp, o in sorted(offs.items())},
           "refreshed": 0, "failed": {}, "unreadable": gofs.unreadable_report()}
    if execute and offs:
        gofs.check_lock()
        res = gofs.kafka_store.commit(offs)
        out["failed"] = {"%s-%d" % tp: str(e) for tp, e in res.failed.items()}
        out["refreshed"] = len(res.committed)
        try:
            retention, exp = kafka_expiry(gofs, list(offs))
            out["retention_ms"] = retention
            out["expires_at"] = iso(min(e for _, e in exp.values())) if exp else None
        except ClusterUnavailableError as e:
            # refreshed all the same: only when they expire is not known
            out["expires_at"], out["expiry_unknown"] = None, unknown_expiry(gofs, e)
    out["ok"] = not (out["failed"] or out["unreadable"])
    return out


def expiry_warning(gofs) -> str:
    """The warning printed after offsets are written to Kafka: when the broker drops them unless committed again
    (when the retention cannot be read: at the earliest, after the shortest default)."""
    try:
        retention = read_offsets_retention(gofs.bootstrap_servers, security=gofs.security)
    except Exception as e:
        # only a warning
        return "the offsets written to Kafka expire after offsets.retention.minutes without a commit (%s)" % e
    return ("the offsets written to Kafka expire on the broker at %s%s (%s) unless a member commits them or "
            "'zkmigrate refresh --execute' runs" % (iso(time.time() * 1000 + retention.ms),
                                                    "" if retention.known else " at the earliest",
                                                    retention.describe()))
