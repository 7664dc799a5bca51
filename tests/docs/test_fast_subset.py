"""``pytest -m "not live"`` (docs/contributors.md) runs without Java and without services: run here, in a child
pytest whose PATH has every program of this one except Java's and Maven (``JAVA_HOME``, ``KAFKA_HOME`` and
``ZOOKEEPER_HOME`` unset), it must pass. A test that starts a server or a JVM without asking for the session's
services, and without the ``live`` marker, fails it. Itself live: it must not run inside the subset it runs."""
import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.live
JAVA_TOOLS = {"java", "javac", "jar", "jshell", "keytool", "jarsigner", "mvn", "mvnDebug"}


def _path_without_java(bindir):
    """A directory of links to every program on PATH (the first of each name) except Java's and Maven."""
    os.makedirs(bindir)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = os.path.join(d, name)
            link = os.path.join(bindir, name)
            if name in JAVA_TOOLS or "/jvm/" in os.path.realpath(target) or os.path.lexists(link):
                continue
            if os.path.isfile(target) and os.access(target, os.X_OK):
                os.symlink(target, link)
    return bindir


def test_the_fast_subset_runs_without_java(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "KAFKA_HOME", "ZOOKEEPER_HOME")}
    env["PATH"] = _path_without_java(str(tmp_path / "bin"))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not live"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL)
    summary = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 500 and "deselected" in summary, summary
    assert "failed" not in summary and "error" not in summary, summary
