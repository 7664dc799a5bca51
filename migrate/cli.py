"""``zkmigrate``: move consumer groups' offsets between ZooKeeper and Kafka's offset manager (parse, call, print).

Every command is read-only or a dry run unless ``--execute``; every command has ``--json``. Groups are named as in
Kafka's tools: ``--group G`` (repeatable), ``--all-groups``, or ``--groups-matching REGEX``; several groups run on
``--parallel`` threads and give one report (``{"groups": [...], "ok": ..., "exit_code": ...}`` under ``--json``).
"""
import contextlib
import sys

import click

from zkconsumer.zookeeper import client as zkmod
from zkconsumer.cli.common import (EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_USAGE, ZkCommandGroup, _validate_groups,
                                   bootstrap_option, hoist_log_level,
                                   connect_zookeeper, emit_json, json_option, kafka_security, resolve_bootstrap,
                                   resolve_zookeeper, setup_logging, zookeeper_option,
                                   zookeeper_read_option)
from zkconsumer.tools.groups import list_groups

from . import cutover as cutover_mod
from . import plan as plan_mod
from . import render, state, transfer
from .expiry import expiry_warning
from .fleet import select_groups, worst_exit
from .group_offsets import GroupOffsets
from .keepalive import repeat
from .lock import GroupLock, lock_wait_option
from .leftovers import STORES as FORGET_STORES
from .leftovers import forget_topics
from .offsets_csv import format_csv
from .offsets_file import format_offsets, read_offsets_file
from .reset import STORES as RESET_STORES
from .reset import reset_group
from .selection import check_selection, groups_options, run_and_print, run_and_report, run_selected, single
from .status import group_status
from .verify import PHASES, settle_for, verify_group

STORES = click.Choice(["zookeeper", "kafka"])
topic_option = click.option("--topic", "topics", multiple=True, metavar="TOPIC",
                            help="Also include this topic's partitions (repeatable).")


def _validate_topics(ctx, param, values):
    """Check every topic name before anything connects (exit 2)."""
    from zkconsumer.core.layout import validate_topic
    try:
        return tuple(validate_topic(v) for v in values or ())
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=param.opts[0])


exclude_option = click.option("--exclude-topic", "exclude", multiple=True, metavar="TOPIC", callback=_validate_topics,
                              help="Leave this topic out (e.g. one the group no longer reads; repeatable).")
allow_stale_option = click.option("--allow-stale", is_flag=True,
                                  help="Carry over offsets found stale (a frozen ZooKeeper offset whose Kafka "
                                       "offset was removed, an offset of an earlier topic of the same name, one "
                                       "beyond the log end), and those whose staleness could not be checked (no "
                                       "Read on __consumer_offsets), instead of refusing the group.")
backup_option = click.option("--backup-dir", type=click.Path(file_okay=False), default=None,
                             help="Where the backup export of both stores is written before any change [default: "
                                  "$ZKMIGRATE_STATE_DIR/backups or ~/.zkconsumer/migrate/backups].")


@click.group(cls=ZkCommandGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP)
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
@click.version_option(package_name="zkconsumer", prog_name="zkmigrate")
def cli(log_level):
    """Migrate consumer-group offsets ZooKeeper <-> Kafka's offset manager (the rolling procedure of Kafka's
    documentation: dual commit, then Kafka only; and back). Dry run unless --execute."""
    setup_logging(log_level)


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_read_option
@bootstrap_option
@groups_options
@topic_option
@exclude_option
@json_option
def status(zookeeper, bootstrap, groups, all_groups, matching, parallel, topics, exclude, as_json):
    """Per partition: ZooKeeper / Kafka / log-end offsets, lags, owner; members and where they commit; the phase
    zkmigrate recorded and the cutover fence; the broker-side group; topics that no longer exist."""
    check_selection(groups, all_groups, matching)
    run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel,
                   lambda gofs: (group_status(gofs.exclude(exclude), topics), 0), as_json, render.status)


