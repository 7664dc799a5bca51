"""The zkmigrate commands' group selection, as in Kafka's tools (``--group G`` repeatable, ``--all-groups``,
``--groups-matching REGEX``; ``--parallel`` threads), and running a command over the selected groups: one
connection, a :class:`GroupOffsets` per group, progress on stderr, one report and the worst exit code."""
import re
import sys

import click

from zkconsumer import zk as zkmod
from zkconsumer.cli.common import (_validate_groups, connect_zookeeper, emit_json, exit_code_for, kafka_security,
                                   resolve_bootstrap, resolve_zookeeper)
from zkconsumer.groups import list_groups

from . import render
from .fleet import run_groups, select_groups, worst_exit
from .group_offsets import GroupOffsets
from .lock import GroupLock

__all__ = ["groups_options", "check_selection", "single", "run_selected", "run_and_report", "run_and_print"]


def groups_options(f):
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


def check_selection(groups, all_groups, matching, required=True):
    """Usage checks that need no connection (before anything connects)."""
    given = sum([bool(groups), all_groups, matching is not None])
    if given > 1:
        raise click.UsageError("give one of --group (repeatable), --all-groups or --groups-matching")
    if matching is not None:
        try:
            re.compile(matching)
        except re.error as e:
            raise click.BadParameter("%r is not a regular expression: %s" % (matching, e),
                                     param_hint="--groups-matching")
    if required and not given:
        raise click.UsageError("no group given: pass --group GROUP (repeatable), --all-groups or --groups-matching")


def single(groups, all_groups, matching):
    return len(groups) == 1 and not all_groups and matching is None


def run_selected(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, need_kafka=True,
                 show_progress=False, lock=None):
    """Connect once and run ``per_group(gofs) -> (result, exit code)`` for every selected group (a GroupOffsets of its
    own each, closed after); returns ``{group: (result, exit code)}`` in selection order. *lock* ``(command, wait
    seconds)``: each group's work holds the group's lock (:class:`~.lock.GroupLock`; a group locked by another
    command is refused with its holder named)."""
    zk = connect_zookeeper(resolve_zookeeper(zookeeper))
    try:
        bs = resolve_bootstrap(bootstrap, zk=zk) if need_kafka else None
        names = select_groups(lambda: list_groups(zk), groups, all_groups, matching)
        # here: the groups run on threads of their own
        security = kafka_security()

        def one(g):
            gofs = GroupOffsets(zk, bs, g, security=security)
            try:
                if lock is None:
                    return per_group(gofs)
                with GroupLock(zk, g, *lock) as gofs.lock:
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


def run_and_report(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json, show,
                   need_kafka=True, lock=None):
    """:func:`run_selected`, then print (one group as before, several as one report) and exit with the worst code."""
    sys.exit(run_and_print(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json, show,
                           need_kafka, lock))


def run_and_print(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, as_json, show,
                  need_kafka=True, lock=None) -> int:
    """:func:`run_and_report` without the exit: returns the worst exit code."""
    results = run_selected(zookeeper, bootstrap, groups, all_groups, matching, parallel, per_group, need_kafka,
                           show_progress=not as_json, lock=lock)
    code = worst_exit(c for _, c in results.values())
    if single(groups, all_groups, matching):
        [(out, code)] = results.values()
        if as_json:
            emit_json(out)
        elif "error" in out:
            click.echo("zkmigrate: error: %s" % out["error"], err=True)
        else:
            show(out)
        return code
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
    return code
