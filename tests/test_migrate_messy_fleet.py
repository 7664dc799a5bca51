"""The messy fleet: 50 legacy groups as a platform team finds them, moved to broker-coordinated consumers and back
in three fleet-wide commands (`verify --groups-matching`, `cutover`, `rollback`), on an Apache Kafka 3.9 broker
with an authorizer, run as an operator identity that may not Describe one topic, while a second operator works on
the same fleet.

The fleet (every group stopped, in the ZooKeeper phase unless said):

* 31 ordinary groups on topic `main`;
* 10 groups with leftover offsets of topic `old`, which they no longer read (it has since grown a partition they
  never had an offset for): verify reports it, naming `--exclude-topic`; the commands then leave it out;
* 5 groups with offsets of topic `gone`, deleted since: skipped with a warning everywhere (exit 0);
* 1 group with offsets of topic `recreated`, deleted and created again since: its old offsets are refused;
* 1 group whose Kafka offsets expired after it stopped in the Kafka phase (the broker's removal is done here with
  OffsetDelete, which writes the same tombstone as expiry; real expiry with offsets.retention.minutes=1 is in
  test_migrate_stale.py): its frozen ZooKeeper offsets are refused;
* 1 group with offsets of topic `secret-...`, which the operator may not Describe: reported per partition;
* 1 group another operator is cutting over (`zkmigrate cutover --execute --timeout 600`, waiting for a member to
  stop): the fleet commands are refused for it while that holds the group's lock, naming the holder;

and meanwhile the second operator's keep-alive (`refresh --every 3 --execute`) runs over the whole fleet. Every
group must end where it should, and every refusal must name the group, the partition (where there is one) and a
way out. The run takes ~50 s on the loaded 2-core machine (its own cluster: ~16 s more)."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from consumer_helpers import produce_tracked, wait_until
from test_migrate_acl import acl_cluster, ops
from test_migrate_support import delete_topic, zkmigrate_json
from zkconsumer import zk as zkmod
from zkconsumer.layout import paths
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore
from zkconsumer_migrate import state
from zkconsumer_migrate.fence import is_fenced

ZKMIGRATE = os.path.join(os.path.dirname(sys.executable), "zkmigrate")
WAYS_OUT = ("reset-offsets", "--exclude-topic", "--allow-stale", "forget-topic", "grant", "--lock-wait")


@pytest.fixture(scope="module")
def fleet_cluster(tmp_path_factory):
    cluster = acl_cluster(tmp_path_factory.mktemp("messy"), deny_offsets_read=False)
    try:
        yield cluster
    finally:
        cluster.down()


def operator_b(cluster, tmp_path, name, *args):
    """The second operator: zkmigrate in a process of its own, as the same identity."""
    out = open(tmp_path / (name + ".out"), "wb")
    err = open(tmp_path / (name + ".err"), "wb")
    p = subprocess.Popen([ZKMIGRATE] + list(args) + ["--kafka-config", cluster.ops_config, "--zookeeper",
                                                     cluster.zookeeper_connect], stdout=out, stderr=err,
                         stdin=subprocess.DEVNULL)
    p.files = (tmp_path / (name + ".out"), tmp_path / (name + ".err"))
    return p


def names_what_and_way_out(text, group, partitions=()):
    assert group in text, (group, text)
    if partitions:
        assert any(re.search(r"\b%s\b" % re.escape(p), text) for p in partitions), (partitions, text)
    assert any(w in text for w in WAYS_OUT), text


def commit(bootstrap, g, offsets, zk=None):
    if zk is not None:
        assert ZooKeeperOffsetStore(zk, g).commit(offsets).ok
    else:
        ks = KafkaOffsetStore(bootstrap, g)
        try:
            assert ks.commit(offsets).ok
        finally:
            ks.close()


def test_the_messy_fleet(fleet_cluster, unique, tmp_path):
    c = fleet_cluster
    started = time.monotonic()
    u = unique("m")
    main, old, gone, recreated, secret = (c.create_topic("%s-%s" % (name, u), n) for name, n in (
        ("main", 4), ("old", 2), ("gone", 2), ("recreated", 2), ("secret", 2)))
    for t, n, per in ((main, 4, 40), (old, 2, 10), (gone, 2, 10), (recreated, 2, 500), (secret, 2, 10)):
        produce_tracked(c.bootstrap_servers, t, n * per, partitions=n)
    prefix = "fleet-%s" % u
    normal = ["%s-n%02d" % (prefix, i) for i in range(31)]
    leftover = ["%s-old%d" % (prefix, i) for i in range(10)]
    gone_g = ["%s-gone%d" % (prefix, i) for i in range(5)]
    rec_g, exp_g, sec_g, busy = (prefix + s for s in ("-recreated", "-expired", "-secret", "-busy"))
    groups = normal + leftover + gone_g + [rec_g, exp_g, sec_g, busy]
    assert len(groups) == 50
    main_offs = {(main, p): 10 + p for p in range(4)}
    zk = zkmod.connect(c.zookeeper_connect)
    b1 = b2 = None
    try:
        for g in normal + [busy]:
            commit(None, g, main_offs, zk)
        for g in leftover:  # read old's two partitions once; it has a third one now (they never read it)
            commit(None, g, {**main_offs, (old, 0): 5, (old, 1): 5}, zk)
        c.create_topic(old, 3)
        produce_tracked(c.bootstrap_servers, old, 5, partition=2)
        for g in gone_g:
            commit(None, g, {**main_offs, (gone, 0): 7, (gone, 1): 7}, zk)
        commit(None, rec_g, {**main_offs, (recreated, 0): 480, (recreated, 1): 5}, zk)
        commit(None, sec_g, {**main_offs, (secret, 0): 4, (secret, 1): 4}, zk)
        commit(c.bootstrap_servers, sec_g, {(secret, 0): 6, (secret, 1): 6})
        # the expired group: ZooKeeper frozen at 3 when it went Kafka-only, Kafka at 15 and verified, then stopped
        # long enough for the broker to drop its offsets
        commit(None, exp_g, {(main, p): 3 for p in range(4)}, zk)
        commit(c.bootstrap_servers, exp_g, {(main, p): 15 for p in range(4)})
        zkmigrate_json(c, "verify", "--group", exp_g, "--phase", "kafka", "--settle", "0", "--no-expiry-check",
                       expect=0)
        ks = KafkaOffsetStore(c.bootstrap_servers, exp_g)
        try:
            assert ks.delete_offsets([(main, p) for p in range(4)]).ok and ks.fetch([(main, 0)]) == {}
        finally:
            ks.close()
        delete_topic(c, zk, gone)
        delete_topic(c, zk, recreated)
        c.create_topic(recreated, 2)
        produce_tracked(c.bootstrap_servers, recreated, 40, partitions=2)
        # the busy group still has a member registered; operator B's cutover waits for it, holding the lock
        reg = paths.consumer_registration_path(busy, busy + "_host-1-abcdef12")
        zk.create(reg, b'{"version":1,"subscription":{"%s":1},"pattern":"static","timestamp":"1"}' % main.encode(),
                  ephemeral=True, makepath=True)
        b2 = operator_b(c, tmp_path, "b-cutover", "cutover", "--group", busy, "--execute", "--timeout", "600",
                        "--backup-dir", str(tmp_path / "b"))
        wait_until(lambda: zk.exists(paths.group_lock_path(busy)) and zk.get_children(paths.group_lock_path(busy)),
                   60, message="operator B's cutover holding the busy group's lock")
        b1 = operator_b(c, tmp_path, "b-refresh", "refresh", "--groups-matching", prefix + "-.*", "--execute",
                        "--every", "3")
        sel = ["--groups-matching", prefix + "-.*", "--parallel", "8", "--lock-wait", "10"]

        # 1. verify the fleet
        code, rep, _ = ops(c, "verify", *sel, "--phase", "zookeeper", expect=1)
        v = {g["group"]: g for g in rep["groups"]}
        assert rep["count"] == 50
        assert all(v[g]["ok"] for g in normal + gone_g), [v[g] for g in normal + gone_g if not v[g]["ok"]][:2]
        for g in gone_g:
            assert v[g]["gone_topics"] == {gone: [0, 1]}
            names_what_and_way_out(" ".join(v[g]["warnings"]), g)
        for g in leftover:
            assert not v[g]["ok"] and len(v[g]["problems"]) == 1, v[g]
            names_what_and_way_out(v[g]["problems"][0], g, ["%s-2" % old])
        assert not v[rec_g]["ok"] and not v[exp_g]["ok"] and not v[sec_g]["ok"]
        for g, topic in ((rec_g, recreated), (exp_g, main), (sec_g, secret)):
            for p in v[g]["problems"]:
                names_what_and_way_out(p, g, ["%s-%d" % (topic, i) for i in range(4)])
        assert "locked by 'zkmigrate cutover'" in v[busy]["error"] and "pid %d" % b2.pid in v[busy]["error"]
        names_what_and_way_out(v[busy]["error"], busy)
        code, rep, _ = ops(c, "verify", *sel, "--phase", "zookeeper", "--exclude-topic", old, expect=1)
        v = {g["group"]: g for g in rep["groups"]}
        assert all(v[g]["ok"] for g in leftover), [v[g]["problems"] for g in leftover]

        # 2. the busy group's member stops: operator B's cutover completes
        zk.delete(reg)
        assert b2.wait(120) == 0, b2.files[1].read_text()[-3000:]

        # 3. cutover of the fleet
        code, rep, _ = ops(c, "cutover", *sel, "--execute", "--exclude-topic", old, "--backup-dir",
                           str(tmp_path / "a"), expect=1)
        co = {g["group"]: g for g in rep["groups"]}
        ready = normal + leftover + gone_g + [busy]
        assert all(co[g]["ready"] for g in ready), [(g, co[g].get("reason")) for g in ready if not co[g]["ready"]]
        for g in (rec_g, exp_g, sec_g):
            assert not co[g]["ready"] and "recorded_phase" not in co[g], co[g]
            whys = list(co[g].get("refused", {}).values()) + list(co[g].get("unreadable", {}).values())
            assert whys, co[g]
            for why in whys:
                names_what_and_way_out(why, g, ["%s-%d" % (t, i) for t in (recreated, main, secret) for i in range(4)])
        assert set(co[rec_g]["refused"]) == {"%s-0" % recreated, "%s-1" % recreated}
        assert set(co[exp_g]["refused"]) == {"%s-%d" % (main, p) for p in range(4)}
        assert set(co[sec_g]["unreadable"]) == {"%s-0" % secret, "%s-1" % secret}
        for g in ready:
            assert state.fence_of(state.read_phase(zk, g)) is not None, g

        # operator B's keep-alive ran all along: stopped now, it never crashed; it exits with its last round's code,
        # 1: the secret group's partitions could not be refreshed (the operator may not Describe its topic)
        b1.send_signal(signal.SIGTERM)
        assert b1.wait(120) == 1, b1.files[1].read_text()[-3000:]
        log = b1.files[1].read_text()
        assert "Traceback" not in log and "%s: FAILED" % sec_g in log, log[-3000:]
        b1 = None

        # 4. the broker-coordinated consumers of the ready groups consumed 5 more on each partition, and are stopped
        moved = {tp: o + 5 for tp, o in main_offs.items()}
        for g in ready:
            commit(c.bootstrap_servers, g, moved)

        # 5. rollback of the fleet
        code, rep, _ = ops(c, "rollback", *sel, "--execute", "--exclude-topic", old, "--backup-dir",
                           str(tmp_path / "a"), expect=1)
        rb = {g["group"]: g for g in rep["groups"]}
        assert all(rb[g]["ok"] and rb[g]["fence_lifted"] for g in ready), \
            [(g, rb[g]) for g in ready if not (rb[g]["ok"] and rb[g].get("fence_lifted"))][:2]
        for g in (rec_g, exp_g, sec_g):
            assert not rb[g]["ok"]
            for why in list(rb[g]["refused"].values()) + list(rb[g]["unreadable"].values()):
                names_what_and_way_out(why, g, ["%s-%d" % (t, i) for t in (recreated, main, secret) for i in range(4)])

        # where every group ended
        parts = [(main, p) for p in range(4)]
        for g in ready:  # back on ZooKeeper, where the new consumers left off; the fence lifted
            assert ZooKeeperOffsetStore(zk, g).fetch(parts) == moved, g
            assert state.fence_of(state.read_phase(zk, g)) is None
            assert not is_fenced(zk.get_acls(paths.group_ids_path(g))[0]), g  # members may register again
            assert zk.get_children(paths.group_lock_path(g)) == []
        for g in leftover:  # the leftover topic untouched in both stores
            assert ZooKeeperOffsetStore(zk, g).fetch([(old, 0), (old, 1)]) == {(old, 0): 5, (old, 1): 5}
        ks = KafkaOffsetStore(c.bootstrap_servers, leftover[0])
        try:
            assert ks.fetch([(old, 0), (old, 1), (old, 2)]) == {}
        finally:
            ks.close()
        for g in gone_g:
            assert ZooKeeperOffsetStore(zk, g).fetch([(gone, 0), (gone, 1)]) == {(gone, 0): 7, (gone, 1): 7}
        # the refused groups: nothing written, never fenced
        assert ZooKeeperOffsetStore(zk, rec_g).fetch([(recreated, 0), (recreated, 1)]) == {(recreated, 0): 480,
                                                                                           (recreated, 1): 5}
        assert ZooKeeperOffsetStore(zk, exp_g).fetch(parts) == {tp: 3 for tp in parts}
        assert ZooKeeperOffsetStore(zk, sec_g).fetch([(secret, 0), (secret, 1)]) == {(secret, 0): 4, (secret, 1): 4}
        for g in (rec_g, exp_g, sec_g):
            assert state.fence_of(state.read_phase(zk, g)) is None, g
            ks = KafkaOffsetStore(c.bootstrap_servers, g)
            try:
                kafka = ks.fetch(parts + [(recreated, 0), (recreated, 1)])
            finally:
                ks.close()
            assert kafka == {}, (g, kafka)  # a refused cutover writes nothing, not even the readable partitions
        print("messy fleet: %.0f s" % (time.monotonic() - started))
    finally:
        for p in (b1, b2):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
        zkmod.close(zk)