@cli.command(epilog=EXIT_CODES_HELP)
@groups_options
@click.option("--to", "to", type=STORES, required=True, help="Where the offsets should end up.")
@zookeeper_read_option
@bootstrap_option
@json_option
def plan(groups, all_groups, matching, parallel, to, zookeeper, bootstrap, as_json):
    """The rolling procedure, with the exact properties and commands of each phase, after reading what each
    group's members run now (prints only; when ZooKeeper cannot be read, says so)."""
    check_selection(groups, all_groups, matching)
    from zkconsumer.errors import ZkConsumerError
    given_zk = zookeeper
    zk, why = None, None
    try:
        zk = connect_zookeeper(resolve_zookeeper(zookeeper))
    except (ZkConsumerError, click.UsageError) as e:
        if not groups or all_groups or matching is not None:
            # the groups themselves come from ZooKeeper
            raise
        why = "ZooKeeper unreachable: %s" % (e.format_message() if isinstance(e, click.UsageError) else e)
    try:
        names = select_groups(lambda: list_groups(zk), groups, all_groups, matching) if zk else list(groups)
        plans = []
        for g in names:
            observed = {"read": False, "error": why}
            if zk is not None:
                try:
                    observed = plan_mod.read_group(zk, g)
                except ZkConsumerError as e:
                    observed = {"read": False, "error": str(e)}
            plans.append(plan_mod.make_plan(g, to, given_zk, bootstrap, observed))
    finally:
        if zk is not None:
            zkmod.close(zk)
    if as_json:
        emit_json(plans[0] if len(plans) == 1 and single(groups, all_groups, matching) else plans)
    else:
        click.echo("\n\n".join(plan_mod.render(p) for p in plans))


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_read_option
@bootstrap_option
@groups_options
@click.option("--store", type=STORES, default="zookeeper", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="File to write (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["exportzkoffsets", "csv"]), default="exportzkoffsets",
              show_default=True, help="csv: kafka-consumer-groups' reset-plan CSV (group,topic,partition,offset; "
                                      "topic,partition,offset for one --group), for its --reset-offsets --from-file.")
