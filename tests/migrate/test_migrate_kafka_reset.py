"""A Kafka offset set BELOW ZooKeeper's (a reset to reprocess, the new consumers after a cutover) is not
overwritten by ``copy`` or ``cutover`` ("never backwards" would allow it and skip the records between), unless a
member wrote ZooKeeper after Kafka's offset was set; and a ``restore`` that put Kafka's offset back is not taken
for such a reset: the cutover it undid can be run again.

The groups' histories are written in the order a real group writes them: Kafka's offset first (the dual-commit
phase), then ZooKeeper's (the members back on ZooKeeper storage), then what the test is about.
"""
import json
import time

from tests.support.migrate_support import kafka_commit, kafka_fetch, zkmigrate_json
from zkconsumer.offsets import ZooKeeperOffsetStore


def _group(services, zk, unique, name, kafka=5, zookeeper=8):
    """A 2-partition topic with 20 records each, and a group whose Kafka offsets are *kafka*, then (written after)
    ZooKeeper's *zookeeper*."""
    t = services.create_topic(unique(name), 2)
    for p in (0, 1):
        services.produce(t, 20, partition=p)
    g = unique(name + "-g")
    kafka_commit(services, g, {(t, 0): kafka, (t, 1): kafka})
    time.sleep(0.05)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): zookeeper, (t, 1): zookeeper}).raise_for_errors()
    return t, g


def _manifest(report):
    return [p for p in report["backup"] if p.endswith(".json")][0]


def _as_an_older_zkmigrate_wrote_it(path, key):
    """The backup manifest at *path* without *key* (``kafka_since``, ``zk_mtime``), as an older zkmigrate wrote it."""
    with open(path) as f:
        doc = json.load(f)
    del doc[key]
    with open(path, "w") as f:
        json.dump(doc, f)


def _stops_before_recording_its_writes(monkeypatch):
    """The next restore stops (connection lost) after recording the ZooKeeper writes it is about to make and writing
    them, before recording them as made."""
    from kazoo.exceptions import ConnectionLoss
    from zkconsumer_migrate import state
    record = state.add_restored_nodes

    def stopped(*a, **kw):
        if kw.get("pending") is None:
            raise ConnectionLoss()
        return record(*a, **kw)
    monkeypatch.setattr(state, "add_restored_nodes", stopped)


def _reset_undone_by_a_restore_that_stops(services, zk, t, g, tmp_path, monkeypatch):
    """ZooKeeper's 8 reset to 3 by mistake, then its backup restored by a restore that stops after writing 8 back,
    before recording that write (:func:`_stops_before_recording_its_writes`); the reset's report."""
    code, rs, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "zookeeper",
                                 "--to-offset", "3", "--execute", "--backup-dir", str(tmp_path), expect=0)
    _stops_before_recording_its_writes(monkeypatch)
    code, _, _ = zkmigrate_json(services, "restore", _manifest(rs), "--execute", "--backup-dir", str(tmp_path))
    monkeypatch.undo()
    assert code != 0 and ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}
    return rs


def _zookeeper_writes_fail(monkeypatch):
    """The next restore's ZooKeeper offset writes fail (its Kafka ones are made)."""
    import zkconsumer_migrate.restore as restore
    write = restore.apply_copy

    def zookeeper_fails(store, offsets, *a, **kw):
        if store.name == "zookeeper":
            return {tp: "connection lost" for tp in offsets}
        return write(store, offsets, *a, **kw)
    monkeypatch.setattr(restore, "apply_copy", zookeeper_fails)


