"""Evidence zkmigrate cannot read, on Apache Kafka 3.9 with AclAuthorizer and ``offsets.retention.minutes=1`` (a
cluster of this module's own; the operator ``ops`` over SASL_PLAINTEXT, the test's own clients as the super user):

* without DescribeConfigs on the cluster, ``offsets.retention.minutes`` is unknown: the stale-offset checks take the
  shortest default (1 day, Kafka before 2.0: more ZooKeeper offsets count as old) and say so; the expiry reports
  (status, verify) say "unknown" and what right is missing instead of computing from a guess; the warning after a
  write gives the earliest expiry;
* without Read on ``__consumer_offsets``, a ZooKeeper offset older than the retention (no Kafka offset now, no
  phase record, commits of the group in ``__consumer_offsets``) may be frozen and nobody can tell: copy and cutover refuse it as not checked ("NOT ready: could not
  check"), naming the group, the partition and the ways out (the Read right, ``--allow-stale``), nothing written;
  once the right is granted the check runs and the cutover is ready; a restore that would delete Kafka offsets
  committed since its backup (whose commit time it cannot read) is refused the same way;
* a partition whose Kafka offset the broker does not give for another reason (UNKNOWN_TOPIC_OR_PARTITION,
  LEADER_NOT_AVAILABLE, no answer) is reported with its way out.

The rules alone (pure) first.
"""
import time

import pytest
from kafka.admin import KafkaAdminClient

from tests.support.consumer_helpers import produce_tracked
from tests.support.migrate_support import acl_cluster, ops
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.expiry import Retention
from zkconsumer.offsets.kafka import KafkaOffsetStore
from zkconsumer_migrate.stale import Evidence, to_kafka_refusals, to_zookeeper_refusals

DAY = 86400000


def test_an_unknown_retention_is_taken_as_the_shortest_for_the_rollback_rule():
    """A ZooKeeper offset 2 days old without a Kafka offset: kept by a rollback under a known 7-day retention,
    refused when the retention is unknown (taken as 1 day), the message saying it was assumed."""
    now = 1767225600000
    both = {("t", 0): (5, None)}
    ev = {("t", 0): Evidence(zk_mtime=now - 2 * DAY)}
    assert to_zookeeper_refusals("g", both, ev, None, Retention(7 * DAY), now_ms=now) == {}
    refused = to_zookeeper_refusals("g", both, ev, None, Retention(DAY, False, "no right"), now_ms=now)
    why = refused[("t", 0)]
    assert "group g, t-0:" in why and "offsets.retention.minutes unknown (no right), taken as 1440" in why, why
    assert "--allow-stale" in why and "reset-offsets --group g --topic t:0 --store zookeeper" in why, why


def test_a_partition_that_could_not_be_checked_is_refused_with_its_ways_out():
    both = {("t", 0): (5, None), ("t", 1): (7, None)}
    ev = {("t", 0): Evidence(log_end=3), ("t", 1): Evidence(log_end=30)}
    unchecked = {("t", 0): "not read", ("t", 1): "not read"}
    refused = to_kafka_refusals("g", {("t", 0): 5, ("t", 1): 7}, both, ev, None, unchecked)
    assert "beyond the log end 3" in refused[("t", 0)]  # the evidence that was read says more
    why = refused[("t", 1)]
    assert why.startswith("group g, t-1: not read. Ways out: grant this Kafka identity Read on topic "
                          "__consumer_offsets and run again"), why
    assert "--allow-stale to copy it anyway" in why and "--exclude-topic t" in why, why
    assert to_kafka_refusals("g", {("t", 1): 7}, both, ev, None) == {}


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    cluster = acl_cluster(tmp_path_factory.mktemp("unknown"), deny_offsets_read=True,
                          broker_config={"offsets.retention.minutes": 1})
    try:
        yield cluster
    finally:
        cluster.down()


def _ops_acl(own, resource_name, operation_name):
    [acl] = [a for a in own.ops_acls if a.resource_pattern.resource_name == resource_name
             and a.operation.name == operation_name]
    return acl


