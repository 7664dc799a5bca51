""""Never backwards" is not enough: offsets that must not be carried between the stores, on Apache Kafka 3.9.

* a topic deleted and created again while the group was on Kafka: its ZooKeeper offsets belong to the old topic
  (beyond the new log end, or pointing into unrelated records): cutover, copy and rollback refuse them;
* on a broker with ``offsets.retention.minutes=1`` (a cluster of this module's own): a group that stopped in the
  Kafka phase until its Kafka offsets expired keeps weeks-old ("frozen") ZooKeeper offsets: rollback refuses to keep
  them, cutover refuses to copy them, verify --phase zookeeper fails; the evidence is the phase record (a passing
  verify --phase kafka), the expired commits in ``__consumer_offsets``, and the ZooKeeper offsets' age.

Every refusal names the group, the partition and the ways out (reset-offsets, --exclude-topic, --allow-stale), and
nothing is written.
"""
import pytest

from tests.support.chaos_support import own_cluster_fixture
from tests.support.migrate_support import delete_topic, zkmigrate_json
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore

pytestmark = pytest.mark.live


def _refused_well(out, group, parts, store):
    """Every partition of *parts* refused, each message naming the group, the partition and the ways out."""
    assert set(out["refused"]) == set(parts), out["refused"]
    for name, why in out["refused"].items():
        topic, p = name.rsplit("-", 1)
        assert "group %s, %s:" % (group, name) in why, why
        assert "reset-offsets --group %s --topic %s:%s --store %s" % (group, topic, p, store) in why, why
        assert "--allow-stale" in why and "--exclude-topic %s" % topic in why, why


def test_a_recreated_topic_keeps_its_old_offsets_out(services, zk, unique, tmp_path):
    t = services.create_topic(unique("rc"), 2)
    for p in (0, 1):
        services.produce(t, 500, size=20, partition=p)
    g = unique("rc-g")
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 480, (t, 1): 5}).raise_for_errors()
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        ks.commit({(t, 0): 490, (t, 1): 495}).raise_for_errors()  # the Kafka phase
        delete_topic(services, zk, t)  # the broker drops the group's Kafka offsets of it; ZooKeeper keeps its own
        services.create_topic(t, 2)
        for p in (0, 1):
            services.produce(t, 20, size=20, partition=p)
        parts = ["%s-0" % t, "%s-1" % t]
        # cutover would copy 480 (beyond the new log end 20) and 5 (of the old topic): refused, nothing written
        code, out, err = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir",
                                        str(tmp_path), expect=1)
        assert not out["ready"] and out["copied"] == {} and out["backup"] == []
        _refused_well(out, g, parts, "kafka")
        assert "beyond the log end 20" in out["refused"]["%s-0" % t]
        assert "before topic %s was created" % t in out["refused"]["%s-1" % t]
        assert "topic id" in out["refused"]["%s-1" % t]  # Kafka 3.9 stores the topic id in /brokers/topics/T
        assert ks.fetch([(t, 0), (t, 1)]) == {}
        code, cp, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                     expect=1)
        assert cp["written"] == 0 and not cp["ok"]
        _refused_well(cp, g, parts, "kafka")
        code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir",
                                     str(tmp_path), expect=1)
        _refused_well(rb, g, parts, "zookeeper")
        assert ks.fetch([(t, 0), (t, 1)]) == {}
        # the way out: set the position for the new topic; then cutover copies it
        zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute",
                       "--backup-dir", str(tmp_path), expect=0)
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir",
                                      str(tmp_path), expect=0)
        assert out["ready"] and out["copied"] == {"%s-0" % t: 0, "%s-1" % t: 0}
    finally:
        ks.close()


