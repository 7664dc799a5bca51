"""Every command the docs tell a user to run is run by a test. This file runs docs/operators.md's, spark.md's and
contributors.md's commands and the runbooks' inline ones against the session's ZooKeeper and Apache Kafka 3.9 (the
example hosts, groups and topics replaced by the test's; a consume bounded by ``--max-messages``; an exporter
``--once``), and :data:`WHERE` says, for every command of README.md and docs/*.md, which test runs it or why none
does: a command added to the docs without a test fails ``test_every_documented_command_is_accounted_for``.
(test_docs_commands.py checks that each of them parses; test_readme.py runs the README's, test_walkthrough.py the
migration walk-through's.)"""
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.consumer_helpers import CliConsumer, produce_tracked, wait_for_assignment
from tests.support.docs_commands import documented_commands, resolve
from tests.support.waiting import wait_until

BIN = os.path.dirname(sys.executable)

HERE = "tests/docs/test_docs_commands_run.py"
RUNBOOKS = "tests/docs/test_migrate_runbooks.py (migration.md's rollback runbooks, run as written)"
WALKTHROUGH = "tests/docs/test_walkthrough.py (.ci/walkthrough)"
README = "tests/docs/test_readme.py"
NAME = "names a command, runs nothing"
FRAGMENT = "part of a command (no group, topic or value given); the command itself is run elsewhere"

