"""zkmigrate tools against the real ZooKeeper + broker: export/import, copy (no rewind, backup, idempotent),
verify, plan, status, and the dual read picking the larger offset in a real consumer process."""
import glob
import os
import time

from kafka import KafkaConsumer

from zkconsumer.core.layout import paths
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.dual import DualOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore

from tests.support.migrate_support import DUAL, ConsumerProc, zkmigrate, zkmigrate_json
from tests.support.waiting import wait_until


def _stores(services, zk, group):
    return ZooKeeperOffsetStore(zk, group), KafkaOffsetStore(services.bootstrap_servers, group)


def test_export_import_round_trip(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("rt"), 3)
    g = unique("g-rt")
    zs, ks = _stores(services, zk, g)
    try:
        zs.commit({(topic, 0): 11, (topic, 1): 22, (topic, 2): 33}).raise_for_errors()
        f = tmp_path / "zk.txt"
        zkmigrate(services, "export", "--group", g, "--output", str(f), expect=0)
        lines = f.read_text().splitlines()
        assert lines == ["/consumers/%s/offsets/%s/%d:%d" % (g, topic, p, o) for p, o in ((0, 11), (1, 22), (2, 33))]
        # dry run writes nothing
        zkmigrate(services, "import", "--file", str(f), "--store", "kafka", expect=0)
        assert ks.fetch([(topic, p) for p in range(3)]) == {}
        zkmigrate(services, "import", "--file", str(f), "--store", "kafka", "--execute", "--backup-dir",
                  str(tmp_path), expect=0)
        assert ks.fetch([(topic, p) for p in range(3)]) == {(topic, 0): 11, (topic, 1): 22, (topic, 2): 33}
        f2 = tmp_path / "kafka.txt"
        zkmigrate(services, "export", "--group", g, "--store", "kafka", "--output", str(f2), expect=0)
        assert f2.read_text().splitlines() == lines
        # and back into ZooKeeper under the same paths after deleting them
        zs.delete_offsets([(topic, p) for p in range(3)]).raise_for_errors()
        zkmigrate(services, "import", "--file", str(f2), "--store", "zookeeper", "--execute", "--backup-dir",
                  str(tmp_path), expect=0)
        assert ZooKeeperOffsetStore(zk, g).fetch([(topic, p) for p in range(3)]) == {
            (topic, 0): 11, (topic, 1): 22, (topic, 2): 33}
    finally:
        ks.close()


def test_import_validates_every_line_before_writing(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("iv"), 1)
    g = unique("g-iv")
    cases = [
        ("/consumers/%s/offsets/../x/0:5" % g, ".."),
        ("/consumers/%s/offsets/%s/0:-3" % (g, topic), "'-3'"),
        ("/consumers/%s/ids/%s/0:5" % (g, topic), "/ids/"),
        ("/consumers/%s/offsets/%s/0:12x" % (g, topic), "12x"),
    ]
    for bad, shown in cases:
        f = tmp_path / "bad.txt"
        f.write_text("/consumers/%s/offsets/%s/0:7\n%s\n" % (g, topic, bad))
        code, out, err = zkmigrate(services, "import", "--file", str(f), "--store", "zookeeper", "--execute")
        assert code == 2, (bad, out, err)  # bad input (the documented exit code of a bad file)
        assert "line 2" in err and shown in err, err
        assert zk.exists(paths.group_path(g)) is None  # the good first line was not written either


