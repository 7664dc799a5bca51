"""Helpers shared by the migration tests: consumer processes, CLI runs, offset sampling, a cluster with ACLs."""
import json
import os
import subprocess
import sys
import threading
import time

from click.testing import CliRunner
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourceType)

from tests.support import ROOT
from tests.support.chaos_support import OwnCluster
from tests.support.waiting import end_process
from zkconsumer.local.security import BrokerSecurity

FAST = ["rebalance.backoff.ms=300", "auto.commit.interval.ms=200", "auto.offset.reset=smallest",
        "zookeeper.session.timeout.ms=6000"]
DUAL = ["offsets.storage=kafka", "dual.commit.enabled=true"]
KAFKA = ["offsets.storage=kafka", "dual.commit.enabled=false"]
ZOOKEEPER = ["offsets.storage=zookeeper"]


class ConsumerProc:
    """``python -m zkconsumer consume`` as a child process; stdout (jsonl) and stderr go to files."""

    def __init__(self, tmpdir, name, zookeeper, group, topic, props=(), events=True):
        self.out_path = os.path.join(str(tmpdir), name + ".out")
        self.err_path = os.path.join(str(tmpdir), name + ".err")
        argv = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", zookeeper, "--group", group,
                "--topic", topic]
        for p in list(FAST) + list(props):
            argv += ["--property", p]
        if events:
            argv.append("--events")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        with open(self.out_path, "ab") as out, open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)

    def seen_list(self):
        """[(partition, offset)] in print order, repeats kept."""
        out = []
        try:
            with open(self.out_path) as f:
                for line in f:
                    if line.endswith("\n"):
                        m = json.loads(line)
                        out.append((m["partition"], m["offset"]))
        except FileNotFoundError:
            pass
        return out

    def seen(self):
        return set(self.seen_list())

    def stderr(self):
        try:
            with open(self.err_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=30):
        return end_process(self.proc, timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def delete_topic(services, zk, topic):
    """Delete *topic* (DeleteTopics) and wait until the brokers have removed it from ZooKeeper."""
    from kafka import KafkaAdminClient
    from zkconsumer.core.layout import paths
    admin = KafkaAdminClient(bootstrap_servers=services.bootstrap_servers)
    try:
        admin.delete_topics([topic], timeout_ms=30000)
    finally:
        admin.close()
    deadline = time.monotonic() + 60
    while zk.exists(paths.topic_path(topic)) or zk.exists(paths.delete_topic_path(topic)):
        assert time.monotonic() < deadline, "topic %s was not deleted within 60 s" % topic
        time.sleep(0.2)


def run_cli(cli, args, expect=None):
    """Run a click command in-process; returns (exit_code, stdout, stderr)."""
    runner = CliRunner()
    try:
        res = runner.invoke(cli, list(args), catch_exceptions=False)
        err = res.stderr
    except ValueError:
        res = runner.invoke(cli, list(args), catch_exceptions=False)
        err = ""
    if expect is not None:
        assert res.exit_code == expect, "exit %s != %s for %s\nstdout: %s\nstderr: %s" % (
            res.exit_code, expect, args, res.stdout, err)
    return res.exit_code, res.stdout, err


def zkmigrate(services, *args, expect=None):
    from zkconsumer_migrate.cli import cli
    return run_cli(cli, list(args) + ["--zookeeper", services.zookeeper_connect, "--bootstrap-server",
                                      services.bootstrap_servers], expect)


def zkmigrate_json(services, *args, expect=None):
    code, out, err = zkmigrate(services, *args, "--json", expect=expect)
    return code, json.loads(out), err


def kafka_commit(services, g, offsets):
    """Commit *offsets* (``{tp: offset}``) to Kafka for group *g* (empty metadata, as a consumer commits)."""
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        ks.commit(offsets).raise_for_errors()
    finally:
        ks.close()


def kafka_fetch(services, g, partitions):
    """Group *g*'s Kafka offsets of *partitions* (``{tp: offset}``, absent when none)."""
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        return ks.fetch(partitions)
    finally:
        ks.close()


class Producer(threading.Thread):
    """Produces continuously, recording every acknowledged (partition, offset)."""

    def __init__(self, bootstrap, topic, rate=100):
        super().__init__(daemon=True)
        from kafka import KafkaProducer
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1, enable_idempotence=False)
        self.topic, self.rate = topic, rate
        self.acked = set()
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.errors = []
        self.n = 0

    def run(self):
        try:
            while not self.stop_event.is_set():
                futs = []
                for _ in range(max(1, self.rate // 10)):
                    self.n += 1
                    futs.append(self.producer.send(self.topic, key=b"k%d" % (self.n % 12),
                                                   value=b'{"seq":%d}' % self.n))
                self.producer.flush(30)
                with self.lock:
                    for f in futs:
                        md = f.get(10)
                        self.acked.add((md.partition, md.offset))
                self.stop_event.wait(0.1)
        except Exception as e:  # reported by the test
            self.errors.append(e)

    def snapshot(self):
        with self.lock:
            return set(self.acked)

    def stop(self):
        self.stop_event.set()
        self.join(30)
        self.producer.close()


class OffsetSampler(threading.Thread):
    """Samples both stores repeatedly; records every committed offset that went backwards."""

    def __init__(self, zookeeper, bootstrap, group, partitions, interval=0.2):
        super().__init__(daemon=True)
        from zkconsumer.zookeeper import client as zkmod
        from zkconsumer.offsets import ZooKeeperOffsetStore
        from zkconsumer.offsets.kafka import KafkaOffsetStore
        self.zkmod = zkmod
        self.zk = zkmod.connect(zookeeper)
        self.stores = {"zookeeper": ZooKeeperOffsetStore(self.zk, group),
                       "kafka": KafkaOffsetStore(bootstrap, group)}
        self.partitions = partitions
        self.interval = interval
        self.high = {}
        self.backwards = []
        self.samples = 0
        self.errors = []
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            for name, store in self.stores.items():
                try:
                    got = store.fetch(self.partitions)
                except Exception as e:
                    self.errors.append(e)
                    continue
                for tp, off in got.items():
                    prev = self.high.get((name, tp))
                    if prev is not None and off < prev:
                        self.backwards.append((name, tp, prev, off))
                    self.high[(name, tp)] = max(off, prev or 0)
            self.samples += 1
            self.stop_event.wait(self.interval)

    def stop(self):
        self.stop_event.set()
        self.join(30)
        self.stores["kafka"].close()
        self.zkmod.close(self.zk)


# --- an operator whose Kafka identity is limited by ACLs (AclAuthorizer) -----------------------------------------
OPS, OPS_PW = "ops", "ops-Pl4in-pw"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _acl(rtype, name, op, perm=ACLPermissionType.ALLOW, pattern=ACLResourcePatternType.LITERAL):
    return ACL("User:%s" % OPS, "*", op, perm, ResourcePattern(rtype, name, pattern))


def acl_cluster(directory, deny_offsets_read=True, broker_config=None):
    """A cluster with AclAuthorizer where `ops` may do anything except touch the topics secret-* (and, with
    *deny_offsets_read*, read __consumer_offsets); ``.ops_config`` is its --kafka-config file, ``.ops_acls`` the
    ACLs made for `ops` (*broker_config*: more broker settings)."""
    cluster = OwnCluster(str(directory / "cluster"), security=BrokerSecurity(listeners=("SASL_PLAINTEXT",),
                                                                             plain_users={OPS: OPS_PW}),
                         broker_config=dict({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                             "super.users": "User:ANONYMOUS"},  # PLAINTEXT: the brokers and the test
                                            **(broker_config or {})))
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            acls = [_acl(ResourceType.GROUP, "*", ACLOperation.ALL),
                    _acl(ResourceType.TOPIC, "*", ACLOperation.ALL),
                    _acl(ResourceType.TOPIC, "secret-", ACLOperation.ALL, ACLPermissionType.DENY,
                         ACLResourcePatternType.PREFIXED),
                    _acl(ResourceType.CLUSTER, "kafka-cluster", ACLOperation.DESCRIBE_CONFIGS)]
            if deny_offsets_read:
                acls.append(_acl(ResourceType.TOPIC, "__consumer_offsets", ACLOperation.READ, ACLPermissionType.DENY))
            res = admin.create_acls(acls)
            assert not res["failed"], res
            cluster.ops_acls = acls
        finally:
            admin.close()
        cfg = directory / "ops.properties"
        cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=%s required "
                       "username=\"%s\" password=\"%s\";\n" % (PLAIN, OPS, OPS_PW))
        cluster.ops_config = str(cfg)
    except BaseException:
        cluster.down()
        raise
    return cluster


def ops(acl, *args, expect=None):
    """zkmigrate as the operator (brokers found in ZooKeeper, their SASL_PLAINTEXT endpoint)."""
    from zkconsumer_migrate.cli import cli
    code, out, err = run_cli(cli, list(args) + ["--json", "--kafka-config", acl.ops_config, "--zookeeper",
                                                acl.zookeeper_connect], expect)
    return code, json.loads(out), err
