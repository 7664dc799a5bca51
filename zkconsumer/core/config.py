"""``ConsumerConfig``: every key of the old consumer's ``kafka.consumer.ConsumerConfig`` (Kafka 1.1.1
``kafka.consumer.ConsumerConfig`` and the ZooKeeper keys of its base class ``kafka.utils.ZKConfig``).

Defaults are those of Kafka 0.8.2.2 (plus ``fetch.max.bytes`` from 0.10.1), including the old consumer's quirks:

* ``zookeeper.connection.timeout.ms`` defaults to ``zookeeper.session.timeout.ms``;
* ``rebalance.backoff.ms`` defaults to ``zookeeper.sync.time.ms`` (KAFKA-2589);
* ``client.id`` defaults to ``group.id``;
* ``offsets.storage`` is lower-cased and ``dual.commit.enabled`` defaults to true only when it is ``kafka``;
* ``rebalance.max.retries`` is the *total* number of attempts (Kafka 1.1.1 ``ZKRebalancerListener.syncedRebalance``
  loops ``for (i <- 0 until config.rebalanceMaxRetries)``);
* the ``fetch.wait.max.ms <= socket.timeout.ms`` check is done as 0.9+ does it (KAFKA-1054),
  and ``partition.assignment.strategy`` is validated as in 0.9+ (KAFKA-2032).

Where we are stricter than Java (deliberately, so typos fail fast):

* booleans must be ``true``/``false`` (any case, surrounding whitespace allowed); Java's
  ``toBoolean`` would silently read ``yes`` as false;
* integers are Java ints (``[+-]?[0-9]+``, 32-bit) but surrounding whitespace is allowed, and each
  key has a sensible range (timeouts > 0, counts >= 1, backoffs >= 0);
* ``group.id``/``client.id``/``consumer.id`` must be non-empty ``[a-zA-Z0-9._-]+`` names;
* ``zookeeper.connect`` must be ``host:port[,host:port...][/chroot]`` (the port is required).

zkconsumer extension keys (not in Kafka; marked ``extension`` in :func:`describe_keys`):
``rebalance.settle.ms``, ``rebalance.slow.retry.ms``, ``zookeeper.suspended.grace.ms``, ``split.brain.check``,
``split.brain.check.timeout.ms``, ``cutover.fence``, ``rebalance.leave.grace.ms``,
``dual.commit.kafka.outage.ms``, ``offsets.storage.switch.check``, the Kafka client security keys
(``security.protocol``, ``sasl.*``, ``ssl.*``: validated together by :mod:`zkconsumer.core.kafka_security`), and the
ZooKeeper security keys ``zookeeper.auth.scheme``, ``zookeeper.auth.credentials.file``, ``zookeeper.sasl.mechanism``,
``zookeeper.set.acl``.

Unknown keys are logged (one warning per key, logger ``zkconsumer.core.config``) and kept in
``cfg.raw``, like ``VerifiableProperties.verify()``.  All validation happens in the constructor;
this module never touches the network.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import types
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ..errors import ConfigError
from .kafka_security import SECURITY_KEYS, KafkaSecurity, redact
from .properties import load_properties

__all__ = ["ConsumerConfig", "describe_keys", "KNOWN_KEYS", "EXTENSION_KEYS"]

log = logging.getLogger("zkconsumer.core.config")

_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1
_INT_RE = re.compile(r"[+-]?[0-9]+")
_NAME_RE = re.compile(r"[a-zA-Z0-9._-]+")
_HOST_RE = re.compile(r"(?:\[[0-9A-Fa-f:.%a-zA-Z]+\]|[A-Za-z0-9._-]+)")
_NAME_RULE = "a non-empty name of ASCII letters, digits, '.', '_' and '-'"
_GROUP_RULE = _NAME_RULE + ", at most 249 characters, not '.' or '..'"
_ZK_RULE = ("host:port[,host:port...][/chroot] (chroot starts with '/', has no empty segments and "
            "does not end with '/' unless it is exactly '/')")

#: the longest fetch.idle.wait.ms (a silent leader is given up on this long + 5 s after it was asked)
IDLE_WAIT_MAX_MS = 30000

# Derived defaults: the default is the value of another key (Kafka 1.1.1 ``ConsumerConfig`` and ``ZKConfig``, e.g.
# ``props.getInt("rebalance.backoff.ms", zkSyncTimeMs)``).
_SAME_AS = {
    "zookeeper.connection.timeout.ms": "zookeeper.session.timeout.ms",
    "rebalance.backoff.ms": "zookeeper.sync.time.ms",
    "client.id": "group.id",
}


@dataclasses.dataclass(frozen=True)
class _Key:
    name: str
    # int | bool | enum | name | zk | derived-bool | security | path
    kind: str
    # None = required/derived/unset
    default: object
    doc: str
    # inclusive minimum for ints
    lo: Optional[int] = None
    choices: Tuple[str, ...] = ()
    extension: bool = False

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


_KEYS: Tuple[_Key, ...] = (
    _Key("group.id", "name", None, "Consumer group name (required)."),
    _Key("consumer.id", "name", None, "Explicit consumer id; normally generated as <group>_<host>-<millis>-<uuid8> (as Kafka 1.1.1 ZookeeperConsumerConnector.consumerIdString). For testing."),
    _Key("zookeeper.connect", "zk", None, "ZooKeeper connect string host:port[,host:port...][/chroot] (required)."),
    _Key("zookeeper.session.timeout.ms", "int", 6000, "ZooKeeper session timeout.", lo=1),
    _Key("zookeeper.connection.timeout.ms", "int", None, "Max wait to connect to ZooKeeper; defaults to zookeeper.session.timeout.ms.", lo=1),
    _Key("zookeeper.sync.time.ms", "int", 2000, "How far a ZK follower can be behind its leader; only used as the default of rebalance.backoff.ms.", lo=0),
    _Key("socket.timeout.ms", "int", 30 * 1000, "Socket timeout for fetch and metadata requests; must be >= fetch.wait.max.ms.", lo=1),
    _Key("socket.receive.buffer.bytes", "int", 64 * 1024, "Socket receive buffer for fetch connections.", lo=1),
    _Key("fetch.message.max.bytes", "int", 1024 * 1024, "Bytes fetched per partition per request; larger messages cannot be consumed.", lo=1),
    _Key("num.consumer.fetchers", "int", 1, "Number of fetcher threads.", lo=1),
    _Key("auto.commit.enable", "bool", True, "Periodically commit consumed offsets."),
    _Key("auto.commit.interval.ms", "int", 60 * 1000, "Auto-commit period (first commit after one interval; a reset point is committed at once).", lo=1),
    _Key("queued.max.message.chunks", "int", 2, "Capacity (in fetched chunks) of each stream's queue.", lo=1),
    _Key("rebalance.max.retries", "int", 4, "Total number of rebalance attempts, not 1 + retries (as Kafka 1.1.1 ZKRebalancerListener.syncedRebalance counts them).", lo=1),
    _Key("rebalance.backoff.ms", "int", None, "Backoff between rebalance attempts; defaults to zookeeper.sync.time.ms.", lo=0),
    _Key("refresh.leader.backoff.ms", "int", 200, "Sleep between leader-finder passes.", lo=0),
    _Key("fetch.min.bytes", "int", 1, "Minimum bytes the broker should return for a fetch.", lo=0),
    _Key("fetch.wait.max.ms", "int", 100, "Max broker wait when fetch.min.bytes is not available; must be <= socket.timeout.ms.", lo=0),
    _Key("auto.offset.reset", "enum", "largest", "Where to start without a committed offset, or with one the log no longer has: smallest or largest (the point is committed at once).", choices=("smallest", "largest")),
    _Key("consumer.timeout.ms", "int", -1, "Iterator timeout: -1 blocks forever, >= 0 raises ConsumerTimeoutError after that long.", lo=-1),
    _Key("client.id", "name", None, "Client id sent to brokers; defaults to group.id."),
    _Key("exclude.internal.topics", "bool", True, "Wildcard subscriptions skip internal topics (__consumer_offsets)."),
    _Key("partition.assignment.strategy", "enum", "range", "Partition assignor: range or roundrobin.", choices=("range", "roundrobin")),
    _Key("offsets.storage", "enum", "zookeeper", "Where offsets are committed: zookeeper or kafka (case-insensitive).", choices=("zookeeper", "kafka")),
    _Key("offsets.channel.backoff.ms", "int", 1000, "Backoff between offset-channel reconnects and offset fetch/commit retries.", lo=0),
    _Key("offsets.channel.socket.timeout.ms", "int", 10000, "Socket timeout of the offset-manager channel.", lo=1),
    _Key("offsets.commit.max.retries", "int", 5, "Retries of a commit to (or an offset fetch from) Kafka's offset manager, offsets.channel.backoff.ms apart.", lo=0),
    _Key("dual.commit.enabled", "bool", None, "Also commit to ZooKeeper when offsets.storage=kafka; defaults to true only then."),
    _Key("fetch.max.bytes", "int", 50 * 1024 * 1024, "Max bytes per fetch response (0.10.1+; read by no old-consumer code).", lo=1),
    _Key("fetch.idle.wait.ms", "int", 1000, "Extension: how long a fetcher whose partitions are all caught up asks each leader to hold its Fetch (the idle watch: kafka-python engine, PLAINTEXT, fetch.min.bytes and fetch.wait.max.ms above 0) when fetch.min.bytes is 1: the broker answers as soon as a record arrives, so records are not delivered later, and an idle fetcher costs each broker ~1 Fetch a second instead of one every fetch.wait.max.ms. The watch uses fetch.wait.max.ms when that is longer or when fetch.min.bytes is more than 1. A leader that stops answering without closing its connection is given up on this wait + 5 s after it was asked (its client then fetches). 100 = the Scala consumer's cadence (FetchRequestRateAndTimeMs ~10/s of ~0.1 s for an idle member, which MinFetchRate alerts written for Scala expect); at most 30000.", lo=0, extension=True),
    _Key("rebalance.settle.ms", "int", 20, "Extension: coalescing window for bursts of ZooKeeper events before a rebalance.", lo=0, extension=True),
    _Key("rebalance.slow.retry.ms", "int", 10000, "Extension: retry period after rebalance.max.retries attempts failed (we never sit idle).", lo=1, extension=True),
    _Key("legacy.consumer.version", "enum", "1.1", "Extension: the Kafka release of the group's JVM (Scala) members, for what changed across releases: the roundrobin assignor lays partitions out by the hash of \"[topic,partition]\" up to 0.11 and of \"topic-partition\" from 1.0 (set it to match the JVM members, or a mixed group never agrees).", choices=("0.8.2", "0.9", "0.10", "0.11", "1.0", "1.1"), extension=True),
    _Key("dual.commit.kafka.outage.ms", "int", 60000, "Extension: with dual commit, once Kafka's offset manager has failed every commit for this long, commit to ZooKeeper alone until it is back (reads take the greater of the two, so that is safe in the dual phase; logged, and visible as the member's offsets state); -1 = never (the Scala behaviour: both stores stall).", lo=-1, extension=True),
    _Key("offsets.storage.switch.check", "enum", "refuse", "Extension: a member with offsets.storage=zookeeper refuses to start while Kafka holds newer offsets for the group (a direct kafka -> zookeeper switch would resume from stale offsets); off = skip the check (one OffsetFetch at start).", choices=("refuse", "off"), extension=True),
    _Key("rebalance.leave.grace.ms", "int", 0, "Extension: a member with an explicit consumer.id that shuts down gracefully keeps its partitions unassigned this long, so a restart costs the others no rebalance (every live member must be a zkconsumer member; 0 = off, the legacy behaviour).", lo=0, extension=True),
    _Key("split.brain.check", "enum", "refuse", "Extension: before registering (at start and after every session expiry) the member asks the broker whether a broker-coordinated group of the same id is active: refuse = do not join while it is, nor while the broker cannot be asked (unknown); warn = log and join when it cannot be asked; off = never ask.", choices=("refuse", "warn", "off"), extension=True),
    _Key("cutover.fence", "enum", "refuse", "Extension: a group that zkmigrate cutover handed to broker-coordinated consumers is marked in ZooKeeper; refuse = a ZooKeeper member does not join it (at start or after a session expiry), ignore = skip this check (the create right cutover takes off /consumers/G/ids still refuses the registration, unless cutover ran with --no-acl-fence); zkmigrate rollback --execute lifts both, as does zkmigrate restore of the cutover's own backup.", choices=("refuse", "ignore"), extension=True),
    _Key("split.brain.check.timeout.ms", "int", 30000, "Extension: how long the split-brain check retries a broker that does not answer or has no group coordinator yet (COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created) before the answer counts as unknown.", lo=0, extension=True),
    _Key("fetch.engine", "enum", "kafka-python", "Extension: the client the fetcher threads read with: kafka-python (with zkconsumer's own record decoder) or librdkafka (confluent-kafka in assign mode, no broker-side group; pip install 'zkconsumer[librdkafka]'). Offsets, fencing and queues are zkconsumer's either way. librdkafka gets the old consumer's fetch keys, and `fetch.queue.backoff.ms` = `fetch.wait.max.ms` (10–1000 ms; librdkafka's own 1000 ms default idles a consumer that reads a backlog). Where zkconsumer's C extension is built (Linux), the engine reads librdkafka's fetched messages directly, without a confluent-kafka Message per record (`ZKCONSUMER_RDKAFKA_DIRECT=0` in the environment reads confluent-kafka's Messages instead; the log says at INFO when the direct reader cannot be used and why).", choices=("kafka-python", "librdkafka"), extension=True),
    _Key("security.protocol", "security", "PLAINTEXT", "Extension: how every Kafka client connects (fetchers, offset manager, tools): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (case-insensitive; the old consumer spoke PLAINTEXT only). Brokers are found in ZooKeeper by their endpoint of this protocol.", extension=True),
    _Key("sasl.mechanism", "security", "PLAIN", "Extension: SASL mechanism for SASL_PLAINTEXT/SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.", extension=True),
    _Key("sasl.jaas.config", "security", None, "Extension: the Java client's JAAS entry, e.g. org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"...\"; (only username and password are read; never printed). Alternative: sasl.credentials.file.", extension=True),
    _Key("sasl.credentials.file", "security", None, "Extension: a .properties file with username=... and password=... for SASL (instead of sasl.jaas.config).", extension=True),
    _Key("ssl.cafile", "security", None, "Extension: PEM file of the CA certificate(s) that signed the brokers' certificates (SSL/SASL_SSL; default: the system's CAs).", extension=True),
    _Key("ssl.certfile", "security", None, "Extension: PEM file of the client certificate (chain), for brokers with ssl.client.auth=required; may also hold the private key.", extension=True),
    _Key("ssl.keyfile", "security", None, "Extension: PEM file of the client certificate's private key (with ssl.certfile).", extension=True),
    _Key("ssl.password.file", "security", None, "Extension: a file holding the password of an encrypted ssl.keyfile (first line).", extension=True),
    _Key("ssl.endpoint.identification.algorithm", "security", "https", "Extension: https = check that the broker's certificate names the host connected to; empty = do not.", extension=True),
    _Key("ssl.truststore.location", "security", None, "Extension: the Java client's truststore (instead of ssl.cafile): the CA certificates that signed the brokers' certificates, in a store of ssl.truststore.type.", extension=True),
    _Key("ssl.truststore.type", "security", "JKS", "Extension: JKS (as Kafka's default), PKCS12 (needs the cryptography package) or PEM.", extension=True),
    _Key("ssl.truststore.password", "security", None, "Extension: the truststore's password (checks its integrity; never printed, refused on a command line: put it in the --config file).", extension=True),
    _Key("ssl.keystore.location", "security", None, "Extension: the Java client's keystore (instead of ssl.certfile/ssl.keyfile): the client's private key and certificate, in a store of ssl.keystore.type.", extension=True),
    _Key("ssl.keystore.type", "security", "JKS", "Extension: JKS (as Kafka's default), PKCS12 (needs the cryptography package) or PEM (the key and its chain in one file).", extension=True),
    _Key("ssl.keystore.password", "security", None, "Extension: the keystore's password (never printed, refused on a command line).", extension=True),
    _Key("ssl.key.password", "security", None, "Extension: the password of the private key in the keystore (JKS: defaults to the keystore's password) or of an encrypted PEM key (never printed, refused on a command line).", extension=True),
    _Key("zookeeper.suspended.grace.ms", "int", 1000, "Extension: how long fetching continues after a ZooKeeper disconnect before delivery pauses; must be < zookeeper.session.timeout.ms (when unset and the session timeout is <= 1000, defaults to half of it).", lo=0, extension=True),
    _Key("zookeeper.auth.scheme", "enum", "none", "Extension: how the member authenticates to ZooKeeper: none, digest (the digest scheme: addauth digest user:password) or sasl (SASL with zookeeper.sasl.mechanism, no JAAS file needed); digest and sasl read the user and password from zookeeper.auth.credentials.file.", choices=("none", "digest", "sasl"), extension=True),
    _Key("zookeeper.auth.credentials.file", "path", None, "Extension: file with the ZooKeeper user and password (username=/password= properties, or a JSON object with those keys); required when zookeeper.auth.scheme is digest or sasl; refused when others may read it (chmod 600).", extension=True),
    _Key("zookeeper.sasl.mechanism", "enum", "DIGEST-MD5", "Extension: the SASL mechanism for zookeeper.auth.scheme=sasl (DIGEST-MD5, as ZooKeeper's DigestLoginModule).", choices=("DIGEST-MD5",), extension=True),
    _Key("zookeeper.set.acl", "bool", False, "Extension: every znode the member creates gets the ACL Kafka brokers use with zookeeper.set.acl=true: full control for the creating identity, read for everyone (/consumers itself stays open); needs zookeeper.auth.scheme digest or sasl.", extension=True),
)
_BY_NAME: Dict[str, _Key] = {k.name: k for k in _KEYS}
KNOWN_KEYS: Tuple[str, ...] = tuple(k.name for k in _KEYS)
EXTENSION_KEYS: Tuple[str, ...] = tuple(k.name for k in _KEYS if k.extension)


def _parse_int(key: _Key, text: str) -> int:
    s = text.strip()
    if not _INT_RE.fullmatch(s) or len(s) > 12 or not _INT_MIN <= int(s) <= _INT_MAX:
        raise ConfigError(key.name, text, "an integer (32-bit, Java int)" + _range_text(key))
    v = int(s)
    if key.lo is not None and v < key.lo:
        raise ConfigError(key.name, text, "an integer" + _range_text(key))
    return v


def _range_text(key: _Key) -> str:
    if key.lo is None:
        return ""
    if key.name == "consumer.timeout.ms":
        return " that is -1 (block forever) or >= 0"
    return " > 0" if key.lo == 1 else " >= %d" % key.lo


def _parse_bool(key: _Key, text: str) -> bool:
    s = text.strip().lower()
    if s not in ("true", "false"):
        raise ConfigError(key.name, text, "true or false (case-insensitive)")
    return s == "true"


def _parse_name(key: _Key, text: str) -> str:
    s = text.strip()
    rule = _GROUP_RULE if key.name == "group.id" else _NAME_RULE
    if not _NAME_RE.fullmatch(s) or s in (".", ".."):
        raise ConfigError(key.name, text, rule)
    if key.name == "group.id" and len(s) > 249:
        raise ConfigError(key.name, text, rule, "%d characters" % len(s))
    return s


def parse_zookeeper_connect(text: str) -> Tuple[Tuple[Tuple[str, int], ...], Optional[str]]:
    """Split ``host[:port][,host[:port]...][/chroot]`` into ``((host, port), ...), chroot`` (port defaults to
    2181, as in ZooKeeper); the one parser is :func:`zkconsumer.core.layout.connect.parse_zk_connect`.
    Raises ConfigError for ``zookeeper.connect``."""
    from .layout.connect import parse_zk_connect
    parsed = parse_zk_connect(text)
    return tuple(parsed.host_ports), parsed.chroot


def _check_zookeeper_auth(values: Dict[str, Any], merged: Mapping[str, str]) -> None:
    scheme, creds = values["zookeeper_auth_scheme"], values["zookeeper_auth_credentials_file"]
    if scheme != "none" and not creds:
        raise ConfigError("zookeeper.auth.credentials.file", None,
                          "a file path when zookeeper.auth.scheme is %s" % scheme,
                          "the user and password are read from that file, never from the properties")
    if scheme == "none" and creds:
        raise ConfigError("zookeeper.auth.scheme", merged.get("zookeeper.auth.scheme", "none"),
                          "digest or sasl when zookeeper.auth.credentials.file is set")
    if values["zookeeper_set_acl"] and scheme == "none":
        raise ConfigError("zookeeper.set.acl", merged.get("zookeeper.set.acl", "true"),
                          "false unless zookeeper.auth.scheme is digest or sasl",
                          "the creator's ACL needs an authenticated identity")


def _canonical(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _as_text(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    raise ConfigError(key, redact(key, value), "a string value")


@dataclasses.dataclass(frozen=True)
class ConsumerConfig:
    """Immutable, validated old-consumer configuration (Kafka 1.1.1 ``kafka.consumer.ConsumerConfig``).

    Attribute names are the property keys with ``.`` replaced by ``_``.  ``group_id``/``client_id``
    are None only when built with ``require_group=False`` and no group; ``zookeeper_connect`` is
    None only with ``require_zookeeper=False``.  ``zookeeper_hosts``/``zookeeper_chroot`` are the
    parsed connect string.  ``raw`` is a read-only view of the merged input properties
    (including unknown keys) and is not part of equality.
    """

    group_id: Optional[str]
    consumer_id: Optional[str]
    zookeeper_connect: Optional[str]
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    zookeeper_sync_time_ms: int
    socket_timeout_ms: int
    socket_receive_buffer_bytes: int
    fetch_message_max_bytes: int
    num_consumer_fetchers: int
    auto_commit_enable: bool
    auto_commit_interval_ms: int
    queued_max_message_chunks: int
    rebalance_max_retries: int
    rebalance_backoff_ms: int
    refresh_leader_backoff_ms: int
    fetch_min_bytes: int
    fetch_wait_max_ms: int
    auto_offset_reset: str
    consumer_timeout_ms: int
    client_id: Optional[str]
    exclude_internal_topics: bool
    partition_assignment_strategy: str
    offsets_storage: str
    offsets_channel_backoff_ms: int
    offsets_channel_socket_timeout_ms: int
    offsets_commit_max_retries: int
    dual_commit_enabled: bool
    fetch_max_bytes: int
    fetch_idle_wait_ms: int
    rebalance_settle_ms: int
    rebalance_slow_retry_ms: int
    zookeeper_suspended_grace_ms: int
    rebalance_leave_grace_ms: int
    dual_commit_kafka_outage_ms: int
    offsets_storage_switch_check: str
    split_brain_check: str
    cutover_fence: str
    split_brain_check_timeout_ms: int
    legacy_consumer_version: str
    fetch_engine: str
    security_protocol: str
    sasl_mechanism: str
    sasl_jaas_config: Optional[str] = dataclasses.field(repr=False)
    sasl_credentials_file: Optional[str]
    ssl_cafile: Optional[str]
    ssl_certfile: Optional[str]
    ssl_keyfile: Optional[str]
    ssl_password_file: Optional[str]
    ssl_endpoint_identification_algorithm: str
    ssl_truststore_location: Optional[str]
    ssl_truststore_type: str
    ssl_truststore_password: Optional[str] = dataclasses.field(repr=False)
    ssl_keystore_location: Optional[str]
    ssl_keystore_type: str
    ssl_keystore_password: Optional[str] = dataclasses.field(repr=False)
    ssl_key_password: Optional[str] = dataclasses.field(repr=False)
    zookeeper_auth_scheme: str = "none"
    zookeeper_auth_credentials_file: Optional[str] = None
    zookeeper_sasl_mechanism: str = "DIGEST-MD5"
    zookeeper_set_acl: bool = False
    zookeeper_hosts: Tuple[Tuple[str, int], ...] = ()
    zookeeper_chroot: Optional[str] = None
    raw: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    explicit_keys: Tuple[str, ...] = dataclasses.field(default=(), compare=False, repr=False)
    #: the validated security keys, for every Kafka client (:meth:`KafkaSecurity.client_kwargs`)
    kafka_security: KafkaSecurity = dataclasses.field(default=KafkaSecurity(), compare=False, repr=False)

    @classmethod
    def from_properties(cls, props: Optional[Mapping[str, str]] = None,
                        overrides: Optional[Mapping[str, object]] = None, *,
                        require_group: bool = True, require_zookeeper: bool = True) -> "ConsumerConfig":
        """Validate ``props`` with ``overrides`` applied on top and build the config.

        Override values may be str, int or bool; an override of None removes the key (back to
        its default).  Raises :class:`ConfigError` (naming key, value and what is allowed) on the
        first bad or missing value; logs one warning per unknown key.
        """
        merged: Dict[str, str] = {}
        for source in (props or {}), (overrides or {}):
            for k, v in source.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = _as_text(k, v)
        for k in merged:
            if k not in _BY_NAME:
                log.warning("unknown consumer property %r is ignored (not a ConsumerConfig key)", k)

        # attribute name -> value, checked key by key below (ints, bools, strs, None, the parsed hosts)
        values: Dict[str, Any] = {}
        for key in _KEYS:
            text = merged.get(key.name)
            if text is None:
                if key.name in _SAME_AS:
                    values[key.attr] = values[_BY_NAME[_SAME_AS[key.name]].attr]
                elif key.name == "dual.commit.enabled":
                    values[key.attr] = values["offsets_storage"] == "kafka"
                else:
                    values[key.attr] = key.default
                continue
            if key.kind == "int":
                values[key.attr] = _parse_int(key, text)
            elif key.kind == "bool":
                values[key.attr] = _parse_bool(key, text)
            elif key.kind == "name":
                values[key.attr] = _parse_name(key, text)
            elif key.kind == "security":
                # validated together below
                values[key.attr] = text.strip()
            elif key.kind == "path":
                if not text.strip():
                    raise ConfigError(key.name, text, "a file path")
                values[key.attr] = text.strip()
            elif key.kind == "enum":
                s = text.strip()
                if key.name == "offsets.storage":
                    s = s.lower()
                if s not in key.choices:
                    raise ConfigError(key.name, text, " or ".join(key.choices))
                values[key.attr] = s
            else:
                # zk
                hosts, chroot = parse_zookeeper_connect(text)
                values[key.attr] = text.strip()
                values["zookeeper_hosts"], values["zookeeper_chroot"] = hosts, chroot

        if values["group_id"] is None and require_group:
            raise ConfigError("group.id", None, "required: " + _GROUP_RULE)
        if values["zookeeper_connect"] is None and require_zookeeper:
            raise ConfigError("zookeeper.connect", None, "required: " + _ZK_RULE)
        if values["fetch_wait_max_ms"] > values["socket_timeout_ms"]:
            raise ConfigError("fetch.wait.max.ms", merged["fetch.wait.max.ms"] if "fetch.wait.max.ms" in merged
                              else str(values["fetch_wait_max_ms"]),
                              "at most socket.timeout.ms (%d)" % values["socket_timeout_ms"],
                              "socket.timeout.ms should always be at least fetch.wait.max.ms")
        if values["fetch_idle_wait_ms"] > IDLE_WAIT_MAX_MS:
            raise ConfigError("fetch.idle.wait.ms", merged.get("fetch.idle.wait.ms", str(values["fetch_idle_wait_ms"])),
                              "at most %d" % IDLE_WAIT_MAX_MS)
        grace, session = values["zookeeper_suspended_grace_ms"], values["zookeeper_session_timeout_ms"]
        if "zookeeper.suspended.grace.ms" not in merged and grace >= session:
            # default clamped below session
            grace = values["zookeeper_suspended_grace_ms"] = session // 2
        if grace >= session:
            raise ConfigError("zookeeper.suspended.grace.ms", merged.get("zookeeper.suspended.grace.ms", str(grace)),
                              "less than zookeeper.session.timeout.ms (%d)" % session)
        _check_zookeeper_auth(values, merged)
        if values["rebalance_leave_grace_ms"] > 0 and not values["consumer_id"]:
            raise ConfigError("rebalance.leave.grace.ms", merged.get("rebalance.leave.grace.ms"),
                              "0 unless consumer.id is set",
                              "a member comes back under the same consumer id only when consumer.id is explicit "
                              "(a generated id changes on every start)")
        security = KafkaSecurity.from_properties({k: v for k, v in merged.items() if k in SECURITY_KEYS})
        values["security_protocol"] = security.protocol
        values["sasl_mechanism"] = security.mechanism or values["sasl_mechanism"]
        values["ssl_endpoint_identification_algorithm"] = values["ssl_endpoint_identification_algorithm"].lower()
        return cls(raw=types.MappingProxyType(dict(merged)), kafka_security=security,
                   explicit_keys=tuple(k for k in merged if k in _BY_NAME), **values)

    @classmethod
    def load(cls, path: Union[str, os.PathLike[str], None] = None, overrides: Optional[Mapping[str, object]] = None,
             **kw: bool) -> "ConsumerConfig":
        """Read ``path`` (a ``.properties`` file, optional) then apply ``overrides`` on top.

        ``kw`` is passed to :meth:`from_properties` (``require_group``, ``require_zookeeper``).
        """
        props = load_properties(path) if path is not None else {}
        return cls.from_properties(props, overrides, **kw)

    def to_properties(self) -> Dict[str, str]:
        """Every explicitly given key as text (known keys normalised, unknown keys verbatim).

        ``ConsumerConfig.from_properties(cfg.to_properties()) == cfg`` always holds.
        """
        out: Dict[str, str] = {}
        for k, v in self.raw.items():
            key = _BY_NAME.get(k)
            out[k] = _canonical(getattr(self, key.attr)) if key is not None else v
        return out

    def with_overrides(self, overrides: Mapping[str, object], **kw: bool) -> "ConsumerConfig":
        """A new validated config: this one's raw properties with ``overrides`` on top."""
        kw.setdefault("require_group", self.group_id is not None)
        kw.setdefault("require_zookeeper", self.zookeeper_connect is not None)
        return type(self).from_properties(dict(self.raw), overrides, **kw)

    def get(self, key: str) -> Union[str, int, bool, None]:
        """The typed value of a property key, e.g. ``cfg.get("group.id")``; KeyError if unknown."""
        value: Union[str, int, bool, None] = getattr(self, _BY_NAME[key].attr)
        return value


def describe_keys() -> List[Tuple[str, str, str]]:
    """``(key, default as text, doc)`` for every known key, Kafka's keys first, then the extension keys, for
    ``--help``/docs.

    Required keys show ``(required)``; derived defaults show ``= <other key>``; extension keys'
    docs start with ``Extension:``.
    """
    rows = []
    for key in _KEYS:
        if key.name in ("group.id", "zookeeper.connect"):
            default = "(required)"
        elif key.name == "consumer.id":
            default = "(generated)"
        elif key.default is None and key.kind == "path":
            default = "(unset)"
        elif key.name in _SAME_AS:
            default = "= " + _SAME_AS[key.name]
        elif key.name == "dual.commit.enabled":
            default = "true if offsets.storage=kafka, else false"
        elif key.default is None:
            default = "(none)"
        else:
            default = _canonical(key.default)
        rows.append((key.name, default, key.doc))
    return rows