# every command the docs print (as test_docs_commands normalises it: [optional parts] dropped, a|b read as a)
WHERE = {
    # README.md
    "zkconsumer consume --zookeeper zk1:2181/kafka --topic orders": README,
    "zkconsumer consume --zookeeper zk1:2181/kafka --from-group orders-app --topic orders": README,
    "zkconsumer groups describe --zookeeper zk1:2181/kafka --group orders-app": README,
    "zkmigrate status --zookeeper zk1:2181/kafka --group orders-app": README,
    "zkmigrate plan --zookeeper zk1:2181/kafka --group orders-app --to kafka": README,
    "zkconsumer exporter --zookeeper zk1:2181/kafka --all-groups --port 9308": README,
    "zkconsumer consume --zookeeper zk1:2181/kafka --group orders-app --topic orders": README,
    # docs/migration.md: the walk-through
    "zkconsumer local up": HERE + " (idempotent on the test cluster); " + WALKTHROUGH,
    "zkconsumer local create-topic orders --partitions 3": WALKTHROUGH,
    "zkconsumer local produce orders --count 300": WALKTHROUGH,
    "zkconsumer consume --group orders-app --topic orders --consumer-property auto.commit.interval.ms=1000 "
    "--consumer-property offsets.storage=zookeeper": WALKTHROUGH,
    "zkmigrate plan --group orders-app --to kafka": WALKTHROUGH,
    "zkmigrate verify --group orders-app --phase zookeeper": WALKTHROUGH,
    "zkconsumer consume --group orders-app --topic orders --consumer-property auto.commit.interval.ms=1000 "
    "--consumer-property offsets.storage=kafka --consumer-property dual.commit.enabled=true": WALKTHROUGH,
    "zkconsumer local produce orders --count 30": WALKTHROUGH,
    "zkmigrate verify --group orders-app --phase dual --to kafka": WALKTHROUGH,
    "zkconsumer consume --group orders-app --topic orders --consumer-property auto.commit.interval.ms=1000 "
    "--consumer-property offsets.storage=kafka --consumer-property dual.commit.enabled=false": WALKTHROUGH,
    "zkmigrate verify --group orders-app --phase kafka": WALKTHROUGH,
    "zkmigrate status --group orders-app": WALKTHROUGH,
    "zkconsumer groups describe --group orders-app": WALKTHROUGH,
    "zkmigrate plan --group orders-app --to zookeeper": WALKTHROUGH,
    "zkmigrate verify --group orders-app --phase dual --to zookeeper": WALKTHROUGH,
    "zkmigrate export --group orders-app --store zookeeper --output orders-app.txt": WALKTHROUGH,
    "zkmigrate reset-offsets --group orders-app --topic orders:0 --shift-by -10": WALKTHROUGH,
    "zkmigrate cutover --group orders-app --execute": WALKTHROUGH,
    # docs/migration.md: the rollback runbooks
    "zkconsumer consume --group orders-app --topic orders --consumer-property offsets.storage=zookeeper": RUNBOOKS,
    "zkconsumer consume --group orders-app --topic orders --consumer-property offsets.storage=kafka "
    "--consumer-property dual.commit.enabled=true": RUNBOOKS,
    "zkconsumer groups verify --group orders-app": RUNBOOKS,
    "zkmigrate rollback --group orders-app": RUNBOOKS,
    "zkmigrate rollback --group orders-app --execute": RUNBOOKS,
    # docs/migration.md: in the text
    "zkmigrate restore BACKUP": "tests/migrate/test_migrate_restore.py (the manifest a command's backup wrote)",
    "zkmigrate restore BACKUP --execute": "tests/migrate/test_migrate_restore.py (the manifest a command's backup "
                                          "wrote); " + RUNBOOKS + " (the cutover's)",
    "zkmigrate refresh --execute --every SECONDS": FRAGMENT + " (tests/migrate/test_migrate_outages.py runs "
                                                              "refresh --every)",
    "zkmigrate verify --groups-matching 'orders-.*' --phase dual --to kafka --parallel 8": HERE,
    "zkmigrate cutover --group G --execute --timeout 900": HERE,
    "zkmigrate copy --group G --allow-rewind --execute": "tests/migrate/test_migrate_fence.py::test_cutover_is_not_ready_"
    "when_the_broker_coordinated_consumers_started_first (the command cutover's refusal prints, run as printed)",
    "zkmigrate copy --group G --execute": "tests/migrate/test_migrate_fence.py::test_fences_are_not_moved_over_"
    "partitions_the_backup_does_not_cover (the copy a refused restore prints, run as printed)",
    "zkmigrate copy --group G --allow-stale --execute": "tests/migrate/test_migrate_fence.py::test_a_rollback_keeps_a_"
    "zookeeper_offset_ahead_only_when_written_after_kafkas_last_commit (the way a skipped rewind prints to keep "
    "ZooKeeper's, run as printed)",
    "zkmigrate rollback --group G --execute": HERE,
    "zkconsumer groups verify --group G": HERE,
    "zkconsumer local up --broker kraft --kafka4": "not run here: it starts an Apache Kafka 4.1 KRaft node beside the "
                                                   "test cluster; tests/interop/test_kip848.py starts that node "
                                                   "(LocalCluster.up(broker='kraft', kafka4=True))",
    "zkmigrate reset-offsets --group G --topic T:P --store kafka --to-earliest": HERE,
    "zkmigrate forget-topic --topic T": FRAGMENT + " (tests/migrate/test_migrate_leftovers.py runs forget-topic)",
    "zkmigrate plan --to kafka": FRAGMENT,
    "zkmigrate verify --phase zookeeper|dual": FRAGMENT,
    "zkconsumer groups delete --execute": FRAGMENT,
    "zkmigrate refresh --execute": FRAGMENT,
    "zkmigrate rollback --execute": FRAGMENT,
    "zkmigrate cutover --execute": FRAGMENT,
    # docs/operators.md: blocks
    "zkconsumer consume --topic orders": HERE,
    "zkconsumer consume --from-group orders-app --topic orders": HERE,
    "zkconsumer consume --group orders-app --topic orders": HERE,
    "zkconsumer consume --group mirror --whitelist 'orders-.*'": HERE,
    "zkconsumer consume --topic orders --property print.key=true --property print.timestamp=true": HERE,
    "zkconsumer exporter --zookeeper zk1:2181/kafka --all-groups --port 9309": HERE,
    "zkconsumer exporter --zookeeper zk1:2181/kafka --group orders-app --once --json": HERE,
    "zkconsumer local fetch": HERE,
    "zkconsumer local status": HERE,
    "zkconsumer local create-topic orders --partitions 12": HERE,
    "zkconsumer local create-topic orders --add-partitions 4": HERE,
    "zkconsumer local produce orders --count 1000 --size 100": HERE,
    "zkconsumer tree /brokers": HERE,
    "zkconsumer local stop zookeeper-leader --kill": "not run here (it would kill the test cluster's only ZooKeeper): "
                                                     "tests/local/test_local_cluster.py runs it with --dir on a "
                                                     "3-server ensemble of its own",
    "zkconsumer local start zookeeper-2": "not run here (the test cluster has one ZooKeeper server): "
                                          "tests/local/test_local_cluster.py runs it with --dir on a 3-server ensemble",
    "zkconsumer local down": "not run here (it would stop the test cluster): tests/local/test_local_cluster.py runs "
                             "'zkconsumer local down --dir DIR' on clusters of its own",
    # docs/operators.md: in the text (the runbooks and the rest)
    "zkconsumer groups describe --group G": HERE,
    "zkconsumer consume --from-group G --topic T": HERE,
    "zkconsumer groups owners --group G": HERE,
    "zkconsumer tree /consumers/G/owners": HERE,
    "zkmigrate refresh --group G --execute": HERE,
    "zkmigrate status --group G": HERE,
    "zkconsumer consume --property sasl.jaas.config=": HERE + " (refused, exit 2)",
    "zkconsumer --log-level info consume --zookeeper zookeeper:2181 --group demo --topic orders --format jsonl":
        HERE + " (docker-compose.yml's consumer; the compose file itself: tests/local/test_compose.py)",
    "zkconsumer local fetch --kafka4": HERE,
    "zkconsumer registry sync --zookeeper ZK --bootstrap-server KAFKA":
        "tests/tools/test_registry_mirror.py (under a chroot, against the test broker)",
    "zkconsumer consume --metrics-port 9308": FRAGMENT + " (tests/metrics/test_metrics.py serves and scrapes it)",
    "zkconsumer consume --max-messages N": FRAGMENT,
    "zkconsumer consume --config consumer.properties": FRAGMENT,
    "zkconsumer local produce --one-per-batch": FRAGMENT,
    # docs/contributors.md
    "zkconsumer local up --broker kafka": HERE + " (idempotent on the test cluster)",
}
NOT_ZKCONSUMER = {
    "python -c 'from zkconsumer.core.config import describe_keys ...' (operators.md)": HERE,
    "docker compose up --build / --scale consumer=3 (operators.md)": "not run: no Docker engine on the machines "
                                                                      "the tests run on; tests/local/test_compose.py "
                                                                      "checks the file (and runs 'docker compose "
                                                                      "config' where a client is)",
}