def test_a_rollback_keeps_a_zookeeper_offset_ahead_of_kafka_only_when_it_is_not_stale():
    """ZooKeeper ahead of Kafka (a member on ZooKeeper storage ran after Kafka's last commit): the rollback keeps it;
    beyond the log end, or written before the topic was created, it is refused, naming --allow-rewind (take
    Kafka's) besides the usual ways out; with --allow-rewind (keep_ahead off) only Kafka's offset is checked."""
    from zkconsumer_migrate.stale import Evidence, to_zookeeper_refusals
    both = {("t", 0): (8, 5), ("t", 1): (40, 5), ("t", 2): (9, 5)}
    ev = {("t", 0): Evidence(zk_mtime=2000, topic_ctime=1000, log_end=30),
          ("t", 1): Evidence(zk_mtime=2000, topic_ctime=1000, log_end=30),
          ("t", 2): Evidence(zk_mtime=500, topic_ctime=1000, log_end=30)}
    refused = to_zookeeper_refusals("g", both, ev, None, None, keep_ahead=True)
    assert set(refused) == {("t", 1), ("t", 2)}, refused
    assert "ZooKeeper offset 40, kept ahead of Kafka's 5, is beyond the log end 30" in refused[("t", 1)]
    assert "before topic t was created" in refused[("t", 2)]
    for why in refused.values():
        assert "'--allow-rewind' to take Kafka's offset 5" in why and "--allow-stale" in why, why
    assert to_zookeeper_refusals("g", both, ev, None, None, keep_ahead=False) == {}


def test_a_removed_kafka_offset_not_past_zookeeper_clears_a_frozen_looking_one():
    """A rollback finds no Kafka offset and a ZooKeeper offset that the phase record (or its age) calls frozen: the
    Kafka offset the broker removed, read from __consumer_offsets, decides. Not greater than ZooKeeper's (a cutover's
    copy that expired unused): kept. Greater (consumers went on in Kafka): refused. Not known: refused."""
    from zkconsumer.offsets.expiry import Retention
    from zkconsumer_migrate.stale import Evidence, to_zookeeper_refusals
    now, day = 1767225600000, 86400000
    both = {("t", 0): (7, None)}

    def refused(removed, frozen_since=now - day, retention=None):
        ev = {("t", 0): Evidence(zk_mtime=now - 2 * day, topic_ctime=now - 3 * day, log_end=20, removed=removed)}
        return to_zookeeper_refusals("g", both, ev, frozen_since, retention, now_ms=now)
    assert refused((7, now - 2 * day)) == {}
    assert refused((7, now - 2 * day), None, Retention(day)) == {}
    assert "frozen since then" in refused((15, now - day))[("t", 0)]
    assert "frozen since then" in refused(None)[("t", 0)]
    assert "frozen since then" in refused((None, None))[("t", 0)]
    assert "longer than" in refused(None, None, Retention(day))[("t", 0)]
    early = {("t", 0): Evidence(zk_mtime=now - 2 * day, topic_ctime=now - day, removed=(7, now))}
    assert "earlier topic" in to_zookeeper_refusals("g", both, early, None, None, now_ms=now)[("t", 0)]


own = own_cluster_fixture("stale", broker_config={"offsets.retention.minutes": 1,
                                                   "offsets.retention.check.interval.ms": 1000})


