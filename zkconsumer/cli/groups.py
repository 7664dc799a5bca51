"""``zkconsumer groups list | describe | owners | verify | delete`` (parse, call, print).

Groups are named as in Kafka's ``kafka-consumer-groups``: ``--group G`` (repeatable) or ``--all-groups``."""
import sys

import click

from .. import groups as lib
from .. import zk as zkmod
from ..group_describe import STORAGES, describe
from .common import (EXIT_CHECK_FAILED, EXIT_CODES_HELP, bootstrap_option, check_group_choice, connect_zookeeper,
                     emit_json, group_options, json_option, kafka_security, print_table, resolve_bootstrap,
                     resolve_zookeeper, selected_groups, zookeeper_option,
                     zookeeper_read_option)


def _dash(v):
    return "-" if v is None else str(v)


def _zk(zookeeper):
    return connect_zookeeper(resolve_zookeeper(zookeeper))


@click.group(epilog=EXIT_CODES_HELP)
def groups():
    """Inspect and delete ZooKeeper-coordinated consumer groups (like kafka-consumer-groups --zookeeper)."""


@groups.command("list")
@zookeeper_read_option
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


@groups.command("describe", epilog=EXIT_CODES_HELP)
@group_options()
@click.option("--topic", "topics", multiple=True, metavar="TOPIC", help="Only these topics (repeatable).")
@zookeeper_read_option
@bootstrap_option
@click.option("--offsets-storage", type=click.Choice(STORAGES), default="auto", show_default=True,
              help="Where CURRENT-OFFSET is read: auto = where the group's members say they commit (dual = the "
                   "greater of ZooKeeper and Kafka, what a dual-commit member resumes from).")
@click.option("--no-log-end", is_flag=True, help="Do not ask Kafka at all (no LOG-END-OFFSET, LAG or Kafka offsets).")
@json_option
def describe_cmd(groups, all_groups, topics, zookeeper, bootstrap, offsets_storage, no_log_end, as_json):
    """GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID of each group."""
    check_group_choice(groups, all_groups)
    zk = _zk(zookeeper)
    try:
        names = selected_groups(zk, groups, all_groups)
        for g in names:
            # a missing group is reported before anything else is resolved
            lib.require_group(zk, g)
        bs = None if no_log_end else resolve_bootstrap(bootstrap, zk=zk)
        rows = [r for g in names for r in describe(zk, g, bs, "zookeeper" if no_log_end else offsets_storage,
                                                    security=kafka_security())
                if not topics or r.topic is None or r.topic in topics]
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json([r.as_dict() for r in rows])
        return
    table = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID")]
    table += [(r.group, _dash(r.topic), _dash(r.partition), _dash(r.current_offset), _dash(r.log_end_offset),
               _dash(r.lag), _dash(r.consumer_id), _dash(r.host), _dash(r.client_id)) for r in rows]
    print_table(table)
    sources = sorted({r.offsets_from for r in rows})
    if sources:
        click.echo("(CURRENT-OFFSET from %s)" % ", ".join(
            {"zookeeper": "ZooKeeper", "kafka": "Kafka", "dual": "the greater of ZooKeeper and Kafka"}[s]
            for s in sources), err=True)


@groups.command("owners")
@group_options()
@zookeeper_read_option
@json_option
def owners_cmd(groups, all_groups, zookeeper, as_json):
    """Partition owners of each group and its live members."""
    check_group_choice(groups, all_groups)
    zk = _zk(zookeeper)
    out = []
    try:
        for g in selected_groups(zk, groups, all_groups):
            g = lib.require_group(zk, g)
            own = lib.owners(zk, g)
            members = lib.live_members(zk, g)
            out.append({"group": g, "members": sorted(members),
                        "owners": [{"topic": t, "partition": p, "owner": o} for (t, p), o in own.items()]})
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json(out[0] if len(out) == 1 and groups else out)
        return
    for o in out:
        click.echo("GROUP %s MEMBERS: %s" % (o["group"], ", ".join(o["members"]) if o["members"] else "(none)"))
        for r in o["owners"]:
            click.echo("%s %d %s" % (r["topic"], r["partition"], r["owner"]))


@groups.command("verify", epilog=EXIT_CODES_HELP)
@group_options()
@zookeeper_read_option
@json_option
def verify_cmd(groups, all_groups, zookeeper, as_json):
    """Every partition of every subscribed topic owned by a live member's thread; exit 1 otherwise."""
    check_group_choice(groups, all_groups)
    zk = _zk(zookeeper)
    try:
        reports = [lib.verify(zk, g) for g in selected_groups(zk, groups, all_groups)]
    finally:
        zkmod.close(zk)
    ok = all(r.ok for r in reports)
    if as_json:
        emit_json(reports[0].as_dict() if len(reports) == 1 and groups else [r.as_dict() for r in reports])
    else:
        for r in reports:
            for p in r.problems:
                click.echo("%s: %s" % (r.group, p), err=True)
            click.echo("%s: Rebalance operation %s !" % (r.group, "successful" if r.ok else "failed"))
    sys.exit(0 if ok else EXIT_CHECK_FAILED)


@groups.command("delete", epilog=EXIT_CODES_HELP)
@group_options(all_groups=False)
@zookeeper_option
@click.option("--execute", is_flag=True, help="Really delete (default: dry run).")
@json_option
def delete_cmd(groups, zookeeper, execute, as_json):
    """Delete /consumers/GROUP of each group, only when it has no live members."""
    if not groups:
        raise click.UsageError("no group given: pass --group GROUP (repeatable)")
    zk = _zk(zookeeper)
    try:
        outs = [lib.delete(zk, g, execute=execute) for g in groups]
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json(outs[0] if len(outs) == 1 else outs)
        return
    for out in outs:
        if out["deleted"]:
            click.echo("Deleted all consumer group information for group '%s' in zookeeper." % out["group"])
        else:
            click.echo("Dry run: would delete /consumers/%s (%d znodes); add --execute"
                       % (out["group"], out["znodes"]))