def test_copy_never_rewinds_backs_up_and_is_idempotent(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("cp"), 3)
    for p in range(3):
        services.produce(topic, 50, partition=p)  # every offset below is inside the log
    g = unique("g-cp")
    zs, ks = _stores(services, zk, g)
    parts = [(topic, p) for p in range(3)]
    try:
        # Kafka's first, then ZooKeeper's (members back on ZooKeeper storage): Kafka's 5 was not set after
        # ZooKeeper's 30, so copy writes 30 over it
        ks.commit({(topic, 0): 20, (topic, 1): 5}).raise_for_errors()
        time.sleep(0.05)
        zs.commit({(topic, 0): 10, (topic, 1): 30, (topic, 2): 40}).raise_for_errors()
        # a partition that would move backwards is skipped, and a run that skipped anything exits 1
        code, dry, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path), expect=1)
        assert dry["to_write"] == {"%s-1" % topic: 30, "%s-2" % topic: 40}
        assert ks.fetch(parts) == {(topic, 0): 20, (topic, 1): 5}  # dry run
        code, res, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                      expect=1)
        assert res["written"] == 2
        assert res["skipped_rewind"] == {"%s-0" % topic: {"destination": 20, "source": 10}}
        assert ks.fetch(parts) == {(topic, 0): 20, (topic, 1): 30, (topic, 2): 40}
        backups = sorted(glob.glob(str(tmp_path / ("backup-%s-*.txt" % g))))
        assert len(backups) == 2
        kb = [b for b in backups if "-kafka-" in b][0]
        assert open(kb).read().splitlines() == ["/consumers/%s/offsets/%s/0:20" % (g, topic),
                                                "/consumers/%s/offsets/%s/1:5" % (g, topic)]
        # second run: nothing to do, no new backup (partition 0 is still skipped, so still exit 1)
        code, again, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                        expect=1)
        assert again["written"] == 0 and again["to_write"] == {} and again["backup"] == []
        assert len(glob.glob(str(tmp_path / ("backup-%s-*.txt" % g)))) == 2
        # rollback direction (Kafka -> ZooKeeper) moves only what is ahead: partition 0 (20 > 10)
        code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir",
                                     str(tmp_path), expect=0)
        assert rb["to_write"] == {"%s-0" % topic: 20}
        assert ZooKeeperOffsetStore(zk, g).fetch(parts) == {(topic, 0): 20, (topic, 1): 30, (topic, 2): 40}
        # explicit rewind
        zs2 = ZooKeeperOffsetStore(zk, g)
        zs2.commit({(topic, 2): 3}).raise_for_errors()
        code, rw, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--allow-rewind",
                                     "--backup-dir", str(tmp_path), expect=0)
        assert rw["rewound"] == {"%s-2" % topic: {"from": 40, "to": 3}}
        assert ks.fetch(parts)[(topic, 2)] == 3
    finally:
        ks.close()


def test_copy_refuses_while_members_are_live(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("lv"), 1)
    services.produce(topic, 10, partition=0)
    g = unique("g-lv")
    zs, ks = _stores(services, zk, g)
    try:
        zs.commit({(topic, 0): 9}).raise_for_errors()
        zk.create(paths.consumer_registration_path(g, g + "_host-1-abcdef12"),
                  b'{"version":1,"subscription":{"%s":1},"pattern":"static","timestamp":"1"}' % topic.encode(),
                  ephemeral=True, makepath=True)
        code, out, err = zkmigrate(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path))
        assert code == 1 and "live ZooKeeper member" in err and "--force" in err
        assert ks.fetch([(topic, 0)]) == {}
        assert not os.listdir(str(tmp_path))
        zkmigrate(services, "copy", "--group", g, "--execute", "--force", "--backup-dir", str(tmp_path), expect=0)
        assert ks.fetch([(topic, 0)]) == {(topic, 0): 9}
    finally:
        ks.close()


