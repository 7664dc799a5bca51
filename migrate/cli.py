"""``zkmigrate``: move consumer groups' offsets between ZooKeeper and Kafka's offset manager (parse, call, print).

Every command is read-only or a dry run unless ``--execute``; every command has ``--json``. Groups are named as in
Kafka's tools: ``--group G`` (repeatable), ``--all-groups``, or ``--groups-matching REGEX``; several groups run on
``--parallel`` threads and give one report (``{"groups": [...], "ok": ..., "exit_code": ...}`` under ``--json``).
"""
import sys

import click

from zkconsumer import zk as zkmod
from zkconsumer.cli.common import (EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_USAGE, ZkCommandGroup, bootstrap_option,
                                   connect_zookeeper, emit_json, exit_code_for, json_option, kafka_security,
                                   resolve_bootstrap, resolve_zookeeper,
                                   setup_logging, zookeeper_option)
from zkconsumer.cli.common import _validate_groups
from zkconsumer.groups import list_groups

from . import cutover as cutover_mod
from . import plan as plan_mod
from . import render, state, transfer
from .fleet import run_groups, select_groups, worst_exit
from .group_offsets import GroupOffsets
from .offsets_file import format_offsets, read_offsets_file
from .status import group_status
from .verify import PHASES, settle_for, verify_group

STORES = click.Choice(["zookeeper", "kafka"])
topic_option = click.option("--topic", "topics", multiple=True, metavar="TOPIC",
                            help="Also include this topic's partitions (repeatable).")
backup_option = click.option("--backup-dir", type=click.Path(file_okay=False), default=None,
                             help="Where the backup export of both stores is written before any change [default: "
                                  "$ZKMIGRATE_STATE_DIR/backups or ~/.zkconsumer/migrate/backups].")


def _groups_options(f):
    for opt in reversed([
            click.option("--group", "groups", multiple=True, metavar="GROUP", callback=_validate_groups,
                         help="Consumer group id (repeatable)."),
            click.option("--all-groups", is_flag=True, help="Every group under /consumers."),
            click.option("--groups-matching", "matching", metavar="REGEX", default=None,
                         help="Every group under /consumers whose whole name matches REGEX."),
            click.option("--parallel", type=click.IntRange(1, 64), default=4, show_default=True,
                         help="Groups handled at the same time.")]):
        f = opt(f)
    return f


def _check_selection(groups, all_groups, matching, required=True):
    """Usage checks that need no connection (before anything connects)."""
    given = sum([bool(groups), all_groups, matching is not None])
    if given > 1:
        raise click.UsageError("give one of --group (repeatable), --all-groups or --groups-matching")
    if matching is not None:
        import re
        try:
            re.compile(matching)
        except re.error as e:
            raise click.BadParameter("%r is not a regular expression: %s" % (matching, e),
                                     param_hint="--groups-matching")
    if required and not given:
        raise click.UsageError("no group given: pass --group GROUP (repeatable), --all-groups or --groups-matching")


def _single(groups, all_groups, matching):
    return len(groups) == 1 and not all_groups and matching is None


def _run_groups(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, need_kafka=True,
                show_progress=False):
    """Connect once and run ``per_group(gofs) -> (result, exit code)`` for every selected group (a GroupOffsets of its
    own each, closed after); returns ``{group: (result, exit code)}`` in selection order."""
    zk = connect_zookeeper(resolve_zookeeper(zookeeper))
    try:
        bs = resolve_bootstrap(bootstrap, zk=zk) if need_kafka else None
        names = select_groups(lambda: list_groups(zk), groups, all_groups, matching)
        security = kafka_security()  # here: the groups run on threads of their own

        def one(g):
            gofs = GroupOffsets(zk, bs, g, security=security)
            try:
                return per_group(gofs)
            finally:
                gofs.close()
        progress = None
        if len(names) > 1 and show_progress:
            done = [0]

            def progress(g, code):
                done[0] += 1
                click.echo("[%d/%d] %s: %s" % (done[0], len(names), g, render.verdict(code)), err=True)
        return run_groups(names, one, parallel, exit_code_for, progress)
    finally:
        zkmod.close(zk)