def _acls(own, create=(), delete=()):
    admin = KafkaAdminClient(bootstrap_servers=own.bootstrap_servers)
    try:
        if delete:
            admin.delete_acls(list(delete))
        if create:
            assert not admin.create_acls(list(create))["failed"]
    finally:
        admin.close()


def _kafka(own, g, parts, commit=None):
    ks = KafkaOffsetStore(own.bootstrap_servers, g)
    try:
        if commit:
            assert ks.commit(commit).ok
        return ks.fetch(parts)
    finally:
        ks.close()


@pytest.mark.live
def test_evidence_that_cannot_be_read(own, unique, tmp_path):
    from zkconsumer_migrate import state
    t = own.create_topic(unique("ue"), 2)
    produce_tracked(own.bootstrap_servers, t, 40, partitions=2)
    parts = [(t, 0), (t, 1)]
    names = ["%s-0" % t, "%s-1" % t]
    old, young, kafka_phase, kept = (unique(n) for n in ("ue-old", "ue-young", "ue-kafka", "ue-kept"))
    zk = zkmod.connect(own.zookeeper_connect)
    try:
        # a group that committed to Kafka once (2), went on in ZooKeeper (3), and whose Kafka offsets the broker
        # removed since: its partition of __consumer_offsets holds the removed commits
        _kafka(own, old, parts, {tp: 2 for tp in parts})
        ks = KafkaOffsetStore(own.bootstrap_servers, old)
        try:
            assert set(ks.delete_offsets(parts).committed) == set(parts)
        finally:
            ks.close()
        ZooKeeperOffsetStore(zk, old).commit({tp: 3 for tp in parts}).raise_for_errors()
        written = time.time()

        # 1. no DescribeConfigs: offsets.retention.minutes is unknown, and every command says so
        describe_configs = _ops_acl(own, "kafka-cluster", "DESCRIBE_CONFIGS")
        _acls(own, delete=[describe_configs])
        for g in (young, kept):
            ZooKeeperOffsetStore(zk, g).commit({tp: 4 for tp in parts}).raise_for_errors()
        ZooKeeperOffsetStore(zk, kafka_phase).commit({tp: 5 for tp in parts}).raise_for_errors()
        _kafka(own, kafka_phase, parts, {tp: 6 for tp in parts})

        def copy_dry_run():
            code, out, _ = ops(own, "copy", "--group", young, expect=0)
            return out if any("offsets.retention.minutes unknown" in w for w in out["warnings"]) else None
        out = wait_until(copy_dry_run, 60, message="the DescribeConfigs right to be gone")
        [note] = [w for w in out["warnings"] if "offsets.retention.minutes unknown" in w]
        assert "taken as 1440" in note and "DescribeConfigs" in note, note
        code, rb, _ = ops(own, "rollback", "--group", kept, expect=0)
        assert any("taken as 1440" in w for w in rb["warnings"]), rb["warnings"]
        code, cp, _ = ops(own, "copy", "--group", young, "--execute", "--backup-dir", str(tmp_path), expect=0)
        assert cp["written"] == 2 and any("at the earliest" in w and "taken as 1440" in w for w in cp["warnings"])
        [young_backup] = [p for p in cp["backup"] if p.endswith(".json")]
        # the expiry reports: unknown, naming the right that is missing (no expiry computed from a guess)
        code, st, _ = ops(own, "status", "--group", kafka_phase, expect=0)
        assert st["offsets_retention_ms"] is None and all(r["kafka_expires_at"] is None for r in st["partitions"])
        assert any("offsets.retention.minutes" in w and "DescribeConfigs" in w for w in st["warnings"]), st
        code, rep, _ = ops(own, "verify", "--group", kafka_phase, "--phase", "kafka", "--no-record", expect=0)
        assert rep["expiry"]["unknown"] and "DescribeConfigs" in rep["expiry"]["unknown"], rep["expiry"]
        _acls(own, create=[describe_configs])

        # 2. no Read on __consumer_offsets: whether a ZooKeeper offset older than the retention is frozen is unknown
        time.sleep(max(0.0, written + 65 - time.time()))  # offsets.retention.minutes=1

        def cutover():
            code, out, _ = ops(own, "cutover", "--group", old, "--execute", "--backup-dir", str(tmp_path))
            return (code, out) if out.get("unchecked") else None
        code, co = wait_until(cutover, 60, message="the DescribeConfigs right to be back")
        assert code == 1 and not co["ready"] and "could not check" in co["reason"], co
        assert co["copied"] == {} and co["backup"] == [] and "recorded_phase" not in co
        assert set(co["unchecked"]) == set(names) and set(co["refused"]) == set(names), co
        for name, why in co["refused"].items():
            topic, p = name.rsplit("-", 1)
            assert why.startswith("group %s, %s:" % (old, name)) and "could not be checked" in why, why
            assert "Read on topic __consumer_offsets" in why and "--allow-stale" in why, why
            assert "reset-offsets --group %s --topic %s:%s --store kafka" % (old, topic, p) in why, why
        assert state.read_phase(zk, old) is None and _kafka(own, old, parts) == {}
        code, cp, _ = ops(own, "copy", "--group", old, "--execute", "--backup-dir", str(tmp_path), expect=1)
        assert cp["written"] == 0 and set(cp["unchecked"]) == set(names) and _kafka(own, old, parts) == {}
        code, dry, _ = ops(own, "copy", "--group", old, "--allow-stale", expect=0)  # the explicit override
        assert dry["refused"] == {} and dry["to_write"] == {names[0]: 3, names[1]: 3}, dry

        # restore: the Kafka offsets it would delete (young's backup, from before its copy, has none) were committed
        # since, not by the copy (4): when they were cannot be read without the right, so the restore is refused
        _kafka(own, young, parts, {tp: 7 for tp in parts})
        for args in ((), ("--execute", "--backup-dir", str(tmp_path / "r"))):
            code, rs, _ = ops(own, "restore", young_backup, *args, expect=1)
            assert set(rs["newer"]) == {"kafka:%s" % n for n in names} and rs["deleted"] == 0, rs
            for why in rs["newer"].values():
                assert "its commit time cannot be read" in why and "Read on topic __consumer_offsets" in why, why
                assert "--discard-newer" in why, why
        assert _kafka(own, young, parts) == {tp: 7 for tp in parts} and not (tmp_path / "r").exists()

        # the other way out: the Read right; the check runs (the removed Kafka offsets, 2, are behind ZooKeeper's:
        # not frozen) and the cutover is ready
        _acls(own, delete=[_ops_acl(own, "__consumer_offsets", "READ")])
        code, co = wait_until(lambda: (lambda r: r if r[0] == 0 else None)(
            ops(own, "cutover", "--group", old, "--execute", "--backup-dir", str(tmp_path))[:2]), 60,
            message="the Read right on __consumer_offsets to be granted")
        assert co["ready"] and co["copied"] == {names[0]: 3, names[1]: 3} and co["refused"] == {}, co
        # with the right, the restore reads when they were committed: after the backup (committed again, so that
        # the broker's retention of 1 minute cannot have removed them meanwhile)
        _kafka(own, young, parts, {tp: 7 for tp in parts})
        code, rs, _ = ops(own, "restore", young_backup, expect=1)
        assert set(rs["newer"]) == {"kafka:%s" % n for n in names}, rs
        assert all("after the backup was taken" in why for why in rs["newer"].values()), rs
        # undoing old's cutover, as the runbook does: restore its backup, then roll back. The ZooKeeper offsets
        # the restore left are older than the retention and Kafka holds none, yet nothing committed since the
        # restore can have expired: the rollback keeps them and lifts the fence
        manifest = [b for b in co["backup"] if b.endswith(".json")]
        assert len(manifest) == 1, co["backup"]
        ops(own, "restore", manifest[0], "--execute", expect=0)
        written = max(zk.exists("/consumers/%s/offsets/%s/%d" % (old, t, p)).mtime for _, p in parts)
        time.sleep(max(0.0, 61 - (time.time() - written / 1000.0)))
        code, rb, _ = ops(own, "rollback", "--group", old, "--execute", expect=0)
        assert ZooKeeperOffsetStore(zk, old).fetch(parts) == {tp: 3 for tp in parts}, rb
        assert state.fence_of(state.read_phase(zk, old)) is None
    finally:
        zkmod.close(zk)