def test_cutover_and_copy_do_not_copy_a_frozen_zookeeper_offset_over_a_deliberate_kafka_reset(services, zk, unique,
                                                                                             tmp_path):
    """Cut over at ZooKeeper's 8; the new consumers committed 10, then the operator reset Kafka to 2 to reprocess.
    Running cutover again (or copy) must not write ZooKeeper's frozen 8 over Kafka's 2: 2..7 would be skipped.
    Refused, nothing written, not reported as unchecked; a ZooKeeper offset a member wrote after Kafka's offset was
    set (one that came back before the fence) is still copied."""
    t, g = _group(services, zk, unique, "fo1", kafka=3, zookeeper=8)
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "kafka", "--to-offset", "2",
                   "--execute", "--backup-dir", str(tmp_path), expect=0)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and not out["ready"] and set(out["refused"]) == {"%s-0" % t, "%s-1" % t}, out
    assert "before Kafka's offset became 2" in out["refused"]["%s-0" % t], out
    assert out["unchecked"] == [] and out["reason"].startswith("2 partition(s) have stale"), out
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 1 and out["written"] == 0 and set(out["refused"]) == {"%s-0" % t, "%s-1" % t}, out
    assert kafka_fetch(services, g, [(t, 0), (t, 1)]) == {(t, 0): 2, (t, 1): 2}
    # a member's write after Kafka's offset was set: copied
    time.sleep(0.05)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 9}).raise_for_errors()
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert out["to_write"] == {"%s-0" % t: 9, "%s-1" % t: 8} and set(out["refused"]) == {"%s-1" % t}, out


def test_a_cutover_undone_by_its_restore_runs_again_and_a_later_reset_still_counts(services, zk, unique, tmp_path):
    """Kafka 5, then the members wrote ZooKeeper 8: cutover copies 8. Undone by restoring its backup (Kafka 5
    again, written now), the cutover is run again: it copies 8 as the first did (the restore's commit is not a reset
    made now: it put back what Kafka held, since when the backup says). A reset after the restore is one."""
    t, g = _group(services, zk, unique, "ru")
    code, co, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert co["copied"] == {"%s-0" % t: 8, "%s-1" % t: 8}, co
    with open(_manifest(co)) as f:
        assert {e["partition"] for e in json.load(f)["kafka_since"]} == {0, 1}
    zkmigrate_json(services, "restore", _manifest(co), "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert kafka_fetch(services, g, [(t, 0), (t, 1)]) == {(t, 0): 5, (t, 1): 5}
    # copy's dry run and a rollback's dry run judge Kafka's 5 by when it was first set, too
    code, dry, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path), expect=0)
    assert dry["to_write"] == {"%s-0" % t: 8, "%s-1" % t: 8} and not dry["refused"], dry
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--backup-dir", str(tmp_path), expect=0)
    assert set(rb["kept_ahead"]) == {"%s-0" % t, "%s-1" % t} and not rb["skipped_rewind"], rb
    # a reset of partition 1 after the restore: a new run of commits, set after ZooKeeper's 8
    time.sleep(0.05)
    zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:1" % t, "--store", "kafka", "--to-offset",
                   "4", "--execute", "--backup-dir", str(tmp_path), expect=0)
    code, again, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and set(again["refused"]) == {"%s-1" % t}, again
    assert "before Kafka's offset became 4" in again["refused"]["%s-1" % t], again
    # the reset undone by restoring its own backup: Kafka's 5 again, judged as the first cutover judged it
    resets = sorted(tmp_path.glob("backup-%s-2*.json" % g))
    last = [p for p in resets if json.load(open(p))["by"] == "zkmigrate reset-offsets"][-1]
    zkmigrate_json(services, "restore", str(last), "--execute", "--backup-dir", str(tmp_path), expect=0)
    code, again, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                    expect=0)
    assert again["copied"] == {"%s-0" % t: 8, "%s-1" % t: 8} and again["ready"], again


def test_a_kafka_offset_restored_from_a_backup_that_does_not_say_since_when_is_not_checked(services, zk, unique,
                                                                                          tmp_path):
    """A backup of an older zkmigrate has no ``kafka_since``: after restoring it, when Kafka had first held the offset
    put back is not known, and a cutover refuses to copy ZooKeeper's over it as NOT CHECKED (not as stale), naming
    the restore; --allow-stale copies."""
    t, g = _group(services, zk, unique, "rk")
    code, co, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    path = _manifest(co)
    _as_an_older_zkmigrate_wrote_it(path, "kafka_since")
    zkmigrate_json(services, "restore", path, "--execute", "--backup-dir", str(tmp_path), expect=0)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and out["unchecked"] == ["%s-0" % t, "%s-1" % t], out
    assert "zkmigrate restore put Kafka's 5 back" in out["refused"]["%s-0" % t], out
    assert out["reason"].startswith("could not check"), out
    # a member's write after the restore is where the group stopped: copied
    time.sleep(0.05)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 9}).raise_for_errors()
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path))
    assert set(out["refused"]) == {"%s-1" % t} and out["unchecked"] == ["%s-1" % t], out
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--allow-stale", "--backup-dir",
                                  str(tmp_path), expect=0)
    assert out["copied"] == {"%s-0" % t: 9, "%s-1" % t: 8}, out


