"""A ZooKeeper-less cluster for real: Apache Kafka 3.9 in KRaft mode plus the registry mirror.

KRaft brokers write nothing into ZooKeeper, so ZooKeeper-coordinated consumers would find no broker and no topic;
``zkconsumer local up --broker kraft`` starts the registry mirror (``zkconsumer registry sync``) next to it. A group
consumes from it; a topic created and a partition added on the KRaft cluster reach ``/brokers/topics`` within 2 s
and the group consumes the new partition.
"""
import json
import time

import pytest

from tests.support.chaos_support import own_cluster_fixture
from tests.support.consumer_helpers import CliConsumer, produce_tracked, wait_for_assignment
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod

pytestmark = pytest.mark.live


kraft = own_cluster_fixture("kraft-cluster", broker="kraft")


@pytest.fixture
def kzk(kraft):
    client = zkmod.connect(kraft.zookeeper_connect)
    yield client
    zkmod.close(client)


def _partitions_in_zk(zk, topic):
    path = "/brokers/topics/" + topic
    if not zk.exists(path):
        return 0
    return len(json.loads(zk.get(path)[0])["partitions"])


def test_kraft_broker_is_mirrored_and_a_group_consumes(kraft, kzk, unique, procs):
    info = kraft.cluster.info()
    assert info["broker"] == "kraft" and info["registry_mirror"] is True
    assert kzk.get_children("/brokers/ids") == ["1"]  # node.id of the KRaft node
    assert not kzk.exists("/controller")  # nothing of Kafka's own ZooKeeper layout: this is not a ZK-mode broker
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=kraft.bootstrap_servers)
    try:
        g, t = unique("kraft"), unique("kraft")
        admin.create_topics([NewTopic(t, 2, 1)])
        created = time.monotonic()
        wait_until(lambda: _partitions_in_zk(kzk, t) == 2, 2.0, interval=0.02, message="the new topic in ZooKeeper")
        topic_s = time.monotonic() - created
        members = [CliConsumer(kraft, g, [t], consumer_id=n) for n in ("a", "b")]
        procs.extend(members)
        wait_for_assignment(kzk, g, [t], 2, timeout=40)
        produced = produce_tracked(kraft.bootstrap_servers, t, 40, partitions=2, tag="kraft")

        def delivered():
            return sorted(x for m in members for x in m.seen(t))
        wait_until(lambda: delivered() == sorted((p, o) for p, o, _ in produced), 30, message="consumed from KRaft")

        admin.create_partitions({t: NewPartitions(3)})
        added = time.monotonic()
        wait_until(lambda: _partitions_in_zk(kzk, t) == 3, 2.0, interval=0.02, message="the added partition in ZK")
        partition_s = time.monotonic() - added
        wait_for_assignment(kzk, g, [t], 2, timeout=30)
        more = produce_tracked(kraft.bootstrap_servers, t, 9, partition=2, tag="new")
        wait_until(lambda: set((p, o) for p, o, _ in more) <= set(delivered()), 30,
                   message="the new partition consumed by the group")
        print("\nKRaft + registry mirror: topic in ZooKeeper after %.2f s, added partition after %.2f s"
              % (topic_s, partition_s))
    finally:
        admin.close()