def _key(command):
    return " ".join(command.split())


def test_every_documented_command_is_accounted_for():
    commands = documented_commands()
    documented = {_key(c) for _, c, _ in commands}
    blocks = {_key(c) for _, c, whole in commands if whole}
    # a command named in the text without options or arguments (`zkmigrate copy`) names it, runs nothing
    names = {c for c in documented - blocks if not resolve(shlex.split(c))[1]}
    missing = sorted(documented - names - set(WHERE))
    assert not missing, "commands the docs print that no test runs (run them, or say in WHERE why not): %s" % missing
    stale = sorted(set(WHERE) - documented)
    assert not stale, "WHERE names commands the docs no longer print: %s" % stale


def _env(services):
    env = dict(os.environ, ZK_CONNECT=services.zookeeper_connect, KAFKA_BOOTSTRAP=services.bootstrap_servers,
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    if services.cluster is not None:
        env["ZKCONSUMER_LOCAL_DIR"] = services.cluster.dir
    return env


def _run(services, command, subs=(), extra=(), expect=0):
    """Run a documented command (it must be one of WHERE's HERE entries) with *subs* applied to its words."""
    assert WHERE.get(_key(command), "").startswith(HERE), command
    argv = shlex.split(command)
    for old, new in subs:
        argv = [re.sub(old, new, a) for a in argv]
    argv = [os.path.join(BIN, argv[0])] + argv[1:] + [str(x) for x in extra]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=_env(services),
                       stdin=subprocess.DEVNULL)
    assert p.returncode == expect, (command, argv, p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def test_operators_consume_commands(services, unique, zk):
    t = services.create_topic(unique("docs-orders"), 2)
    produce_tracked(services.bootstrap_servers, t, 6, partitions=2)
    g, mirror = unique("docs-app"), unique("docs-mirror")
    for p in (0, 1):  # the production group, committed at the start of the topic
        zk.create("/consumers/%s/offsets/%s/%d" % (g, t, p), b"0", makepath=True)
    subs = [(r"^orders-app$", g), (r"^mirror$", mirror), (r"^orders-\.\*$", re.escape(t[:-4]) + ".*"),
            (r"^orders$", t)]
    bounded = ["--max-messages", "6", "--from-beginning"]
    for command in ("zkconsumer consume --topic orders", "zkconsumer consume --from-group orders-app --topic orders",
                    "zkconsumer consume --group orders-app --topic orders",
                    "zkconsumer consume --group mirror --whitelist 'orders-.*'"):
        out = _run(services, command, subs, bounded).stdout.splitlines()
        assert len(out) == 6 and all('"topic": "%s"' % t in x or '"topic":"%s"' % t in x for x in out), (command, out)
    out = _run(services, "zkconsumer consume --topic orders --property print.key=true --property "
                         "print.timestamp=true", subs, bounded).stdout.splitlines()
    assert len(out) == 6 and all(x.startswith("CreateTime:") for x in out), out
    out = _run(services, "zkconsumer --log-level info consume --zookeeper zookeeper:2181 --group demo --topic "
                         "orders --format jsonl", subs + [(r"^zookeeper:2181$", services.zookeeper_connect),
                                                          (r"^demo$", unique("docs-demo"))], bounded)
    assert len(out.stdout.splitlines()) == 6 and "INFO" in out.stderr
    p = _run(services, "zkconsumer consume --property sasl.jaas.config=", [(r"=$", "=x")], ["--topic", t], expect=2)
    assert "sasl.jaas.config holds a password" in p.stderr, p.stderr


def test_operators_exporter_commands(services, unique, zk):
    t = services.create_topic(unique("docs-exp"), 1)
    g = unique("docs-exp-g")
    zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"0", makepath=True)
    subs = [(r"^zk1:2181/kafka$", services.zookeeper_connect), (r"^orders-app$", g)]
    page = _run(services, "zkconsumer exporter --zookeeper zk1:2181/kafka --all-groups --port 9309", subs,
                ["--once"]).stdout
    assert 'kafka_consumergroup_group_lag{' in page and g in page
    doc = _run(services, "zkconsumer exporter --zookeeper zk1:2181/kafka --group orders-app --once --json", subs)
    assert '"%s:0": 0' % t in doc.stdout