def _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json, show, need_kafka=True):
    """:func:`_run_groups`, then print (one group as before, several as one report) and exit with the worst code."""
    results = _run_groups(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, need_kafka,
                          show_progress=not as_json)
    code = worst_exit(c for _, c in results.values())
    if _single(groups, all_groups, matching):
        [(out, code)] = results.values()
        if as_json:
            emit_json(out)
        elif "error" in out:
            click.echo("zkmigrate: error: %s" % out["error"], err=True)
        else:
            show(out)
        sys.exit(code)
    if as_json:
        emit_json({"groups": [r for r, _ in results.values()], "count": len(results),
                   "ok": code == 0, "exit_code": code})
    else:
        for out, _ in results.values():
            if "error" in out:
                click.echo("%s: error: %s" % (out["group"], out["error"]), err=True)
            else:
                show(out)
        click.echo("%d group(s): %s" % (len(results), render.summary(results)))
    sys.exit(code)


@click.group(cls=ZkCommandGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP)
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
@click.version_option(package_name="zkconsumer", prog_name="zkmigrate")
def cli(log_level):
    """Migrate consumer-group offsets ZooKeeper <-> Kafka's offset manager (the rolling procedure of Kafka's
    documentation: dual commit, then Kafka only; and back). Dry run unless --execute."""
    setup_logging(log_level)


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@_groups_options
@topic_option
@json_option
def status(zookeeper, bootstrap, groups, all_groups, matching, parallel, topics, as_json):
    """Per partition: ZooKeeper / Kafka / log-end offsets, lags, owner; members and where they commit; the phase
    zkmigrate recorded; the broker-side group."""
    _check_selection(groups, all_groups, matching)
    _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel,
           lambda gofs: (group_status(gofs, topics), 0), as_json, render.status)


