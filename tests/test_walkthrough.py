"""docs/migration.md's walk-through is true to the code: ``.ci/walkthrough`` runs every command of it on the test
cluster (a member per phase, the zookeeper -> dual -> kafka migration and back, export, reset-offsets, cutover),
and its output reads like the session printed in the docs line for line, numbers aside (offsets, times, dates and
durations differ between runs; every word, option, column and message must match)."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _shape(text):
    lines = [re.sub(r"\s+", " ", re.sub(r"[0-9]+", "N", line)).strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def test_the_walkthrough_output_is_what_the_docs_print(services):
    if services.cluster is None:
        pytest.fail("the walk-through runs zkconsumer local commands: it needs the embedded test cluster",
                    pytrace=False)
    doc = open(os.path.join(ROOT, "docs", "migration.md")).read()
    printed = re.search(r"```text\n(\$ zkconsumer local up\n.*?)```", doc, re.S).group(1)
    p = subprocess.run(["bash", os.path.join(ROOT, ".ci", "walkthrough")], capture_output=True, text=True,
                       timeout=900, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, WALKTHROUGH_LOCAL_DIR=services.cluster.dir))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    want, got = _shape(printed), _shape(p.stdout)
    assert [x for x in got if x.startswith("$ ")] == [x for x in want if x.startswith("$ ")], \
        "the walk-through runs other commands than the docs print"
    for i, (w, g) in enumerate(zip(want, got)):
        assert w == g, "line %d of the walk-through: the docs print %r, the code %r (re-record: bash " \
                       ".ci/walkthrough)" % (i + 1, w, g)
    assert len(want) == len(got), (want[len(got):], got[len(want):])