@topic_option
@exclude_option
@json_option
def export(zookeeper, bootstrap, groups, all_groups, matching, parallel, store, output, fmt, topics, exclude,
           as_json):
    """Offsets in the ExportZkOffsets format /consumers/G/offsets/T/P:offset, or as kafka-consumer-groups' CSV
    (every group when none is named, as ExportZkOffsets did)."""
    check_selection(groups, all_groups, matching, required=False)
    if not groups and matching is None:
        all_groups = True
    i = 0 if store == "zookeeper" else 1
    collected = {}

    def one(gofs):
        both = gofs.exclude(exclude).read_all(topics, scan_all_topics=(store == "kafka"))
        offs = {tp: v[i] for tp, v in both.items() if v[i] is not None}
        collected[gofs.group] = offs
        unreadable = gofs.unreadable_report()
        out = {"group": gofs.group, "store": store, "count": len(offs), "unreadable": unreadable,
               "offsets": {render.tp(tp): o for tp, o in sorted(offs.items())}}
        return out, EXIT_CHECK_FAILED if unreadable else 0

    results = run_selected(zookeeper, bootstrap, groups, all_groups, matching, parallel, one,
                           need_kafka=(store == "kafka"))
    if fmt == "csv":
        lines = format_csv({g: collected[g] for g in results if g in collected}, with_group=not single(groups, False,
                                                                                                       matching))
    else:
        lines = [line for g in results if g in collected for line in format_offsets(g, collected[g])]
    code = worst_exit(c for _, c in results.values())
    if output:
        with open(output, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    if as_json:
        outs = [r for r, _ in results.values()]
        if single(groups, False, matching):
            out = dict(outs[0], output=output)
        else:
            out = {"groups": outs, "store": store, "output": output, "count": len(lines), "ok": code == 0,
                   "exit_code": code}
        emit_json(out)
    else:
        for r, _ in results.values():
            if "error" in r:
                click.echo("%s: error: %s" % (r["group"], r["error"]), err=True)
            for why in (r.get("unreadable") or {}).values():
                click.echo("%s: not exported: %s" % (r["group"], why), err=True)
        if output:
            click.echo("exported %d offset(s) of %d group(s) from %s to %s" % (len(lines), len(collected), store,
                                                                               output), err=True)
        else:
            for line in lines:
                click.echo(line)
    sys.exit(code)


def _one_group(ctx, param, value):
    return None if value is None else _validate_groups(ctx, param, (value,))[0]


@cli.command("import", epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="An ExportZkOffsets file (zkmigrate export's output) or kafka-consumer-groups' reset-plan CSV "
                   "(its --reset-offsets --export; topic,partition,offset lines need --group).")
@click.option("--group", "group", default=None, metavar="GROUP", callback=_one_group,
              help="The group of a topic,partition,offset CSV; with a file that names its groups, only this one.")
@click.option("--store", type=STORES, required=True)
@click.option("--execute", is_flag=True, help="Write (default: show what would be written).")
@click.option("--allow-rewind", is_flag=True, help="Also move offsets backwards.")
@click.option("--force", is_flag=True, help="Write even while ZooKeeper members are live.")
@backup_option
@lock_wait_option
@json_option
def import_cmd(zookeeper, bootstrap, path, group, store, execute, allow_rewind, force, backup_dir, lock_wait,
               as_json):
    """Write the offsets of an ExportZkOffsets file or a kafka-consumer-groups CSV into one store (every line
    validated first).

    The rules of copy and rollback: an offset is never moved backwards without --allow-rewind, both stores are
    backed up before the first write, the dry run shows every change, and a group with live ZooKeeper members
    (--force) or active broker-coordinated consumers is refused, for every group of the file before anything is
    written."""
    # raises before anything is touched
    data = read_offsets_file(path, group)
    if group is not None:
        if group not in data:
            raise click.BadParameter("%s has no offsets of group %s (its groups: %s)" % (path, group, ", ".join(
                sorted(data)) or "none"), param_hint="--group")
        data = {group: data[group]}
    result = {"file": path, "store": store, "execute": execute, "groups": {}}
    zk = connect_zookeeper(resolve_zookeeper(zookeeper))
    try:
        # both stores are backed up; the broker-side group is asked
        bs = resolve_bootstrap(bootstrap, zk=zk)
        security = kafka_security()
        with contextlib.ExitStack() as held:
            # every group of the file locked (in one order: two imports cannot deadlock) and checked before the
            # first write: a group another operator holds refuses the whole import, nothing written
            locks = {name: held.enter_context(GroupLock(zk, name, "import", lock_wait))
                     for name in sorted(data)} if execute else {}
            for name in data:
                transfer.check_no_live_members(zk, name, force, "import")
                probe = GroupOffsets(zk, bs, name, security=security)
                try:
                    transfer.check_no_broker_consumers(probe, "import")
                finally:
                    probe.close()
            for name, offs in sorted(data.items()):
                gofs = GroupOffsets(zk, bs, name, security=security)
                gofs.lock = locks.get(name)
                try:
                    result["groups"][name] = transfer.import_group(gofs, offs, store, execute, allow_rewind,
                                                                   backup_dir)
                finally:
                    gofs.close()
    finally:
        zkmod.close(zk)
    left_behind = any(g["failed"] or g["skipped_rewind"] or g["unreadable"] for g in result["groups"].values())
    if as_json:
        emit_json(result)
    else:
        render.import_result(result, execute, store)
    sys.exit(EXIT_CHECK_FAILED if left_behind else 0)


def _copy_options(f):
    for opt in reversed([
            zookeeper_option, bootstrap_option, groups_options,
            click.option("--execute", is_flag=True, help="Write (default: dry run)."),
            click.option("--allow-rewind", is_flag=True, help="Also move offsets backwards."),
            click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live."),
            backup_option, topic_option, exclude_option, allow_stale_option, lock_wait_option, json_option]):
        f = opt(f)
    return f


@cli.command(epilog=EXIT_CODES_HELP)
@_copy_options
@click.option("--from", "src", type=click.Choice(["zookeeper"]), default="zookeeper", show_default=True)
@click.option("--to", "dst", type=click.Choice(["kafka"]), default="kafka", show_default=True)
def copy(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, allow_rewind, force, backup_dir,
         topics, exclude, allow_stale, lock_wait, as_json, src, dst):
    """Copy ZooKeeper offsets to Kafka (never backwards unless --allow-rewind; idempotent; stale offsets refused
    unless --allow-stale; topics that no longer exist skipped)."""
    check_selection(groups, all_groups, matching)

    def per_group(gofs):
        out = transfer.copy_group(gofs.exclude(exclude), src, dst, execute, allow_rewind, force, backup_dir, topics,
                                  allow_stale)
        # anything left behind is not "done"
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                   render.copy_result, lock=("copy", lock_wait) if execute else None)