@cli.command(epilog=EXIT_CODES_HELP)
@_groups_options
@click.option("--to", "to", type=STORES, required=True, help="Where the offsets should end up.")
@zookeeper_option
@bootstrap_option
@json_option
def plan(groups, all_groups, matching, parallel, to, zookeeper, bootstrap, as_json):
    """The rolling procedure, with the exact properties and verify command of each phase (prints only)."""
    _check_selection(groups, all_groups, matching)
    if groups and not all_groups and matching is None:  # names only: nothing to connect to
        plans = [plan_mod.make_plan(g, to, zookeeper, bootstrap) for g in groups]
    else:
        zk = connect_zookeeper(resolve_zookeeper(zookeeper))
        try:
            names = select_groups(lambda: list_groups(zk), groups, all_groups, matching)
        finally:
            zkmod.close(zk)
        plans = [plan_mod.make_plan(g, to, zookeeper, bootstrap) for g in names]
    if as_json:
        emit_json(plans[0] if len(plans) == 1 and _single(groups, all_groups, matching) else plans)
    else:
        click.echo("\n\n".join(plan_mod.render(p) for p in plans))


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@_groups_options
@click.option("--store", type=STORES, default="zookeeper", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="File to write (default: stdout).")
@topic_option
@json_option
def export(zookeeper, bootstrap, groups, all_groups, matching, parallel, store, output, topics, as_json):
    """Offsets in the ExportZkOffsets format /consumers/G/offsets/T/P:offset (every group when none is named, as
    ExportZkOffsets did)."""
    _check_selection(groups, all_groups, matching, required=False)
    if not groups and matching is None:
        all_groups = True
    i = 0 if store == "zookeeper" else 1
    collected = {}

    def one(gofs):
        both = gofs.read_all(topics, scan_all_topics=(store == "kafka"))
        offs = {tp: v[i] for tp, v in both.items() if v[i] is not None}
        collected[gofs.group] = offs
        return {"group": gofs.group, "store": store, "count": len(offs),
                "offsets": {render.tp(tp): o for tp, o in sorted(offs.items())}}, 0

    results = _run_groups(zookeeper, bootstrap, groups, all_groups, matching, parallel, one,
                          need_kafka=(store == "kafka"))
    lines = [line for g in results if g in collected for line in format_offsets(g, collected[g])]
    code = worst_exit(c for _, c in results.values())
    if output:
        with open(output, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    if as_json:
        outs = [r for r, _ in results.values()]
        if _single(groups, False, matching):
            out = dict(outs[0], output=output)
        else:
            out = {"groups": outs, "store": store, "output": output, "count": len(lines), "ok": code == 0,
                   "exit_code": code}
        emit_json(out)
    else:
        for r, _ in results.values():
            if "error" in r:
                click.echo("%s: error: %s" % (r["group"], r["error"]), err=True)
        if output:
            click.echo("exported %d offset(s) of %d group(s) from %s to %s" % (len(lines), len(collected), store,
                                                                               output), err=True)
        else:
            for line in lines:
                click.echo(line)
    sys.exit(code)


@cli.command("import", epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="An ExportZkOffsets file (or zkmigrate export's output).")
@click.option("--store", type=STORES, required=True)
@click.option("--execute", is_flag=True, help="Write (default: show what would be written).")
@click.option("--allow-rewind", is_flag=True, help="Also move offsets backwards.")
@click.option("--force", is_flag=True, help="Write even while ZooKeeper members are live.")
@backup_option
@json_option
def import_cmd(zookeeper, bootstrap, path, store, execute, allow_rewind, force, backup_dir, as_json):
    """Write the offsets of an ExportZkOffsets file into one store (every line validated first).

    The rule of copy and rollback: an offset is never moved backwards without --allow-rewind, both stores are
    backed up before the first write, and the dry run shows every change."""
    data = read_offsets_file(path)  # raises before anything is touched
    result = {"file": path, "store": store, "execute": execute, "groups": {}}
    zk = connect_zookeeper(resolve_zookeeper(zookeeper))
    try:
        bs = resolve_bootstrap(bootstrap, zk=zk) if store == "kafka" else None
        for group in data:
            transfer.check_no_live_members(zk, group, force, "import")
        for group, offs in sorted(data.items()):
            gofs = GroupOffsets(zk, bs, group, security=kafka_security())
            try:
                both = gofs.read(list(offs))
                i = 0 if store == "zookeeper" else 1
                decision = transfer.plan_copy(offs, {tp: v[i] for tp, v in both.items()}, allow_rewind)
                todo, failed, backup = decision["write"], {}, []
                if execute and todo:
                    backup = transfer.write_backup(backup_dir or state.default_backup_dir(), group, both)
                    failed = transfer.apply_copy(gofs.store(store), todo)
            finally:
                gofs.close()
            result["groups"][group] = {
                "offsets": len(offs), "unchanged": len(decision["unchanged"]),
                "changes": {render.tp(tp): {"from": both[tp][i], "to": o} for tp, o in sorted(todo.items())},
                "skipped_rewind": {} if allow_rewind else
                {render.tp(tp): {"current": d, "file": s_} for tp, (d, s_) in decision["rewind"].items()},
                "written": len(todo) - len(failed) if execute else 0, "backup": backup,
                "failed": {render.tp(tp): e for tp, e in failed.items()}}
    finally:
        zkmod.close(zk)
    left_behind = any(g["failed"] or g["skipped_rewind"] for g in result["groups"].values())
    if as_json:
        emit_json(result)
    else:
        render.import_result(result, execute, store)
    sys.exit(EXIT_CHECK_FAILED if left_behind else 0)


def _copy(src, dst, execute, allow_rewind, force, backup_dir, topics):
    def per_group(gofs):
        members = transfer.check_no_live_members(gofs.zk, gofs.group, force, "copy")
        both = gofs.read_all(topics, scan_all_topics=(src == "kafka"))
        i, j = (0, 1) if src == "zookeeper" else (1, 0)
        source = {tp: v[i] for tp, v in both.items() if v[i] is not None}
        decision = transfer.plan_copy(source, {tp: v[j] for tp, v in both.items()}, allow_rewind)
        todo = decision["write"]
        out = {"group": gofs.group, "from": src, "to": dst, "execute": execute, "live_members": members,
               "to_write": {render.tp(tp): o for tp, o in todo.items()},
               "unchanged": len(decision["unchanged"]),
               "skipped_rewind": {} if allow_rewind else
               {render.tp(tp): {"destination": d, "source": s} for tp, (d, s) in decision["rewind"].items()},
               "rewound": {render.tp(tp): {"from": d, "to": s} for tp, (d, s) in decision["rewind"].items()}
               if allow_rewind else {},
               "backup": [], "failed": {}, "written": 0}
        if execute and todo:
            out["backup"] = transfer.write_backup(backup_dir or state.default_backup_dir(), gofs.group, both)
            failed = transfer.apply_copy(gofs.store(dst), todo)
            out["failed"] = {render.tp(tp): e for tp, e in failed.items()}
            out["written"] = len(todo) - len(failed)
            if dst == "kafka" and out["written"]:
                out["warnings"] = [_expiry_warning(gofs)]
        out["ok"] = not (out["failed"] or out["skipped_rewind"])
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)  # anything left behind is not "done"
    return per_group