def test_an_unreadable_consumer_offsets_is_reported_as_not_checked(services, zk, unique, tmp_path, monkeypatch):
    """Whether ZooKeeper's offset was written after Kafka's lower one was set cannot be read: cutover is not ready
    because it could not check (not "stale"), and the refusal names the Read right."""
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.offsets import expiry
    t, g = _group(services, zk, unique, "ru2")

    def unreadable(*a, **kw):
        raise ClusterUnavailableError("TOPIC_AUTHORIZATION_FAILED")
    monkeypatch.setattr(expiry, "read_commit_log", unreadable)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and out["unchecked"] == ["%s-0" % t, "%s-1" % t] and not out["backup"], out
    assert out["reason"].startswith("could not check"), out
    assert "Read on topic __consumer_offsets" in out["refused"]["%s-0" % t], out


def test_a_zookeeper_reset_undone_by_its_restore_leaves_the_cutover_as_it_was(services, zk, unique, tmp_path):
    """Kafka 5, then the members wrote ZooKeeper 8; a ZooKeeper reset by mistake, undone by restoring its backup:
    ZooKeeper's 8 is back, written by the restore, and counts from when the members wrote it (the backup's
    zk_mtime): cutover copies it as it would have before. A Kafka reset after the members' write still counts."""
    t, g = _group(services, zk, unique, "rz")
    code, rs, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "zookeeper",
                                 "--to-offset", "3", "--execute", "--backup-dir", str(tmp_path), expect=0)
    with open(_manifest(rs)) as f:
        assert {e["partition"] for e in json.load(f)["zk_mtime"]} == {0, 1}
    zkmigrate_json(services, "restore", _manifest(rs), "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path), expect=0)
    assert out["to_write"] == {"%s-0" % t: 8, "%s-1" % t: 8} and not out["refused"], out
    time.sleep(0.05)
    kafka_commit(services, g, {(t, 1): 4})
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path))
    assert set(out["refused"]) == {"%s-1" % t}, out
    assert "as the backup zkmigrate restore wrote it back from says" in out["refused"]["%s-1" % t], out
    assert out["unchecked"] == [], out


def test_a_restore_stopped_before_it_records_its_zookeeper_writes_leaves_them_known(services, zk, unique, tmp_path,
                                                                                     monkeypatch):
    """Kafka 5, ZooKeeper 8 (a member), then Kafka reset to 2 to reprocess: copy refuses 8 over 2. A ZooKeeper reset
    by mistake, undone by a restore that stops (connection lost) after writing ZooKeeper's 8 back and before
    recording that write; run again, it has nothing to write. ZooKeeper's 8 must still count as the restore's write
    of the backup's offset (recorded before writing), not as a member's made now: copy still refuses it."""
    t, g = _group(services, zk, unique, "rc")
    time.sleep(0.05)
    kafka_commit(services, g, {(t, 0): 2, (t, 1): 2})
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path))
    assert set(out["refused"]) == {"%s-0" % t, "%s-1" % t}, out
    rs = _reset_undone_by_a_restore_that_stops(services, zk, t, g, tmp_path, monkeypatch)
    code, again, _ = zkmigrate_json(services, "restore", _manifest(rs), "--execute", "--backup-dir", str(tmp_path),
                                    expect=0)
    assert again["written"] == 0, again
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path))
    assert code == 1 and set(out["refused"]) == {"%s-0" % t, "%s-1" % t} and out["unchecked"] == [], out
    # a member's write after it: copied
    time.sleep(0.05)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 9}).raise_for_errors()
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path))
    assert set(out["refused"]) == {"%s-1" % t}, out


