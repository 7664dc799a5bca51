"""Offsets a legacy group keeps for topics it no longer reads, on Apache Kafka 3.9: a deleted topic is listed and
skipped (exit 0 with a warning) by status, verify, copy, cutover and rollback; ``--exclude-topic`` leaves out a
topic that still exists; ``zkmigrate forget-topic`` deletes a topic's offsets of a group (dry run first, a backup,
refused while a live member reads the topic)."""
import glob

from test_migrate_support import delete_topic, zkmigrate, zkmigrate_json
from zkconsumer.layout import paths
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore


def test_a_deleted_topic_is_listed_and_skipped_by_every_command(services, zk, unique, tmp_path):
    live = services.create_topic(unique("lo-live"), 2)
    dead = services.create_topic(unique("lo-dead"), 1)
    for p in (0, 1):
        services.produce(live, 10, partition=p)
    services.produce(dead, 5, partition=0)
    g = unique("lo-g")
    ZooKeeperOffsetStore(zk, g).commit({(live, 0): 4, (live, 1): 4, (dead, 0): 5}).raise_for_errors()
    delete_topic(services, zk, dead)
    forget = "zkmigrate forget-topic --group %s --topic %s --execute" % (g, dead)

    code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", expect=0)
    assert rep["gone_topics"] == {dead: [0]} and rep["partitions"] == 2
    assert any(dead in w and forget in w for w in rep["warnings"]), rep["warnings"]
    code, out, err = zkmigrate(services, "verify", "--group", g, "--phase", "zookeeper", expect=0)
    assert "WARNING" in err and "topic %s no longer exists" % dead in err and forget in err
    code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert st["gone_topics"] == {dead: [0]} and {r["topic"] for r in st["partitions"]} == {live}
    code, cp, _ = zkmigrate_json(services, "copy", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert cp["written"] == 2 and set(cp["to_write"]) == {"%s-0" % live, "%s-1" % live} and cp["gone_topics"]
    zkmigrate_json(services, "verify", "--group", g, "--phase", "dual", "--to", "kafka", expect=0)
    code, co, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert co["ready"] and co["gone_topics"] == {dead: [0]}
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert rb["gone_topics"] == {dead: [0]} and rb["fence_lifted"]["changed"]

    # forget-topic: a dry run changes nothing, --execute backs up both stores first and deletes the node
    code, dry, _ = zkmigrate_json(services, "forget-topic", "--group", g, "--topic", dead, expect=0)
    assert dry["topics"][dead]["zookeeper"] == {"0": 5} and dry["to_delete"] == 1 and dry["deleted"] == 0
    assert zk.exists(paths.topic_offsets_path(g, dead))
    code, done, _ = zkmigrate_json(services, "forget-topic", "--group", g, "--topic", dead, "--execute",
                                   "--backup-dir", str(tmp_path / "b"), expect=0)
    assert done["deleted"] == 1 and len(done["backup"]) == 3  # both stores and the manifest
    assert not zk.exists(paths.topic_offsets_path(g, dead))
    zk_backup = [b for b in done["backup"] if "-zookeeper-" in b][0]
    assert open(zk_backup).read().splitlines() == ["/consumers/%s/offsets/%s/0:5" % (g, dead)]
    code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert st["gone_topics"] == {} and st["warnings"] == []


def test_a_topic_the_group_no_longer_reads_is_excluded_or_forgotten(services, zk, unique, tmp_path):
    cur = services.create_topic(unique("lo-cur"), 1)
    old = services.create_topic(unique("lo-old"), 1)
    services.produce(cur, 10, partition=0)
    services.produce(old, 10, partition=0)
    g = unique("lo-g2")
    zs, ks = ZooKeeperOffsetStore(zk, g), KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        zs.commit({(cur, 0): 5, (old, 0): 3}).raise_for_errors()
        ks.commit({(cur, 0): 7}).raise_for_errors()  # the Kafka phase: only the topic it reads has a Kafka offset
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0",
                                      expect=1)
        assert any("%s-0 has no offset in kafka" % old in p and "--exclude-topic %s" % old in p
                   for p in rep["problems"]), rep["problems"]
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0",
                                      "--exclude-topic", old, expect=0)
        assert rep["excluded_topics"] == [old] and rep["partitions"] == 1

        # a live member subscribed to the topic: refused, nothing deleted (nor backed up)
        reg = paths.consumer_registration_path(g, g + "_host-1-abcdef12")
        zk.create(reg, b'{"version":1,"subscription":{"%s":1},"pattern":"static","timestamp":"1"}' % old.encode(),
                  ephemeral=True, makepath=True)
        code, out, _ = zkmigrate_json(services, "forget-topic", "--group", g, "--topic", old, "--execute",
                                      "--backup-dir", str(tmp_path), expect=1)
        assert "still read" in out["error"] and old in out["error"] and g in out["error"]
        assert zs.fetch([(old, 0)]) == {(old, 0): 3} and not glob.glob(str(tmp_path / "*"))
        zk.delete(reg)

        ks.commit({(old, 0): 3}).raise_for_errors()  # a copy put it into Kafka too: both stores forget it
        code, done, _ = zkmigrate_json(services, "forget-topic", "--group", g, "--topic", old, "--execute",
                                       "--backup-dir", str(tmp_path), expect=0)
        assert done["deleted"] == 2 and done["topics"][old] == {"zookeeper": {"0": 3}, "kafka": {"0": 3}}
        assert ZooKeeperOffsetStore(zk, g).fetch([(old, 0)]) == {} and ks.fetch([(old, 0)]) == {}
        zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", "--settle", "0", expect=0)
    finally:
        ks.close()


