"""``zkmigrate plan`` reads the group (live members, where each commits, the recorded phase) or says it could not,
and every command it prints runs: each is run here as printed against the session's ZooKeeper + Apache Kafka and
is accepted (a check may fail, exit 1; bad usage, exit 2, may not)."""
import os
import re
import shlex
import subprocess
import sys

from tests.support.consumer_helpers import connector, produce_tracked
from tests.support.waiting import wait_until

BIN = os.path.dirname(sys.executable)


def _run(argv, timeout=180):
    argv = [os.path.join(BIN, argv[0])] + argv[1:]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_plan_reads_the_group_and_every_printed_command_runs(services, unique):
    g, t = unique("plan"), services.create_topic(unique("plan"), 2)
    produce_tracked(services.bootstrap_servers, t, 4, partitions=2)
    member = connector(services, g, **{"auto.offset.reset": "smallest"})
    try:
        member.create_message_streams({t: 1})
        wait_until(lambda: member.metrics()["OwnedPartitionsCount"] == 2, 30, message="the member owns both")
        member.commit_offsets()
        for to in ("kafka", "zookeeper"):
            r = _run(["zkmigrate", "plan", "--zookeeper", services.zookeeper_connect, "--group", g, "--to", to])
            assert r.returncode == 0, r.stderr
            assert "members now (read from ZooKeeper): 1 live member(s): 1 zookeeper" in r.stdout, r.stdout
            cmds = re.findall(r"verify: (zkmigrate .+)$", r.stdout, re.M)
            cmds += re.findall(r"'(zkconsumer groups verify [^']+)'", r.stdout)
            cmds += re.findall(r"To go back later: (zkmigrate .+)$", r.stdout, re.M)
            assert len(cmds) >= 5, r.stdout
            for cmd in sorted(set(cmds)):
                out = _run(shlex.split(cmd))
                assert out.returncode in (0, 1), (cmd, out.returncode, out.stderr[-1500:])
                assert "Usage:" not in out.stderr, (cmd, out.stderr)
    finally:
        member.shutdown()


def test_plan_says_when_it_could_not_read_the_group(unique):
    r = _run(["zkmigrate", "plan", "--zookeeper", "127.0.0.1:1", "--group", unique("plan"), "--to", "kafka"], 120)
    assert r.returncode == 0, r.stderr
    assert "members now: not read (ZooKeeper unreachable" in r.stdout
    assert "currently run with" not in r.stdout
