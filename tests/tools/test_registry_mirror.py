"""The registry mirror against the real session services (ZooKeeper + the session's broker, Apache Kafka by default).

Two kinds of test:

* a LIVE mirror process (``zkconsumer registry sync --interval 0.5``, as ``zkconsumer local up`` starts it for a
  KRaft or tansu broker) writing into a chroot of its own (Apache Kafka in ZooKeeper mode registers itself in the
  root namespace): timing, broker registration, deletes, and that unchanged nodes are not rewritten;
* a ``RegistryMirror`` of our own on a kazoo client with a fresh chroot (``/mirror-test-xxxx``), driven with
  ``sync_once()`` for deterministic tests of its rules. A chroot is a separate ``/brokers`` tree, so the live mirror
  (which writes the root namespace) cannot interfere, and foreign registrations can be staged there safely.
"""
import json
import time

import pytest

from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.kafka.metadata import ClusterMetadata, PartitionInfo, admin_client, fetch_cluster_metadata
from zkconsumer.local import tools
from zkconsumer.tools.registry_mirror import RegistryMirror

BROKER_IDS = {"tansu": 111, "kafka": 0}  # tansu 0.6 always reports 111; the local cluster numbers Kafka from 0
MIRROR_INTERVAL = 0.5  # what LocalCluster starts the mirror with


