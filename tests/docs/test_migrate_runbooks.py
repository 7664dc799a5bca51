"""docs/migration.md's rollback runbooks, run as written (test_readme.py's style): each ```sh block of "Rolling
back: a runbook per phase" runs against the session's ZooKeeper + Apache Kafka on a group brought into that phase by
real members with the default settings (auto.commit.interval.ms=60000, auto.offset.reset=largest). Every command
must exit 0; `zkconsumer consume ... &` restarts the member with those settings (SIGTERM to the running one first,
then wait until the new one owns every partition), `kill -TERM $MEMBER` stops it. Afterwards every produced message
was delivered, ZooKeeper holds the log end, the recorded phase is zookeeper, and no committed offset of either store
moved backwards while the runbook ran (sampled every 0.2 s)."""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

from kafka import KafkaConsumer

from tests.support import ROOT
from tests.support.consumer_helpers import produce_tracked
from tests.support.migrate_support import OffsetSampler, zkmigrate
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths
from zkconsumer.offsets import ZooKeeperOffsetStore

DOC = open(os.path.join(ROOT, "docs", "migration.md")).read()
BIN = os.path.dirname(sys.executable)
PARTITIONS = 3
DUAL = ["--consumer-property", "offsets.storage=kafka", "--consumer-property", "dual.commit.enabled=true"]
KAFKA = ["--consumer-property", "offsets.storage=kafka", "--consumer-property", "dual.commit.enabled=false"]
ZOOKEEPER = ["--consumer-property", "offsets.storage=zookeeper"]


def runbook(heading, index=0):
    """The commands of the index-th ```sh block under '### heading' of the runbooks section."""
    section = DOC.split("## Rolling back: a runbook per phase", 1)[1]
    part = section.split("### " + heading + "\n", 1)[1].split("\n### ", 1)[0]
    block = re.findall(r"```sh\n(.*?)```", part, re.S)[index]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


class Run:
    """One group on one topic, its members (one at a time, as `zkconsumer consume` processes) and what they saw."""

    def __init__(self, services, unique, tmp_path):
        self.services, self.tmp = services, tmp_path
        self.topic = services.create_topic(unique("rb"), PARTITIONS)
        self.group = unique("rb-g")
        self.env = dict(os.environ, ZK_CONNECT=services.zookeeper_connect,
                        ZKCONSUMER_LOCAL_DIR=str(tmp_path / "no-local-cluster"),
                        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
        self.env.pop("KAFKA_BOOTSTRAP", None)
        self.member, self.outputs, self.produced = None, [], set()
        self.backup = None  # what BACKUP stands for in a runbook
        self.kafka_seen = set()  # delivered to broker-coordinated consumers
        self.parts = [(self.topic, p) for p in range(PARTITIONS)]

    def produce(self, n):
        self.produced |= {(p, o) for p, o, _ in produce_tracked(self.services.bootstrap_servers, self.topic, n,
                                                                  partitions=PARTITIONS)}

    def seen(self):
        out = set(self.kafka_seen)
        for path in self.outputs:
            with open(path) as f:
                for line in f:
                    if line.endswith("\n"):
                        m = json.loads(line)
                        out.add((m["partition"], m["offset"]))
        return out

    def stop(self):
        if self.member is not None and self.member.poll() is None:
            self.member.send_signal(signal.SIGTERM)
            assert self.member.wait(60) == 0, open(self.outputs[-1] + ".err").read()[-2000:]
        self.member = None

    def start(self, argv):
        """A member with the given `zkconsumer consume` argv (after the restart of the one before)."""
        self.stop()
        out = str(self.tmp / ("member-%d.out" % len(self.outputs)))
        self.outputs.append(out)
        with open(out, "wb") as o, open(out + ".err", "wb") as e:
            self.member = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=self.env)
        wait_until(lambda: self.member.poll() is not None or subprocess.run(
            [os.path.join(BIN, "zkconsumer"), "groups", "verify", "--group", self.group], env=self.env,
            capture_output=True).returncode == 0, 90, interval=0.5, message="the member owning every partition")
        assert self.member.poll() is None, open(out + ".err").read()[-2000:]

    def consume(self, *props):
        self.start([os.path.join(BIN, "zkconsumer"), "consume", "--group", self.group, "--topic", self.topic]
                   + list(props))

    def caught_up(self):
        wait_until(lambda: self.produced <= self.seen(), 90, interval=0.5, message="every message delivered")

    def run(self, commands):
        """The runbook's commands, as written (the group and topic names substituted)."""
        ran = []
        for cmd in commands:
            cmd = cmd.replace("orders-app", self.group).replace("--topic orders", "--topic " + self.topic)
            if self.backup is not None:
                cmd = cmd.replace("BACKUP", shlex.quote(self.backup))
            if cmd.startswith("kill -TERM $MEMBER"):
                self.stop()
            elif cmd.endswith("&"):
                argv = shlex.split(cmd[:-1])
                self.start([os.path.join(BIN, argv[0])] + argv[1:])
            else:
                argv = shlex.split(cmd)
                p = subprocess.run([os.path.join(BIN, argv[0])] + argv[1:], env=self.env, capture_output=True,
                                   text=True, timeout=300, stdin=subprocess.DEVNULL)
                assert p.returncode == 0, (cmd, p.stdout[-2000:], p.stderr[-3000:])
                ran.append((cmd, p.stdout))
        return ran

    def check_end(self, zk):
        """More messages, every one delivered by the last member; ZooKeeper at the log end once it stopped."""
        self.produce(30)
        self.caught_up()
        self.stop()
        ends = {}
        for p, o in self.produced:
            ends[(self.topic, p)] = max(ends.get((self.topic, p), 0), o + 1)
        assert ZooKeeperOffsetStore(zk, self.group).fetch(self.parts) == ends
        phase = json.loads(zk.get(paths.group_migration_path(self.group))[0])
        assert phase["phase"] == "zookeeper", phase