def test_every_unreadable_partition_names_its_way_out(services, zk, unique):
    """A partition whose Kafka offset the broker will not give, for a reason other than authorization: unknown
    while its topic is deleted (UNKNOWN_TOPIC_OR_PARTITION), still without a leader after the retries
    (LEADER_NOT_AVAILABLE), or missing from the answer: left out of the read and reported with the error and what to
    do (run again, --exclude-topic), not the bare error. The broker's answer (Apache Kafka 3.9) is altered in our
    own decoding step, as in test_offsets_kafka.py: those states do not last long enough to be caught on a cluster."""
    from kafka import errors as Errors

    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer_migrate.group_offsets import GroupOffsets
    t = services.create_topic(unique("uw"), 4)
    g = unique("uw-g")
    parts = [(t, p) for p in range(4)]
    ZooKeeperOffsetStore(zk, g).commit({tp: 1 for tp in parts}).raise_for_errors()

    class Moving(KafkaOffsetStore):
        async def _async_fetch(self, node, ask):
            got = await super()._async_fetch(node, ask)
            got[(t, 1)] = (Errors.UnknownTopicOrPartitionError, -1)
            got[(t, 2)] = (Errors.LeaderNotAvailableError, -1)
            got.pop((t, 3), None)
            return got
    gofs = GroupOffsets(zk, services.bootstrap_servers, g)
    gofs.kafka_store.close()
    gofs.kafka_store = Moving(services.bootstrap_servers, g, ConsumerConfig.from_properties(
        {"group.id": g, "offsets.channel.backoff.ms": "100", "offsets.commit.max.retries": "1"},
        require_zookeeper=False))
    try:
        assert set(gofs.read(parts)) == {(t, 0)}
        report = gofs.unreadable_report()
    finally:
        gofs.close()
    assert set(report) == {"%s-%d" % (t, p) for p in (1, 2, 3)}, report
    for p, error, way in ((1, "UnknownTopicOrPartition", "the topic is being deleted"),
                          (2, "LeaderNotAvailable", "run again in a moment"),
                          (3, "no answer", "run again")):
        why = report["%s-%d" % (t, p)]
        assert error in why and way in why and "--exclude-topic %s" % t in why, why


