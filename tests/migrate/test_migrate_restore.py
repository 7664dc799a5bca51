"""`zkmigrate restore BACKUP`: both stores put back exactly as a backup found them, offsets created since deleted
(ZooKeeper nodes, Kafka's OffsetDelete), dry run first, a backup of what was there before; a group member started
afterwards with the default settings resumes exactly where the backup says. A bad backup is refused before
anything connects."""
import json
import os
import subprocess
import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from tests.support.consumer_helpers import produce_tracked
from tests.support.migrate_support import zkmigrate, zkmigrate_json
from zkconsumer.core.layout import paths
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore
from zkconsumer_migrate.restore import plan_restore

_offset = st.one_of(st.none(), st.integers(0, 50))
_state = st.dictionaries(st.tuples(st.sampled_from("ab"), st.integers(0, 3)), st.tuples(_offset, _offset),
                         max_size=8)


@given(_state, _state)
def test_plan_restore_turns_the_current_state_into_the_backup(saved, current):
    plan = plan_restore(saved, current)
    after = {tp: list(current.get(tp, (None, None))) for tp in set(saved) | set(current)}
    for i, store in enumerate(("zookeeper", "kafka")):
        for tp, off in plan[store]["set"].items():
            after[tp][i] = off
        for tp in plan[store]["delete"]:
            after[tp][i] = None
        assert plan[store]["unchanged"] + len(plan[store]["set"]) + len(plan[store]["delete"]) == len(saved)
    assert {tp: tuple(after[tp]) for tp in saved} == saved  # exactly the backup on its partitions
    assert {tp: tuple(v) for tp, v in after.items() if tp not in saved} == \
        {tp: current[tp] for tp in current if tp not in saved}  # nothing else touched


def _both(services, zk, g, parts):
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        return ZooKeeperOffsetStore(zk, g).fetch(parts), ks.fetch(parts)
    finally:
        ks.close()