def test_bad_topic_names_are_refused_before_connecting(services):
    for args in (["forget-topic", "--group", "g", "--topic", "bad/name"],
                 ["verify", "--group", "g", "--phase", "kafka", "--exclude-topic", "bad/name"],
                 ["copy", "--group", "g", "--exclude-topic", ".."]):
        code, out, err = zkmigrate(services, *args, expect=2)
        assert "--topic" in err or "--exclude-topic" in err, (args, err)


def test_forget_topic_in_one_store_backs_up_both_and_its_undo_leaves_the_other_store_alone(services, zk, unique,
                                                                                        tmp_path):
    """forget-topic --store kafka (or zookeeper) deletes in one store, but its backup is what 'zkmigrate restore'
    puts back exactly: it must hold the other store's offsets as they are, or the undo it prints would delete
    them."""
    t = services.create_topic(unique("lo-one"), 2)
    for p in (0, 1):
        services.produce(t, 10, partition=p)
    for store, other in (("kafka", "zookeeper"), ("zookeeper", "kafka")):
        g = unique("lo-one-" + store)
        zs, ks = ZooKeeperOffsetStore(zk, g), KafkaOffsetStore(services.bootstrap_servers, g)
        try:
            zs.commit({(t, 0): 4, (t, 1): 5}).raise_for_errors()
            ks.commit({(t, 0): 6, (t, 1): 7}).raise_for_errors()
            before = (zs.fetch([(t, 0), (t, 1)]), ks.fetch([(t, 0), (t, 1)]))
            code, done, _ = zkmigrate_json(services, "forget-topic", "--group", g, "--topic", t, "--store", store,
                                           "--execute", "--backup-dir", str(tmp_path / store), expect=0)
            assert done["deleted"] == 2, done
            kept = zs if other == "zookeeper" else ks
            assert kept.fetch([(t, 0), (t, 1)]) == before[0 if other == "zookeeper" else 1]
            manifest = [b for b in done["backup"] if b.endswith(".json")][0]
            code, dry, _ = zkmigrate_json(services, "restore", manifest, expect=0)
            assert dry["changes"][other] == {}, dry["changes"]  # the undo touches only what forget-topic deleted
            zkmigrate_json(services, "restore", manifest, "--execute", "--backup-dir", str(tmp_path / store),
                           expect=0)
            assert (zs.fetch([(t, 0), (t, 1)]), ks.fetch([(t, 0), (t, 1)])) == before
        finally:
            ks.close()
