"""``zkmigrate``: move a group's offsets between ZooKeeper and Kafka's offset manager (parse, call, print).

Every command is read-only / a dry run unless ``--execute``; every command has ``--json``.
"""
import contextlib
import sys

import click

from zkconsumer import zk as zkmod
from zkconsumer.cli.common import (ZkCommandGroup, bootstrap_option, emit_json, json_option, resolve_bootstrap,
                                   resolve_zookeeper, setup_logging, zookeeper_option)
from zkconsumer.layout import validate_group

from . import cutover as cutover_mod
from . import plan as plan_mod
from . import transfer
from .group_offsets import GroupOffsets
from .offsets_file import format_offsets, parse_offsets
from .status import group_status
from .verify import PHASES, verify_group

STORES = click.Choice(["zookeeper", "kafka"])
group_option = click.option("--group", required=True, help="Consumer group id.")
topic_option = click.option("--topic", "topics", multiple=True, metavar="TOPIC",
                            help="Also include this topic's partitions (repeatable).")


@contextlib.contextmanager
def _open(zookeeper, bootstrap, group):
    group = validate_group(group)  # before connecting anywhere
    zk = zkmod.connect(resolve_zookeeper(zookeeper))
    gofs = None
    try:
        gofs = GroupOffsets(zk, resolve_bootstrap(bootstrap, zk=zk), group)
        yield gofs
    finally:
        if gofs is not None:
            gofs.close()
        zkmod.close(zk)


def _tp(tp):
    return "%s-%d" % tp


def _dash(v):
    return "-" if v is None else str(v)


