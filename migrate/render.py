"""Text output of the zkmigrate commands (``--json`` prints the result dicts as they are)."""
from __future__ import annotations

import click

from zkconsumer.cli.common import print_table

VERDICTS = {0: "ok", 1: "FAILED", 2: "bad input", 3: "could not check"}


def tp(tp_) -> str:
    return "%s-%d" % tp_


def dash(v) -> str:
    return "-" if v is None else str(v)


def verdict(code: int) -> str:
    return VERDICTS.get(code, "exit %d" % code)


def summary(results) -> str:
    counts = {}
    for _, code in results.values():
        counts[verdict(code)] = counts.get(verdict(code), 0) + 1
    return ", ".join("%d %s" % (n, v) for v, n in sorted(counts.items()))


def status(st: dict) -> None:
    click.echo("GROUP %s" % st["group"])
    table = [("TOPIC", "PARTITION", "ZK-OFFSET", "KAFKA-OFFSET", "LOG-END-OFFSET", "ZK-LAG", "KAFKA-LAG", "OWNER")]
    for r in st["partitions"]:
        table.append((r["topic"], str(r["partition"]), dash(r["zookeeper_offset"]), dash(r["kafka_offset"]),
                      dash(r["log_end_offset"]), dash(r["zookeeper_lag"]), dash(r["kafka_lag"]), dash(r["owner"])))
    print_table(table)
    expiring = [r for r in st["partitions"] if r.get("kafka_expires_at")]
    if expiring:
        first = min(expiring, key=lambda r: r["kafka_expires_at"])
        click.echo("Kafka offsets expire (offsets.retention.minutes=%d) from %s (%s-%d, committed %s) unless "
                   "committed again" % ((st.get("offsets_retention_ms") or 0) // 60000, first["kafka_expires_at"],
                                        first["topic"], first["partition"], first["kafka_committed_at"]))
    warnings(st)
    members = st["zookeeper_members"]
    modes = st.get("member_storage") or {}
    click.echo("ZooKeeper members: %s" % (", ".join("%s (%s)" % (m, modes.get(m) or "unknown") for m in members)
                                          or "(none)"))
    phase = st.get("phase")
    if phase and "error" in phase:
        click.echo("Recorded phase: %s" % phase["error"])
    elif phase:
        click.echo("Recorded phase: %s%s since %s (%s)" % (phase["phase"], (" --to %s" % phase["to"]) if phase.get(
            "to") else "", phase.get("since"), phase.get("by")))
    else:
        click.echo("Recorded phase: (none: no verify has passed yet)")
    fence = st.get("fence")
    if fence and st.get("fence_acl"):
        click.echo("Cutover fence: since %s (%s): ZooKeeper members cannot join (%s has no create right); 'zkmigrate "
                   "rollback --group %s --execute' lifts it" % (fence.get("since"), fence.get("by"), st["fence_acl"],
                                                                 st["group"]))
    elif fence:
        # the record alone: zkconsumer members read it, JVM members only meet the ACL
        click.echo("Cutover fence: since %s (%s), recorded only: zkconsumer members refuse to join, but the group's "
                   "ids node grants the create right, so JVM (Scala) members can join ('zkmigrate cutover --group %s "
                   "--execute' takes it off, 'zkmigrate rollback --group %s --execute' lifts the fence)"
                   % (fence.get("since"), fence.get("by"), st["group"], st["group"]))
    b = st["broker_group"]
    click.echo("Broker-side group: state %s, %d member(s)%s%s" % (
        b.get("state"), len(b.get("members") or []),
        {"consumer": ", consumer group protocol (KIP-848)", "classic": ", classic group protocol"}.get(
            b.get("group_type") or "", ""),
        (" (%s)" % b["error"]) if b.get("error") else ""))
    for m in b.get("members") or []:
        click.echo("  %s%s" % (m["member_id"], "".join(
            " %s=%s" % (k, m[k]) for k in ("client_id", "client_host") if m.get(k))))


def unreadable(out: dict) -> None:
    """The partitions Kafka would not answer for (left out of the command's work), on stderr."""
    for why in (out.get("unreadable") or {}).values():
        click.echo("  NOT DONE %s" % why, err=True)


def backup_paths(paths) -> None:
    """The backup's files on stderr, and how to undo the change with it."""
    for p in paths:
        click.echo("backup: %s" % p, err=True)
    manifest = [p for p in paths if p.endswith(".json")]
    if manifest:
        click.echo("undo: zkmigrate restore %s --execute" % manifest[0], err=True)