def test_frozen_zookeeper_offsets_after_the_kafka_offsets_expired(own, unique, tmp_path):
    t = own.create_topic(unique("fz"), 2)
    from zkconsumer.local import tools
    for p in (0, 1):
        tools.produce(own.bootstrap_servers, t, 20, partition=p)
    zk = zkmod.connect(own.zookeeper_connect)
    recorded, unrecorded = unique("fz-rec"), unique("fz-norec")
    parts = ["%s-0" % t, "%s-1" % t]
    try:
        for g in (recorded, unrecorded):
            # ZooKeeper frozen at 3 when the members went Kafka-only; they consumed on to 15 in Kafka, then stopped
            ZooKeeperOffsetStore(zk, g).commit({(t, 0): 3, (t, 1): 3}).raise_for_errors()
            ks = KafkaOffsetStore(own.bootstrap_servers, g)
            try:
                ks.commit({(t, 0): 15, (t, 1): 15}).raise_for_errors()
            finally:
                ks.close()
        zkmigrate_json(own, "verify", "--group", recorded, "--phase", "kafka", "--settle", "0", "--no-expiry-check",
                   expect=0)  # the operator verified the Kafka phase: recorded
        wait_until(lambda: all(r["kafka_offset"] is None for g in (recorded, unrecorded)
                               for r in zkmigrate_json(own, "status", "--group", g, expect=0)[1]["partitions"]),
                   150, "the Kafka offsets to expire (offsets.retention.minutes=1)", interval=2)

        # (a) a rollback would keep ZooKeeper's 3 where the group had reached 15: refused, nothing recorded
        code, rb, _ = zkmigrate_json(own, "rollback", "--group", recorded, "--execute", "--backup-dir", str(tmp_path),
                                 expect=1)
        _refused_well(rb, recorded, parts, "zookeeper")
        assert "frozen" in rb["refused"][parts[0]] and "recorded phase" in rb["refused"][parts[0]]
        assert "recorded_phase" not in rb
        code, rep, _ = zkmigrate_json(own, "verify", "--group", recorded, "--phase", "zookeeper", expect=1)
        assert any("frozen" in p and recorded in p for p in rep["problems"]), rep["problems"]
        code, rb, _ = zkmigrate_json(own, "rollback", "--group", unrecorded, "--backup-dir", str(tmp_path), expect=1)
        _refused_well(rb, unrecorded, parts, "zookeeper")
        assert "offsets.retention.minutes=1" in rb["refused"][parts[0]]

        # (b) cutover would copy the frozen 3 into Kafka and say READY: refused, nothing written, no fence
        for g, needle in ((recorded, "recorded phase"), (unrecorded, "Kafka held offset 15")):
            code, co, _ = zkmigrate_json(own, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                     expect=1)
            assert not co["ready"] and co["copied"] == {} and "recorded_phase" not in co
            _refused_well(co, g, parts, "kafka")
            assert all(needle in why for why in co["refused"].values()), co["refused"]
            assert all(r["kafka_offset"] is None
                       for r in zkmigrate_json(own, "status", "--group", g, expect=0)[1]["partitions"])

        # the explicit override: keep ZooKeeper's offsets (the rollback then records its phase)
        code, rb, _ = zkmigrate_json(own, "rollback", "--group", recorded, "--execute", "--allow-stale",
                                 "--backup-dir", str(tmp_path), expect=0)
        assert rb["refused"] == {} and rb["recorded_phase"]["phase"] == "rollback"
        zkmigrate_json(own, "verify", "--group", recorded, "--phase", "zookeeper", expect=0)
    finally:
        zkmod.close(zk)


def test_undoing_a_cutover_whose_offsets_expired_before_the_new_consumers_started(own, unique, tmp_path):
    """migration.md, "After cutover": the new consumers never started, and the offsets the cutover wrote to Kafka
    expired meanwhile (offsets.retention.minutes=1 here, 7 days by default; cutover warns when). The runbook that
    undoes the cutover (restore the backup it printed, which lifts its fence) must give the group back to its
    ZooKeeper members at the offsets they stopped at: nobody consumed since, ZooKeeper's offsets are not frozen
    (the removed Kafka offsets were the very same values the cutover copied from them)."""
    t = own.create_topic(unique("uc"), 2)
    from zkconsumer.local import tools
    for p in (0, 1):
        tools.produce(own.bootstrap_servers, t, 20, partition=p)
    zk = zkmod.connect(own.zookeeper_connect)
    g = unique("uc-g")
    try:
        # a stopped group on ZooKeeper storage, cut over
        ZooKeeperOffsetStore(zk, g).commit({(t, 0): 7, (t, 1): 9}).raise_for_errors()
        code, co, _ = zkmigrate_json(own, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                     expect=0)
        manifest = [p for p in co["backup"] if p.endswith(".json")][0]
        wait_until(lambda: all(r["kafka_offset"] is None
                               for r in zkmigrate_json(own, "status", "--group", g, expect=0)[1]["partitions"]),
                   150, "the Kafka offsets to expire (offsets.retention.minutes=1)", interval=2)
        rs = zkmigrate_json(own, "restore", manifest, "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
        assert rs.get("fence_lifted"), rs
        # a rollback after it (the runbook before the restore lifted the fence) finds nothing to refuse
        code, rb, _ = zkmigrate_json(own, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path))
        assert code == 0, (code, rb.get("refused"), rb.get("warnings"))
        assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 7, (t, 1): 9}
    finally:
        zkmod.close(zk)


