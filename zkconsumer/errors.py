"""One exception hierarchy for the whole package.

Every error a user can cause or meet derives from :class:`ZkConsumerError`, so library callers can catch by type
and the CLIs can turn any of them into one clear line on stderr and a non-zero exit. The tree (classes defined in
this module unless a module is named; ``also`` names further base classes)::

    ZkConsumerError
    ├── ConfigError (also ValueError)
    ├── PropertiesSyntaxError (also ValueError)
    ├── InvalidNameError (also ValueError)
    ├── ZnodeFormatError
    ├── ClusterUnavailableError
    │   ├── KafkaSecurityError
    │   ├── SplitBrainUnknownError
    │   └── BrokerGroupDescribeError
    ├── OffsetStoreError
    │   └── OffsetManagerUnavailableError (also ClusterUnavailableError)
    ├── RebalanceError
    │   ├── RegistrationConflictError
    │   ├── OwnershipLostError
    │   └── UnusableRegistration  in zkconsumer.core.subscription.topic_count
    ├── GroupConflictError
    │   ├── FenceError  in migrate.fence
    │   └── GroupLockedError  in migrate.lock
    ├── ConsumerTimeoutError
    ├── MessageTooLargeError
    ├── FetchError
    ├── LocalClusterError
    ├── RegistryConflictError
    ├── ZkAuthError  in zkconsumer.zookeeper.auth
    ├── IncompatibleClientError  in zkconsumer.kafka.internals
    ├── NoAnswerInTime  in zkconsumer.consumer.single_flight
    ├── GroupNotFoundError  in zkconsumer.tools.groups
    ├── GroupNotSettledError  in zkconsumer.spark.stream
    ├── DataLossError  in zkconsumer.spark.kafka_io
    ├── NoOffsetForTimestampError (also ValueError)  in zkconsumer.spark.cluster
    └── OffsetsFileError (also ValueError)  in migrate.offsets_file
        └── BackupFileError  in migrate.backup

The suite checks that this drawing is the tree the classes form (every class, its parent, its module).
"""

from __future__ import annotations

from typing import Optional


class ZkConsumerError(Exception):
    """Root of every error raised by zkconsumer and migrate."""


class ConfigError(ZkConsumerError, ValueError):
    """A consumer property is missing or has a bad value.

    The message always names the key, the value given and what is allowed.
    """

    def __init__(self, key: str, value: object, allowed: str, detail: Optional[str] = None) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        self.detail = detail
        msg = "invalid value %r for %s: %s" % (value, key, allowed)
        if detail:
            msg += " (%s)" % detail
        super().__init__(msg)


class PropertiesSyntaxError(ZkConsumerError, ValueError):
    """A .properties file or a --property argument could not be parsed."""


class InvalidNameError(ZkConsumerError, ValueError):
    """A group id, topic or consumer id is not a legal Kafka name (it would not be a safe znode name)."""

    def __init__(self, kind: str, name: object, reason: str) -> None:
        self.kind = kind
        self.name = name
        self.reason = reason
        super().__init__(
            "illegal %s %r: %s; legal names use only [a-zA-Z0-9._-], are 1-249 characters long "
            "and are not '.' or '..'" % (kind, name, reason))


class ZnodeFormatError(ZkConsumerError):
    """A znode holds data that does not decode as the legacy format (empty, not JSON, wrong types)."""

    def __init__(self, path: Optional[str], reason: str, data: object = None) -> None:
        self.path = path
        self.reason = reason
        self.data = data
        shown = ""
        if data is not None:
            text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else str(data)
            shown = ": %r" % (text[:120] + ("..." if len(text) > 120 else ""))
        super().__init__("malformed znode %s: %s%s" % (path or "<unknown path>", reason, shown))


class ClusterUnavailableError(ZkConsumerError):
    """ZooKeeper or the Kafka cluster cannot be reached."""


class KafkaSecurityError(ClusterUnavailableError):
    """A Kafka broker answers but refused our TLS handshake or SASL authentication (wrong CA, user, password or
    mechanism): not transient, so it is not retried like an outage. The message names the servers,
    ``security.protocol`` and the mechanism, never the password."""


class LocalClusterError(ZkConsumerError):
    """The embedded local cluster could not be started, found or stopped."""


class RegistryConflictError(ZkConsumerError):
    """The registry mirror refuses to touch a broker registration it did not write."""


class RebalanceError(ZkConsumerError):
    """A rebalance attempt failed (ownership conflict, vanished member, bad subscription)."""


class RegistrationConflictError(RebalanceError):
    """Our consumer id is registered by another live ZooKeeper session (a duplicate explicit consumer.id), or
    ZooKeeper refuses to create the registration (no CREATE right on ``/consumers/G/ids``: a fenced group)."""


class OwnershipLostError(RebalanceError):
    """A commit or delivery was refused because this consumer no longer owns the partition (fencing)."""

    #: the failed commit's ``CommitResult`` when raised by ``CommitResult.raise_for_errors`` (not set otherwise)
    result: object


class OffsetStoreError(ZkConsumerError):
    """Reading or writing committed offsets failed."""

    #: the failed commit's ``CommitResult`` when raised by ``CommitResult.raise_for_errors`` (not set otherwise)
    result: object


class OffsetManagerUnavailableError(OffsetStoreError, ClusterUnavailableError):
    """Kafka's offset manager (the group coordinator) cannot be reached or found."""


class ConsumerTimeoutError(ZkConsumerError):
    """No message arrived within consumer.timeout.ms (the old ConsumerTimeoutException)."""


class MessageTooLargeError(ZkConsumerError):
    """A message is larger than fetch.message.max.bytes; the partition cannot make progress."""


class GroupConflictError(ZkConsumerError):
    """The same group id is active as a broker-coordinated group (split brain) or has live members."""


class FetchError(ZkConsumerError):
    """Fetching kept failing for a stream's partitions (raised by the stream's iterator; iteration may go on, and
    fetching keeps retrying)."""


class SplitBrainUnknownError(ClusterUnavailableError):
    """Whether a broker-coordinated group of the same id is active could not be found out (split.brain.check)."""


class BrokerGroupDescribeError(ClusterUnavailableError):
    """The group coordinator refused to describe a group (e.g. GROUP_AUTHORIZATION_FAILED), so whether a
    broker-coordinated group of that id is active cannot be known; the message names the group and the error."""