def copy_result(out: dict) -> None:
    execute = out["execute"]
    verb = "wrote" if execute else "would write (dry run; add --execute)"
    click.echo("%s %d offset(s) %s -> %s for group %s; %d already equal"
               % (verb, out["written"] if execute else len(out["to_write"]), out["from"], out["to"], out["group"],
                  out["unchanged"]))
    for t, o in sorted(out["to_write"].items()):
        click.echo("  %s -> %d" % (t, o))
    for t, r in sorted(out["skipped_rewind"].items()):
        click.echo("  skipped %s: %s has %d, source %d (would move backwards; --allow-rewind)%s"
                   % (t, out["to"], r["destination"], r["source"], ": %s" % r["why"] if r.get("why") else ""),
                   err=True)
    for t, r in sorted((out.get("kept_ahead") or {}).items()):
        click.echo("  kept %s: zookeeper has %d, ahead of kafka's %d (where the group stopped last)"
                   % (t, r["zookeeper"], r["kafka"]))
    backup_paths(out["backup"])
    for t, e in out["failed"].items():
        click.echo("  FAILED %s: %s" % (t, e), err=True)
    unreadable(out)
    refusals(out)
    if out.get("fence_lifted"):
        click.echo("lifted the cutover fence of group %s (%s accepts new members again)"
                   % (out["group"], out["fence_lifted"]["path"]))
    warnings(out)


def import_result(result: dict, execute: bool, store: str) -> None:
    for group, g in result["groups"].items():
        verb = "wrote" if execute else "would write (dry run; add --execute)"
        click.echo("%s %d offset(s) of group %s to %s; %d already equal"
                   % (verb, g["written"] if execute else len(g["changes"]), group, store, g["unchanged"]))
        for t, c in g["changes"].items():
            click.echo("  %s: %s -> %d" % (t, "none" if c["from"] is None else c["from"], c["to"]))
        for t, r in g["skipped_rewind"].items():
            click.echo("  skipped %s: %s has %d, the file %d (would move backwards; --allow-rewind)"
                       % (t, store, r["current"], r["file"]), err=True)
        backup_paths(g["backup"])
        for t, e in g["failed"].items():
            click.echo("  FAILED %s: %s" % (t, e), err=True)
        unreadable(g)


def verify_result(rep: dict, phase: str) -> None:
    for p in rep["problems"]:
        click.echo("FAIL: %s" % p, err=True)
    for n in rep.get("notes") or []:
        click.echo("NOTE: %s" % n, err=True)
    warnings(rep)
    click.echo("verify %s (phase %s, %d partition(s), next phase reads %s, settle %.0f s): %s"
               % (rep["group"], phase, rep["partitions"], rep["target_store"], rep.get("settle", 0),
                  "OK" if rep["ok"] else "FAILED"))


def cutover_result(out: dict) -> None:
    for t, o in sorted(out["to_copy"].items()):
        click.echo("  %s %s -> %d" % ("copied" if t in out["copied"] else "to copy", t, o))
    refusals(out)
    if out["ready"] and out.get("dry_run") and not out.get("fenced"):
        verdict = ("READY to be cut over (dry run: nothing is fenced, ZooKeeper members can still join; run again "
                   "with --execute before starting broker-coordinated consumers)")
    elif out["ready"]:
        verdict = "READY for broker-coordinated consumers"
    else:
        verdict = "NOT ready: %s" % out.get("reason")
    click.echo("cutover %s: %s" % (out["group"], verdict))
    backup_paths(out.get("backup") or [])
    warnings(out)


def reset_result(out: dict) -> None:
    table = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "STORES", "NOTE")]
    for r in out["partitions"]:
        table.append((out["group"], r["topic"], str(r["partition"]), dash(r["current"]), dash(r["new"]),
                      ",".join(r.get("stores") or []) or "-", r["note"] or ""))
    print_table(table)
    _reset_status(out, err=False)


def reset_outcome(out: dict) -> None:
    """What ``reset-offsets --export`` says beside the CSV (on stderr): the group's error, or what was written,
    the backup, the failures and the partitions the plan left unchanged."""
    if "error" in out:
        click.echo("%s: error: %s" % (out["group"], out["error"]), err=True)
        return
    for r in out["partitions"]:
        if r["new"] is None:
            click.echo("%s: %s-%d: %s" % (out["group"], r["topic"], r["partition"], r["note"]), err=True)
    _reset_status(out, err=True)


