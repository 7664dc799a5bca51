"""Tests for zkconsumer.layout.paths and .connect."""

import pytest
from hypothesis import given, strategies as st

from zkconsumer.errors import ConfigError, InvalidNameError, ZnodeFormatError
from zkconsumer.layout import paths as P
from zkconsumer.layout import parse_zk_connect, ZkConnect

G, T, C = "group1", "topic1", "group1_host1-1441925174996-4bd8d65c"


def test_every_path():
    assert P.consumers_path() == "/consumers"
    assert P.group_path(G) == "/consumers/group1"
    assert P.group_ids_path(G) == "/consumers/group1/ids"
    assert P.consumer_registration_path(G, C) == "/consumers/group1/ids/" + C
    assert P.group_owners_path(G) == "/consumers/group1/owners"
    assert P.topic_owners_path(G, T) == "/consumers/group1/owners/topic1"
    assert P.partition_owner_path(G, T, 3) == "/consumers/group1/owners/topic1/3"
    assert P.group_offsets_path(G) == "/consumers/group1/offsets"
    assert P.topic_offsets_path(G, T) == "/consumers/group1/offsets/topic1"
    assert P.partition_offset_path(G, T, "0") == "/consumers/group1/offsets/topic1/0"
    assert P.broker_ids_path() == "/brokers/ids"
    assert P.broker_path(1) == "/brokers/ids/1"
    assert P.broker_topics_path() == "/brokers/topics"
    assert P.topic_path(T) == "/brokers/topics/topic1"
    assert P.topic_partitions_path(T) == "/brokers/topics/topic1/partitions"
    assert P.partition_path(T, 2) == "/brokers/topics/topic1/partitions/2"
    assert P.partition_state_path(T, 2) == "/brokers/topics/topic1/partitions/2/state"
    assert P.controller_path() == "/controller"
    assert P.controller_epoch_path() == "/controller_epoch"
    assert P.delete_topics_path() == "/admin/delete_topics"
    assert P.delete_topic_path(T) == "/admin/delete_topics/topic1"
    assert P.topic_config_path(T) == "/config/topics/topic1"
    assert P.REASSIGN_PARTITIONS_PATH == "/admin/reassign_partitions"
    assert P.PREFERRED_REPLICA_ELECTION_PATH == "/admin/preferred_replica_election"


INJECTIONS = ["../brokers", "..", ".", "a/b", "", "/", "x/../../brokers", "g\x00"]


@pytest.mark.parametrize("bad", INJECTIONS)
def test_injection_rejected_in_group(bad):
    for build in (P.group_path, P.group_ids_path, P.group_owners_path, P.group_offsets_path):
        with pytest.raises(InvalidNameError):
            build(bad)
    with pytest.raises(InvalidNameError):
        P.consumer_registration_path(bad, C)
    with pytest.raises(InvalidNameError):
        P.partition_offset_path(bad, T, 0)


@pytest.mark.parametrize("bad", INJECTIONS)
def test_injection_rejected_in_topic(bad):
    for build in (P.topic_path, P.topic_partitions_path, P.delete_topic_path, P.topic_config_path):
        with pytest.raises(InvalidNameError):
            build(bad)
    for build in (P.topic_owners_path, P.topic_offsets_path):
        with pytest.raises(InvalidNameError):
            build(G, bad)
    with pytest.raises(InvalidNameError):
        P.partition_owner_path(G, bad, 0)
    with pytest.raises(InvalidNameError):
        P.partition_state_path(bad, 0)


@pytest.mark.parametrize("bad", ["../../brokers", "..", ".", "a/b", "", "x\x00"])
def test_injection_rejected_in_consumer_id(bad):
    with pytest.raises(InvalidNameError):
        P.consumer_registration_path(G, bad)


