"""Every zkconsumer / zkmigrate command the docs print is one the CLIs accept: each command line of README.md's and
docs/*.md's shell and session blocks parses as a whole (its subcommand, options, choices, required options and
arguments, with ``[optional parts]`` dropped and ``a|b`` read as ``a``), and each one quoted inline names a
subcommand and options that exist. Running them is the job of test_readme.py (the README's), test_walkthrough.py
(the migration walk-through, through .ci/walkthrough) and test_docs_commands_run.py (the rest, and where each
command is run or why not); ``zkmigrate plan``'s own printed commands are run in test_migrate_plan_commands.py."""
import shlex

import click
import pytest

from tests.support.docs_commands import documented_commands, resolve

def test_the_docs_name_commands_at_all():
    cmds = documented_commands()
    assert len([c for c in cmds if c[2]]) >= 30 and len(cmds) >= 60


@pytest.mark.parametrize("doc,command,whole", documented_commands(), ids=lambda x: x if isinstance(x, str) else "")
def test_documented_command_parses(doc, command, whole):
    # a placeholder for a file the reader has (the backup a command printed): an existing file stands in for it
    argv = [__file__ if a == "BACKUP" else a for a in shlex.split(command)]
    cmd, rest = resolve(argv)
    if whole and not isinstance(cmd, click.Group):
        try:
            cmd.make_context(argv[0], list(rest))
        except click.exceptions.Exit:
            pass
        except click.UsageError as e:
            pytest.fail("%s: %r is not accepted: %s" % (doc, command, e.format_message()))
        return
    names = {n for p in cmd.params for n in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])}
    names |= {"--help", "-h"}
    for tok in rest:
        if tok.startswith("--"):
            assert tok.split("=", 1)[0] in names, "%s: %r: %s has no option %s" % (doc, command, argv[:2], tok)
