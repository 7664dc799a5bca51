"""Kafka-tool habits: reset-offsets' --to-* choices are exclusive (exit 2, nothing written), --to-current and
--by-duration (kafka-consumer-groups'), --log-level after the subcommand as well as before, and no
--zookeeper-set-acl on read-only commands. Real ZooKeeper + Apache Kafka."""
import os
import subprocess
import sys

from tests.support.consumer_helpers import produce_tracked

BIN = os.path.dirname(sys.executable)


def _run(*argv):
    return subprocess.run([os.path.join(BIN, argv[0])] + list(argv[1:]), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_reset_choices_are_exclusive_current_and_duration(services, unique, zk):
    g, t = unique("habit"), services.create_topic(unique("habit"), 1)
    produce_tracked(services.bootstrap_servers, t, 10, partitions=1)
    zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"4", makepath=True)
    base = ["zkmigrate", "reset-offsets", "--zookeeper", services.zookeeper_connect, "--group", g, "--all-topics"]
    r = _run(*base, "--to-earliest", "--to-latest", "--execute")
    assert r.returncode == 2 and "--to-earliest, --to-latest given" in r.stderr
    assert zk.get("/consumers/%s/offsets/%s/0" % (g, t))[0] == b"4"
    r = _run(*base, "--to-current", "--json")
    assert r.returncode == 0, r.stderr
    assert '"new": 4' in r.stdout
    r = _run(*base, "--by-duration", "P1D", "--execute", "--json")
    assert r.returncode == 0, r.stderr
    assert zk.get("/consumers/%s/offsets/%s/0" % (g, t))[0] == b"0"  # everything is younger than a day
    r = _run(*base, "--by-duration", "1 hour")
    assert r.returncode == 2 and "--by-duration" in r.stderr


def test_log_level_after_the_subcommand(services):
    for argv in (["zkconsumer", "groups", "list", "--zookeeper", services.zookeeper_connect, "--log-level", "debug"],
                 ["zkmigrate", "plan", "--group", "g", "--to", "kafka", "--zookeeper", services.zookeeper_connect,
                  "--log-level=debug"]):
        r = _run(*argv)
        assert r.returncode == 0, r.stderr
        assert " DEBUG " in r.stderr, argv


def test_no_set_acl_on_read_only_commands(services):
    for argv in (["zkconsumer", "groups", "describe", "--group", "g"], ["zkconsumer", "tree", "/"],
                 ["zkmigrate", "status", "--group", "g"], ["zkconsumer", "groups", "list"]):
        r = _run(*argv, "--zookeeper", services.zookeeper_connect, "--zookeeper-set-acl")
        assert r.returncode == 2 and "No such option" in r.stderr, (argv, r.stderr)
    assert "--zookeeper-set-acl" in _run("zkconsumer", "groups", "delete", "--help").stdout  # it writes
