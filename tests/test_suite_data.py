"""The records the suite produces outlive the test that reads them: a timestamp older than the broker's retention
(7 days by default) gets its segment deleted at the broker's next retention check (every minute on the test
cluster), after which a read that expects the record waits until the test's timeout, now and then, depending on
when the check runs. A timestamp written as a number in a test's producer call is such a date, sooner or later."""
import ast
import os
import time

from tests.support import ROOT
from tests.support.consumer_helpers import RETENTION_S

#: keyword arguments of kafka-python's and the helpers' producer calls that set a record's timestamp
TIMESTAMP_KEYWORDS = {"timestamp_ms"}


def _literal_timestamps(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in TIMESTAMP_KEYWORDS and isinstance(kw.value, ast.Constant) \
                        and isinstance(kw.value.value, int):
                    yield node.lineno, kw.value.value


def test_no_test_produces_a_record_the_broker_may_delete_before_it_is_read():
    # the oldest timestamp a record may carry and still be kept for a day from now
    oldest = (time.time() - RETENTION_S + 86400) * 1000
    found = []
    for d, _, files in os.walk(os.path.join(ROOT, "tests")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                found += ["%s:%d timestamp_ms=%d" % (os.path.relpath(path, ROOT), line, value)
                          for line, value in _literal_timestamps(path) if 0 <= value < oldest]
    assert not found, "records older than the broker's retention (use a recent timestamp): %s" % found