@cli.command(epilog=EXIT_CODES_HELP)
@_copy_options
def rollback(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, allow_rewind, force, backup_dir,
             topics, exclude, allow_stale, lock_wait, as_json):
    """Copy Kafka offsets back to ZooKeeper (never backwards unless --allow-rewind; idempotent; ZooKeeper offsets
    Kafka cannot vouch for refused unless --allow-stale; refused while broker-coordinated consumers of the group
    run). With --execute and nothing left behind it lifts the cutover fence."""
    check_selection(groups, all_groups, matching)

    def per_group(gofs):
        out = transfer.rollback_group(gofs.exclude(exclude), execute, allow_rewind, force, backup_dir, topics,
                                      allow_stale)
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                   render.copy_result, lock=("rollback", lock_wait) if execute else None)


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@groups_options
@click.option("--phase", type=click.Choice(PHASES), required=True,
              help="What the members run now: zookeeper, dual (kafka + dual commit) or kafka.")
@click.option("--to", "to", type=STORES, default="kafka", show_default=True,
              help="With --phase dual: the direction (the store the next phase reads).")
@click.option("--settle", type=click.FloatRange(0, 600), default=None,
              help="Seconds a lagging store may take to catch up (commits in flight) [default: from the live "
                   "members' auto.commit.interval.ms: twice the largest, plus 1 s; 65 s for members that do not "
                   "publish it (JVM members, whose default is 60 s); 0 without live members].")
@click.option("--expiry-margin", type=click.FloatRange(0, None), default=86400.0, show_default=True,
              help="In the dual and kafka phases, fail when a Kafka offset expires on the broker within this many "
                   "seconds (offsets.retention.minutes after its last commit).")
@click.option("--no-expiry-check", is_flag=True, help="Do not read the Kafka offsets' commit times.")
@click.option("--no-record", is_flag=True, help="Do not record the phase when the check passes (read only).")
@topic_option
@exclude_option
@lock_wait_option
@json_option
def verify(zookeeper, bootstrap, groups, all_groups, matching, parallel, phase, to, settle, expiry_margin,
           no_expiry_check, no_record, topics, exclude, lock_wait, as_json):
    """Exit 1 when the stores disagree beyond commits in flight, an offset the phase reads is missing or outside
    the log, or the group is active both in ZooKeeper and on the broker (split brain). A passing verify records the
    phase in ZooKeeper (not with --no-record); it never changes offsets and never lifts the cutover fence."""
    check_selection(groups, all_groups, matching)

    def per_group(gofs):
        s = settle if settle is not None else settle_for(gofs.zk, gofs.group)
        rep = verify_group(gofs.exclude(exclude), phase, to if phase == "dual" else None, topics, s,
                           expiry_margin=None if no_expiry_check else expiry_margin)
        rep["settle"] = s
        if rep["ok"] and not no_record:
            gofs.check_lock()
            rep["recorded_phase"] = state.record_phase(gofs.zk, gofs.group, phase, "zkmigrate verify",
                                                       to if phase == "dual" else None)
        return rep, (0 if rep["ok"] else EXIT_CHECK_FAILED)
    run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                   lambda rep: render.verify_result(rep, phase), lock=None if no_record else ("verify", lock_wait))


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@groups_options
@click.option("--execute", is_flag=True, help="Copy missing/greater ZooKeeper offsets to Kafka.")
@click.option("--timeout", type=click.FloatRange(0, 86400), default=30.0, show_default=True,
              help="Seconds to wait for the last ZooKeeper owner to go (a rolling stop: as long as the bounce "
                   "takes; each departure is reported, and a broker-side group forming meanwhile stops it).")
@click.option("--no-acl-fence", is_flag=True,
              help="Do not take the create right off /consumers/G/ids (then only zkconsumer members are fenced; JVM "
                   "members could join again).")
