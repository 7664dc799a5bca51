"""A batch's plan and commit (zkconsumer.spark.plan_batch, commit_batch: the driver's one-shot ZooKeeper calls) whose
ZooKeeper goes away mid-call fail once the connection stayed lost for the one-shot bound, instead of waiting for ever
(kazoo queues a request made while disconnected until the next connection): the query fails and Spark can restart it
from its checkpoint, rather than hanging with its batch. The lost ZooKeeper is a relay that cuts every connection
and then accepts new ones without answering, just before the call's reads of the group."""
import pytest

pytestmark = pytest.mark.spark

from tests.support.spark_support import set_zk_offsets, source_options  # noqa: E402
from tests.support.waiting import outcome_within, wait_until  # noqa: E402
from tests.support.zk_relay import Relay, zk_target  # noqa: E402
from zkconsumer.zookeeper import client as zkmod  # noqa: E402


@pytest.mark.parametrize("call, step", [("plan_batch", "zkconsumer.spark.cluster.partitions_to_read"),
                                        ("commit_batch", "zkconsumer.spark.fence.owner_nodes")])
def test_a_batch_call_whose_zookeeper_went_away_fails_instead_of_waiting(services, zk, unique, monkeypatch, call,
                                                                         step):
    import importlib

    import zkconsumer.spark as source
    monkeypatch.setattr(zkmod, "ONE_SHOT_GIVE_UP_MS", 2000)
    topic, group = services.create_topic(unique("zkgone"), 2), unique("zkgone-g")
    services.produce(topic, 10)
    set_zk_offsets(zk, group, topic, {0: 1, 1: 1})
    relay = Relay(zk_target(services))
    relay.start()
    module_name, attr = step.rsplit(".", 1)
    module = importlib.import_module(module_name)
    real = getattr(module, attr)

    def after_zookeeper_went_away(client, *args, **kw):
        relay.blackhole()
        wait_until(lambda: not client.connected, 30, message="the call's client to lose its connection")
        return real(client, *args, **kw)
    monkeypatch.setattr(module, attr, after_zookeeper_went_away)
    try:
        opts = source_options(services, group, topic)
        opts["zookeeper.connect"] = relay.connect
        args = (opts,) if call == "plan_batch" else (opts, {(topic, 0): 5, (topic, 1): 5})
        outcome = outcome_within(lambda: getattr(source, call)(*args), 45)
    finally:
        relay.close()
    assert outcome, "%s still waits for ZooKeeper after 45 s" % call
    assert isinstance(outcome[0], zkmod.lost_connection_errors()), outcome
