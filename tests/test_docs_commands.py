"""Every zkconsumer / zkmigrate command the docs print is one the CLIs accept: each command line of README.md's and
docs/*.md's shell and session blocks parses as a whole (its subcommand, options, choices, required options and
arguments, with ``[optional parts]`` dropped and ``a|b`` read as ``a``), and each one quoted inline names a
subcommand and options that exist. Running them is the job of test_readme.py (the README's), test_walkthrough.py
(the migration walk-through, through .ci/walkthrough) and test_docs_commands_run.py (the rest, and where each
command is run or why not); ``zkmigrate plan``'s own printed commands are run in test_migrate_plan_commands.py."""
import os
import re
import shlex

import click
import pytest

from zkconsumer.cli.main import cli as zkconsumer_cli
from zkconsumer_migrate.cli import cli as zkmigrate_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")]
CLIS = {"zkconsumer": zkconsumer_cli, "zkmigrate": zkmigrate_cli}


def _normalise(line):
    line = re.sub(r"\s+#.*$", "", line.strip())
    line = re.split(r"\s+(?:>|2>|&&|\|\s)", line)[0].rstrip(" &")
    line = re.sub(r"\[[^\[\]]*\]", "", line)  # [--optional parts]
    line = re.sub(r"(\S+)\|\S+", r"\1", line.replace("\\|", "|"))  # a|b -> a
    return line.replace("...", "").strip()


def _block_commands(text):
    out = []
    for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
        body = m.group(2).replace("\\\n", " ")
        for line in body.splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            elif m.group(1) == "text":
                continue  # output lines of a session
            if line.split(" ", 1)[0] in CLIS:
                out.append(_normalise(line))
    return out


def _inline_commands(text):
    return [_normalise(c) for c in re.findall(r"`((?:zkconsumer|zkmigrate) [^`]+)`", text)]


def _resolve(argv):
    """(the click command the argv names, the rest of the argv); pytest.fail when a subcommand does not exist."""
    from zkconsumer.cli.common import hoist_log_level
    argv = argv[:1] + hoist_log_level(argv[1:])
    cmd, i = CLIS[argv[0]], 1
    if argv[1:2] == ["--log-level"]:
        i = 3
    while isinstance(cmd, click.Group) and i < len(argv) and not argv[i].startswith("-"):
        sub = cmd.get_command(click.Context(cmd), argv[i])
        if sub is None:
            pytest.fail("%r: no subcommand %r" % (" ".join(argv), argv[i]))
        cmd, i = sub, i + 1
    return cmd, argv[i:]


def _commands():
    out = []
    for doc in DOCS:
        text = open(os.path.join(ROOT, doc)).read()
        out += [(doc, c, True) for c in _block_commands(text)]
        out += [(doc, c, False) for c in _inline_commands(text)]
    return out


def test_the_docs_name_commands_at_all():
    cmds = _commands()
    assert len([c for c in cmds if c[2]]) >= 30 and len(cmds) >= 60


@pytest.mark.parametrize("doc,command,whole", _commands(), ids=lambda x: x if isinstance(x, str) else "")
def test_documented_command_parses(doc, command, whole):
    # a placeholder for a file the reader has (the backup a command printed): an existing file stands in for it
    argv = [__file__ if a == "BACKUP" else a for a in shlex.split(command)]
    cmd, rest = _resolve(argv)
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