def test_operators_local_commands(services, unique):
    if services.cluster is None:
        pytest.fail("the local commands need the embedded test cluster", pytrace=False)
    t = unique("docs-local")
    subs = [(r"^orders$", t)]
    _run(services, "zkconsumer local fetch")
    _run(services, "zkconsumer local fetch --kafka4")
    assert "already running" in _run(services, "zkconsumer local up").stderr
    _run(services, "zkconsumer local up --broker kafka")
    _run(services, "zkconsumer local status")
    _run(services, "zkconsumer local create-topic orders --partitions 12", subs)
    assert "16" in _run(services, "zkconsumer local create-topic orders --add-partitions 4", subs).stdout
    assert "1000" in _run(services, "zkconsumer local produce orders --count 1000 --size 100", subs).stdout
    assert re.search(r"\n +%s +\{" % re.escape(t), _run(services, "zkconsumer tree /brokers").stdout)


def test_the_config_table_command(services):
    doc = open(os.path.join(ROOT, "docs", "operators.md")).read()
    snippet = re.search(r"```sh\n(python -c '.*?')\n```", doc, re.S).group(1)
    p = subprocess.run(["bash", "-c", snippet.replace("python ", shlex.quote(sys.executable) + " ", 1)],
                       capture_output=True, text=True, timeout=60, env=_env(services))
    assert p.returncode == 0, p.stderr
    rows = p.stdout.splitlines()
    assert len(rows) > 40 and all(row in doc for row in rows if "<group>_<host>" not in row)


