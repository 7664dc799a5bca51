"""Broker unreachable during dual commit: a clear error, ZooKeeper offsets intact (Kafka first, ZooKeeper
skipped), the consumer keeps running and commits both stores once the broker is back.

Uses its own tansu broker (frozen with SIGSTOP / thawed with SIGCONT: tansu only has in-memory storage, so a
restart would lose the topic) and its own registry mirror in a ZooKeeper chroot of the shared ZooKeeper."""
import os
import signal
import sys
import time

from zkconsumer.zookeeper import client as zkmod
from zkconsumer.local import discovery, processes, tools
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore

from tests.support.migrate_support import DUAL, ROOT, ConsumerProc
from tests.support.waiting import wait_until


def test_broker_unreachable_during_dual_commit(services, zk, unique, tmp_path):
    chroot = "/" + unique("bd")
    zk.ensure_path(chroot)
    zkc = services.zookeeper_connect + chroot
    port = processes.free_port()
    bs = "127.0.0.1:%d" % port
    url = "tcp://" + bs
    broker = processes.spawn([discovery.find_tansu(), "broker", "--listener-url", url, "--advertised-listener-url",
                              url, "--storage-engine", "memory://tansu/"], str(tmp_path / "tansu.log"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    mirror = None
    consumer = None
    czk = zkmod.connect(zkc)
    try:
        processes.wait_for_port("127.0.0.1", port, broker, 30, "tansu", str(tmp_path / "tansu.log"))
        mirror = processes.spawn([sys.executable, "-m", "zkconsumer", "registry", "sync", "--zookeeper", zkc,
                                  "--bootstrap-server", bs, "--interval", "0.5"], str(tmp_path / "mirror.log"),
                                 env=env)
        topic = unique("bd")
        tools.create_or_grow_topic(bs, topic, 2)
        tools.wait_for_zk_topic(zkc, topic, 2)
        tools.produce(bs, topic, 20, partition=0)
        tools.produce(bs, topic, 20, partition=1)
        g = unique("g-bd")
        parts = [(topic, 0), (topic, 1)]
        zs = ZooKeeperOffsetStore(czk, g)
        consumer = ConsumerProc(tmp_path, "bd", zkc, g, topic, DUAL + [
            "offsets.channel.socket.timeout.ms=1500", "offsets.channel.backoff.ms=200",
            "offsets.commit.max.retries=1"])
        ks = KafkaOffsetStore(bs, g)
        try:
            want = {(topic, 0): 20, (topic, 1): 20}
            wait_until(lambda: zs.fetch(parts) == want and ks.fetch(parts) == want, 30, "both stores at 20/20")
        finally:
            ks.close()

        os.kill(broker.pid, signal.SIGSTOP)  # broker unreachable: connections hang, requests time out
        try:
            wait_until(lambda: "Kafka first, ZooKeeper skipped" in consumer.stderr(), 30,
                       "a clear commit error while the broker is unreachable")
            time.sleep(2)
            assert consumer.alive(), consumer.stderr()[-2000:]
            assert ZooKeeperOffsetStore(czk, g).fetch(parts) == want  # intact
        finally:
            os.kill(broker.pid, signal.SIGCONT)

        tools.produce(bs, topic, 5, partition=0)
        tools.produce(bs, topic, 7, partition=1)
        want = {(topic, 0): 25, (topic, 1): 27}
        ks = KafkaOffsetStore(bs, g)
        try:
            wait_until(lambda: ZooKeeperOffsetStore(czk, g).fetch(parts) == want and ks.fetch(parts) == want, 60,
                       "both stores committed again after the broker came back")
        finally:
            ks.close()
        assert consumer.alive()
        seen = consumer.seen()
        assert {(0, o) for o in range(25)} <= seen and {(1, o) for o in range(27)} <= seen
    finally:
        if consumer is not None:
            try:
                os.kill(broker.pid, signal.SIGCONT)
            except OSError:
                pass
            consumer.stop(20)
            consumer.kill()
        if mirror is not None:
            processes.stop(mirror.pid)
        processes.stop(broker.pid)
        zkmod.close(czk)
        try:
            zk.delete(chroot, recursive=True)
        except Exception:
            pass