def test_verify_rules(services, zk, unique):
    topic = services.create_topic(unique("vf"), 2)
    services.produce(topic, 2, partition=0, one_per_batch=True)
    services.produce(topic, 2, partition=1, one_per_batch=True)
    g = unique("g-vf")
    zs, ks = _stores(services, zk, g)
    try:
        zs.commit({(topic, 0): 2, (topic, 1): 2}).raise_for_errors()
        zkmigrate(services, "verify", "--group", g, "--phase", "zookeeper", expect=0)
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "dual", "--settle", "0.5",
                                      expect=1)
        assert sum("has no offset in kafka" in p for p in rep["problems"]) == 2
        ks.commit({(topic, 0): 2, (topic, 1): 1}).raise_for_errors()
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "dual", "--settle", "0.5",
                                      expect=1)
        assert len(rep["problems"]) == 1 and "%s-1: kafka offset 1 stays behind zookeeper offset 2" % topic \
            in rep["problems"][0]
        ks.commit({(topic, 1): 2}).raise_for_errors()
        zkmigrate(services, "verify", "--group", g, "--phase", "dual", "--settle", "0.5", expect=0)
        zkmigrate(services, "verify", "--group", g, "--phase", "kafka", expect=0)
        # rollback direction: ZooKeeper behind Kafka fails
        ks.commit({(topic, 0): 2, (topic, 1): 2})
        zs.commit({(topic, 1): 1}).raise_for_errors()
        zkmigrate(services, "verify", "--group", g, "--phase", "dual", "--to", "zookeeper", "--settle", "0.3",
                  expect=1)
        zkmigrate(services, "verify", "--group", "no/such", "--phase", "kafka", expect=2)  # bad input
    finally:
        ks.close()


def test_plan_and_status(services, zk, unique):
    code, out, _ = zkmigrate(services, "plan", "--group", "orders", "--to", "kafka", expect=0)
    assert "offsets.storage=kafka dual.commit.enabled=true" in out
    assert "zkmigrate verify --group orders --phase dual --to kafka" in out
    assert "offsets.storage=kafka dual.commit.enabled=false" in out
    code, p, _ = zkmigrate_json(services, "plan", "--group", "orders", "--to", "zookeeper", expect=0)
    assert [s.get("phase") for s in p["steps"]] == [None, "dual", "zookeeper"]
    assert p["steps"][1]["properties"] == ["offsets.storage=kafka", "dual.commit.enabled=true"]
    assert "--phase dual --to zookeeper" in p["steps"][1]["verify"]

    topic = services.create_topic(unique("st"), 2)
    services.produce(topic, 5, partition=0, one_per_batch=True)
    g = unique("g-st")
    zs, ks = _stores(services, zk, g)
    try:
        zs.commit({(topic, 0): 3}).raise_for_errors()
        ks.commit({(topic, 0): 4}).raise_for_errors()
        code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
        row = [r for r in st["partitions"] if r["partition"] == 0][0]
        assert (row["zookeeper_offset"], row["kafka_offset"], row["log_end_offset"]) == (3, 4, 5)
        assert (row["zookeeper_lag"], row["kafka_lag"], row["owner"]) == (2, 1, None)
        assert st["zookeeper_members"] == [] and st["broker_group"]["active"] is False
    finally:
        ks.close()


def test_dual_read_picks_the_larger_offset(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("dr"), 2)
    services.produce(topic, 12, partition=0)
    services.produce(topic, 12, partition=1)
    g = unique("g-dr")
    zs, ks = _stores(services, zk, g)
    try:
        zs.commit({(topic, 0): 5, (topic, 1): 9}).raise_for_errors()
        ks.commit({(topic, 0): 8, (topic, 1): 3}).raise_for_errors()
        assert DualOffsetStore(ZooKeeperOffsetStore(zk, g), ks).fetch([(topic, 0), (topic, 1)]) == {
            (topic, 0): 8, (topic, 1): 9}
        c = ConsumerProc(tmp_path, "dr", services.zookeeper_connect, g, topic, DUAL)
        try:
            wait_until(lambda: len(c.seen()) >= (12 - 8) + (12 - 9), 30, "messages after the larger offsets")
        finally:
            assert c.stop() == 0
        seen = c.seen()
        assert min(o for p, o in seen if p == 0) == 8
        assert min(o for p, o in seen if p == 1) == 9
        both = DualOffsetStore(ZooKeeperOffsetStore(zk, g), ks).fetch_both([(topic, 0), (topic, 1)])
        assert both == {(topic, 0): (12, 12), (topic, 1): (12, 12)}
    finally:
        ks.close()