def _expiry_warning(gofs):
    from zkconsumer.offsets.expiry import offsets_retention_ms
    from .expiry import iso
    import time as _time
    try:
        retention = offsets_retention_ms(gofs.bootstrap_servers, security=gofs.security)
    except Exception as e:  # only a warning
        return "the offsets written to Kafka expire after offsets.retention.minutes without a commit (%s)" % e
    return ("the offsets written to Kafka expire on the broker at %s (offsets.retention.minutes=%d) unless a member "
            "commits them or 'zkmigrate refresh --execute' runs" % (iso(_time.time() * 1000 + retention),
                                                                   retention // 60000))


def _copy_options(f):
    for opt in reversed([
            zookeeper_option, bootstrap_option, _groups_options,
            click.option("--execute", is_flag=True, help="Write (default: dry run)."),
            click.option("--allow-rewind", is_flag=True, help="Also move offsets backwards."),
            click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live."),
            backup_option, topic_option, json_option]):
        f = opt(f)
    return f


@cli.command(epilog=EXIT_CODES_HELP)
@_copy_options
@click.option("--from", "src", type=click.Choice(["zookeeper"]), default="zookeeper", show_default=True)
@click.option("--to", "dst", type=click.Choice(["kafka"]), default="kafka", show_default=True)
def copy(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, allow_rewind, force, backup_dir,
         topics, as_json, src, dst):
    """Copy ZooKeeper offsets to Kafka (never backwards unless --allow-rewind; idempotent)."""
    _check_selection(groups, all_groups, matching)
    _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel,
           _copy(src, dst, execute, allow_rewind, force, backup_dir, topics), as_json, render.copy_result)


@cli.command(epilog=EXIT_CODES_HELP)
@_copy_options
def rollback(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, allow_rewind, force, backup_dir,
             topics, as_json):
    """Copy Kafka offsets back to ZooKeeper (never backwards unless --allow-rewind; idempotent)."""
    _check_selection(groups, all_groups, matching)
    _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel,
           _rollback(_copy("kafka", "zookeeper", execute, allow_rewind, force, backup_dir, topics), execute),
           as_json, render.copy_result)


def _rollback(copy_fn, execute):
    """A rollback that left nothing behind lifts the cutover fence: ZooKeeper members may join again."""
    def per_group(gofs):
        out, code = copy_fn(gofs)
        if execute and code == 0:
            prev = state.read_phase(gofs.zk, gofs.group) or {}
            if prev.get("phase") == "cutover":
                out["recorded_phase"] = state.record_phase(gofs.zk, gofs.group, "rollback", "zkmigrate rollback",
                                                           "zookeeper")
        return out, code
    return per_group


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@_groups_options
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
@topic_option
@json_option
def verify(zookeeper, bootstrap, groups, all_groups, matching, parallel, phase, to, settle, expiry_margin,
           no_expiry_check, topics, as_json):
    """Exit 1 when the stores disagree beyond commits in flight, an offset is missing or outside the log, or the
    group is active both in ZooKeeper and on the broker (split brain). A passing verify records the phase."""
    _check_selection(groups, all_groups, matching)

    def per_group(gofs):
        s = settle if settle is not None else settle_for(gofs.zk, gofs.group)
        rep = verify_group(gofs, phase, to if phase == "dual" else None, topics, s,
                           expiry_margin=None if no_expiry_check else expiry_margin)
        rep["settle"] = s
        if rep["ok"]:
            rep["recorded_phase"] = state.record_phase(gofs.zk, gofs.group, phase, "zkmigrate verify",
                                                       to if phase == "dual" else None)
        return rep, (0 if rep["ok"] else EXIT_CHECK_FAILED)
    _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
           lambda rep: render.verify_result(rep, phase))


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@_groups_options
@click.option("--execute", is_flag=True, help="Copy missing/greater ZooKeeper offsets to Kafka.")
@click.option("--timeout", type=click.FloatRange(0, 86400), default=30.0, show_default=True,
              help="Seconds to wait for the last ZooKeeper owner to go (a rolling stop: as long as the bounce "
                   "takes; each departure is reported, and a broker-side group forming meanwhile stops it).")
