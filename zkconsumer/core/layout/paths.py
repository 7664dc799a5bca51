"""Builders for every znode path the old consumer and its tools touch.

The paths are those of Kafka's ``object ZkUtils`` (its path constants and ``get...Path`` builders),
``ZKGroupDirs`` and ``ZKGroupTopicDirs`` (``kafka/utils/ZkUtils.scala`` at 0.8.2.2 and 1.1.1).  Paths are
chroot-relative, exactly as ZkClient sees them.

Every builder validates its name arguments with :mod:`zkconsumer.core.layout.names` *before* concatenating, so an
illegal group/topic/consumer id/partition raises :class:`~zkconsumer.errors.InvalidNameError` and never becomes a
path.  Partition and broker-id arguments may be ``int`` or canonical decimal ``str``; they are rendered with
``str(int)`` like Scala's ``Int.toString``.
"""

from __future__ import annotations

from typing import Tuple, Union

from ...errors import InvalidNameError, ZnodeFormatError
from .names import (validate_broker_id, validate_consumer_id, validate_group, validate_partition,
                    validate_topic)

__all__ = [
    "CONSUMERS_PATH", "BROKER_IDS_PATH", "BROKER_TOPICS_PATH", "TOPIC_CONFIG_PATH", "TOPIC_CONFIG_CHANGES_PATH",
    "CONTROLLER_PATH", "CONTROLLER_EPOCH_PATH", "REASSIGN_PARTITIONS_PATH", "DELETE_TOPICS_PATH",
    "PREFERRED_REPLICA_ELECTION_PATH",
    "consumers_path", "group_path", "group_ids_path", "consumer_registration_path", "group_owners_path",
    "topic_owners_path", "partition_owner_path", "group_offsets_path", "topic_offsets_path",
    "partition_offset_path", "broker_ids_path", "broker_path", "broker_topics_path", "topic_path",
    "topic_partitions_path", "partition_path", "partition_state_path", "controller_path", "controller_epoch_path",
    "delete_topics_path", "delete_topic_path", "topic_config_path", "parse_offset_path",
]

# object ZkUtils, Kafka 0.8.2.2 kafka/utils/ZkUtils.scala l.39-48 (1.1.1 builds the same paths from /admin,
# /brokers and /config)
CONSUMERS_PATH = "/consumers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIG_PATH = "/config/topics"
TOPIC_CONFIG_CHANGES_PATH = "/config/changes"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"


# ---- /consumers (ZKGroupDirs / ZKGroupTopicDirs) ----------------------------------------------------------------

def consumers_path() -> str:
    """``/consumers``"""
    return CONSUMERS_PATH


def group_path(group: str) -> str:
    """``/consumers/[group]`` (``ZKGroupDirs.consumerGroupDir``)."""
    return CONSUMERS_PATH + "/" + validate_group(group)


def group_ids_path(group: str) -> str:
    """``/consumers/[group]/ids`` (``ZKGroupDirs.consumerRegistryDir``)."""
    return group_path(group) + "/ids"


def consumer_registration_path(group: str, consumer_id: str) -> str:
    """``/consumers/[group]/ids/[consumerId]`` (ephemeral; Kafka 1.1.1
    ``ZookeeperConsumerConnector.registerConsumerInZK``)."""
    return group_ids_path(group) + "/" + validate_consumer_id(consumer_id)


def group_owners_path(group: str) -> str:
    """``/consumers/[group]/owners`` (1.1.1 ``consumerGroupOwnersDir``)."""
    return group_path(group) + "/owners"


def topic_owners_path(group: str, topic: str) -> str:
    """``/consumers/[group]/owners/[topic]`` (``ZKGroupTopicDirs.consumerOwnerDir``)."""
    return group_owners_path(group) + "/" + validate_topic(topic)


def partition_owner_path(group: str, topic: str, partition: Union[int, str]) -> str:
    """``/consumers/[group]/owners/[topic]/[partition]`` (ephemeral; ``ZkUtils.getConsumerPartitionOwnerPath``)."""
    return topic_owners_path(group, topic) + "/" + str(validate_partition(partition))


def group_offsets_path(group: str) -> str:
    """``/consumers/[group]/offsets`` (1.1.1 ``consumerGroupOffsetsDir``)."""
    return group_path(group) + "/offsets"


def topic_offsets_path(group: str, topic: str) -> str:
    """``/consumers/[group]/offsets/[topic]`` (``ZKGroupTopicDirs.consumerOffsetDir``)."""
    return group_offsets_path(group) + "/" + validate_topic(topic)


def partition_offset_path(group: str, topic: str, partition: Union[int, str]) -> str:
    """``/consumers/[group]/offsets/[topic]/[partition]`` (persistent; Kafka 1.1.1
    ``ZookeeperConsumerConnector.commitOffsetToZooKeeper``)."""
    return topic_offsets_path(group, topic) + "/" + str(validate_partition(partition))


# ---- /brokers ---------------------------------------------------------------------------------------------------

def broker_ids_path() -> str:
    """``/brokers/ids``"""
    return BROKER_IDS_PATH


def broker_path(broker_id: Union[int, str]) -> str:
    """``/brokers/ids/[brokerId]`` (ephemeral, written by the broker)."""
    return BROKER_IDS_PATH + "/" + str(validate_broker_id(broker_id))