def test_a_kept_zookeeper_offset_beyond_the_log_end_is_refused_whatever_kafka_removed():
    """No Kafka offset, ZooKeeper at 3, the log ending at 2: a removed Kafka commit not past 3 clears the frozen
    evidence, not the log end (the consumers would reset)."""
    from zkconsumer_migrate.stale import Evidence, to_zookeeper_refusals
    now, day = 1767225600000, 86400000
    ev = {("t", 0): Evidence(zk_mtime=now - 2 * day, topic_ctime=now - 3 * day, log_end=2, removed=(3, now - day))}
    refused = to_zookeeper_refusals("g", {("t", 0): (3, None)}, ev, now - day, None, now_ms=now)
    assert "beyond the log end 2" in refused[("t", 0)], refused


def test_kafka_offset_since_counts_a_restores_run_from_the_backups_time():
    """The run of commits a restore started counts from when the backup says Kafka had held the offset; another
    run (a reset after the restore, to any value) counts from its own first commit; a restore whose backup does
    not say (or whose commit was not read back) keeps the run's own time, marked not known."""
    from zkconsumer.offsets.expiry import LastCommit
    from zkconsumer_migrate.state import RestoredKafka
    from zkconsumer_migrate.stale import kafka_offset_since
    both = {("t", p): (8, 5) for p in range(5)}
    log = {("t", 0): LastCommit(5, 2500, False, 2000), ("t", 1): LastCommit(5, 2600, False, 2100),
           ("t", 2): LastCommit(5, 2000, False, 2000), ("t", 3): LastCommit(5, 2000, False, None),
           ("t", 4): LastCommit(4, 2000, False, 2000)}
    restored = {("t", 0): RestoredKafka(5, 2000, 100), ("t", 1): RestoredKafka(5, 2000, 100),
                ("t", 2): RestoredKafka(5, 2000, None), ("t", 3): RestoredKafka(5, None, 100),
                ("t", 4): RestoredKafka(4, 2000, 100)}
    since, unknown = kafka_offset_since(log, both, restored)
    # 0: the restore's run, kept alive since; 1: a later run; 2: backup silent; 3: not read back; 4: not Kafka's now
    assert since == {("t", 0): 100, ("t", 1): 2100, ("t", 2): 2000, ("t", 3): 2000}, since
    assert unknown == {("t", 2), ("t", 3)}, unknown
    assert kafka_offset_since(log, both) == ({("t", 0): 2000, ("t", 1): 2100, ("t", 2): 2000, ("t", 3): 2000},
                                             set())


