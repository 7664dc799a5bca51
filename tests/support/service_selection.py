"""Which services the test session runs against, chosen from the environment (pure), and the Docker path.

* ``ZK_CONNECT`` and ``KAFKA_BOOTSTRAP`` both set: external services (their brokers must be registered in that
  ZooKeeper: a ZooKeeper-mode Kafka, or a registry mirror); only one of them set is an error;
* otherwise ``ZKCONSUMER_TEST_BROKER``: ``kafka`` (default: the embedded cluster with Apache Kafka 3.9 in
  ZooKeeper mode), ``tansu`` (the embedded fallback broker + registry mirror) or ``docker`` (testcontainers:
  ZooKeeper and Apache Kafka 3.9 in ZooKeeper mode as containers; needs a Docker engine, and fails with a clear
  message where none answers — these machines have none).
"""
from dataclasses import dataclass
from typing import Mapping, Optional

BROKER_ENV = "ZKCONSUMER_TEST_BROKER"
CHOICES = ("kafka", "tansu", "docker")
# Docker images for the docker path: Kafka 3.9 is the last line with ZooKeeper mode. The Confluent images run
# ZooKeeper mode from environment variables alone (cp-kafka 7.9 ships Apache Kafka 3.9).
ZOOKEEPER_IMAGE = "zookeeper:3.9"
KAFKA_IMAGE = "confluentinc/cp-kafka:7.9.0"


class SelectionError(Exception):
    """The environment asks for something that cannot be: the message says what and how to fix it."""


@dataclass(frozen=True)
class Choice:
    kind: str  # external | kafka | tansu | docker
    zookeeper_connect: Optional[str] = None
    bootstrap_servers: Optional[str] = None


def choose(env: Mapping[str, str]) -> Choice:
    zk, kafka = env.get("ZK_CONNECT"), env.get("KAFKA_BOOTSTRAP")
    if bool(zk) != bool(kafka):
        raise SelectionError("set both ZK_CONNECT and KAFKA_BOOTSTRAP to use external services (only %s is set)"
                             % ("ZK_CONNECT" if zk else "KAFKA_BOOTSTRAP"))
    if zk and kafka:
        return Choice("external", zk, kafka)
    kind = env.get(BROKER_ENV) or "kafka"
    if kind not in CHOICES:
        raise SelectionError("%s=%s: choose one of %s (or set ZK_CONNECT and KAFKA_BOOTSTRAP)"
                             % (BROKER_ENV, kind, ", ".join(CHOICES)))
    return Choice(kind)


def docker_engine_answers(timeout: float = 3.0) -> Optional[str]:
    """None when a Docker engine answers a ping, else why not (one line)."""
    try:
        import docker
        client = docker.from_env(timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
        return None
    except Exception as e:  # DockerException, connection refused, no socket, ...
        return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


class DockerServices:
    """ZooKeeper + Apache Kafka (ZooKeeper mode) containers on one network, the broker advertised on a host port
    chosen before start (so the tests, on the host, can reach it). ``start()`` -> (zookeeper_connect, bootstrap)."""

    def __init__(self):
        self.network = self.zookeeper = self.kafka = None

    def start(self):
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.network import Network
        from testcontainers.core.waiting_utils import wait_for_logs
        from zkconsumer.local.processes import free_port
        zk_port, kafka_port = free_port(), free_port()
        self.network = Network().__enter__()
        self.zookeeper = (DockerContainer(ZOOKEEPER_IMAGE).with_network(self.network)
                          .with_network_aliases("zookeeper").with_bind_ports(2181, zk_port))
        self.zookeeper.start()
        wait_for_logs(self.zookeeper, "binding to port", timeout=60)
        self.kafka = (DockerContainer(KAFKA_IMAGE).with_network(self.network).with_bind_ports(kafka_port, kafka_port)
                      .with_env("KAFKA_BROKER_ID", "0")
                      .with_env("KAFKA_ZOOKEEPER_CONNECT", "zookeeper:2181")
                      .with_env("KAFKA_LISTENERS", "PLAINTEXT://0.0.0.0:%d" % kafka_port)
                      .with_env("KAFKA_ADVERTISED_LISTENERS", "PLAINTEXT://127.0.0.1:%d" % kafka_port)
                      .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1")
                      .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
                      .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
                      .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
                      .with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false"))
        self.kafka.start()
        wait_for_logs(self.kafka, r"\[KafkaServer id=0\] started", timeout=120)
        return "127.0.0.1:%d" % zk_port, "127.0.0.1:%d" % kafka_port

    def stop(self):
        for c in (self.kafka, self.zookeeper):
            if c is not None:
                try:
                    c.stop()
                except Exception:
                    pass
        if self.network is not None:
            try:
                self.network.__exit__(None, None, None)
            except Exception:
                pass