@pytest.fixture
def admin(services):
    client = admin_client(services.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def broker_id(admin, services):
    ids = sorted(fetch_cluster_metadata(admin).brokers)
    assert len(ids) == 1, "these tests expect a single-broker cluster, got %s" % ids
    if services.cluster is not None:  # the embedded broker
        assert ids == [BROKER_IDS[services.cluster.read_state()["broker_kind"]]]
    return ids[0]


@pytest.fixture(scope="module")
def live(services):
    """A live mirror process syncing the session broker into a fresh chroot; yields a client on that chroot."""
    import subprocess
    import sys
    import uuid
    from zkconsumer.local import processes
    root = "/live-mirror-" + uuid.uuid4().hex[:8]
    admin_zk = zkmod.connect(services.zookeeper_connect)
    admin_zk.ensure_path(root)
    argv = [sys.executable, "-m", "zkconsumer", "registry", "sync", "--zookeeper", services.zookeeper_connect + root,
            "--bootstrap-server", services.bootstrap_servers, "--interval", str(MIRROR_INTERVAL)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    client = zkmod.connect(services.zookeeper_connect + root)
    try:
        wait_until(lambda: proc.poll() is not None or (client.exists("/brokers/ids")
                                                       and client.get_children("/brokers/ids")), 30, "first sync")
        assert proc.poll() is None, "the mirror exited: %s" % proc.stderr.read().decode()
        yield client
    finally:
        processes.stop(proc.pid)
        zkmod.close(client)
        admin_zk.delete(root, recursive=True)
        zkmod.close(admin_zk)


def create_topic_on_broker(services, name, partitions):
    """Create the topic over the Kafka protocol only (no waiting for ZooKeeper: that is what is under test)."""
    tools.create_or_grow_topic(services.bootstrap_servers, name, partitions)


@pytest.fixture
def chroot_zk(services, zk, unique):
    """A kazoo client chroot'ed at a fresh /mirror-test-xxxx (created empty); removed afterwards."""
    root = "/" + unique("mirror-test")
    zk.ensure_path(root)
    client = zkmod.connect(services.zookeeper_connect + root)
    clients = [client]
    yield root, client, clients
    for c in clients:
        zkmod.close(c)
    zk.delete(root, recursive=True)


def other_session(services, root, clients):
    """Another, independent ZooKeeper session on the same chroot (someone who is not the mirror)."""
    client = zkmod.connect(services.zookeeper_connect + root)
    clients.append(client)
    return client


def foreign_registration(broker_id, port=9092):
    return json.dumps({"version": 4, "host": "foreign-host", "port": port, "jmx_port": -1,
                       "timestamp": "1000", "endpoints": ["PLAINTEXT://foreign-host:%d" % port],
                       "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}}).encode()


# -- a live mirror process (chroot) -------------------------------------------------------------------------

def test_new_topic_appears_with_partition_map_and_states(services, live, unique, broker_id):
    topic = unique("mirror-new")
    create_topic_on_broker(services, topic, 4)
    t0 = time.monotonic()
    path = "/brokers/topics/" + topic
    wait_until(lambda: live.exists(path) and len(live.get_children(path + "/partitions") if live.exists(
        path + "/partitions") else []) == 4 and all(live.exists("%s/partitions/%d/state" % (path, p)) for p in range(4)),
        10.0, "topic %s mirrored into ZooKeeper" % topic)
    # a few mirror intervals (0.5 s) when idle; the bound is loose because a loaded 2-core CI machine delays it
    print("\nmirror: topic visible in ZooKeeper after %.2f s" % (time.monotonic() - t0))

    data, stat = live.get(path)
    assert stat.ephemeralOwner == 0  # topics are persistent, like a controller's
    assert json.loads(data) == {"version": 1, "partitions": {str(p): [broker_id] for p in range(4)}}
    for p in range(4):
        state, sstat = live.get("%s/partitions/%d/state" % (path, p))
        state = json.loads(state)
        assert state["leader"] == broker_id
        assert state["isr"] == [broker_id]
        assert state["version"] == 1
        assert isinstance(state["leader_epoch"], int) and isinstance(state["controller_epoch"], int)
        assert sstat.ephemeralOwner == 0


def test_broker_registration_is_ephemeral_v4_with_the_bootstrap_endpoint(services, live, broker_id):
    path = "/brokers/ids/%d" % broker_id
    data, stat = live.get(path)
    assert stat.ephemeralOwner != 0, "a broker registration must vanish with its writer's session"
    reg = json.loads(data)
    assert reg["version"] == 4
    assert reg["endpoints"] == ["PLAINTEXT://%s" % services.bootstrap_servers]
    host, port = services.bootstrap_servers.rsplit(":", 1)
    assert (reg["host"], reg["port"]) == (host, int(port))
    assert live.get_children("/brokers/ids") == [str(broker_id)]


def test_deleted_topic_disappears(services, live, unique, admin):
    topic = unique("mirror-del")
    services.create_topic(topic, 2)
    wait_until(lambda: live.exists("/brokers/topics/" + topic), 10.0, "topic %s mirrored" % topic)
    admin.delete_topics([topic])
    wait_until(lambda: not live.exists("/brokers/topics/" + topic), 15.0,
               "deleted topic %s gone from ZooKeeper" % topic)
    assert topic not in live.get_children("/brokers/topics")


def test_unchanged_nodes_are_not_rewritten(services, live, unique, broker_id):
    """Consumers watch these nodes and rebalance on every write: an idle mirror must not touch them."""
    topic = unique("mirror-idle")
    services.create_topic(topic, 3)
    path = "/brokers/topics/" + topic
    wait_until(lambda: all(live.exists("%s/partitions/%d/state" % (path, p)) for p in range(3)), 5.0, "states")
    watched = [path, "/brokers/ids/%d" % broker_id] + ["%s/partitions/%d/state" % (path, p) for p in range(3)]
    before = {p: live.exists(p) for p in watched}
    fired = []
    live.get(path, watch=lambda event: fired.append(event))
    time.sleep(MIRROR_INTERVAL * 6)  # six sync passes
    after = {p: live.exists(p) for p in watched}
    for p in watched:
        assert (after[p].mzxid, after[p].version) == (before[p].mzxid, before[p].version), "%s was rewritten" % p
    assert fired == [], "the topic node's data watch fired: %s" % fired
    # the mirror is alive and syncing all along: a new topic still shows up
    other = unique("mirror-idle2")
    create_topic_on_broker(services, other, 1)
    wait_until(lambda: live.exists("/brokers/topics/" + other), 2.0, "second topic mirrored")


# -- a RegistryMirror of our own on a chroot, sync_once() ------------------------------------------------------------

def test_added_partitions_update_the_partition_map(services, chroot_zk, admin, unique, broker_id):
    """tansu 0.6 has no CreatePartitions, so a topic cannot really grow on this broker. The metadata source is
    therefore the broker's REAL metadata with one extra partition added to a real test topic — exactly what the
    mirror would read from a broker after kafka-topics --alter --partitions. Everything written goes to real
    ZooKeeper (in a chroot, out of the live mirror's way)."""
    _, client, _ = chroot_zk
    topic = unique("mirror-grow")
    create_topic_on_broker(services, topic, 2)
    grow = {"on": False}

    def source():
        meta = fetch_cluster_metadata(admin)
        assert topic in meta.topics and sorted(meta.topics[topic]) == [0, 1]
        if not grow["on"]:
            return meta
        topics = dict(meta.topics)
        topics[topic] = dict(topics[topic])
        topics[topic][2] = PartitionInfo(partition=2, leader=broker_id, leader_epoch=0, replicas=(broker_id,),
                                         isr=(broker_id,))
        return ClusterMetadata(brokers=meta.brokers, topics=topics, controller_id=meta.controller_id)

    mirror = RegistryMirror(client, metadata_source=source)
    report = mirror.sync_once()
    assert report.registered == [broker_id] and topic in report.topics_created
    path = "/brokers/topics/" + topic
    data, stat1 = client.get(path)
    assert json.loads(data)["partitions"] == {"0": [broker_id], "1": [broker_id]}
    assert not client.exists(path + "/partitions/2/state")

    report = mirror.sync_once()  # nothing changed: nothing written
    assert not report.changed() and client.exists(path).mzxid == stat1.mzxid

    grow["on"] = True
    report = mirror.sync_once()
    assert report.topics_updated == [topic] and report.topics_created == []
    assert report.states_written == 1
    data, stat2 = client.get(path)
    assert json.loads(data) == {"version": 1, "partitions": {"0": [broker_id], "1": [broker_id], "2": [broker_id]}}
    assert stat2.version == stat1.version + 1
    state = json.loads(client.get(path + "/partitions/2/state")[0])
    assert (state["leader"], state["isr"]) == (broker_id, [broker_id])

    assert not mirror.sync_once().changed()  # and stable again


def test_foreign_registration_of_an_unknown_broker_is_never_touched(services, chroot_zk, admin, broker_id):
    root, client, clients = chroot_zk
    foreigner = other_session(services, root, clients)
    foreign_id = 999
    assert foreign_id != broker_id
    foreigner.create("/brokers/ids/%d" % foreign_id, foreign_registration(foreign_id), ephemeral=True, makepath=True)
    data0, stat0 = foreigner.get("/brokers/ids/%d" % foreign_id)

    mirror = RegistryMirror(client, admin)
    first = mirror.sync_once()
    assert first.registered == [broker_id]
    assert first.refused == [] and first.unregistered == [] and first.topics_skipped is False
    assert first.topics_created  # 999 is not one of the cluster's brokers: topics are still mirrored
    for _ in range(3):
        report = mirror.sync_once()
        assert foreign_id not in report.unregistered + report.updated + report.registered

    data1, stat1 = client.get("/brokers/ids/%d" % foreign_id)
    assert data1 == data0
    assert (stat1.ephemeralOwner, stat1.mzxid, stat1.version) == (stat0.ephemeralOwner, stat0.mzxid, stat0.version)
    assert stat1.ephemeralOwner == foreigner.client_id[0] != client.client_id[0]
    assert sorted(client.get_children("/brokers/ids")) == sorted([str(broker_id), str(foreign_id)])

    # the mirror's own registration of a broker that leaves the cluster IS removed (contrast)
    mine = RegistryMirror(client, metadata_source=lambda: ClusterMetadata(brokers={}, topics={}))
    report = mine.sync_once()
    assert report.unregistered == [broker_id]
    assert client.get_children("/brokers/ids") == [str(foreign_id)]
    assert client.get("/brokers/ids/%d" % foreign_id)[1].mzxid == stat0.mzxid


def test_foreign_registration_of_the_clusters_own_broker_is_refused(services, chroot_zk, admin, broker_id):
    root, client, clients = chroot_zk
    foreigner = other_session(services, root, clients)
    path = "/brokers/ids/%d" % broker_id
    foreigner.create(path, foreign_registration(broker_id), ephemeral=True, makepath=True)
    data0, stat0 = foreigner.get(path)

    mirror = RegistryMirror(client, admin)
    for _ in range(3):
        report = mirror.sync_once()
        assert report.refused == [broker_id]
        assert report.topics_skipped is True
        assert report.registered == [] and report.updated == [] and report.unregistered == []
        assert report.topics_created == [] and report.topics_updated == [] and report.states_written == 0
    data1, stat1 = client.get(path)
    assert data1 == data0
    assert (stat1.ephemeralOwner, stat1.mzxid, stat1.version) == (stat0.ephemeralOwner, stat0.mzxid, stat0.version)
    assert stat1.ephemeralOwner == foreigner.client_id[0]
    assert client.get_children("/brokers/topics") == []  # the real broker owns /brokers/topics

    # once the other registrant's session ends, the node goes and the mirror takes over
    zkmod.close(foreigner)
    clients.remove(foreigner)
    wait_until(lambda: not client.exists(path), 10.0, "foreign ephemeral gone")
    report = mirror.sync_once()
    assert report.registered == [broker_id] and report.refused == [] and report.topics_skipped is False
    assert client.get(path)[1].ephemeralOwner == client.client_id[0]
    assert report.topics_created and client.get_children("/brokers/topics")