def _sampled(run, commands):
    sampler = OffsetSampler(run.services.zookeeper_connect, run.services.bootstrap_servers, run.group, run.parts)
    sampler.start()
    try:
        return run.run(commands)
    finally:
        sampler.stop()
        assert sampler.backwards == [] and sampler.samples > 0, sampler.backwards


def _started_at_zero(run, zk):
    """The group exists with offset 0 everywhere (its members start at the beginning, auto.offset.reset unused)."""
    assert ZooKeeperOffsetStore(zk, run.group).commit({tp: 0 for tp in run.parts}).ok
    run.produce(60)


def test_rollback_from_the_dual_phase(services, zk, unique, tmp_path):
    run = Run(services, unique, tmp_path)
    try:
        _started_at_zero(run, zk)
        run.consume(*DUAL)  # the group in the dual phase: a restart made both stores commit
        run.caught_up()
        run.consume(*DUAL)
        run.produce(30)  # delivered, not committed yet
        run.caught_up()
        _sampled(run, runbook("From the dual phase"))
        run.check_end(zk)
    finally:
        run.stop()


def _in_the_kafka_phase(run, zk):
    """Through the dual phase into the Kafka-only one: ZooKeeper frozen where the dual member left it."""
    _started_at_zero(run, zk)
    run.consume(*DUAL)
    run.caught_up()
    run.consume(*KAFKA)
    run.produce(60)
    run.caught_up()


def test_rollback_from_the_kafka_phase_rolling(services, zk, unique, tmp_path):
    run = Run(services, unique, tmp_path)
    try:
        _in_the_kafka_phase(run, zk)
        run.consume(*KAFKA)
        run.produce(30)
        run.caught_up()
        assert ZooKeeperOffsetStore(zk, run.group).fetch(run.parts) != {}
        _sampled(run, runbook("From the Kafka-only phase", 0))
        run.check_end(zk)
    finally:
        run.stop()


def test_rollback_from_the_kafka_phase_stopped(services, zk, unique, tmp_path):
    run = Run(services, unique, tmp_path)
    try:
        _in_the_kafka_phase(run, zk)
        ran = _sampled(run, runbook("From the Kafka-only phase", 1))
        dry = [out for cmd, out in ran if cmd.endswith("rollback --group %s" % run.group)][0]
        assert "would write" in dry
        run.check_end(zk)
    finally:
        run.stop()