def test_cutover(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("co"), 2)
    for p in range(2):
        services.produce(topic, 10, partition=p)
    g = unique("g-co")
    zs, ks = _stores(services, zk, g)
    parts = [(topic, 0), (topic, 1)]
    try:
        zs.commit({(topic, 0): 7, (topic, 1): 4}).raise_for_errors()
        ks.commit({(topic, 0): 9}).raise_for_errors()
        reg = paths.consumer_registration_path(g, g + "_host-1-abcdef12")
        zk.create(reg, b'{"version":1,"subscription":{"%s":1},"pattern":"static","timestamp":"1"}' % topic.encode(),
                  ephemeral=True, makepath=True)
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--timeout", "0.5", expect=1)
        assert out["ready"] is False and out["zookeeper_members"] and out["copied"] == {}
        zk.delete(reg)
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--timeout", "5", expect=1)
        assert out["to_copy"] == {"%s-1" % topic: 4} and ks.fetch(parts) == {(topic, 0): 9}
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                      expect=0)
        assert out["ready"] is True and out["copied"] == {"%s-1" % topic: 4} and len(out["backup"]) == 3
        assert ks.fetch(parts) == {(topic, 0): 9, (topic, 1): 4}
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, expect=0)
        assert out["to_copy"] == {}
    finally:
        ks.close()


def test_cutover_then_a_broker_coordinated_consumer_resumes_exactly(services, zk, unique, tmp_path):
    """After cutover a Kafka-coordinated consumer (KafkaConsumer(group_id=...)) starts exactly at the offsets the
    ZooKeeper group had committed; the broker-side group is seen Stable while it polls and Empty after it left."""
    from tests.support.consumer_helpers import produce_tracked
    topic = services.create_topic(unique("co2"), 2)
    produce_tracked(services.bootstrap_servers, topic, 40, partitions=2, tag="co2")  # offsets 0..19 each
    g = unique("g-co2")
    zs, ks = _stores(services, zk, g)
    try:
        zs.commit({(topic, 0): 7, (topic, 1): 13}).raise_for_errors()
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                      expect=0)
        assert out["ready"] is True
        kc = KafkaConsumer(topic, bootstrap_servers=services.bootstrap_servers, group_id=g, enable_auto_commit=False,
                           auto_offset_reset="none", session_timeout_ms=6000, heartbeat_interval_ms=1000)
        try:
            first = {}
            deadline = time.monotonic() + 30
            while len(first) < 2 and time.monotonic() < deadline:
                for tp, recs in kc.poll(500).items():
                    first.setdefault(tp.partition, recs[0].offset)
            assert first == {0: 7, 1: 13}, first
            code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=None)
            assert st["broker_group"]["state"] == "Stable" and st["broker_group"]["members"], st["broker_group"]
        finally:
            kc.close(autocommit=False)
        wait_until(lambda: zkmigrate_json(services, "status", "--group", g, expect=None)[1]["broker_group"]["state"]
                   == "Empty", 30, "broker-side group Empty after its member left")
    finally:
        ks.close()


def test_import_never_rewinds_without_allow_rewind_and_backs_up_first(services, zk, unique, tmp_path):
    """One rule for every writer (as copy and rollback): import moves no offset backwards unless --allow-rewind,
    writes a backup of both stores before the first write, and its dry run shows each change."""
    g, t = unique("g-imp"), "imp-topic"
    zk.create(paths.partition_offset_path(g, t, 0), b"50", makepath=True)
    zk.create(paths.partition_offset_path(g, t, 1), b"5", makepath=True)
    f = tmp_path / "offsets.txt"
    f.write_text("/consumers/%s/offsets/%s/0:10\n/consumers/%s/offsets/%s/1:7\n" % (g, t, g, t))
    backups = tmp_path / "backups"
    code, out, err = zkmigrate(services, "import", "--file", str(f), "--store", "zookeeper", expect=1)
    assert "%s-1: 5 -> 7" % t in out and "skipped %s-0" % t in err and "--allow-rewind" in err
    code, out, err = zkmigrate(services, "import", "--file", str(f), "--store", "zookeeper", "--execute",
                               "--backup-dir", str(backups), expect=1)
    assert zk.get(paths.partition_offset_path(g, t, 0))[0] == b"50"      # not moved backwards
    assert zk.get(paths.partition_offset_path(g, t, 1))[0] == b"7"       # forwards is fine
    assert len(list(backups.iterdir())) == 3  # both stores' files and the manifest
    code, rep, _ = zkmigrate_json(services, "import", "--file", str(f), "--store", "zookeeper", "--execute",
                                  "--allow-rewind", "--backup-dir", str(backups), expect=0)
    assert rep["groups"][g]["changes"] == {"%s-0" % t: {"from": 50, "to": 10}}
    assert zk.get(paths.partition_offset_path(g, t, 0))[0] == b"10"
    zk_backups = sorted(p for p in backups.iterdir() if "-zookeeper-" in p.name)
    assert zk_backups[-1].read_text().splitlines()[0] == "/consumers/%s/offsets/%s/0:50" % (g, t)