@backup_option
@topic_option
@exclude_option
@allow_stale_option
@lock_wait_option
@json_option
def cutover(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, timeout, no_acl_fence, backup_dir,
            topics, exclude, allow_stale, lock_wait, as_json):
    """Hand the group to broker-coordinated consumers: no ZooKeeper owner left, Kafka >= ZooKeeper, ready; with
    --execute the group is fenced: /consumers/G/ids refuses new members (JVM ones included) and zkconsumer members
    refuse to join (cutover.fence) until 'zkmigrate rollback --execute'."""
    check_selection(groups, all_groups, matching)

    def per_group(gofs):
        out = cutover_mod.cutover(gofs.exclude(exclude), execute, timeout, backup_dir or state.default_backup_dir(),
                                  topics, progress=None if as_json else
                                  (lambda msg: click.echo("%s: %s" % (gofs.group, msg), err=True)),
                                  allow_stale=allow_stale, acl_fence=not no_acl_fence)
        if out["ready"] and execute:
            out["warnings"].append(expiry_warning(gofs) + " (start the broker-coordinated consumers before then)")
        return out, (0 if out["ready"] else EXIT_CHECK_FAILED)
    run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                   render.cutover_result, lock=("cutover", lock_wait) if execute else None)


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@groups_options
@click.option("--execute", is_flag=True, help="Re-commit (default: show what would be re-committed).")
@click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live.")
@click.option("--every", type=click.FloatRange(1, None), default=None, metavar="SECONDS",
              help="Keep-alive: repeat every SECONDS until SIGTERM/SIGINT (e.g. a quarter of offsets.retention.minutes); "
                   "a round that fails (ZooKeeper or Kafka down) is logged and the next one runs on time; the exit "
                   "code is the last round's.")
@topic_option
@exclude_option
@lock_wait_option
@json_option
def refresh(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, force, every, topics, exclude,
            lock_wait, as_json):
    """Re-commit the groups' Kafka offsets unchanged, so the broker does not drop them (offsets.retention.minutes
    after their last commit) while no consumer commits: a stopped group in the Kafka phase, or offsets written by
    copy/cutover before the new consumers start."""
    from .expiry import refresh_group
    check_selection(groups, all_groups, matching)

    def per_group(gofs):
        out = refresh_group(gofs.exclude(exclude), execute, force, topics)
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    lock = ("refresh", lock_wait) if execute else None
    if every is None:
        run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                       render.refresh_result, lock=lock)
    sys.exit(repeat(lambda: run_and_print(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group,
                                          as_json, render.refresh_result, lock=lock), every))


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@click.argument("backups", nargs=-1, required=True, metavar="BACKUP...",
                type=click.Path(exists=True, dir_okay=False))
@click.option("--execute", is_flag=True, help="Write and delete (default: show what would change).")
@click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live.")
@click.option("--discard-newer", is_flag=True,
              help="Also delete or move back offsets committed after the backup was taken (the consumers' work "
                   "since is undone); without it such offsets refuse the restore.")
@click.option("--no-fence", is_flag=True,
              help="Do not put back the cutover fence that the backed-up command (a rollback, or a restore that "
                   "undid a cutover) lifted (without it, a restore that would put it back while ZooKeeper members are "
                   "registered is refused, --force or not).")
@backup_option
@lock_wait_option
@json_option
def restore(zookeeper, bootstrap, backups, execute, force, discard_newer, no_fence, backup_dir, lock_wait, as_json):
    """Put both stores of a group back exactly as a backup found them: its offsets written back (backwards too),
    offsets created since deleted. BACKUP is the backup-<group>-<time>.json that every writing command leaves
    beside its two .txt files (either .txt will do). Dry run unless --execute; a backup of what is there now is
    written first; refused while the group is live, and when an offset it would delete or move back was committed
    after the backup was taken (other than by the command that wrote the backup; --discard-newer). A cutover's
    backup undoes that cutover, fence included; a rollback's puts back the fence it lifted (--no-fence)."""
    from .backup import load_backup
    from .restore import restore_group
    loaded = {}
    # every file read and checked before anything connects
    for path in backups:
        b = load_backup(path)
        if b.group in loaded:
            raise click.BadParameter("%s and %s are both backups of group %s: restore one of them"
                                     % (loaded[b.group].path, b.path, b.group), param_hint="BACKUP")
        loaded[b.group] = b

    def per_group(gofs):
        out = restore_group(gofs, loaded[gofs.group], execute, force, backup_dir, discard_newer, no_fence)
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    run_and_report(zookeeper, bootstrap, tuple(loaded), False, None, 4, per_group, as_json, render.restore_result,
                   lock=("restore", lock_wait) if execute else None)


