"""An operator whose Kafka identity may not Describe one topic, on an Apache Kafka broker with an authorizer
(AclAuthorizer; the operator connects over SASL_PLAINTEXT as `ops`, the test's own clients over PLAINTEXT as the
super user): the groups that never used that topic are migrated as if it did not exist (zkmigrate asks Kafka only
about each group's own topics), a group with a leftover offset of it gets that partition reported, with the
broker's error and the way out, and the rest of the group done; without Read on __consumer_offsets the expiry check
says "unknown" instead of failing every group.

One test-owned cluster for the module (~35 s to start)."""
import json

import pytest
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourceType)

from chaos_support import OwnCluster
from consumer_helpers import produce_tracked
from test_migrate_support import run_cli
from zkconsumer import zk as zkmod
from zkconsumer.local.security import BrokerSecurity
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore

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


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    cluster = acl_cluster(tmp_path_factory.mktemp("acl"))
    try:
        yield cluster
    finally:
        cluster.down()


def ops(acl, *args, expect=None):
    """zkmigrate as the operator (brokers found in ZooKeeper, their SASL_PLAINTEXT endpoint)."""
    from zkconsumer_migrate.cli import cli
    code, out, err = run_cli(cli, list(args) + ["--json", "--kafka-config", acl.ops_config, "--zookeeper",
                                                acl.zookeeper_connect], expect)
    return code, json.loads(out), err


def by_group(rep):
    return {g["group"]: g for g in rep["groups"]}


def test_one_forbidden_topic_fails_only_its_partitions(acl, unique, tmp_path):
    opened = acl.create_topic(unique("open"), 2)
    secret = acl.create_topic(unique("secret"), 2)
    produce_tracked(acl.bootstrap_servers, opened, 40, partitions=2)
    produce_tracked(acl.bootstrap_servers, secret, 40, partitions=2)
    prefix = unique("acl")
    clean = ["%s-clean-%d" % (prefix, i) for i in range(3)]
    leftover = prefix + "-leftover"
    zk = zkmod.connect(acl.zookeeper_connect)
    try:  # stopped groups in the Kafka phase: frozen ZooKeeper offsets behind Kafka's
        for g in clean + [leftover]:
            ks = KafkaOffsetStore(acl.bootstrap_servers, g)
            try:
                offs = {(opened, 0): 10, (opened, 1): 12}
                if g == leftover:  # it used to read the secret topic too
                    offs.update({(secret, 0): 5, (secret, 1): 6})
                assert ZooKeeperOffsetStore(zk, g).commit({tp: o - 2 for tp, o in offs.items()}).ok
                assert ks.commit(offs).ok
            finally:
                ks.close()
    finally:
        zkmod.close(zk)
    sel = ["--groups-matching", prefix + "-.*"]

    code, rep, _ = ops(acl, "verify", *sel, "--phase", "kafka", "--settle", "0", expect=1)
    g = by_group(rep)
    for name in clean:  # the secret topic exists, but is none of these groups' business
        assert g[name]["ok"], g[name]
        # expiry: the operator may not read __consumer_offsets: unknown, said, not a failure
        assert g[name]["expiry"]["unknown"] and "Read on __consumer_offsets" in " ".join(g[name]["warnings"])
    bad = g[leftover]
    assert not bad["ok"] and set(bad["unreadable"]) == {"%s-0" % secret, "%s-1" % secret}, bad
    msg = [p for p in bad["problems"] if "%s-0" % secret in p]
    assert msg and "TopicAuthorizationFailed" in msg[0] and "Describe" in msg[0], bad["problems"]
    assert not any(opened in p for p in bad["problems"]), bad["problems"]  # its other partitions pass

    code, rep, _ = ops(acl, "refresh", *sel, "--execute", expect=1)
    g = by_group(rep)
    assert all(g[name]["ok"] and g[name]["refreshed"] == 2 for name in clean), rep
    assert g[leftover]["refreshed"] == 2 and set(g[leftover]["unreadable"]) == {"%s-0" % secret, "%s-1" % secret}
    assert all(g[name]["expires_at"] is None and g[name]["expiry_unknown"] for name in clean)

    code, rep, _ = ops(acl, "rollback", *sel, "--execute", "--backup-dir", str(tmp_path), expect=1)
    g = by_group(rep)
    assert all(g[name]["ok"] and g[name]["written"] == 2 for name in clean), rep
    assert g[leftover]["written"] == 2 and set(g[leftover]["unreadable"]) == {"%s-0" % secret, "%s-1" % secret}

    code, rep, _ = ops(acl, "export", *sel, "--store", "kafka", "--output", str(tmp_path / "k.txt"), expect=1)
    lines = (tmp_path / "k.txt").read_text().splitlines()
    assert len(lines) == 2 * 4 and not any(secret in line for line in lines)
    assert set(by_group(rep)[leftover]["unreadable"]) == {"%s-0" % secret, "%s-1" % secret}

    code, st, _ = ops(acl, "status", "--group", leftover, expect=0)
    assert any("%s-0" % secret in w and "TopicAuthorizationFailed" in w for w in st["warnings"]), st["warnings"]

    zk = zkmod.connect(acl.zookeeper_connect)
    try:  # what the rollback did: ZooKeeper caught up with Kafka where the operator may look, nothing else
        for name in clean:
            assert ZooKeeperOffsetStore(zk, name).fetch([(opened, 0), (opened, 1)]) == {(opened, 0): 10,
                                                                                        (opened, 1): 12}
        assert ZooKeeperOffsetStore(zk, leftover).fetch([(secret, 0), (secret, 1)]) == {(secret, 0): 3,
                                                                                        (secret, 1): 4}
    finally:
        zkmod.close(zk)