@backup_option
@topic_option
@json_option
def cutover(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, timeout, backup_dir, topics,
            as_json):
    """Hand the group to broker-coordinated consumers: no ZooKeeper owner left, Kafka >= ZooKeeper, ready; with
    --execute the group is marked cut over, and ZooKeeper members refuse to join it (cutover.fence)."""
    _check_selection(groups, all_groups, matching)

    def per_group(gofs):
        out = cutover_mod.cutover(gofs, execute, timeout, backup_dir or state.default_backup_dir(), topics,
                                  progress=None if as_json else (lambda msg: click.echo("%s: %s" % (gofs.group, msg),
                                                                                        err=True)))
        if out["ready"] and execute:
            out["recorded_phase"] = state.record_phase(gofs.zk, gofs.group, "cutover", "zkmigrate cutover")
            out["warnings"] = [_expiry_warning(gofs) + " (start the broker-coordinated consumers before then)"]
        return out, (0 if out["ready"] else EXIT_CHECK_FAILED)
    _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json, render.cutover_result)


@cli.command(epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@_groups_options
@click.option("--execute", is_flag=True, help="Re-commit (default: show what would be re-committed).")
@click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live.")
@click.option("--every", type=click.FloatRange(1, None), default=None, metavar="SECONDS",
              help="Keep-alive: repeat every SECONDS until interrupted (e.g. a quarter of offsets.retention.minutes).")
@topic_option
@json_option
def refresh(zookeeper, bootstrap, groups, all_groups, matching, parallel, execute, force, every, topics, as_json):
    """Re-commit the groups' Kafka offsets unchanged, so the broker does not drop them (offsets.retention.minutes
    after their last commit) while no consumer commits: a stopped group in the Kafka phase, or offsets written by
    copy/cutover before the new consumers start."""
    from .expiry import refresh_group
    _check_selection(groups, all_groups, matching)

    def per_group(gofs):
        out = refresh_group(gofs, execute, force, topics)
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    if every is None:
        _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
               render.refresh_result)
    import time as _time
    while True:
        try:
            _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json,
                   render.refresh_result)
        except SystemExit as e:
            if e.code not in (0, None):
                click.echo("refresh: this round ended with exit code %s; trying again in %.0f s" % (e.code, every),
                           err=True)
        _time.sleep(every)


def _parse_scope(values):
    """--topic T or T:P,P,... -> {topic: None (all partitions) or {partitions}}; checked before connecting."""
    from zkconsumer.layout import validate_topic
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


@cli.command("reset-offsets", epilog=EXIT_CODES_HELP)
@zookeeper_option
@bootstrap_option
@_groups_options
@click.option("--topic", "topic_scope", multiple=True, metavar="TOPIC[:P,P...]",
              help="Reset this topic (all its partitions, or the listed ones); repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has.")
@click.option("--to-earliest", "spec", flag_value="earliest", help="The log start.")
@click.option("--to-latest", "spec", flag_value="latest", help="The log end.")
@click.option("--to-offset", type=click.IntRange(0, None), default=None, help="This offset.")
@click.option("--to-datetime", default=None, metavar="ISO-8601",
              help="The first message at or after this time (no zone = UTC).")