def test_a_restore_that_fails_after_one_that_stopped_keeps_the_stopped_ones_writes_known(services, zk, unique,
                                                                                          tmp_path, monkeypatch):
    """As above, a restore stops after writing ZooKeeper's 8 back, before recording that write (left pending). Then
    another restore of the same partitions (the stopped one's own backup: ZooKeeper 3) fails to write ZooKeeper and
    ends its own pending entries: it must first have confirmed the stopped restore's, or ZooKeeper's 8 would read as
    a member's write made now, and copy would write it over Kafka's 2 (skipping 2..7)."""
    t, g = _group(services, zk, unique, "rf")
    time.sleep(0.05)
    kafka_commit(services, g, {(t, 0): 2, (t, 1): 2})
    _reset_undone_by_a_restore_that_stops(services, zk, t, g, tmp_path, monkeypatch)
    # the backup the stopped restore took (its report, cut short, does not name it)
    its_backup = [str(p) for p in tmp_path.glob("*.json") if json.loads(p.read_text())["by"] == "zkmigrate restore"]
    assert len(its_backup) == 1, its_backup
    _zookeeper_writes_fail(monkeypatch)
    code, second, _ = zkmigrate_json(services, "restore", its_backup[0], "--execute", "--discard-newer",
                                     "--backup-dir", str(tmp_path))
    monkeypatch.undo()
    assert code != 0 and set(second["failed"]) == {"zookeeper:%s-0" % t, "zookeeper:%s-1" % t}, second
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path))
    assert code == 1 and set(out["refused"]) == {"%s-0" % t, "%s-1" % t} and out["unchecked"] == [], out


def test_a_zookeeper_offset_restored_from_a_backup_without_its_time_is_not_checked(services, zk, unique, tmp_path):
    """A backup of an older zkmigrate gives no zk_mtime: ZooKeeper's offset the restore wrote back is no evidence of
    a member, and nothing shows it stale either: cutover is not ready because it could not check."""
    t, g = _group(services, zk, unique, "rn")
    code, rs, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "zookeeper",
                                 "--to-offset", "3", "--execute", "--backup-dir", str(tmp_path), expect=0)
    path = _manifest(rs)
    _as_an_older_zkmigrate_wrote_it(path, "zk_mtime")
    zkmigrate_json(services, "restore", path, "--execute", "--backup-dir", str(tmp_path), expect=0)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--backup-dir", str(tmp_path))
    assert code != 0 and out["unchecked"] == ["%s-0" % t, "%s-1" % t], out
    assert out["reason"].startswith("could not check") and "zkmigrate restore" in out["refused"]["%s-0" % t], out


def test_a_restore_that_wrote_kafka_but_not_zookeeper_does_not_vouch_for_zookeeper(services, zk, unique, tmp_path,
                                                                                    monkeypatch):
    """Kafka 5, then ZooKeeper 8 (a member): copy writes Kafka 8 (its backup: Kafka 5, since then). The members go
    on to ZooKeeper 15. Restoring that backup (--discard-newer) puts Kafka's 5 back but its ZooKeeper write fails:
    the backup's time for Kafka's 5 describes it beside ZooKeeper's 8, not 15, so it must not make 15 look written
    after Kafka's 5 was set; copying 15 over 5 would skip 5..14, which the restore meant to deliver again."""
    t, g = _group(services, zk, unique, "rh")
    code, cp, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    time.sleep(0.05)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 15, (t, 1): 15}).raise_for_errors()
    _zookeeper_writes_fail(monkeypatch)
    code, rs, _ = zkmigrate_json(services, "restore", _manifest(cp), "--execute", "--discard-newer", "--backup-dir",
                                 str(tmp_path))
    monkeypatch.undo()
    assert code != 0 and set(rs["failed"]) == {"zookeeper:%s-0" % t, "zookeeper:%s-1" % t}, rs
    assert kafka_fetch(services, g, [(t, 0), (t, 1)]) == {(t, 0): 5, (t, 1): 5}
    code, out, _ = zkmigrate_json(services, "copy", "--group", g, "--backup-dir", str(tmp_path))
    assert code == 1 and set(out["refused"]) == {"%s-0" % t, "%s-1" % t}, out
    # the ZooKeeper writes it was about to make were not applied: nothing is left pending to catch a member's later
    # write of the same offset
    from zkconsumer.core.layout import paths
    assert json.loads(zk.get(paths.group_restored_path(g))[0])["zk_pending"] == []
