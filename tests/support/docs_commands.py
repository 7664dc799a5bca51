"""The commands README.md and docs/*.md print: each command line of their shell and session blocks, and each one
quoted inline, normalised (``[optional parts]`` dropped, ``a|b`` read as ``a``), and the click command an argv
names."""
import os
import re

import click
import pytest

from tests.support import ROOT
from zkconsumer.cli.main import cli as zkconsumer_cli
from zkconsumer_migrate.cli import cli as zkmigrate_cli

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


def resolve(argv):
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


def documented_commands():
    out = []
    for doc in DOCS:
        text = open(os.path.join(ROOT, doc)).read()
        out += [(doc, c, True) for c in _block_commands(text)]
        out += [(doc, c, False) for c in _inline_commands(text)]
    return out
