"""zkmigrate reset-offsets: kafka-consumer-groups --reset-offsets for ZooKeeper groups (and dual/Kafka stores).

Pure planning rules first, then the command against real ZooKeeper + Apache Kafka: dry run by default, a backup
first, the stores the group uses, clamping into the log range, per-partition scope, refusal while live."""
import json
import os
import time

import pytest
from kafka import KafkaProducer

from consumer_helpers import wait_until
from test_migrate_support import ConsumerProc, zkmigrate_json
from zkconsumer_migrate.reset import plan_reset

A, B = ("t", 0), ("t", 1)


def test_plan_rules():
    cur = {A: 5, B: None}
    lo, hi = {A: 2, B: 0}, {A: 10, B: 7}
    assert {tp: d["new"] for tp, d in plan_reset("earliest", None, cur, lo, hi).items()} == {A: 2, B: 0}
    assert {tp: d["new"] for tp, d in plan_reset("latest", None, cur, lo, hi).items()} == {A: 10, B: 7}
    p = plan_reset("offset", 1, cur, lo, hi)
    assert p[A]["new"] == 2 and "clamped" in p[A]["note"] and p[B]["new"] == 1
    p = plan_reset("shift", -4, cur, lo, hi)
    assert p[A]["new"] == 2 and "before the log start" in p[A]["note"]
    assert p[B]["new"] == 0 and "no current offset" in p[B]["note"]
    assert plan_reset("shift", 3, cur, lo, hi)[A]["new"] == 8
    assert plan_reset("shift", 30, cur, lo, hi)[A]["new"] == 10
    p = plan_reset("current", None, cur, lo, hi)  # kafka-consumer-groups: the log end without a current offset
    assert p[A]["new"] == 5 and p[B]["new"] == 7 and "log end" in p[B]["note"]
    p = plan_reset("datetime", 123, cur, lo, hi, {A: 4, B: None})
    assert p[A]["new"] == 4 and p[B]["new"] == 7 and "log end" in p[B]["note"]
    p = plan_reset("earliest", None, {("u", 0): 3}, lo, hi)
    assert p[("u", 0)]["new"] is None and "not changed" in p[("u", 0)]["note"]
    with pytest.raises(ValueError):
        plan_reset("sideways", None, cur, lo, hi)


def _produce(bootstrap, topic, partition, n, tag):
    prod = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        for i in range(n):
            prod.send(topic, value=b"%s-%d" % (tag.encode(), i), partition=partition)
        prod.flush(30)
    finally:
        prod.close(10)


def _offsets(rep):
    return {(r["topic"], r["partition"]): (r["zookeeper_offset"], r["kafka_offset"], r["new"])
            for r in rep["partitions"]}


