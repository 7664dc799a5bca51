"""Offsets expiring on the broker during a migration (offsets.retention.minutes): the record format and partition
rule of __consumer_offsets (pure), then on an Apache Kafka broker with offsets.retention.minutes=1: status shows
each Kafka offset's commit and expiry time, verify fails when one expires within the margin, copy warns, and
`zkmigrate refresh` keeps a stopped group's offsets while another group's vanish."""
import json
import struct
import time

from consumer_helpers import produce_tracked
from test_migrate_support import run_cli
from chaos_support import own_cluster_fixture
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.expiry import java_string_hash, offsets_topic_partition, parse_commit_record
from zkconsumer import zk as zkmod


def _s(text):
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def test_java_hash_and_partition_rule():
    # values printed by java.lang.String.hashCode on this machine's JDK
    assert java_string_hash("gprobe") == -1239224407 and java_string_hash("orders-app") == 772757305
    assert java_string_hash("é-grp") == 216623617 and java_string_hash("") == 0
    assert offsets_topic_partition("gprobe", 10) == 7 and offsets_topic_partition("orders-app", 50) == 772757305 % 50
    assert offsets_topic_partition("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE: Utils.abs -> 0
    assert java_string_hash("polygenelubricants") == -(1 << 31)


def test_commit_record_versions():
    key = struct.pack(">h", 1) + _s("g") + _s("t") + struct.pack(">i", 3)
    v1 = struct.pack(">hq", 1, 42) + _s("") + struct.pack(">qq", 1700000000000, 1700000060000)
    v3 = struct.pack(">hqi", 3, 42, 7) + _s("meta") + struct.pack(">q", 1700000000001)
    v4 = struct.pack(">hqi", 4, 42, 7) + bytes([5]) + b"meta" + struct.pack(">q", 1700000000002) + bytes([0])
    assert parse_commit_record(key, v1) == ("g", "t", 3, 1700000000000)
    assert parse_commit_record(key, v3) == ("g", "t", 3, 1700000000001)
    assert parse_commit_record(key, v4) == ("g", "t", 3, 1700000000002)
    assert parse_commit_record(key, None) == ("g", "t", 3, None)  # tombstone: deleted or expired
    assert parse_commit_record(struct.pack(">h", 2) + _s("g"), b"whatever") is None  # group metadata


own = own_cluster_fixture("expiry", broker_config={"offsets.retention.minutes": 1,
                                                    "offsets.retention.check.interval.ms": 1000})


def _zkmigrate(own, *args, expect=None):
    from zkconsumer_migrate.cli import cli
    code, out, err = run_cli(cli, list(args) + ["--zookeeper", own.zookeeper_connect, "--bootstrap-server",
                                                own.bootstrap_servers, "--json"], expect)
    return code, json.loads(out), err


def test_expiry_is_visible_verified_and_refreshed(own, unique, tmp_path, monkeypatch):
    monkeypatch.setenv("ZKMIGRATE_STATE_DIR", str(tmp_path / "state"))
    t = own.create_topic(unique("exp"), 2)
    produce_tracked(own.bootstrap_servers, t, 20, partitions=2)
    zk = zkmod.connect(own.zookeeper_connect)
    try:
        kept, dropped = unique("exp-kept"), unique("exp-dropped")
        for g in (kept, dropped):
            assert ZooKeeperOffsetStore(zk, g).commit({(t, 0): 3, (t, 1): 4}).ok
            code, out, _ = _zkmigrate(own, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
            assert out["written"] == 2
            assert "offsets.retention.minutes=1" in out["warnings"][0]
        t_copy = time.time()
        code, st, _ = _zkmigrate(own, "status", "--group", kept, expect=0)
        assert st["offsets_retention_ms"] == 60000
        for r in st["partitions"]:
            committed = time.mktime(time.strptime(r["kafka_committed_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
            expires = time.mktime(time.strptime(r["kafka_expires_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
            assert abs(committed - t_copy) < 10 and expires - committed == 60
        code, rep, _ = _zkmigrate(own, "verify", "--group", kept, "--phase", "kafka", "--settle", "0",
                                  "--expiry-margin", "300", expect=1)
        assert any("expires in" in p and "zkmigrate refresh" in p for p in rep["problems"]), rep["problems"]
        _zkmigrate(own, "verify", "--group", kept, "--phase", "kafka", "--settle", "0", "--expiry-margin", "5",
                   expect=0)
        code, dry, _ = _zkmigrate(own, "refresh", "--group", kept, expect=0)
        assert dry["refreshed"] == 0 and len(dry["offsets"]) == 2
        # kept is refreshed every 15 s, dropped never; both were committed at t_copy, so once dropped's offsets
        # have expired (retention 60 s, checked every second) kept's would have too without the refreshes
        deadline, refreshed_at = t_copy + 120, time.time()
        while any(r["kafka_offset"] is not None
                  for r in _zkmigrate(own, "status", "--group", dropped, expect=0)[1]["partitions"]):
            assert time.time() < deadline, "the unrefreshed group's Kafka offsets did not expire within 120 s"
            if time.time() - refreshed_at >= 15:
                code, out, _ = _zkmigrate(own, "refresh", "--group", kept, "--execute", expect=0)
                assert out["refreshed"] == 2
                refreshed_at = time.time()
            time.sleep(2)
        assert time.time() - t_copy >= 55  # expiry came from the retention, not from something else
        code, st, _ = _zkmigrate(own, "status", "--group", kept, expect=0)
        assert {(r["partition"], r["kafka_offset"]) for r in st["partitions"]} == {(0, 3), (1, 4)}
    finally:
        zkmod.close(zk)
