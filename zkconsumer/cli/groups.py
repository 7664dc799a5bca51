"""``zkconsumer groups list | describe G | owners G | verify G | delete G [--execute]`` (parse, call, print)."""
import sys

import click

from .. import groups as lib
from .. import zk as zkmod
from .common import (bootstrap_option, emit_json, json_option, resolve_bootstrap, resolve_zookeeper,
                     zookeeper_option)


def _dash(v):
    return "-" if v is None else str(v)


def _zk(zookeeper):
    return zkmod.connect(resolve_zookeeper(zookeeper))


@click.group()
def groups():
    """Inspect and delete ZooKeeper-coordinated consumer groups (like kafka-consumer-groups --zookeeper)."""


@groups.command("list")
@zookeeper_option
@json_option
def list_cmd(zookeeper, as_json):
    """Every group under /consumers (also groups that only hold offsets)."""
    zk = _zk(zookeeper)
    try:
        names = lib.list_groups(zk)
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json(names)
    else:
        for n in names:
            click.echo(n)


@groups.command("describe")
@click.argument("group")
@zookeeper_option
@bootstrap_option
@click.option("--no-log-end", is_flag=True, help="Do not ask Kafka for log-end offsets (LOG-END-OFFSET, LAG = -).")
@json_option
def describe_cmd(group, zookeeper, bootstrap, no_log_end, as_json):
    """TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID of GROUP (ZooKeeper offsets)."""
    zk = _zk(zookeeper)
    try:
        lib.require_group(zk, group)  # a missing group is reported before anything else is resolved
        rows = lib.describe(zk, group, None if no_log_end else resolve_bootstrap(bootstrap, zk=zk))
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json([r.as_dict() for r in rows])
        return
    click.echo("Note: This will only show information about consumers that use ZooKeeper (not those using the "
               "Java consumer API).", err=True)
    table = [("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")]
    table += [(_dash(r.topic), _dash(r.partition), _dash(r.current_offset), _dash(r.log_end_offset),
               _dash(r.lag), _dash(r.consumer_id)) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(6)]
    for row in table:
        click.echo(" ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


@groups.command("owners")
@click.argument("group")
@zookeeper_option
@json_option
def owners_cmd(group, zookeeper, as_json):
    """Partition owners of GROUP and its live members."""
    zk = _zk(zookeeper)
    try:
        group = lib.require_group(zk, group)
        own = lib.owners(zk, group)
        members = lib.live_members(zk, group)
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json({"group": group, "members": sorted(members),
                   "owners": [{"topic": t, "partition": p, "owner": o} for (t, p), o in own.items()]})
        return
    click.echo("MEMBERS: %s" % (", ".join(members) if members else "(none)"))
    for (t, p), o in own.items():
        click.echo("%s %d %s" % (t, p, o))


@groups.command("verify")
@click.argument("group")
@zookeeper_option
@json_option
def verify_cmd(group, zookeeper, as_json):
    """Every partition of every subscribed topic owned by a live member's thread; exit 1 otherwise."""
    zk = _zk(zookeeper)
    try:
        report = lib.verify(zk, group)
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json(report.as_dict())
    else:
        for p in report.problems:
            click.echo(p, err=True)
        click.echo("Rebalance operation %s !" % ("successful" if report.ok else "failed"))
    sys.exit(0 if report.ok else 1)


@groups.command("delete")
@click.argument("group")
@zookeeper_option
@click.option("--execute", is_flag=True, help="Really delete (default: dry run).")
@json_option
def delete_cmd(group, zookeeper, execute, as_json):
    """Delete /consumers/GROUP, only when it has no live members."""
    zk = _zk(zookeeper)
    try:
        out = lib.delete(zk, group, execute=execute)
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json(out)
    elif out["deleted"]:
        click.echo("Deleted all consumer group information for group '%s' in zookeeper." % out["group"])
    else:
        click.echo("Dry run: would delete /consumers/%s (%d znodes); add --execute" % (out["group"], out["znodes"]))