def test_a_zookeeper_offset_ahead_is_kept_only_when_written_after_kafkas_offset_was_set():
    from zkconsumer_migrate.stale import Evidence, frozen_ahead
    both = {("t", 0): (8, 2), ("t", 1): (9, 3), ("t", 2): (5, 5)}
    ev = {tp: Evidence(zk_mtime=10000, zk_mzxid=70 + tp[1]) for tp in both}
    # Kafka's offset set before ZooKeeper's write: ZooKeeper is where the group stopped
    assert frozen_ahead("g", both, ev, {("t", 0): 9000, ("t", 1): 9000}) == {}
    # after it: Kafka was set below ZooKeeper since, whatever the phase record says
    frozen = frozen_ahead("g", both, ev, {("t", 0): 9000, ("t", 1): 30000})
    assert set(frozen) == {("t", 1)} and "before Kafka's offset became 3" in frozen[("t", 1)], frozen
    assert "zkmigrate copy --group g --allow-stale --execute" in frozen[("t", 1)]
    # not known: not kept
    assert set(frozen_ahead("g", both, ev, {})) == {("t", 0), ("t", 1)}
    assert set(frozen_ahead("g", both, {}, {("t", 0): 9000, ("t", 1): 9000})) == {("t", 0), ("t", 1)}
    unread = frozen_ahead("g", both, ev, {}, unread="TopicAuthorizationFailedError")
    assert "could not be read (TopicAuthorizationFailedError)" in unread[("t", 0)], unread
    assert "Read on topic __consumer_offsets" in unread[("t", 0)]
    assert "Read on" not in frozen_ahead("g", both, ev, {}, unread="took longer than 30 s")[("t", 0)]
    # the node as the last restore wrote it (the same transaction): no evidence of a member, whatever the clocks
    frozen = frozen_ahead("g", both, ev, {("t", 0): 9000, ("t", 1): 9000}, {("t", 0): 70, ("t", 1): 60})
    assert set(frozen) == {("t", 0)} and "zkmigrate restore" in frozen[("t", 0)], frozen


def test_the_restored_nodes_are_kept_while_unchanged(zk, unique):
    from zkconsumer_migrate import state
    g = unique("rs-g")
    assert state.restored_nodes(zk, g) == {}
    state.add_restored_nodes(zk, g, {("t", 0): 70}, {})
    state.add_restored_nodes(zk, g, {("t", 1): 80}, {("t", 0): 70})
    assert state.restored_nodes(zk, g) == {("t", 0): 70, ("t", 1): 80}
    # t-0 written since by someone else: its entry goes with the next restore
    state.add_restored_nodes(zk, g, {("t", 2): 90}, {("t", 0): 75, ("t", 1): 80})
    assert state.restored_nodes(zk, g) == {("t", 1): 80, ("t", 2): 90}


def test_only_a_rollback_of_a_group_cut_over_counts_for_cutover():
    from zkconsumer_migrate.state import rolled_back_since

    def rec(*entries):
        top, *older = [dict(phase=p, by="zkmigrate " + b, since="2026-11-27T10:00:%02dZ" % (59 - i),
                            **({"lifted": True} if p == "rollback" and b == "rollback" and lifted else {}))
                       for i, (p, b, lifted) in enumerate(e + (True,) if len(e) == 2 else e for e in entries)]
        return dict(top, history=older)
    assert rolled_back_since(rec(("rollback", "rollback"), ("cutover", "cutover"))) is not None
    # a rollback of a group never cut over, one that lifted no fence, or a record another command wrote
    assert rolled_back_since(rec(("rollback", "rollback"), ("kafka", "verify"))) is None
    assert rolled_back_since(rec(("rollback", "rollback", False), ("rollback", "rollback"), ("cutover", "cutover"))) \
        is None
    assert rolled_back_since(rec(("rollback", "restore"), ("rollback", "rollback"), ("kafka", "verify"))) is None
    assert rolled_back_since(rec(("kafka", "verify"), ("rollback", "rollback"), ("cutover", "cutover"))) is not None


def test_the_group_records_of_consumer_offsets_name_their_group():
    import struct
    from zkconsumer.offsets.expiry import parse_group_record_key

    def key(version, *strings):
        return struct.pack(">h", version) + b"".join(struct.pack(">h", len(x)) + x for x in strings)
    assert parse_group_record_key(key(2, b"orders")) == "orders"
    # KIP-848's records (ConsumerGroupMetadataKey, ConsumerGroupMemberMetadataKey...) lead with the group id
    assert parse_group_record_key(key(3, b"orders")) == "orders"
    assert parse_group_record_key(key(5, b"orders", b"member-1")) == "orders"
    # offset commits, and keys that cannot be read
    assert parse_group_record_key(key(1, b"orders", b"topic") + struct.pack(">i", 0)) is None
    assert parse_group_record_key(b"\x00") is None and parse_group_record_key(None) is None
    assert parse_group_record_key(struct.pack(">hh", 2, 9) + b"abc") is None
