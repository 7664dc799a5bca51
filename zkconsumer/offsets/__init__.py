"""Offset stores: ZooKeeper (``zookeeper.py``), Kafka offset manager (``kafka.py``) and dual commit (``dual.py``), one
interface.

* :class:`OffsetStore` - ``fetch(partitions)``, ``commit(offsets, fence=None) -> CommitResult``, ``close()``;
* :class:`CommitResult` - committed / unchanged / failed (with reasons), ``raise_for_errors()``;
* :class:`OwnershipFence` - ``OwnershipFence(zk_session_id, {(t, p): owner_path})`` for fenced commits;
* :func:`make_offset_store` - the store ``offsets.storage`` / ``dual.commit.enabled`` select.

The Kafka-backed stores (and kafka-python) are imported lazily, when a group uses them.
"""

from .base import CommitResult, OffsetStore, OwnershipFence
from .zookeeper import ZooKeeperOffsetStore

__all__ = ["CommitResult", "OffsetStore", "OwnershipFence", "ZooKeeperOffsetStore", "make_offset_store"]


def make_offset_store(config, zk_client, bootstrap_servers=None, strict=False) -> OffsetStore:
    """The offset store for ``config`` (a :class:`~zkconsumer.config.ConsumerConfig`), bound to ``group.id``.

    * ``offsets.storage=zookeeper`` -> :class:`ZooKeeperOffsetStore` (``dual.commit.enabled`` has no effect: Kafka
      1.1.1 ``ZookeeperConsumerConnector.commitOffsets`` and ``fetchOffsets`` read it only with ``kafka``);
    * ``kafka`` and ``dual.commit.enabled=false`` -> :class:`zkconsumer.offsets.kafka.KafkaOffsetStore`;
    * ``kafka`` and ``dual.commit.enabled=true`` -> :class:`zkconsumer.offsets.dual.DualOffsetStore`.

    ``bootstrap_servers`` is required for the Kafka-backed stores.  ``strict`` is passed to the ZooKeeper store
    (the consumer wants the tolerant reading of malformed nodes: see :class:`ZooKeeperOffsetStore`).
    """
    group = config.group_id
    if config.offsets_storage == "zookeeper":
        return ZooKeeperOffsetStore(zk_client, group, strict=strict)
    if not bootstrap_servers:
        from ..errors import ConfigError
        raise ConfigError("offsets.storage", config.offsets_storage,
                          "zookeeper, or kafka together with bootstrap servers",
                          "no bootstrap servers were given for the Kafka offset manager")
    from .kafka import KafkaOffsetStore
    kafka = KafkaOffsetStore(bootstrap_servers, group, config=config, zk=zk_client)
    if not config.dual_commit_enabled:
        return kafka
    from .dual import DualOffsetStore
    return DualOffsetStore(ZooKeeperOffsetStore(zk_client, group, strict=strict), kafka,
                           kafka_outage_ms=config.dual_commit_kafka_outage_ms)