def test_restore_puts_both_stores_back_exactly(services, zk, unique, tmp_path):
    t = services.create_topic(unique("rs"), 3)
    produce_tracked(services.bootstrap_servers, t, 300, partitions=3)  # 100 per partition
    g = unique("rs-g")
    parts = [(t, p) for p in range(3)]
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        # Kafka's first, then ZooKeeper's (a group back on ZooKeeper storage after a dual phase): Kafka's 8 was not
        # set after ZooKeeper's 10, so cutover copies 10 over it
        assert ks.commit({(t, 0): 8}).ok
        time.sleep(0.05)
        assert ZooKeeperOffsetStore(zk, g).commit({(t, 0): 10, (t, 1): 20}).ok
    finally:
        ks.close()
    before = _both(services, zk, g, parts)
    bdir = tmp_path / "backups"
    # the changes of a migration: cutover copies partitions 0 and 1 into Kafka, a reset moves Kafka's 0 and rollback
    # ZooKeeper's 0 forwards, another reset creates partition 2 in both stores
    code, co, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(bdir), expect=0)
    manifest = [p for p in co["backup"] if p.endswith(".json")]
    assert len(co["backup"]) == 3 and len(manifest) == 1, co["backup"]
    zkmigrate(services, "reset-offsets", "--group", g, "--topic", "%s:0" % t, "--to-offset", "30", "--store", "kafka",
              "--execute", "--backup-dir", str(bdir), expect=0)
    zkmigrate(services, "rollback", "--group", g, "--execute", "--backup-dir", str(bdir), expect=0)
    zkmigrate(services, "reset-offsets", "--group", g, "--topic", "%s:2" % t, "--to-offset", "50", "--store", "both",
              "--execute", "--backup-dir", str(bdir), expect=0)
    changed = _both(services, zk, g, parts)
    assert changed == ({(t, 0): 30, (t, 1): 20, (t, 2): 50}, {(t, 0): 30, (t, 1): 20, (t, 2): 50})

    # dry run: every change listed (deletions included), nothing changed; the offsets written since the backup
    # that it would delete or move back are listed, except the one the cutover itself wrote (kafka 1: 20)
    code, dry, _ = zkmigrate_json(services, "restore", manifest[0], expect=1)
    assert dry["changes"] == {
        "zookeeper": {"%s-0" % t: {"from": 30, "to": 10}, "%s-2" % t: {"from": 50, "to": None}},
        "kafka": {"%s-0" % t: {"from": 30, "to": 8}, "%s-1" % t: {"from": 20, "to": None},
                  "%s-2" % t: {"from": 50, "to": None}}}, dry["changes"]
    assert set(dry["newer"]) == {"zookeeper:%s-0" % t, "zookeeper:%s-2" % t, "kafka:%s-0" % t, "kafka:%s-2" % t}
    assert "after the backup was taken" in dry["newer"]["kafka:%s-0" % t] and "--discard-newer" in \
        dry["newer"]["kafka:%s-0" % t]
    assert dry["by"] == "zkmigrate cutover" and dry["exact"] is True
    assert _both(services, zk, g, parts) == changed
    code, out, err = zkmigrate(services, "restore", manifest[0], "--discard-newer", expect=0)
    assert "delete (no offset in the backup)" in out and "dry run" in out and "DISCARDED" in err
    code, res, _ = zkmigrate_json(services, "restore", manifest[0], "--execute", "--backup-dir", str(bdir), expect=1)
    assert res["written"] == res["deleted"] == 0 and res["backup"] == [] and _both(services, zk, g, parts) == changed

    code, res, _ = zkmigrate_json(services, "restore", manifest[0], "--execute", "--discard-newer", "--backup-dir",
                                  str(bdir), expect=0)
    assert (res["written"], res["deleted"], res["failed"]) == (2, 3, {}), res
    assert _both(services, zk, g, parts) == before
    assert zk.exists(paths.partition_offset_path(g, t, 2)) is None
    again = zkmigrate_json(services, "restore", manifest[0], expect=0)[1]
    assert again["changes"] == {"zookeeper": {}, "kafka": {}}  # idempotent

    # what was there before the restore was backed up: restoring that backup undoes the restore
    undo = [p for p in res["backup"] if p.endswith(".json")][0]
    zkmigrate_json(services, "restore", undo, "--execute", "--backup-dir", str(bdir), expect=0)
    assert _both(services, zk, g, parts) == changed
    zkmigrate_json(services, "restore", manifest[0], "--execute", "--discard-newer", "--backup-dir", str(bdir),
                   expect=0)

    # a member with the default settings (offsets.storage=zookeeper, auto.offset.reset=largest) resumes exactly at
    # the restored offsets: 90 + 80 messages, nothing of partition 2 (no offset: it starts at the log end)
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable), "zkconsumer"), "consume", "--zookeeper",
                        services.zookeeper_connect, "--group", g, "--topic", t, "--max-messages", "170"],
                       capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    got = [json.loads(line) for line in p.stdout.splitlines()]
    first = {}
    for m in got:
        first.setdefault(m["partition"], m["offset"])
    assert first == {0: 10, 1: 20} and len(got) == 170, (first, len(got))


def test_restore_of_a_backup_without_manifest_and_bad_backups(services, zk, unique, tmp_path):
    t = services.create_topic(unique("rs2"), 2)
    produce_tracked(services.bootstrap_servers, t, 20, partitions=2)
    g = unique("rs2-g")
    assert ZooKeeperOffsetStore(zk, g).commit({(t, 0): 4}).ok
    bdir = tmp_path / "b"
    code, cp, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(bdir), expect=0)
    zk_txt = [p for p in cp["backup"] if "-zookeeper-" in p][0]
    # bad backups: exit 2 naming the file and what is wrong, nothing connects or changes
    bad = tmp_path / ("backup-%s-20260101T000000-000.json" % g)
    bad.write_text(json.dumps({"version": 1, "group": g, "partitions": [
        {"topic": t, "partition": 0, "zookeeper": -3, "kafka": None}]}))
    code, out, err = zkmigrate(services, "restore", str(bad), "--execute")
    assert code == 2 and str(bad) in err and "partitions[0]" in err and "-3" in err, (code, err)
    code, out, err = zkmigrate(services, "restore", str(tmp_path / "nope.json"))
    assert code == 2 and "nope.json" in err
    # an older backup (two .txt files, no manifest): restored from the files, with a warning
    os.remove([p for p in cp["backup"] if p.endswith(".json")][0])
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        assert ks.commit({(t, 0): 9, (t, 1): 7}).ok
        # the Kafka offset 9 it would delete was committed after the backup: refused, nothing changed
        code, res, _ = zkmigrate_json(services, "restore", zk_txt, "--execute", "--backup-dir", str(bdir), expect=1)
        assert set(res["newer"]) == {"kafka:%s-0" % t} and res["deleted"] == 0, res
        assert ks.fetch([(t, 0), (t, 1)]) == {(t, 0): 9, (t, 1): 7}
        code, res, _ = zkmigrate_json(services, "restore", zk_txt, "--execute", "--discard-newer", "--backup-dir",
                                      str(bdir), expect=0)
        assert res["exact"] is False and any("no manifest" in w for w in res["warnings"])
        # partition 0 had no Kafka offset in the backup (listed in the ZooKeeper file only): deleted; partition 1
        # is in neither file: not known, left as it is
        assert ks.fetch([(t, 0), (t, 1)]) == {(t, 1): 7}
        assert res["not_in_backup"] == {"%s-1" % t: {"zookeeper": None, "kafka": 7}}
    finally:
        ks.close()


