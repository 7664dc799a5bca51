"""Every test file that the docs, the code, the CI scripts and the tests themselves name exists: a test moved or
renamed without its mentions fails here, naming the file that mentions it. Paths are from the repository's root
(``tests/chaos/test_chaos_defaults.py``, globs such as ``tests/spark/test_spark_*.py`` included), except in
docs/contributors.md's status table, whose test column is relative to ``tests/``."""
import glob
import os
import re

from tests.support import ROOT

SKIP_DIRS = {".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", ".zkconsumer", "build", "dist"}
SUFFIXES = (".md", ".py", ".c", ".java", ".xml", ".yml", ".yaml", ".cfg", ".toml")
NAMED = re.compile(r"(?<![\w/.])tests/[\w/*]*?[\w*]+\.(?:py|java)\b")


def _texts():
    for base in ("README.md", "setup.cfg", "pyproject.toml"):
        yield base, open(os.path.join(ROOT, base)).read()
    for top in ("docs", ".ci", "zkconsumer", "migrate", "bench", "tests", "monitoring"):
        for here, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
            for name in files:
                if name.endswith(SUFFIXES) or here.endswith(os.sep + ".ci"):
                    path = os.path.join(here, name)
                    with open(path, errors="replace") as f:
                        yield os.path.relpath(path, ROOT), f.read()


def test_every_named_test_file_exists():
    named, missing = 0, []
    for where, text in _texts():
        for path in NAMED.findall(text):
            named += 1
            if not glob.glob(os.path.join(ROOT, path)):
                missing.append("%s names %s" % (where, path))
    assert named >= 80  # the docs cite the tests that show what they say
    assert not missing, "\n".join(missing)


def test_the_status_table_names_existing_tests():
    text = open(os.path.join(ROOT, "docs", "contributors.md")).read()
    table = text[text.index("## Status"):text.index("\n## ", text.index("## Status") + 1)]
    rows = [line.rsplit("|", 2)[-2] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    paths = [p for row in rows[1:] for p in re.findall(r"`([\w/*]+\.py)`", row)]
    assert len(paths) >= 30
    missing = [p for p in paths if not glob.glob(os.path.join(ROOT, "tests", p))]
    assert not missing, missing