def test_reset_offsets_command(services, unique, tmp_path, monkeypatch):
    monkeypatch.setenv("ZKMIGRATE_STATE_DIR", str(tmp_path / "state"))
    t = services.create_topic(unique("rs"), 2)
    for p in (0, 1):
        _produce(services.bootstrap_servers, t, p, 10, "early")
    time.sleep(1.5)
    middle = time.time()
    time.sleep(1.5)
    for p in (0, 1):
        _produce(services.bootstrap_servers, t, p, 5, "late")
    g = unique("rs-g")
    c = ConsumerProc(tmp_path, "c", services.zookeeper_connect, g, t)
    try:
        wait_until(lambda: len(c.seen()) == 30, 40, message="the group to consume everything")
        code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--to-earliest",
                                      expect=1)  # live member: refused (exit 1), nothing written
        assert "live" in rep["error"]
    finally:
        c.stop()
        c.kill()
    # dry run: shows the change, writes nothing
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--to-earliest", expect=0)
    assert _offsets(rep) == {(t, 0): (15, None, 0), (t, 1): (15, None, 0)} and rep["written"] == 0
    code, rep, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert {r["zookeeper_offset"] for r in rep["partitions"]} == {15}
    # one partition by offset; the other untouched; a backup of both stores first
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:0" % t, "--to-offset", "3",
                                  "--execute", expect=0)
    assert _offsets(rep) == {(t, 0): (15, None, 3)} and rep["written"] == 1 and len(rep["backup"]) == 3
    assert all(os.path.dirname(b) == str(tmp_path / "state" / "backups") for b in rep["backup"])
    code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert {(r["partition"], r["zookeeper_offset"]) for r in st["partitions"]} == {(0, 3), (1, 15)}
    # shift clamps into the log range, and says so
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", t, "--shift-by", "-100",
                                  "--execute", expect=0)
    assert {r["new"] for r in rep["partitions"]} == {0} and all("clamped" in r["note"] for r in rep["partitions"])
    # by time: the first message written after `middle` is offset 10 in each partition
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(middle)) + ".%03dZ" % int((middle % 1) * 1000)
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", t, "--to-datetime", stamp,
                                  "--execute", expect=0)
    assert {r["new"] for r in rep["partitions"]} == {10}, rep
    # a dual-commit group keeps offsets in both stores: auto writes both (the greater one would win otherwise)
    zkmigrate_json(services, "copy", "--group", g, "--execute", expect=0)
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", t, "--to-offset", "12",
                                  "--execute", expect=0)
    assert all(r["stores"] == ["zookeeper", "kafka"] for r in rep["partitions"]) and rep["written"] == 4
    code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert {(r["zookeeper_offset"], r["kafka_offset"]) for r in st["partitions"]} == {(12, 12)}


def test_reset_offsets_bad_input_before_connecting(services):
    for args, needle in ((["--group", "g", "--all-topics"], "exactly one of"),
                         (["--group", "g", "--to-latest"], "--all-topics"),
                         (["--group", "g", "--all-topics", "--to-datetime", "yesterday"], "ISO 8601"),
                         (["--group", "g", "--topic", "t:x", "--to-latest"], "comma-separated"),
                         (["--group", "g", "--topic", "bad/topic", "--to-latest"], "illegal")):
        code, out, _ = zkmigrate_json(services, "reset-offsets", *args, expect=2)
        assert needle in json.dumps(out), (args, out)


def test_reset_auto_writes_where_the_recorded_phase_reads(services, zk, unique, tmp_path):
    """--store auto for a partition no store has an offset for yet (a partition added to a topic): a group in the
    Kafka phase reads Kafka, so the reset goes there (ZooKeeper alone would change nothing); in the dual phase it
    goes to both stores."""
    from zkconsumer.offsets import ZooKeeperOffsetStore
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    for phase, to, want in (("kafka", (), ["kafka"]), ("dual", ("--to", "kafka"), ["zookeeper", "kafka"])):
        t = services.create_topic(unique("rp"), 2)
        _produce(services.bootstrap_servers, t, 0, 10, "a")
        g = unique("rp-g")
        zs, ks = ZooKeeperOffsetStore(zk, g), KafkaOffsetStore(services.bootstrap_servers, g)
        try:
            zs.commit({(t, 0): 4}).raise_for_errors()
            ks.commit({(t, 0): 6}).raise_for_errors()
            code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", phase, *to, "--settle", "0",
                                          expect=0)  # partition 1 is empty: nothing to lose
            assert rep["recorded_phase"]["phase"] == phase
            _produce(services.bootstrap_servers, t, 1, 10, "b")
            code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:1" % t,
                                          "--to-offset", "3", "--execute", "--backup-dir", str(tmp_path), expect=0)
            assert rep["partitions"][0]["stores"] == want, rep
            assert ks.fetch([(t, 1)]).get((t, 1)) == (3 if "kafka" in want else None)
            assert zs.fetch([(t, 1)]).get((t, 1)) == (3 if "zookeeper" in want else None)
        finally:
            ks.close()