@click.option("--shift-by", type=int, default=None, help="The current offset plus N (N may be negative).")
@click.option("--store", "store", type=click.Choice(["auto", "zookeeper", "kafka", "both"]), default="auto",
              show_default=True, help="Where to write: auto = every store that holds an offset for the partition "
                                      "(ZooKeeper when none does).")
@click.option("--execute", is_flag=True, help="Write (default: dry run).")
@click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live.")
@backup_option
@json_option
def reset_offsets(zookeeper, bootstrap, groups, all_groups, matching, parallel, topic_scope, all_topics, spec,
                  to_offset, to_datetime, shift_by, store, execute, force, backup_dir, as_json):
    """Move a stopped group's offsets (kafka-consumer-groups --reset-offsets for ZooKeeper groups). Dry run unless
    --execute; a backup of both stores first; refused while the group is live."""
    from zkconsumer.broker_group import describe_broker_group
    from zkconsumer.errors import GroupConflictError
    from zkconsumer.groups import log_ranges
    from .reset import plan_reset
    _check_selection(groups, all_groups, matching)
    chosen = [(n, v) for n, v in (("earliest", spec == "earliest"), ("latest", spec == "latest"),
                                  ("offset", to_offset), ("datetime", to_datetime), ("shift", shift_by))
              if v is not None and v is not False]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                               "--shift-by")
    if bool(topic_scope) == all_topics:
        raise click.UsageError("give --topic TOPIC[:P,...] (repeatable) or --all-topics")
    kind, value = chosen[0]
    value = _parse_datetime(value) if kind == "datetime" else (None if kind in ("earliest", "latest") else value)
    scope = _parse_scope(topic_scope)

    def per_group(gofs):
        members = transfer.check_no_live_members(gofs.zk, gofs.group, force, "reset")
        broker = describe_broker_group(gofs.bootstrap_servers, gofs.group, security=gofs.security)
        if broker.active:
            raise GroupConflictError("refusing to reset offsets of group %s: it is active as a broker-coordinated "
                                     "group (state %s); stop those consumers first" % (gofs.group, broker.state))
        both = gofs.read_all(list(scope))
        parts = [tp for tp in both if all_topics or (tp[0] in scope and (scope[tp[0]] is None
                                                                           or tp[1] in scope[tp[0]]))]
        start, end, at = log_ranges(gofs.bootstrap_servers, parts, value if kind == "datetime" else None,
                                       security=gofs.security)
        current = {tp: max((v for v in both[tp] if v is not None), default=None) for tp in parts}
        planned = plan_reset(kind, value, current, start, end, at)
        writes = {"zookeeper": {}, "kafka": {}}
        for tp, d in planned.items():
            if d["new"] is None:
                continue
            z, k = both[tp]
            targets = {"zookeeper": ["zookeeper"], "kafka": ["kafka"], "both": ["zookeeper", "kafka"],
                       "auto": [n for n, v in (("zookeeper", z), ("kafka", k)) if v is not None] or ["zookeeper"]}
            d["stores"] = targets[store]
            for name in targets[store]:
                if both[tp][0 if name == "zookeeper" else 1] != d["new"]:
                    writes[name][tp] = d["new"]
        out = {"group": gofs.group, "execute": execute, "live_members": members, "reset": kind,
               "partitions": [dict(topic=tp[0], partition=tp[1], zookeeper_offset=both[tp][0],
                                   kafka_offset=both[tp][1], **planned[tp]) for tp in sorted(planned)],
               "backup": [], "failed": {}, "written": 0}
        if execute and any(writes.values()):
            out["backup"] = transfer.write_backup(backup_dir or state.default_backup_dir(), gofs.group, both)
            for name, todo in writes.items():
                if todo:
                    failed = transfer.apply_copy(gofs.store(name), todo)
                    out["failed"].update({"%s:%s" % (name, render.tp(tp)): e for tp, e in failed.items()})
                    out["written"] += len(todo) - len(failed)
        out["ok"] = not out["failed"]
        return out, (0 if out["ok"] else EXIT_CHECK_FAILED)
    _fleet(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json, render.reset_result)


def main():
    cli(prog_name="zkmigrate")


__all__ = ["cli", "main", "EXIT_USAGE"]