def _reset_status(out: dict, err: bool) -> None:
    if out["execute"]:
        click.echo("wrote %d offset(s) of group %s" % (out["written"], out["group"]), err=err)
    else:
        click.echo("dry run: nothing written (add --execute)", err=err)
    backup_paths(out["backup"])
    for t, e in out["failed"].items():
        click.echo("  FAILED %s: %s" % (t, e), err=True)
    unreadable(out)
    warnings(out)


def refresh_result(out: dict) -> None:
    if out["execute"]:
        click.echo("refreshed %d Kafka offset(s) of group %s%s" % (
            out["refreshed"], out["group"], (": next expiry %s" % out["expires_at"]) if out.get("expires_at") else ""))
    else:
        click.echo("would refresh %d Kafka offset(s) of group %s (dry run; add --execute)"
                   % (len(out["offsets"]), out["group"]))
    for t, e in out["failed"].items():
        click.echo("  FAILED %s: %s" % (t, e), err=True)
    unreadable(out)
    if out.get("expiry_unknown"):
        click.echo("WARNING: %s" % out["expiry_unknown"], err=True)


def restore_result(out: dict) -> None:
    click.echo("restore %s from %s (taken %s%s)" % (out["group"], out["from_backup"], out.get("taken_at") or "?",
                                                   (" before '%s'" % out["by"]) if out.get("by") else ""))
    for store, changes in out["changes"].items():
        for t, c in sorted(changes.items()):
            click.echo("  %s %s: %s -> %s" % (store, t, dash(c["from"]), "delete (no offset in the backup)"
                                             if c["to"] is None else c["to"]))
    for t, v in sorted(out["not_in_backup"].items()):
        click.echo("  not in the backup, left as it is: %s (zookeeper %s, kafka %s)" % (t, dash(v["zookeeper"]),
                                                                                      dash(v["kafka"])))
    n = sum(len(c) for c in out["changes"].values())
    for t, why in sorted((out.get("newer") or {}).items()):
        click.echo("%s %s: %s" % ("DISCARDED" if out.get("discard_newer") else "REFUSED", t, why), err=True)
    if out.get("newer") and not out.get("discard_newer"):
        click.echo("not restored: %d offset(s) were committed since the backup (nothing written)"
                   % len(out["newer"]))
    elif out["execute"]:
        click.echo("restored group %s: %d offset(s) written, %d deleted" % (out["group"], out["written"],
                                                                           out["deleted"]))
    else:
        click.echo("dry run: %d change(s), nothing written (add --execute)" % n)
    put_back = out.get("fence_put_back")
    if put_back and out["execute"] and "fence" in put_back:
        click.echo("put back the cutover fence of group %s that '%s' lifted: %s (ZooKeeper members stay out: "
                   "the group is the broker-coordinated consumers' again)" % (out["group"], out.get("by"), ", ".join(
                       h for h, on in (("%s has no create right" % put_back["path"], put_back["changed"]),
                                       ("the fence recorded", put_back["record"])) if on) or "in place already"))
    if out.get("fence_lifted"):
        click.echo("lifted the cutover fence of group %s that the cutover set: ZooKeeper members may join again"
                   % out["group"])
    backup_paths(out["backup"])
    for t, e in out["failed"].items():
        click.echo("  FAILED %s: %s" % (t, e), err=True)
    unreadable(out)
    warnings(out)


def forget_result(out: dict) -> None:
    for t, stores in sorted(out["topics"].items()):
        for store in ("zookeeper", "kafka"):
            offs = stores.get(store) or {}
            if offs:
                click.echo("  %s %s: %s" % (t, store, " ".join("%s:%s" % (p, dash(o)) for p, o in sorted(offs.items()))))
    if out["execute"]:
        click.echo("deleted %d offset(s) of group %s" % (out["deleted"], out["group"]))
    else:
        click.echo("would delete %d offset(s) of group %s (dry run; add --execute)" % (out["to_delete"], out["group"]))
    backup_paths(out["backup"])
    for t, e in sorted(out["failed"].items()):
        click.echo("  FAILED %s: %s" % (t, e), err=True)


def warnings(out: dict) -> None:
    for w in out.get("warnings") or []:
        click.echo("WARNING: %s" % w, err=True)


def refusals(out: dict) -> None:
    for t, why in sorted((out.get("refused") or {}).items()):
        click.echo("REFUSED %s: %s" % (t, why), err=True)