@pytest.mark.parametrize("bad", [-1, "../0", "0/x", "01", "a", None, True, 1.5])
def test_bad_partitions_and_broker_ids(bad):
    with pytest.raises(InvalidNameError):
        P.partition_owner_path(G, T, bad)
    with pytest.raises(InvalidNameError):
        P.partition_offset_path(G, T, bad)
    with pytest.raises(InvalidNameError):
        P.partition_state_path(T, bad)
    with pytest.raises(InvalidNameError):
        P.broker_path(bad)


def test_parse_offset_path_export_lines():
    # lines as Kafka's ExportZkOffsets writes them (path:offset): the path is everything before the LAST ':'
    for line, expected in [("/consumers/group1/offsets/topic1/0:286894308", ("group1", "topic1", 0)),
                           ("/consumers/group1/offsets/topic1/1:284803985", ("group1", "topic1", 1))]:
        path, _, offset = line.rpartition(":")
        assert P.parse_offset_path(path) == expected
        assert int(offset) > 0


@pytest.mark.parametrize("bad", [
    "/consumers/group1/offsets/topic1/1-0",          # 0.7 broker-partition naming
    "/consumers/group1/offsets/topic1",
    "/consumers/group1/offsets/topic1/0/",
    "/consumers/group1/owners/topic1/0",
    "consumers/group1/offsets/topic1/0",
    "/consumers//offsets/topic1/0",
    "/consumers/../offsets/topic1/0",
    "/consumers/group1/offsets/../0",
    "/consumers/group1/offsets/topic1/-1",
    "/brokers/ids/1",
    "",
])
def test_parse_offset_path_rejects(bad):
    with pytest.raises(ZnodeFormatError) as info:
        P.parse_offset_path(bad)
    assert "/consumers/<group>/offsets/<topic>/<partition>" in str(info.value)


@given(st.from_regex(r"[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,20}", fullmatch=True),
       st.from_regex(r"[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,20}", fullmatch=True),
       st.integers(min_value=0, max_value=2 ** 31 - 1))
def test_offset_path_roundtrip(group, topic, partition):
    assert P.parse_offset_path(P.partition_offset_path(group, topic, partition)) == (group, topic, partition)


# ---- zookeeper.connect ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,hosts,chroot", [
    ("localhost:2181", "localhost:2181", None),
    ("zk1", "zk1:2181", None),
    ("zk1:2181,zk2:2182,zk3", "zk1:2181,zk2:2182,zk3:2181", None),
    ("zk1:2181,zk2:2181/kafka", "zk1:2181,zk2:2181", "/kafka"),
    ("zk1/kafka/prod", "zk1:2181", "/kafka/prod"),
    (" zk1:2181 , zk2:2181 /kafka", "zk1:2181,zk2:2181", "/kafka"),
    ("zk1:2181/", "zk1:2181", None),
    ("10.0.0.1:2181", "10.0.0.1:2181", None),
    ("[::1]:2181,[fe80::1]", "[::1]:2181,[fe80::1]:2181", None),
])
def test_parse_zk_connect(value, hosts, chroot):
    zc = parse_zk_connect(value)
    assert zc == ZkConnect(hosts, chroot)
    assert zc.kazoo_hosts == hosts + (chroot or "")


def test_host_ports():
    assert parse_zk_connect("a:1,[::1]:2,b").host_ports == (("a", 1), ("::1", 2), ("b", 2181))


@pytest.mark.parametrize("bad", [
    "", "   ", None, "/kafka", "zk1:2181/kafka/", "zk1:2181//kafka", "zk1/kafka//x", "zk1/../x", "zk1/a/./b",
    "zk1:abc", "zk1:", "zk1:0", "zk1:65536", "zk1:-1", "zk1,,zk2", ",zk1", "zk1,", ":2181", "zk 1:2181",
    "zk1:2181:2182", "[::1", "[::1]x", "zk1/chroot\x00",
])
def test_parse_zk_connect_rejects(bad):
    with pytest.raises(ConfigError) as info:
        parse_zk_connect(bad)
    assert info.value.key == "zookeeper.connect"
    assert "zookeeper.connect" in str(info.value)
