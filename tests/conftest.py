"""Session-wide real services for the test suite.

By default one embedded local cluster (a real ZooKeeper server and Apache Kafka 3.9 in ZooKeeper mode, the same
code as ``zkconsumer local up --broker kafka``) is started for the whole session in a temporary directory and
stopped at the end. ``ZKCONSUMER_TEST_BROKER`` chooses the broker: ``kafka`` (default; fetched with Maven into the
cache the first time, or ``$KAFKA_HOME``), ``tansu`` (the fallback broker + registry mirror) or ``docker``
(testcontainers: ZooKeeper + Apache Kafka images, where a Docker engine answers).
Set ``ZK_CONNECT`` and ``KAFKA_BOOTSTRAP`` to run the suite against external services instead (their brokers must
be visible in ZooKeeper: a real ZooKeeper-mode Kafka, or a ``zkconsumer registry sync`` mirror).
A missing service is a test error with the reason, never a skip.

Tests that need live services are marked ``live``: every test that asks for ``services`` (or a fixture built on it,
such as ``zk``), ``spark`` or ``spark_cluster`` is marked here; a test that starts servers, Kafka's tools or a JVM
of its own carries the marker itself. ``pytest -m "not live"`` runs the rest, the pure core, in seconds and without
Java.
"""
import os
import uuid

import pytest

from tests.support import ROOT, service_selection
from zkconsumer.errors import ZkConsumerError
from zkconsumer.local import LocalCluster

BROKER_ENV = service_selection.BROKER_ENV
# the session's live services: a test asking for any of them (or for a fixture that does) is a live test
LIVE_FIXTURES = frozenset({"services", "spark", "spark_cluster"})


def pytest_collection_modifyitems(items):
    for item in items:
        if LIVE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.live)


class Services:
    def __init__(self, zookeeper_connect, bootstrap_servers, cluster=None):
        self.zookeeper_connect = zookeeper_connect
        self.bootstrap_servers = bootstrap_servers
        self.cluster = cluster  # the LocalCluster, when embedded (tests that restart servers need it)

    def create_topic(self, name, partitions):
        from zkconsumer.local import tools
        tools.create_or_grow_topic(self.bootstrap_servers, name, partitions)
        tools.wait_for_zk_topic(self.zookeeper_connect, name, partitions)
        return name

    def produce(self, topic, count, **kw):
        from zkconsumer.local import tools
        return tools.produce(self.bootstrap_servers, topic, count, **kw)


@pytest.fixture(scope="session")
def services(tmp_path_factory):
    try:
        choice = service_selection.choose(os.environ)
    except service_selection.SelectionError as e:
        pytest.fail(str(e), pytrace=False)
    if choice.kind == "external":
        yield Services(choice.zookeeper_connect, choice.bootstrap_servers)
        return
    if choice.kind == "docker":
        why = service_selection.docker_engine_answers()
        if why is not None:
            pytest.fail("%s=docker needs a Docker engine, and none answers (%s); use kafka (the embedded Apache "
                        "Kafka) on machines without one" % (BROKER_ENV, why), pytrace=False)
        docker = service_selection.DockerServices()
        try:
            zk_connect, bootstrap = docker.start()
            yield Services(zk_connect, bootstrap)
        finally:
            docker.stop()
        return
    cluster = LocalCluster(str(tmp_path_factory.mktemp("local-cluster")))
    try:
        info = cluster.up(start_timeout=90, broker=choice.kind)
    except ZkConsumerError as e:
        pytest.fail("cannot start the test cluster (%s=%s): %s" % (BROKER_ENV, choice.kind, e), pytrace=False)
    try:
        yield Services(info["zookeeper_connect"], info["bootstrap_servers"], cluster)
    finally:
        cluster.down()


@pytest.fixture
def zk(services):
    from zkconsumer.zookeeper import client as zkmod
    client = zkmod.connect(services.zookeeper_connect)
    yield client
    zkmod.close(client)


@pytest.fixture
def procs():
    """Child processes (objects with .kill()) to kill at the end of a test, whatever happens."""
    started = []
    yield started
    for c in started:
        c.kill()


@pytest.fixture
def conns():
    """Connectors to shut down at the end of a test, whatever happens."""
    made = []
    yield made
    for c in reversed(made):
        try:
            c.shutdown()
        except Exception:
            pass


@pytest.fixture
def unique():
    """unique('topic') -> 'topic-3f2a9c1b': names that never collide across tests sharing the cluster."""
    return lambda prefix="t": "%s-%s" % (prefix, uuid.uuid4().hex[:8])


@pytest.fixture
def silent():
    """The address of a listener that accepts connections (its backlog of 8 does) and never answers: a broker that
    does not answer (the idle watch's tests)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()
    s.close()


# --- Spark (zkconsumer.spark tests): one local[2] SparkSession for the whole test session -------------------------
@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession with the ``zkconsumer`` data source registered (started once, ~10-15 s)."""
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession
    from zkconsumer.spark import ZkConsumerDataSource
    session = (SparkSession.builder.master("local[2]").appName("zkconsumer-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC").config("spark.log.level", "ERROR")
               .getOrCreate())
    session.dataSource.register(ZkConsumerDataSource)
    session.range(1).count()
    yield session
    session.stop()


# --- Spark standalone cluster (tests/spark/test_spark_cluster.py): a master and two workers, started once, on demand
@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A real Spark standalone cluster from the installed pyspark: one master and two workers (1 core, 512 MiB
    each), every one its own JVM on loopback; executors run in further JVMs under the workers. Only the tests that
    ask for it start it (once per test session, ~20-40 s)."""
    import sys
    from zkconsumer.spark.standalone import StandaloneCluster
    cluster = StandaloneCluster(str(tmp_path_factory.mktemp("spark-standalone")))
    try:
        cluster.up(workers=2, cores=1, memory="512m", python=os.environ.get("PYSPARK_PYTHON") or sys.executable,
                   start_timeout=180)
    except ZkConsumerError as e:
        pytest.fail("cannot start the Spark standalone cluster: %s" % e, pytrace=False)
    try:
        yield cluster
    finally:
        cluster.down()
