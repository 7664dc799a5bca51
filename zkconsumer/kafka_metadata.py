"""Kafka adapter: cluster metadata over the Kafka protocol (kafka-python), as plain immutable values.

Used by the registry mirror (to write the legacy ``/brokers`` layout), the fetchers (partition leaders) and the
tools (log-end offsets). Nothing here touches ZooKeeper.
"""
import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .errors import ClusterUnavailableError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: Optional[str] = None


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: Tuple[int, ...]
    isr: Tuple[int, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: Dict[int, BrokerInfo] = field(default_factory=dict)
    topics: Dict[str, Dict[int, PartitionInfo]] = field(default_factory=dict)
    controller_id: Optional[int] = None
    # listed with an error (e.g. leader not yet elected): not deleted
    unavailable_topics: Tuple[str, ...] = ()


    def partitions_for(self, topic) -> List[int]:
        return sorted(self.topics.get(topic, {}))


def admin_client(bootstrap_servers, client_id="zkconsumer", timeout_ms=10000, security=None,
                 bootstrap_timeout_ms=None):
    """A KafkaAdminClient (with *security*, a :class:`~zkconsumer.kafka_security.KafkaSecurity`), or
    ClusterUnavailableError naming the bootstrap servers and the security settings; *bootstrap_timeout_ms*
    bounds the wait for a first connection (default: kafka-python's)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError
    from .kafka_connect_errors import connect_error
    from .kafka_security import PLAINTEXT
    security = security or PLAINTEXT
    try:
        extra = {"bootstrap_timeout_ms": bootstrap_timeout_ms} if bootstrap_timeout_ms else {}
        return KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id=client_id,
                                request_timeout_ms=timeout_ms, **extra, **security.client_kwargs())
    except (KafkaError, OSError, ValueError) as e:
        raise connect_error("reach the Kafka cluster", bootstrap_servers, security, e) from e


def fetch_cluster_metadata(admin, include_internal=True) -> ClusterMetadata:
    """Read brokers and every topic's partitions (leader, replicas, ISR) in one pass."""
    from kafka.errors import KafkaError
    try:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
    except (KafkaError, OSError) as e:
        raise ClusterUnavailableError("cannot read cluster metadata: %s" % e) from e
    brokers = {b["broker_id"]: BrokerInfo(b["broker_id"], b["host"], b["port"], b.get("rack"))
               for b in cluster.get("brokers", [])}
    out = {}
    unavailable = []
    for t in topics:
        if t.get("error_code"):
            log.debug("topic %s reported error code %s", t.get("name"), t.get("error_code"))
            if t.get("name"):
                unavailable.append(t["name"])
            continue
        if t.get("is_internal") and not include_internal:
            continue
        parts = {}
        for p in t.get("partitions", []):
            parts[p["partition_index"]] = PartitionInfo(
                partition=p["partition_index"], leader=p.get("leader_id", -1), leader_epoch=p.get("leader_epoch", 0),
                replicas=tuple(p.get("replica_nodes", ())), isr=tuple(p.get("isr_nodes", ())))
        out[t["name"]] = parts
    return ClusterMetadata(brokers=brokers, topics=out, controller_id=cluster.get("controller_id"),
                           unavailable_topics=tuple(sorted(unavailable)))