def test_an_old_backup_does_not_undo_what_the_new_consumers_committed(services, zk, unique, tmp_path):
    """The backup cutover wrote, restored after the broker-coordinated consumers ran (defaults: auto commit, reset
    to latest): it would delete the Kafka offsets they committed, and when they start again they would skip what
    arrived meanwhile. Refused (dry run and --execute), naming each offset, its commit time and the way out; nothing
    changed; --discard-newer restores it all the same. Right after the cutover the same backup restores without
    the override (the offsets the cutover wrote are its own)."""
    from kafka import KafkaConsumer
    t = services.create_topic(unique("rn"), 2)
    produce_tracked(services.bootstrap_servers, t, 200, partitions=2)  # 100 per partition
    g = unique("rn-g")
    parts = [(t, 0), (t, 1)]
    assert ZooKeeperOffsetStore(zk, g).commit({(t, 0): 10, (t, 1): 20}).ok
    bdir = tmp_path / "backups"
    code, co, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(bdir), expect=0)
    [manifest] = [p for p in co["backup"] if p.endswith(".json")]
    code, dry, _ = zkmigrate_json(services, "restore", manifest, expect=0)  # nothing ran since: the undo of cutover
    assert dry["newer"] == {} and set(dry["changes"]["kafka"]) == {"%s-0" % t, "%s-1" % t}

    kc = KafkaConsumer(t, bootstrap_servers=services.bootstrap_servers, group_id=g)  # the new consumers' defaults
    try:
        got = 0
        deadline = time.monotonic() + 60
        while got < 170 and time.monotonic() < deadline:
            got += sum(len(v) for v in kc.poll(500).values())
        assert got == 170, got
    finally:
        kc.close()  # commits (enable.auto.commit)
    assert _both(services, zk, g, parts)[1] == {(t, 0): 100, (t, 1): 100}
    for args in ((), ("--execute",)):
        code, out, err = zkmigrate(services, "restore", manifest, *args, "--backup-dir", str(bdir / "r"), expect=1)
        assert "not restored: 2 offset(s) were committed since the backup" in out, out
        for p in (0, 1):
            line = [ln for ln in err.splitlines() if ln.startswith("REFUSED kafka:%s-%d" % (t, p))]
            assert line and "group %s" % g in line[0] and "100, committed" in line[0], err
            assert "after the backup was taken" in line[0] and "delete" in line[0] and "--discard-newer" in line[0]
    assert not (bdir / "r").exists()
    assert _both(services, zk, g, parts) == ({(t, 0): 10, (t, 1): 20}, {(t, 0): 100, (t, 1): 100})
    code, res, _ = zkmigrate_json(services, "restore", manifest, "--execute", "--discard-newer", "--backup-dir",
                                  str(bdir), expect=0)
    assert res["deleted"] == 2 and set(res["newer"]) == {"kafka:%s-0" % t, "kafka:%s-1" % t}
    assert _both(services, zk, g, parts) == ({(t, 0): 10, (t, 1): 20}, {})