@cli.command("forget-topic", epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@groups_options
@click.option("--topic", "topics", multiple=True, required=True, metavar="TOPIC", callback=_validate_topics,
              help="A topic the groups no longer read (repeatable).")
@click.option("--store", type=click.Choice(FORGET_STORES), default="both", show_default=True,
              help="Where to delete the topic's offsets.")
@click.option("--execute", is_flag=True, help="Delete (default: show what would be deleted).")
@backup_option
@lock_wait_option
@json_option
def forget_topic(zookeeper, bootstrap, groups, all_groups, matching, parallel, topics, store, execute, backup_dir,
                 lock_wait, as_json):
    """Delete the groups' offsets of topics they no longer read (deleted topics, or leftovers that make verify
    report missing offsets). Dry run unless --execute; a backup of both stores first; refused for a group while a
    live member subscribes to the topic or owns one of its partitions."""
    check_selection(groups, all_groups, matching)

    def per_group(gofs):
        out = forget_topics(gofs, list(topics), store, execute, backup_dir)
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                   render.forget_result,
                   lock=("forget-topic", lock_wait) if execute else None)


def _parse_scope(values):
    """--topic T or T:P,P,... -> {topic: None (all partitions) or {partitions}}; checked before connecting."""
    from zkconsumer.core.layout import validate_topic
    scope = {}
    for v in values:
        topic, _, parts = v.partition(":")
        try:
            validate_topic(topic)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--topic")
        if parts:
            try:
                ps = {int(x) for x in parts.split(",")}
            except ValueError:
                raise click.BadParameter("%r: partitions are comma-separated integers (T:0,1,2)" % v,
                                         param_hint="--topic")
            if any(p < 0 for p in ps):
                raise click.BadParameter("%r: partitions are >= 0" % v, param_hint="--topic")
            scope[topic] = None if scope.get(topic, ps) is None else (scope.get(topic, set()) | ps)
        else:
            scope[topic] = None
    return scope


def _parse_datetime(text):
    """ISO 8601 (``2026-11-23T06:00:00``, ``...Z``, ``...+01:00``; no zone = UTC) -> epoch milliseconds."""
    import datetime
    try:
        dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter("%r is not an ISO 8601 date-time (e.g. 2026-11-23T06:00:00Z)" % text,
                                 param_hint="--to-datetime")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)


def _parse_duration(text):
    """An ISO 8601 duration as kafka-consumer-groups --by-duration takes it (``PnDTnHnMnS``, e.g. ``PT30M``,
    ``P1DT2H``) -> milliseconds."""
    import re as _re
    m = _re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT") or not any(m.groups()):
        raise click.BadParameter("%r is not an ISO 8601 duration PnDTnHnMnS (e.g. PT30M, P1DT2H)" % text,
                                 param_hint="--by-duration")
    d, h, mi, sec = (float(x) if x else 0.0 for x in m.groups())
    return int((((d * 24 + h) * 60 + mi) * 60 + sec) * 1000)