def test_a_rollback_right_after_a_restore_keeps_the_zookeeper_offsets_it_left():
    """Undoing a cutover (restore, then rollback): the ZooKeeper offsets the restore left are older than the
    retention on a quiet group, and Kafka holds none. Within one retention of the restore no Kafka commit made
    since can have expired, so the rollback keeps them; a restore older than the retention, or a later record
    other than a verify, brings the age rule back."""
    from zkconsumer_migrate.state import restored_since
    now = 1767225600000
    both = {("t", 0): (5, None)}
    ev = {("t", 0): Evidence(zk_mtime=now - 10 * DAY)}
    week = Retention(7 * DAY)
    assert ("t", 0) in to_zookeeper_refusals("g", both, ev, None, week, now_ms=now)
    assert to_zookeeper_refusals("g", both, ev, None, week, now_ms=now, restored_at=now - DAY) == {}
    assert ("t", 0) in to_zookeeper_refusals("g", both, ev, None, week, now_ms=now, restored_at=now - 8 * DAY)
    restore = {"phase": "restore", "since": "2026-01-01T00:00:00Z", "by": "zkmigrate restore"}
    verify = {"phase": "zookeeper", "since": "2026-01-02T00:00:00Z", "by": "zkmigrate verify"}
    assert restored_since(restore) == 1767225600000
    assert restored_since(dict(verify, history=[restore])) == 1767225600000
    assert restored_since({"phase": "cutover", "since": "2026-01-03T00:00:00Z", "by": "zkmigrate cutover",
                           "history": [restore]}) is None
    assert restored_since(None) is None and restored_since({"error": "unreadable"}) is None
