"""Groups of the consumer group protocol (KIP-848, ``group.protocol=consumer``) on Apache Kafka 4.1 (KRaft, plus the
registry mirror for the ZooKeeper side): their coordinator answers the classic DescribeGroups with ``Dead`` and no
members, so the broker-side group is read with ConsumerGroupDescribe. A Kafka 4 Java consumer of that protocol
consumes group G while a zkconsumer member of G runs; then describe_broker_group says active with its member,
zkmigrate status/verify/cutover show an active consumer-protocol group (verify and cutover: split brain), and a
second zkconsumer member refuses to start (split.brain.check=refuse, the default). One broker for the module."""
import pytest

from tests.support.chaos_support import own_cluster_fixture
from tests.support.jvm_helpers import ConsumerProtocolMember, compile_consumer_protocol_member
from tests.support.migrate_support import ConsumerProc, zkmigrate_json
from tests.support.waiting import wait_until
from zkconsumer.kafka.broker_group import describe_broker_group
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.consumer import ZookeeperConsumerConnector
from zkconsumer.errors import GroupConflictError
from zkconsumer.core.layout import paths

pytestmark = pytest.mark.live

kafka4 = own_cluster_fixture("kip848-cluster", broker="kraft", kafka_jars="kafka4")


@pytest.fixture(scope="module")
def group(kafka4, tmp_path_factory):
    """(group, topic, the ZooKeeper member, the Java member): both consuming, the Java one assigned."""
    tmp = tmp_path_factory.mktemp("kip848")
    classpath = compile_consumer_protocol_member(str(tmp))
    topic = kafka4.create_topic("kip848-t", 2)
    g = "kip848-g"
    zc = ConsumerProc(tmp, "zk1", kafka4.zookeeper_connect, g, topic)
    member = None
    try:
        from zkconsumer.zookeeper import client as zkmod
        client = zkmod.connect(kafka4.zookeeper_connect)
        try:  # the ZooKeeper member registered (its guard ran while the broker had no group G)
            wait_until(lambda: client.exists(paths.group_ids_path(g)) and client.get_children(
                paths.group_ids_path(g)), 40, "the ZooKeeper member registered")
        finally:
            zkmod.close(client)
        member = ConsumerProtocolMember(classpath, kafka4.bootstrap_servers, g, topic, "kip848-java")
        wait_until(lambda: any(a.startswith("assigned [") and "kip848-t-" in a for a in member.assigned), 60,
                   "the consumer-protocol member assigned (stderr: %s)" % member.stderr[-5:])
        yield g, topic, zc, member
    finally:
        if member is not None:
            member.close()
        zc.stop()


def test_describe_broker_group_sees_the_consumer_protocol_group(kafka4, group):
    g, topic, _, _ = group
    bg = describe_broker_group(kafka4.bootstrap_servers, g)
    assert bg.active, bg  # before ConsumerGroupDescribe: Dead, no members, not active
    assert bg.group_type == "consumer" and bg.state in ("Stable", "Reconciling", "Assigning"), bg
    m, = bg.members
    assert m["client_id"] == "kip848-java" and m["member_type"] == "consumer" and m["member_epoch"] > 0, m
    wait_until(lambda: describe_broker_group(kafka4.bootstrap_servers, g).members[0]["assignment"] == {topic: [0, 1]},
               20, "the member's assignment in the describe")


def test_zkmigrate_status_verify_and_cutover_see_an_active_consumer_protocol_group(kafka4, group):
    g, _, zc, _ = group
    _, st, _ = zkmigrate_json(kafka4, "status", "--group", g, expect=0)
    b = st["broker_group"]
    assert b["active"] is True and b["group_type"] == "consumer" and b["protocol_type"] == "consumer", b
    assert [m["client_id"] for m in b["members"]] == ["kip848-java"], b
    _, rep, _ = zkmigrate_json(kafka4, "verify", "--group", g, "--phase", "zookeeper", "--settle", "0", expect=1)
    assert rep["broker_group"]["group_type"] == "consumer" and rep["broker_group"]["active"] is True, rep
    split = [p for p in rep["problems"] if p.startswith("split brain")]
    assert split and "KIP-848" in split[0], rep["problems"]
    _, cut, _ = zkmigrate_json(kafka4, "cutover", "--group", g, "--timeout", "5", expect=1)  # dry run
    assert cut["ready"] is False and cut["reason"].startswith("split brain") and "KIP-848" in cut["reason"], cut
    assert zc.proc.poll() is None  # the ZooKeeper member still runs


def test_a_zookeeper_member_refuses_to_join_it(kafka4, group):
    g, topic, _, _ = group
    conn = ZookeeperConsumerConnector(ConsumerConfig.from_properties(
        {"group.id": g, "zookeeper.connect": kafka4.zookeeper_connect, "split.brain.check.timeout.ms": "5000"}),
        bootstrap_servers=kafka4.bootstrap_servers)
    try:
        with pytest.raises(GroupConflictError) as info:
            conn.create_message_streams({topic: 1})
    finally:
        conn.shutdown()
    msg = str(info.value)
    assert g in msg and "KIP-848" in msg and "split brain" in msg, msg