def test_runbook_commands_on_a_live_group(services, unique, zk, procs):
    t = services.create_topic(unique("docs-rb"), 2)
    g = unique("docs-rb-g")
    produce_tracked(services.bootstrap_servers, t, 4, partitions=2)
    member = CliConsumer(services, g, [t], consumer_id="m1")
    procs.append(member)
    wait_for_assignment(zk, g, [t], 1, timeout=60)
    subs = [(r"^G$", g), (r"^T$", t), (r"^/consumers/G/owners$", "/consumers/%s/owners" % g)]
    assert g in _run(services, "zkconsumer groups describe --group G", subs).stdout
    _run(services, "zkconsumer groups verify --group G", subs)
    assert "m1" in _run(services, "zkconsumer groups owners --group G", subs).stdout
    assert t in _run(services, "zkconsumer tree /consumers/G/owners", subs).stdout
    _run(services, "zkmigrate status --group G", subs)
    wait_until(lambda: all(zk.exists("/consumers/%s/offsets/%s/%d" % (g, t, p)) and
                           zk.get("/consumers/%s/offsets/%s/%d" % (g, t, p))[0] == b"2" for p in (0, 1)), 60,
               message="the member's commits")
    member.kill()
    # from the offsets the member committed: the group's stream from there on, read-only
    produce_tracked(services.bootstrap_servers, t, 2, partitions=2)
    out = _run(services, "zkconsumer consume --from-group G --topic T", subs, ["--max-messages", "2"]).stdout
    assert len(out.splitlines()) == 2


def test_migration_commands_in_the_text(services, unique, zk):
    """verify over a fleet by regex, a reset of one partition in Kafka, cutover with a timeout, rollback and refresh,
    each on stopped groups."""
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    t = services.create_topic(unique("docs-mig"), 1)
    prefix = unique("docs-fleet")
    produce_tracked(services.bootstrap_servers, t, 5, partitions=1)
    groups = [prefix + "-a", prefix + "-b"]
    for g in groups:  # dual: both stores at the same offset
        zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"3", makepath=True)
        store = KafkaOffsetStore(services.bootstrap_servers, g)
        try:
            store.commit({(t, 0): 3}).raise_for_errors()
        finally:
            store.close()
    p = _run(services, "zkmigrate verify --groups-matching 'orders-.*' --phase dual --to kafka --parallel 8",
             [(r"^orders-\.\*$", re.escape(prefix) + "-.*")])
    assert "2 group(s)" in p.stdout, p.stdout
    p = _run(services, "zkmigrate reset-offsets --group G --topic T:P --store kafka --to-earliest",
             [(r"^G$", groups[1]), (r"^T:P$", t + ":0")])
    assert "dry run" in p.stdout and " 3 " in p.stdout and " 0 " in p.stdout, p.stdout
    g = groups[0]
    assert "READY" in _run(services, "zkmigrate cutover --group G --execute --timeout 900", [(r"^G$", g)]).stdout
    _run(services, "zkmigrate rollback --group G --execute", [(r"^G$", g)])
    assert "refreshed 1" in _run(services, "zkmigrate refresh --group G --execute", [(r"^G$", groups[1])]).stdout