def broker_topics_path() -> str:
    """``/brokers/topics``"""
    return BROKER_TOPICS_PATH


def topic_path(topic: str) -> str:
    """``/brokers/topics/[topic]`` (``ZkUtils.getTopicPath``: the partition -> replicas map)."""
    return BROKER_TOPICS_PATH + "/" + validate_topic(topic)


def topic_partitions_path(topic: str) -> str:
    """``/brokers/topics/[topic]/partitions``"""
    return topic_path(topic) + "/partitions"


def partition_path(topic: str, partition: Union[int, str]) -> str:
    """``/brokers/topics/[topic]/partitions/[partition]``"""
    return topic_partitions_path(topic) + "/" + str(validate_partition(partition))


def partition_state_path(topic: str, partition: Union[int, str]) -> str:
    """``/brokers/topics/[topic]/partitions/[partition]/state`` (``ZkUtils.getTopicPartitionLeaderAndIsrPath``)."""
    return partition_path(topic, partition) + "/state"


# ---- controller, admin, config ------------------------------------------------------------------------------------

def controller_path() -> str:
    """``/controller`` (ephemeral)."""
    return CONTROLLER_PATH


def controller_epoch_path() -> str:
    """``/controller_epoch`` (persistent)."""
    return CONTROLLER_EPOCH_PATH


def delete_topics_path() -> str:
    """``/admin/delete_topics``"""
    return DELETE_TOPICS_PATH


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/[topic]`` (an empty persistent node: Kafka 1.1.1 ``AdminUtils.deleteTopic``)."""
    return DELETE_TOPICS_PATH + "/" + validate_topic(topic)


def topic_config_path(topic: str) -> str:
    """``/config/topics/[topic]``"""
    return TOPIC_CONFIG_PATH + "/" + validate_topic(topic)


# ---- parsing ---------------------------------------------------------------------------------------------------

_OFFSET_PATH_FORM = "/consumers/<group>/offsets/<topic>/<partition>"


def parse_offset_path(path: str) -> Tuple[str, str, int]:
    """Split the path of an ExportZkOffsets / ImportZkOffsets line (Kafka 1.1.1 ``kafka.tools.ExportZkOffsets``),
    ``/consumers/G/offsets/T/P``, into ``(group, topic, partition)``.

    The path must have exactly that shape (no trailing ``/``, no empty components); the group, topic and
    partition must be legal (partition canonical decimal, e.g. ``0``, not the 0.7 ``1-0`` broker-partition form).
    Anything else raises :class:`~zkconsumer.errors.ZnodeFormatError` naming the path and the expected form.
    """
    if not isinstance(path, str):
        raise ZnodeFormatError(repr(path), "not an offset path %s (not a string)" % _OFFSET_PATH_FORM)
    parts = path.split("/")
    if len(parts) != 6 or parts[0] != "" or parts[1] != "consumers" or parts[3] != "offsets":
        raise ZnodeFormatError(path, "not an offset path of the form %s" % _OFFSET_PATH_FORM)
    try:
        group = validate_group(parts[2])
        topic = validate_topic(parts[4])
        partition = validate_partition(parts[5])
    except InvalidNameError as e:
        raise ZnodeFormatError(path, "not an offset path of the form %s: %s %r %s"
                               % (_OFFSET_PATH_FORM, e.kind, e.name, e.reason)) from e
    return group, topic, partition


# ---- our own znodes (never read or written by the Scala consumer or Kafka's tools) --------------------------

def group_member_info_dir(group: str) -> str:
    """``/consumers/[group]/zkconsumer/members``: one ephemeral node per zkconsumer member, beside the Scala
    layout (the registration under ``ids`` keeps the Scala consumer's exact bytes)."""
    return group_path(group) + "/zkconsumer/members"


def member_info_path(group: str, consumer_id: str) -> str:
    """``/consumers/[group]/zkconsumer/members/[consumerId]`` (ephemeral, JSON: host, client id, offset storage)."""
    return group_member_info_dir(group) + "/" + validate_consumer_id(consumer_id)


def group_restored_path(group: str) -> str:
    """``/consumers/[group]/zkconsumer/restored``: the offset nodes ``zkmigrate restore`` wrote, each with the zxid of
    its write (persistent JSON): a rollback does not take them for a member's while they are unchanged."""
    return group_path(group) + "/zkconsumer/restored"


def group_migration_path(group: str) -> str:
    """``/consumers/[group]/zkconsumer/migration``: the phase zkmigrate recorded for the group (persistent JSON; a
    ``cutover`` phase fences ZooKeeper members out of a group handed to broker-coordinated consumers)."""
    return group_path(group) + "/zkconsumer/migration"


def group_lock_path(group: str) -> str:
    """``/consumers/[group]/zkconsumer/lock``: zkmigrate's per-group lock (kazoo's Lock recipe: one ephemeral
    sequential child per contender, JSON naming its host, pid and command; the lowest holds the lock)."""
    return group_path(group) + "/zkconsumer/lock"


def group_leaving_dir(group: str) -> str:
    """``/consumers/[group]/zkconsumer/leaving``: members that left gracefully and announced they come back
    (``rebalance.leave.grace.ms``); one persistent JSON node per consumer id."""
    return group_path(group) + "/zkconsumer/leaving"
