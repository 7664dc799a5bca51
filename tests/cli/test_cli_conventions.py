"""The CLIs follow Kafka's tools where operators have habits: --group (repeatable) / --all-groups /
--groups-matching, kafka-console-consumer's options, --version, exit codes 0/1/2/3, errors as JSON under --json,
validation before any connection; zkmigrate works on many groups at once with one report, records the phase a
passing verify established, and writes backups to a state directory, never the current one."""
import json
import logging
import os
import subprocess
import sys

from tests.support.migrate_support import ROOT, ConsumerProc, run_cli, zkmigrate, zkmigrate_json
from tests.support.waiting import wait_until
from zkconsumer.cli import cli as zkcli

UNREACHABLE = "127.0.0.1:1"


def _run(*argv, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    p = subprocess.run([sys.executable, "-m"] + list(argv), capture_output=True, text=True, timeout=timeout, env=env,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def test_version_on_both_clis():
    from zkconsumer import __version__
    assert __version__ and __version__ != "0+unknown"
    code, out, _ = run_cli(zkcli, ["--version"], expect=0)
    assert __version__ in out
    from zkconsumer_migrate.cli import cli as mcli
    code, out, _ = run_cli(mcli, ["--version"], expect=0)
    assert "zkmigrate" in out and __version__ in out


def test_bad_group_name_fails_before_connecting():
    """An unreachable ZooKeeper would give exit 3 after the connect timeout; a bad name is exit 2 at once."""
    for argv in (["zkconsumer", "groups", "describe", "--group", "bad/name", "--zookeeper", UNREACHABLE],
                 ["zkconsumer", "groups", "verify", "--group", "a b", "--zookeeper", UNREACHABLE]):
        code, out, err = _run(*argv, timeout=30)
        assert code == 2, (argv, code, err)
        assert "--group" in err and "illegal" in err, err
    from zkconsumer_migrate.cli import cli as mcli
    code, out, err = run_cli(mcli, ["status", "--group", "x" * 300, "--zookeeper", UNREACHABLE])
    assert code == 2 and "249" in (out + err)


def test_unreachable_is_exit_3_and_json_errors():
    from zkconsumer_migrate.cli import cli as mcli
    code, out, err = run_cli(mcli, ["status", "--group", "g", "--zookeeper", UNREACHABLE, "--json"])
    assert code == 3, (code, out, err)
    rep = json.loads(out)
    assert rep["exit_code"] == 3 and "ZooKeeper" in rep["error"] and rep["error_type"] == "ClusterUnavailableError"
    code, out, err = run_cli(mcli, ["verify", "--phase", "kafka", "--json", "--zookeeper", UNREACHABLE])
    assert code == 2 and json.loads(out)["exit_code"] == 2 and "no group given" in json.loads(out)["error"]


def test_console_consumer_options(services, unique, tmp_path):
    """--from-beginning, --timeout-ms, --consumer-property and --consumer.config as in kafka-console-consumer."""
    t = services.create_topic(unique("cc"), 2)
    services.produce(t, 10)
    cfg = tmp_path / "consumer.properties"
    cfg.write_text("rebalance.backoff.ms=200\nclient.id=from-file\n")
    common = ["zkconsumer", "consume", "--zookeeper", services.zookeeper_connect, "--topic", t,
              "--consumer.config", str(cfg), "--consumer-property", "zookeeper.session.timeout.ms=6000",
              "--timeout-ms", "4000"]
    code, out, err = _run(*common, "--group", unique("cc-end"), timeout=90)
    assert code == 0 and out == "", (code, out, err[-2000:])  # largest: nothing old; then the timeout ends it
    code, out, err = _run(*common, "--group", unique("cc-begin"), "--from-beginning", timeout=90)
    assert code == 0, err[-2000:]
    got = [(r["partition"], r["offset"]) for r in map(json.loads, out.splitlines())]
    assert len(got) == 10 and len(set(got)) == 10 and {p for p, _ in got} <= {0, 1}, got


def test_fleet_verify_export_and_recorded_phase(services, zk, unique, tmp_path, monkeypatch):
    t = services.create_topic(unique("fl"), 2)
    services.produce(t, 8)
    prefix = unique("fleet")
    names = ["%s-%d" % (prefix, i) for i in range(3)]
    procs = [ConsumerProc(tmp_path, n, services.zookeeper_connect, n, t) for n in names]
    try:
        for p in procs:
            wait_until(lambda p=p: len(p.seen()) == 8, 40, message="every member to consume")
    finally:
        for p in procs:
            p.stop()
            p.kill()
    # every group of the pattern, one report; the ZooKeeper phase passes, so it is recorded
    code, rep, _ = zkmigrate_json(services, "verify", "--groups-matching", prefix + "-[0-9]+", "--phase",
                                  "zookeeper", "--parallel", "2", expect=0)
    assert rep["ok"] and rep["count"] == 3 and [g["group"] for g in rep["groups"]] == names
    assert all(g["ok"] and g["recorded_phase"]["phase"] == "zookeeper" for g in rep["groups"])
    # the kafka phase fails for all three (nothing in Kafka yet): exit 1, each group says why
    code, rep, _ = zkmigrate_json(services, "verify", "--groups-matching", prefix + "-.*", "--phase", "kafka",
                                  expect=1)
    assert not rep["ok"] and all("no offset in kafka" in " ".join(g["problems"]) for g in rep["groups"])
    code, st, _ = zkmigrate_json(services, "status", "--group", names[0], expect=0)
    assert st["phase"]["phase"] == "zookeeper" and st["phase"]["by"] == "zkmigrate verify"
    # copy with no --backup-dir: the backups go to the state directory, not the current one
    state = tmp_path / "state"
    monkeypatch.setenv("ZKMIGRATE_STATE_DIR", str(state))
    monkeypatch.chdir(tmp_path)
    code, rep, _ = zkmigrate_json(services, "copy", "--group", names[0], "--group", names[1], "--execute", expect=0)
    assert [g["written"] for g in rep["groups"]] == [2, 2]
    assert len(os.listdir(state / "backups")) == 6 and not list(tmp_path.glob("backup-*"))  # 3 files a group
    # export without a group: every group, ExportZkOffsets lines
    code, out, _ = zkmigrate(services, "export", expect=0)
    lines = set(out.splitlines())
    for n in names:
        assert {"/consumers/%s/offsets/%s/%d:4" % (n, t, p) for p in range(2)} <= lines
    # describe of several groups, --topic filter, offsets from where the group keeps them
    code, out, _ = run_cli(zkcli, ["groups", "describe", "--group", names[0], "--group", names[2], "--topic", t,
                                   "--json", "--zookeeper", services.zookeeper_connect], expect=0)
    rows = json.loads(out)
    assert {r["group"] for r in rows} == {names[0], names[2]} and {r["current_offset"] for r in rows} == {4}


def test_kazoo_reconnect_noise_is_one_line():
    from zkconsumer.cli.common import _KazooReconnectFilter
    filt = _KazooReconnectFilter()
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.WARNING)
    try:
        def rec(msg, level=logging.WARNING):
            return logging.LogRecord("kazoo.client", level, __file__, 1, msg, None, None)
        shown = [r.getMessage() for r in (rec("Connection dropped: socket connection broken"),
                                          rec("Transition to CONNECTING"),
                                          rec("Connecting to 127.0.0.1(127.0.0.1):2181, use_ssl: False", 20),
                                          rec("Connection dropped: socket connection error: refused"),
                                          rec("Connection time-out: timed out"),
                                          rec("Zookeeper connection established, state: CONNECTED", 20),
                                          rec("Zookeeper connection established, state: CONNECTED", 20))
                 if filt.filter(r)]
    finally:
        root.setLevel(old)
    assert shown == ["ZooKeeper connection lost (Connection dropped: socket connection broken); reconnecting",
                     "ZooKeeper connection re-established"]


def test_fleet_commands_skip_owner_and_offset_nodes_no_topic_can_have(services, zk, unique):
    # pykafka's balanced consumer on Python 3 names its owner nodes b'topic': every-group commands go on
    t = services.create_topic(unique("junk"), 1)
    services.produce(t, 3)
    g = unique("pykafka-junk")
    zk.create("/consumers/%s/owners/b'%s'/0" % (g, t), b"x", makepath=True)
    zk.create("/consumers/%s/offsets/b'%s'/0" % (g, t), b"3", makepath=True)
    zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"2", makepath=True)
    # and a live member whose static subscription names no topic (Kafka reads an unknown pattern kind as static)
    zk.create("/consumers/%s/ids/%s_odd" % (g, g), json.dumps({"version": 1, "subscription": {"x.*": 1},
                                                                "pattern": "whitelist", "timestamp": "1"}).encode(),
              ephemeral=True, makepath=True)
    code, out, err = zkmigrate(services, "export", expect=0)
    assert "/consumers/%s/offsets/%s/0:2" % (g, t) in out.splitlines() and "b'" not in out
    code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", expect=0)
    code, out, _ = run_cli(zkcli, ["groups", "describe", "--group", g, "--json", "--zookeeper",
                                   services.zookeeper_connect], expect=0)
    assert [(r["topic"], r["current_offset"]) for r in json.loads(out) if r["topic"]] == [(t, 2)]
