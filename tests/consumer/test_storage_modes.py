"""Members on different offset storage: each publishes its mode (member info), verify fails on an unsafe mix and on
members not yet on the verified phase, and a ZooKeeper-storage member refuses to start where Kafka holds newer
offsets (a direct kafka -> zookeeper switch), unless told otherwise. Real ZooKeeper + Apache Kafka."""
import pytest

from tests.support.consumer_helpers import connector
from tests.support.migrate_support import zkmigrate_json
from tests.support.waiting import wait_until
from zkconsumer.errors import GroupConflictError
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore


def test_zookeeper_member_refuses_when_kafka_is_ahead(services, zk, unique, conns):
    g, t = unique("sw"), services.create_topic(unique("sw"), 2)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 5, (t, 1): 5})
    kafka = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        assert kafka.commit({(t, 0): 50}).ok
    finally:
        kafka.close()
    a = connector(services, g)
    conns.append(a)
    with pytest.raises(GroupConflictError) as info:
        a.create_message_streams({t: 1})
    text = str(info.value)
    assert "%s-0: Kafka 50, ZooKeeper 5" % t in text and "offsets.storage.switch.check=off" in text
    assert "dual" in text
    b = connector(services, g, **{"offsets.storage.switch.check": "off"})
    conns.append(b)
    b.create_message_streams({t: 1})
    wait_until(lambda: len(b.owned_partitions()) == 2, 20, message="b starts with the check off")


def test_verify_fails_on_an_unsafe_mix_and_an_unfinished_bounce(services, zk, unique, conns):
    g, t = unique("mix"), services.create_topic(unique("mix"), 2)
    a = connector(services, g)  # ZooKeeper storage
    conns.append(a)
    a.create_message_streams({t: 1})
    b = connector(services, g, **{"offsets.storage": "kafka", "dual.commit.enabled": "false"})
    conns.append(b)
    b.create_message_streams({t: 1})
    wait_until(lambda: len(a.owned_partitions()) + len(b.owned_partitions()) == 2, 20, message="both assigned")
    a.commit_offsets()
    b.commit_offsets()
    code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", "--settle", "0",
                                  expect=1)
    assert any(p.startswith("unsafe mix of offset storage") for p in rep["problems"]), rep["problems"]
    assert any("runs kafka, not the zookeeper phase" in p for p in rep["problems"]), rep["problems"]
    code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert sorted(st["member_storage"].values()) == ["kafka", "zookeeper"]
    c = connector(services, g)  # ZooKeeper storage beside a Kafka-only member: refused
    conns.append(c)
    with pytest.raises(GroupConflictError) as info:
        c.create_message_streams({t: 1})
    assert "Kafka-only offset storage" in str(info.value) and b.consumer_id in str(info.value)