def test_verify_compares_both_stores_in_every_phase_and_the_log_range(services, zk, unique):
    topic = services.create_topic(unique("vb"), 1)
    services.produce(topic, 1000, size=20, partition=0)
    g = unique("g-vb")
    zs, ks = _stores(services, zk, g)
    tp = (topic, 0)
    try:
        zs.commit({tp: 900}).raise_for_errors()
        ks.commit({tp: 10}).raise_for_errors()
        # ZooKeeper far ahead of Kafka: the kafka phase must not pass (a rollback's max-read would jump to 900)
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0.5",
                                      expect=1)
        assert any("kafka offset 10 stays behind zookeeper offset 900" in p for p in rep["problems"]), rep
        zs.commit({tp: 5}).raise_for_errors()
        ks.commit({tp: 950}).raise_for_errors()
        # Kafka far ahead of ZooKeeper: the zookeeper phase must not pass (the dual phase would skip to 950)
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", "--settle", "0.5",
                                      expect=1)
        assert any("zookeeper offset 5 stays behind kafka offset 950" in p for p in rep["problems"]), rep
        # an offset beyond the log end fails whatever the phase
        zs.commit({tp: 5000}).raise_for_errors()
        ks.commit({tp: 5000}).raise_for_errors()
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0.5",
                                      expect=1)
        assert any("beyond the log end 1000" in p for p in rep["problems"]), rep
        zs.commit({tp: 1000}).raise_for_errors()
        ks.commit({tp: 1000}).raise_for_errors()
        zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0.5", expect=0)
        # an offset below the log start (records deleted by retention) fails too, and shows in status
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=services.bootstrap_servers)
        try:
            admin.delete_records({TopicPartition(topic, 0): 300})
        finally:
            admin.close()
        # only the store the phase reads is held to the log range: one retention period after the switch, the
        # frozen ZooKeeper offsets of the kafka phase are below the log start, which is reported, not failed
        zs.commit({tp: 200}).raise_for_errors()
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0.5",
                                      expect=0)
        assert rep["problems"] == [] and any("zookeeper offset 200 is below the log start 300" in n
                                             and "not read in the kafka phase" in n for n in rep["notes"]), rep
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", "--settle", "0.5",
                                      expect=1)
        assert any("zookeeper offset 200 is below the log start 300" in p for p in rep["problems"]), rep
        ks.commit({tp: 200}).raise_for_errors()
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0.5",
                                      expect=1)
        assert any("kafka offset 200 is below the log start 300" in p for p in rep["problems"]), rep
        # the Kafka store below the log start is only a note in the zookeeper phase (ZooKeeper is read there)
        zs.commit({tp: 400}).raise_for_errors()
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", "--settle", "0.5",
                                      expect=0)
        assert any("kafka offset 200 is below the log start 300" in n for n in rep["notes"]), rep
        # dual members read the greater of the two: that one is held to the range
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "dual", "--to", "zookeeper",
                                      "--settle", "0.5", expect=0)
        assert any("kafka offset 200 is below the log start 300" in n for n in rep["notes"]), rep
        code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
        assert any("below the log start 300" in w for w in st["warnings"]), st["warnings"]
    finally:
        ks.close()
