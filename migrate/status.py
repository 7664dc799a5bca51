"""``zkmigrate status``: both stores, log-end offsets, lags and owners per partition; ZooKeeper members; the
broker-side group; the recorded phase and the cutover fence; topics that no longer exist (listed, not asked about).
Read-only."""
from __future__ import annotations

import logging

from zkconsumer import groups as zkgroups
from zkconsumer.errors import ClusterUnavailableError

from zkconsumer.broker_group import describe_broker_group

__all__ = ["group_status", "unrecorded_fence_warning"]

log = logging.getLogger(__name__)


def _lag(end, off):
    return end - off if end is not None and off is not None else None


def group_status(gofs, topics=(), scan_all_topics=False) -> dict:
    """``gofs``: a :class:`~migrate.group_offsets.GroupOffsets`.  Returns a JSON-able dict."""
    from .leftovers import skipped_report, split_gone
    zk, group = gofs.zk, gofs.group
    both, gone = split_gone(zk, gofs.read_all(topics, scan_all_topics))
    skipped = skipped_report(gofs, gone)
    own = zkgroups.owners(zk, group)
    members = zkgroups.live_members(zk, group)
    lso, leo, _ = (zkgroups.log_ranges(gofs.bootstrap_servers, list(both), security=gofs.security) if both
                   else ({}, {}, None))
    rows = []
    for (t, p), (z, k) in sorted(both.items()):
        end = leo.get((t, p))
        rows.append({"topic": t, "partition": p, "zookeeper_offset": z, "kafka_offset": k, "log_end_offset": end,
                     "log_start_offset": lso.get((t, p)),
                     "zookeeper_lag": _lag(end, z), "kafka_lag": _lag(end, k), "owner": own.get((t, p))})
    try:
        broker = describe_broker_group(gofs.bootstrap_servers, group, security=gofs.security).as_dict()
    except ClusterUnavailableError as e:
        broker = {"group": group, "state": "unknown", "members": [], "active": None, "error": str(e)}
    from zkconsumer.group_describe import member_infos
    from .state import fence_of, read_phase
    infos = member_infos(zk, group)
    warnings = skipped["warnings"] + ["%s-%d: %s offset %d is beyond the log end %d (the next start resets)"
                % (r["topic"], r["partition"], store, r["%s_offset" % store], r["log_end_offset"])
                for r in rows for store in ("zookeeper", "kafka")
                if r["%s_offset" % store] is not None and r["log_end_offset"] is not None
                and r["%s_offset" % store] > r["log_end_offset"]]
    warnings += ["%s-%d: %s offset %d is below the log start %d (deleted by retention: the next start resets)"
                 % (r["topic"], r["partition"], store, r["%s_offset" % store], r["log_start_offset"])
                 for r in rows for store in ("zookeeper", "kafka")
                 if r["%s_offset" % store] is not None and r["log_start_offset"] is not None
                 and r["%s_offset" % store] < r["log_start_offset"]]
    from .expiry import kafka_expiry, iso, unknown_expiry
    warnings += list(gofs.unreadable.values())
    kparts = [(r["topic"], r["partition"]) for r in rows if r["kafka_offset"] is not None]
    retention = None
    if kparts:
        try:
            retention, exp = kafka_expiry(gofs, kparts)
        except ClusterUnavailableError as e:
            exp = {}
            warnings.append(unknown_expiry(gofs, e))
        for r in rows:
            c, x = exp.get((r["topic"], r["partition"]), (None, None))
            r["kafka_committed_at"], r["kafka_expires_at"] = iso(c), iso(x)
    phase = read_phase(zk, group)
    fence = fence_of(phase)
    out = {"group": group, "partitions": rows, "zookeeper_members": sorted(members), "broker_group": broker,
           "offsets_retention_ms": retention,
           "member_storage": {m: (infos[m].mode if m in infos else None) for m in sorted(members)},
           "phase": phase, "fence": fence, "gone_topics": skipped["gone_topics"],
           "excluded_topics": skipped["excluded_topics"], "warnings": warnings,
           "unreadable": gofs.unreadable_report()}
    # the fenced ids node (None: not fenced, cut over with --no-acl-fence, or the ACL changed since)
    from .fence import fenced_ids_node
    out["fence_acl"] = fenced_ids_node(zk, group)
    if out["fence_acl"] and fence is None:
        warnings.append(unrecorded_fence_warning(group, out["fence_acl"]))
    return out


def unrecorded_fence_warning(group: str, path: str) -> str:
    return ("group %s: %s has no create right (no member can register) but no cutover fence is recorded (a cutover "
            "stopped between its two writes): 'zkmigrate cutover --group %s --execute' again finishes it, "
            "'zkmigrate rollback --group %s --execute' gives the right back" % (group, path, group, group))