@click.group(cls=ZkCommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
def cli(log_level):
    """Migrate consumer-group offsets ZooKeeper <-> Kafka (reference §4.8). Dry run unless --execute."""
    setup_logging(log_level)


@cli.command()
@zookeeper_option
@bootstrap_option
@group_option
@topic_option
@json_option
def status(zookeeper, bootstrap, group, topics, as_json):
    """Per partition: ZooKeeper / Kafka / log-end offsets, lags, owner; ZooKeeper members; broker-side group."""
    with _open(zookeeper, bootstrap, group) as gofs:
        st = group_status(gofs, topics)
    if as_json:
        emit_json(st)
        return
    table = [("TOPIC", "PARTITION", "ZK-OFFSET", "KAFKA-OFFSET", "LOG-END-OFFSET", "ZK-LAG", "KAFKA-LAG", "OWNER")]
    for r in st["partitions"]:
        table.append((r["topic"], str(r["partition"]), _dash(r["zookeeper_offset"]), _dash(r["kafka_offset"]),
                      _dash(r["log_end_offset"]), _dash(r["zookeeper_lag"]), _dash(r["kafka_lag"]),
                      _dash(r["owner"])))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        click.echo(" ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    click.echo("ZooKeeper members: %s" % (", ".join(st["zookeeper_members"]) or "(none)"))
    b = st["broker_group"]
    click.echo("Broker-side group: state %s, %d member(s)%s" % (
        b.get("state"), len(b.get("members") or []), (" (%s)" % b["error"]) if b.get("error") else ""))
    for m in b.get("members") or []:
        click.echo("  %s" % m["member_id"])


@cli.command()
@group_option
@click.option("--to", "to", type=STORES, required=True, help="Where the offsets should end up.")
@zookeeper_option
@bootstrap_option
@json_option
def plan(group, to, zookeeper, bootstrap, as_json):
    """The rolling procedure, with the exact properties and verify command of each phase (prints only)."""
    p = plan_mod.make_plan(validate_group(group), to, zookeeper, bootstrap)
    if as_json:
        emit_json(p)
    else:
        click.echo(plan_mod.render(p))


@cli.command()
@zookeeper_option
@bootstrap_option
@group_option
@click.option("--store", type=STORES, default="zookeeper", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="File to write (default: stdout).")
@topic_option
@json_option
def export(zookeeper, bootstrap, group, store, output, topics, as_json):
    """The group's offsets in the ExportZkOffsets format /consumers/G/offsets/T/P:offset."""
    with _open(zookeeper, bootstrap, group) as gofs:
        both = gofs.read_all(topics, scan_all_topics=(store == "kafka"))
    i = 0 if store == "zookeeper" else 1
    offs = {tp: v[i] for tp, v in both.items() if v[i] is not None}
    lines = format_offsets(gofs.group, offs)
    if output:
        with open(output, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    if as_json:
        emit_json({"group": gofs.group, "store": store, "output": output, "count": len(lines),
                   "offsets": {_tp(tp): o for tp, o in sorted(offs.items())}})
    elif output:
        click.echo("exported %d offset(s) of group %s from %s to %s" % (len(lines), gofs.group, store, output),
                   err=True)
    else:
        for line in lines:
            click.echo(line)


@cli.command("import")
@zookeeper_option
@bootstrap_option
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--store", type=STORES, required=True)
@click.option("--execute", is_flag=True, help="Write (default: show what would be written).")
@click.option("--allow-rewind", is_flag=True, help="Also move offsets backwards.")
@click.option("--force", is_flag=True, help="Write even while ZooKeeper members are live.")
@click.option("--backup-dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Where the backup export of both stores is written before any change.")
@json_option
def import_cmd(zookeeper, bootstrap, path, store, execute, allow_rewind, force, backup_dir, as_json):
    """Write the offsets of an ExportZkOffsets file into one store (every line validated first).

    The rule of copy and rollback: an offset is never moved backwards without --allow-rewind, both stores are
    backed up before the first write, and the dry run shows every change."""
    with open(path) as f:
        data = parse_offsets(f, path)  # raises before anything is touched
    result = {"file": path, "store": store, "execute": execute, "groups": {}}
    zk = zkmod.connect(resolve_zookeeper(zookeeper))
    try:
        bs = resolve_bootstrap(bootstrap, zk=zk) if store == "kafka" else None
        for group in data:
            transfer.check_no_live_members(zk, group, force, "import")
        for group, offs in sorted(data.items()):
            gofs = GroupOffsets(zk, bs, group)
            try:
                both = gofs.read(list(offs))
                i = 0 if store == "zookeeper" else 1
                decision = transfer.plan_copy(offs, {tp: v[i] for tp, v in both.items()}, allow_rewind)
                todo, failed, backup = decision["write"], {}, []
                if execute and todo:
                    backup = transfer.write_backup(backup_dir, group, both)
                    failed = transfer.apply_copy(gofs.store(store), todo)
            finally:
                gofs.close()
            result["groups"][group] = {
                "offsets": len(offs), "unchanged": len(decision["unchanged"]),
                "changes": {_tp(tp): {"from": both[tp][i], "to": o} for tp, o in sorted(todo.items())},
                "skipped_rewind": {} if allow_rewind else
                {_tp(tp): {"current": d, "file": s_} for tp, (d, s_) in decision["rewind"].items()},
                "written": len(todo) - len(failed) if execute else 0, "backup": backup,
                "failed": {_tp(tp): e for tp, e in failed.items()}}
    finally:
        zkmod.close(zk)
    failed_any = any(g["failed"] for g in result["groups"].values())
    skipped_any = any(g["skipped_rewind"] for g in result["groups"].values())
    if as_json:
        emit_json(result)
    else:
        for group, g in result["groups"].items():
            verb = "wrote" if execute else "would write (dry run; add --execute)"
            click.echo("%s %d offset(s) of group %s to %s; %d already equal"
                       % (verb, g["written"] if execute else len(g["changes"]), group, store, g["unchanged"]))
            for tp, c in g["changes"].items():
                click.echo("  %s: %s -> %d" % (tp, "none" if c["from"] is None else c["from"], c["to"]))
            for tp, r in g["skipped_rewind"].items():
                click.echo("  skipped %s: %s has %d, the file %d (would move backwards; --allow-rewind)"
                           % (tp, store, r["current"], r["file"]), err=True)
            for b in g["backup"]:
                click.echo("backup: %s" % b, err=True)
            for tp, e in g["failed"].items():
                click.echo("  FAILED %s: %s" % (tp, e), err=True)
    sys.exit(1 if failed_any or skipped_any else 0)


def _copy_command(zookeeper, bootstrap, group, src, dst, execute, allow_rewind, force, backup_dir, topics, as_json):
    with _open(zookeeper, bootstrap, group) as gofs:
        members = transfer.check_no_live_members(gofs.zk, gofs.group, force, "copy")
        both = gofs.read_all(topics, scan_all_topics=(src == "kafka"))
        i, j = (0, 1) if src == "zookeeper" else (1, 0)
        source = {tp: v[i] for tp, v in both.items() if v[i] is not None}
        decision = transfer.plan_copy(source, {tp: v[j] for tp, v in both.items()}, allow_rewind)
        todo = decision["write"]
        out = {"group": gofs.group, "from": src, "to": dst, "execute": execute, "live_members": members,
               "to_write": {_tp(tp): o for tp, o in todo.items()},
               "unchanged": len(decision["unchanged"]),
               "skipped_rewind": {} if allow_rewind else
               {_tp(tp): {"destination": d, "source": s} for tp, (d, s) in decision["rewind"].items()},
               "rewound": {_tp(tp): {"from": d, "to": s} for tp, (d, s) in decision["rewind"].items()}
               if allow_rewind else {},
               "backup": [], "failed": {}, "written": 0}
        if execute and todo:
            out["backup"] = transfer.write_backup(backup_dir, gofs.group, both)
            if len(todo) > transfer.CHUNK:
                with click.progressbar(length=len(todo), label="writing offsets to %s" % dst,
                                       file=sys.stderr) as bar:
                    failed = transfer.apply_copy(gofs.store(dst), todo, bar.update)
            else:
                failed = transfer.apply_copy(gofs.store(dst), todo)
            out["failed"] = {_tp(tp): e for tp, e in failed.items()}
            out["written"] = len(todo) - len(failed)
    if as_json:
        emit_json(out)
    else:
        verb = "wrote" if execute else "would write (dry run; add --execute)"
        click.echo("%s %d offset(s) %s -> %s for group %s; %d already equal"
                   % (verb, out["written"] if execute else len(todo), src, dst, out["group"], out["unchanged"]))
        for tp, o in sorted(out["to_write"].items()):
            click.echo("  %s -> %d" % (tp, o))
        for tp, r in sorted(out["skipped_rewind"].items()):
            click.echo("  skipped %s: %s has %d, source %d (would move backwards; --allow-rewind)"
                       % (tp, dst, r["destination"], r["source"]), err=True)
        for p in out["backup"]:
            click.echo("backup: %s" % p, err=True)
        for tp, e in out["failed"].items():
            click.echo("  FAILED %s: %s" % (tp, e), err=True)
    sys.exit(1 if out["failed"] or out["skipped_rewind"] else 0)  # anything left behind is not "done"


def _copy_options(f):
    for opt in reversed([
            zookeeper_option, bootstrap_option, group_option,
            click.option("--execute", is_flag=True, help="Write (default: dry run)."),
            click.option("--allow-rewind", is_flag=True, help="Also move offsets backwards."),
            click.option("--force", is_flag=True, help="Run even while ZooKeeper members are live."),
            click.option("--backup-dir", type=click.Path(file_okay=False), default=".", show_default=True,
                         help="Where the backup export of both stores is written before any change."),
            topic_option, json_option]):
        f = opt(f)
    return f


@cli.command()
@_copy_options
@click.option("--from", "src", type=click.Choice(["zookeeper"]), default="zookeeper", show_default=True)
@click.option("--to", "dst", type=click.Choice(["kafka"]), default="kafka", show_default=True)
def copy(zookeeper, bootstrap, group, execute, allow_rewind, force, backup_dir, topics, as_json, src, dst):
    """Copy ZooKeeper offsets to Kafka (never backwards unless --allow-rewind; idempotent)."""
    _copy_command(zookeeper, bootstrap, group, src, dst, execute, allow_rewind, force, backup_dir, topics, as_json)


@cli.command()
@_copy_options
def rollback(zookeeper, bootstrap, group, execute, allow_rewind, force, backup_dir, topics, as_json):
    """Copy Kafka offsets back to ZooKeeper (never backwards unless --allow-rewind; idempotent)."""
    _copy_command(zookeeper, bootstrap, group, "kafka", "zookeeper", execute, allow_rewind, force, backup_dir,
                  topics, as_json)


@cli.command()
@zookeeper_option
@bootstrap_option
@group_option
@click.option("--phase", type=click.Choice(PHASES), required=True,
              help="What the members run now: zookeeper, dual (kafka + dual commit) or kafka.")
@click.option("--to", "to", type=STORES, default="kafka", show_default=True,
              help="With --phase dual: the direction (the store the next phase reads).")
@click.option("--settle", type=click.FloatRange(0, 600), default=10.0, show_default=True,
              help="Seconds a lagging store may take to catch up (in-flight dual commits).")
@topic_option
@json_option
def verify(zookeeper, bootstrap, group, phase, to, settle, topics, as_json):
    """Exit 1 when the stores disagree beyond in-flight dual commits, an offset is missing, or split brain."""
    with _open(zookeeper, bootstrap, group) as gofs:
        rep = verify_group(gofs, phase, to if phase == "dual" else None, topics, settle)
    if as_json:
        emit_json(rep)
    else:
        for p in rep["problems"]:
            click.echo("FAIL: %s" % p, err=True)
        click.echo("verify %s (phase %s, %d partition(s), next phase reads %s): %s"
                   % (rep["group"], phase, rep["partitions"], rep["target_store"], "OK" if rep["ok"] else "FAILED"))
    sys.exit(0 if rep["ok"] else 1)


@cli.command()
@zookeeper_option
@bootstrap_option
@group_option
@click.option("--execute", is_flag=True, help="Copy missing/greater ZooKeeper offsets to Kafka.")
@click.option("--timeout", type=click.FloatRange(0, 3600), default=30.0, show_default=True,
              help="Seconds to wait for the last ZooKeeper owner to go.")
@click.option("--backup-dir", type=click.Path(file_okay=False), default=".", show_default=True)
@topic_option
@json_option
def cutover(zookeeper, bootstrap, group, execute, timeout, backup_dir, topics, as_json):
    """Hand the group to broker-coordinated consumers: no ZooKeeper owner left, Kafka >= ZooKeeper, ready."""
    with _open(zookeeper, bootstrap, group) as gofs:
        out = cutover_mod.cutover(gofs, execute, timeout, backup_dir, topics)
    if as_json:
        emit_json(out)
    else:
        for tp, o in sorted(out["to_copy"].items()):
            click.echo("  %s %s -> %d" % ("copied" if tp in out["copied"] else "to copy", tp, o))
        click.echo("cutover %s: %s" % (out["group"], "READY for broker-coordinated consumers" if out["ready"]
                                       else "NOT ready: %s" % out.get("reason")))
    sys.exit(0 if out["ready"] else 1)


def main():
    cli(prog_name="zkmigrate")
