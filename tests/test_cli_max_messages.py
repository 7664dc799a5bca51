"""``zkconsumer consume --max-messages N`` with several streams: at-least-once holds for what the CLI prints.

With N reached by one stream, the other streams may already have taken a message each; those are not printed, so
they must not be committed either (a restart would skip them).
"""
import json
import subprocess
import sys

from consumer_helpers import FAST_PROPS
from zkconsumer.layout import paths

PARTITIONS = 4


def _committed(zk, group, topic):
    out = {}
    for p in range(PARTITIONS):
        path = paths.partition_offset_path(group, topic, p)
        if zk.exists(path):
            out[p] = int(zk.get(path)[0])
    return out


def test_max_messages_with_many_streams_commits_only_what_was_printed(services, zk, unique):
    t = services.create_topic(unique("maxmsg"), PARTITIONS)
    services.produce(t, 2000, size=20)  # plenty queued on every partition: every stream has records at hand
    for attempt in range(3):
        g = unique("maxmsg")
        cmd = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", services.zookeeper_connect,
               "--group", g, "--topic", t, "--streams", str(PARTITIONS), "--max-messages", "40", "--format", "jsonl"]
        for k, v in dict(FAST_PROPS, **{"auto.offset.reset": "smallest"}).items():
            cmd += ["--property", "%s=%s" % (k, v)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr
        printed = [json.loads(line) for line in p.stdout.splitlines()]
        assert len(printed) == 40
        next_after_printed = {}
        for r in printed:
            next_after_printed[r["partition"]] = max(next_after_printed.get(r["partition"], 0), r["offset"] + 1)
        committed = _committed(zk, g, t)
        for part, off in committed.items():
            assert off <= next_after_printed.get(part, 0), (
                "attempt %d: partition %d committed %d but only printed up to %s: a message that was never "
                "written out was committed" % (attempt, part, off, next_after_printed.get(part)))
        # and what was printed is committed (graceful exit commits)
        for part, off in next_after_printed.items():
            assert committed.get(part) == off, (attempt, part, committed, next_after_printed)