@cli.command("reset-offsets", epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@groups_options
@click.option("--topic", "topic_scope", multiple=True, metavar="TOPIC[:P,P...]",
              help="Reset this topic (all its partitions, or the listed ones); repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has.")
@click.option("--to-earliest", is_flag=True, help="The log start.")
@click.option("--to-latest", is_flag=True, help="The log end.")
@click.option("--to-current", is_flag=True,
              help="The current offset (clamped into the log range); the log end where there is none.")
@click.option("--to-offset", type=click.IntRange(0, None), default=None, help="This offset.")
@click.option("--to-datetime", default=None, metavar="ISO-8601",
              help="The first message at or after this time (no zone = UTC).")
@click.option("--shift-by", type=int, default=None, help="The current offset plus N (N may be negative).")
@click.option("--by-duration", default=None, metavar="PnDTnHnMnS",
              help="The first message at or after now minus this ISO 8601 duration (e.g. PT30M, P1DT2H).")
@click.option("--from-file", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
              help="The offsets of a kafka-consumer-groups reset-plan CSV (--export's output: topic,partition,offset "
                   "for one --group, else group,topic,partition,offset) or an ExportZkOffsets file; its partitions "
                   "are the scope.")
@click.option("--export", is_flag=True,
              help="Print the new offsets as kafka-consumer-groups' CSV (for --from-file here or in "
                   "kafka-consumer-groups) instead of the table.")
@click.option("--store", "store", type=click.Choice(RESET_STORES), default="auto",
              show_default=True, help="Where to write: auto = the stores the group's recorded phase reads "
                                      "(zookeeper: ZooKeeper; dual, rollback: both; kafka, cutover or fenced: "
                                      "Kafka) and every store that holds an offset for the partition (ZooKeeper "
                                      "when none does and no phase is recorded).")
@click.option("--execute", is_flag=True, help="Write (default: dry run).")
@click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live.")
@backup_option
@lock_wait_option
@json_option
def reset_offsets(zookeeper, bootstrap, groups, all_groups, matching, parallel, topic_scope, all_topics, to_earliest,
                  to_latest, to_current, to_offset, to_datetime, shift_by, by_duration, from_file, export, store,
                  execute, force, backup_dir, lock_wait, as_json):
    """Move a stopped group's offsets (kafka-consumer-groups --reset-offsets for ZooKeeper groups). Dry run unless
    --execute; a backup of both stores first; refused while the group is live."""
    check_selection(groups, all_groups, matching)
    names = {"shift": "--shift-by", "duration": "--by-duration", "file": "--from-file"}
    chosen = [(n, v) for n, v in (("earliest", to_earliest), ("latest", to_latest), ("current", to_current),
                                  ("offset", to_offset), ("datetime", to_datetime), ("shift", shift_by),
                                  ("duration", by_duration), ("file", from_file))
              if v is not None and v is not False]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
                               "--to-datetime, --shift-by, --by-duration, --from-file (%s given)"
                               % (", ".join(names.get(n, "--to-" + n) for n, _ in chosen) or "none"))
    if export and as_json:
        raise click.UsageError("--export prints kafka-consumer-groups' CSV and --json a report: give one of them")
    kind, value = chosen[0]
    # as kafka-consumer-groups: no group column for one --group
    with_group = not single(groups, all_groups, matching)
    plans = None
    if kind == "file":
        if topic_scope or all_topics:
            raise click.UsageError("--from-file takes its partitions from the file: leave out --topic and "
                                   "--all-topics")
        # every line checked first
        plans = read_offsets_file(from_file, groups[0] if len(groups) == 1 else None)
        groups, all_groups, matching = _file_groups(from_file, plans, groups, all_groups, matching)
    elif bool(topic_scope) == all_topics:
        raise click.UsageError("give --topic TOPIC[:P,...] (repeatable) or --all-topics")
    if kind == "duration":
        import time as _time
        kind, value = "datetime", int(_time.time() * 1000) - _parse_duration(value)
    elif kind == "datetime":
        value = _parse_datetime(value)
    elif kind in ("earliest", "latest", "current"):
        value = None
    scope = _parse_scope(topic_scope)

    def per_group(gofs):
        out = reset_group(gofs, kind, plans[gofs.group] if plans is not None else value, scope, all_topics, store,
                          execute, force, backup_dir)
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    lock = ("reset-offsets", lock_wait) if execute else None
    if not export:
        run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                       render.reset_result, lock=lock)
    results = run_selected(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, lock=lock)
    planned = {g: {(r["topic"], r["partition"]): r["new"] for r in out["partitions"] if r["new"] is not None}
               for g, (out, _) in results.items() if "error" not in out}
    for line in format_csv(planned, with_group):
        click.echo(line)
    for out, _ in results.values():
        render.reset_outcome(out)
    sys.exit(worst_exit(c for _, c in results.values()))


def _file_groups(path, plans, groups, all_groups, matching):
    """The selection of ``reset-offsets --from-file``: the named groups (each must be in the file), else the file's
    groups (all of them, or those *matching*)."""
    if groups:
        missing = [g for g in groups if g not in plans]
        if missing:
            raise click.BadParameter("%s has no offsets of group(s) %s (its groups: %s)" % (
                path, ", ".join(missing), ", ".join(sorted(plans)) or "none"), param_hint="--from-file")
        return groups, False, None
    import re
    chosen = tuple(g for g in sorted(plans) if matching is None or re.fullmatch(matching, g))
    if not chosen:
        raise click.BadParameter("no group of %s matches %r (its groups: %s)" % (path, matching, ", ".join(
            sorted(plans)) or "none"), param_hint="--groups-matching")
    return chosen, False, None


def main():
    import sys
    cli(args=hoist_log_level(sys.argv[1:]), prog_name="zkmigrate")


__all__ = ["cli", "main", "EXIT_USAGE"]