def _cut_over(run, zk):
    """A group on ZooKeeper storage, its members stopped, cut over: cutover's stderr."""
    _started_at_zero(run, zk)
    run.consume(*ZOOKEEPER)
    run.caught_up()
    run.stop()
    return zkmigrate(run.services, "cutover", "--group", run.group, "--execute", "--backup-dir", str(run.tmp),
                     expect=0)[2]


def test_rollback_after_cutover(services, zk, unique, tmp_path):
    run = Run(services, unique, tmp_path)
    try:
        _cut_over(run, zk)
        # the broker-coordinated consumers take over, consume, commit, and are stopped
        run.produce(30)
        kc = KafkaConsumer(run.topic, bootstrap_servers=services.bootstrap_servers, group_id=run.group,
                           enable_auto_commit=False, auto_offset_reset="none", session_timeout_ms=6000)
        try:
            deadline = time.monotonic() + 60
            while not run.produced <= run.seen() and time.monotonic() < deadline:
                for recs in kc.poll(500).values():
                    run.kafka_seen |= {(r.partition, r.offset) for r in recs}
            kc.commit()
        finally:
            kc.close(autocommit=False)
        assert run.produced <= run.seen()
        ran = _sampled(run, runbook("After cutover"))
        assert "state Empty" in ran[0][1], ran[0][1]
        run.check_end(zk)
    finally:
        run.stop()


def test_undoing_a_cutover_whose_new_consumers_never_started(services, zk, unique, tmp_path):
    """The second block of "After cutover": restore the backup the cutover printed, roll back (the fence goes),
    and the ZooKeeper members resume where they stopped."""
    run = Run(services, unique, tmp_path)
    try:
        err = _cut_over(run, zk)
        undo = [line for line in err.splitlines() if line.startswith("undo: zkmigrate restore ")]
        assert len(undo) == 1, err
        run.backup = shlex.split(undo[0])[3]
        _sampled(run, runbook("After cutover", 1))
        run.check_end(zk)
    finally:
        run.stop()


def test_undoing_a_cutover_of_a_group_that_came_back_from_the_dual_phase(services, zk, unique, tmp_path):
    """The walk-through's group: it went through the dual phase and back to ZooKeeper storage (Kafka keeps the
    offsets the dual phase left, behind ZooKeeper's), then was cut over, and the new consumers never started. The
    second block of "After cutover" (restore the backup the cutover printed, roll back) must lift the fence and let
    the ZooKeeper members resume where they stopped."""
    run = Run(services, unique, tmp_path)
    try:
        _started_at_zero(run, zk)
        run.consume(*DUAL)
        run.caught_up()
        # back on ZooKeeper storage ("From the dual phase"): Kafka keeps the dual phase's last offsets
        run.consume(*ZOOKEEPER)
        run.produce(30)
        run.caught_up()
        run.stop()
        from zkconsumer.offsets.kafka import KafkaOffsetStore
        ks = KafkaOffsetStore(services.bootstrap_servers, run.group)
        try:
            kafka_before = ks.fetch(run.parts)
        finally:
            ks.close()
        zk_before = ZooKeeperOffsetStore(zk, run.group).fetch(run.parts)
        assert kafka_before and all(kafka_before[tp] < zk_before[tp] for tp in run.parts), (kafka_before, zk_before)
        err = zkmigrate(run.services, "cutover", "--group", run.group, "--execute", "--backup-dir", str(run.tmp),
                        expect=0)[2]
        undo = [line for line in err.splitlines() if line.startswith("undo: zkmigrate restore ")]
        assert len(undo) == 1, err
        run.backup = shlex.split(undo[0])[3]
        # not sampled: the restore moves Kafka back to the offsets it had before the cutover, as it should
        run.run(runbook("After cutover", 1))
        assert ZooKeeperOffsetStore(zk, run.group).fetch(run.parts) == zk_before
        run.check_end(zk)
    finally:
        run.stop()
