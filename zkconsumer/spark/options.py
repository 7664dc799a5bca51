"""Options of the ``zkconsumer`` data source: parsed and validated once, kept as plain picklable data.

Names follow Spark's Kafka source where they mean the same thing (``subscribe``, ``subscribePattern``,
``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``kafka.bootstrap.servers``,
``kafkaConsumer.pollTimeoutMs``, ``includeHeaders``, ``minPartitions``, ``maxRecordsPerPartition``); every legacy consumer property (``zookeeper.connect``, ``group.id``,
``offsets.storage``, ``dual.commit.enabled``, ...: :data:`zkconsumer.config.KNOWN_KEYS`) is accepted as an option
too.  Spark lower-cases option names, so matching is case-insensitive.  A bad value raises
:class:`~zkconsumer.errors.ConfigError` naming the option, the value and what is allowed.
"""
from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple

from ..config import KNOWN_KEYS, ConsumerConfig
from ..errors import ConfigError, InvalidNameError
from ..kafka_security import SECURITY_KEYS, KafkaSecurity
from ..layout.names import validate_partition, validate_topic

if TYPE_CHECKING:
    from ..zk_auth import ZkAuth

# our option name (as documented) -> lower-case key Spark hands us
SOURCE_OPTIONS = ("subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "maxOffsetsPerTrigger",
                  "failOnDataLoss", "kafka.bootstrap.servers", "kafkaConsumer.pollTimeoutMs", "arrowBatchSize",
                  "logEnd", "includeHeaders", "minPartitions", "maxRecordsPerPartition")
_LOWER = {k.lower(): k for k in SOURCE_OPTIONS}
_CONSUMER_KEYS = {k.lower(): k for k in KNOWN_KEYS}

EARLIEST, LATEST = -2, -1


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """Validated options (plain data: safe to pickle to executors)."""
    topics: Tuple[str, ...]                  # subscribe
    pattern: Optional[str]                   # subscribePattern (Java regex, whole-name match)
    consumer_props: Tuple[Tuple[str, str], ...] = dataclasses.field(repr=False)  # may hold sasl.jaas.config
    group: str
    zookeeper_connect: str
    bootstrap_servers: Optional[str]
    starting: object                         # "earliest" | "latest" | None (not given) | {(t, p): -2/-1/offset}
    ending: object                           # "latest" | {(t, p): -1/offset}
    max_offsets_per_trigger: Optional[int]
    fail_on_data_loss: bool
    poll_timeout_ms: int
    arrow_batch_size: int
    log_end_from_fetch: bool = False         # logEnd=fetch: brokers whose ListOffsets(latest) is wrong (tansu)
    include_headers: bool = False            # includeHeaders: a headers array<struct<key,value>> column
    min_partitions: Optional[int] = None     # minPartitions: at least this many Spark tasks per batch
    max_records_per_partition: Optional[int] = None  # maxRecordsPerPartition: at most this many offsets per task

    @property
    def consumer_config(self) -> ConsumerConfig:
        return ConsumerConfig.from_properties(dict(self.consumer_props))

    @property
    def kafka_security(self) -> KafkaSecurity:
        """The Kafka client security of every connection of the source (driver and executors)."""
        return KafkaSecurity.from_properties({k: v for k, v in self.consumer_props if k in SECURITY_KEYS})

    def zk_auth(self) -> "ZkAuth":
        """The ZooKeeper credentials and ACL of the ``zookeeper.auth.*`` / ``zookeeper.set.acl`` options (the
        password is read from the credentials file here, on the machine that connects; never an option)."""
        from ..zk_auth import from_config
        return from_config(self.consumer_config)

    def default_reset(self, streaming: bool) -> str:
        """Where partitions without a committed offset start: ``startingOffsets`` if given, else the group's
        ``auto.offset.reset`` if given (smallest -> earliest, largest -> latest), else Spark's default
        (latest for streaming, earliest for batch)."""
        if self.starting in ("earliest", "latest"):
            return self.starting
        props = dict(self.consumer_props)
        if "auto.offset.reset" in props:
            return "earliest" if props["auto.offset.reset"].strip() == "smallest" else "latest"
        return "latest" if streaming else "earliest"

    def topic_filter(self):
        from ..topic_filter import Whitelist
        return Whitelist(self.pattern) if self.pattern is not None else None


def _bool(name, value):
    s = str(value).strip().lower()
    if s not in ("true", "false"):
        raise ConfigError(name, value, "true or false")
    return s == "true"


def _pos_int(name, value, lo=1):
    try:
        v = int(str(value).strip())
    except ValueError:
        v = None
    if v is None or v < lo:
        raise ConfigError(name, value, "an integer >= %d" % lo)
    return v


def _offsets_json(name, value, allow_earliest):
    """Spark's JSON form ``{"topic": {"0": 23, "1": -1}}`` -> {(t, p): offset}."""
    try:
        obj = json.loads(value)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested thousands deep
        obj = None
    allowed = ("'earliest', 'latest' or JSON like {\"topic\":{\"0\":23,\"1\":-1}} (-2 = earliest, -1 = latest)"
               if allow_earliest else "'latest' or JSON like {\"topic\":{\"0\":23,\"1\":-1}} (-1 = latest)")
    if not isinstance(obj, dict):
        raise ConfigError(name, value, allowed)
    out = {}
    for t, parts in obj.items():
        try:
            validate_topic(t)
        except InvalidNameError as e:
            raise ConfigError(name, value, allowed, "topic %r: %s" % (t, e.reason)) from None
        if not isinstance(parts, dict):
            raise ConfigError(name, value, allowed, "topic %r must map to {partition: offset}" % t)
        for p, off in parts.items():
            try:
                pi = validate_partition(p)
            except InvalidNameError:
                raise ConfigError(name, value, allowed, "partition %r of %r is not a partition number (0, 1, ...)"
                                  % (p, t)) from None
            if isinstance(off, bool) or not isinstance(off, int) or off < (EARLIEST if allow_earliest else LATEST):
                raise ConfigError(name, value, allowed, "bad offset %r for %s-%s" % (off, t, p))
            out[(t, pi)] = off
    return out


def _kafka_security_option(lower_key: str) -> Optional[str]:
    """The security key of a Spark Kafka-source style option (``kafka.security.protocol``, ``kafka.sasl.mechanism``,
    ``kafka.sasl.jaas.config``, ``kafka.ssl.cafile`` ...: Spark hands ``kafka.``-prefixed options to the client),
    or None. The same keys without the prefix are consumer properties and accepted as such."""
    if lower_key.startswith("kafka."):
        return {k.lower(): k for k in SECURITY_KEYS}.get(lower_key[len("kafka."):])
    return None


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate Spark's (case-insensitive) option map."""
    src: Dict[str, str] = {}
    props: Dict[str, str] = {}
    for k, v in options.items():
        lk = str(k).lower()
        if lk in _LOWER:
            src[_LOWER[lk]] = v
        elif lk in _CONSUMER_KEYS:
            props[_CONSUMER_KEYS[lk]] = v
        elif _kafka_security_option(lk) is not None:
            props[_kafka_security_option(lk) or ""] = v
        elif lk == "assign":
            raise ConfigError("assign", v, "not supported: a legacy group assigns partitions itself; use "
                              "subscribe or subscribePattern")
        else:
            shown = "[hidden]" if "jaas" in lk or "password" in lk else v  # a mistyped secret key stays secret
            raise ConfigError(k, shown, "not an option of the zkconsumer source; allowed: %s and the legacy consumer "
                              "properties (zookeeper.connect, group.id, offsets.storage, dual.commit.enabled, ...)"
                              % ", ".join(SOURCE_OPTIONS))
    subscribe, pattern = src.get("subscribe"), src.get("subscribePattern")
    if (subscribe is None) == (pattern is None):
        raise ConfigError("subscribe/subscribePattern", subscribe if subscribe is not None else pattern,
                          "exactly one of subscribe (comma-separated topics) or subscribePattern (Java regex)")
    topics: Tuple[str, ...] = ()
    if subscribe is not None:
        names = [t.strip() for t in subscribe.split(",") if t.strip()]
        if not names:
            raise ConfigError("subscribe", subscribe, "a comma-separated list of topic names")
        for t in names:
            try:
                validate_topic(t)
            except Exception as e:
                raise ConfigError("subscribe", subscribe, "legal topic names", str(e)) from None
        topics = tuple(sorted(set(names)))
    else:
        from ..topic_filter import compile_java_regex
        assert pattern is not None  # exactly one of subscribe, subscribePattern
        try:
            compile_java_regex(pattern, key="subscribePattern")
        except Exception as e:
            raise ConfigError("subscribePattern", pattern, "a Java regular expression", str(e)) from None
    # group config: validated here so a typo fails at load() on the driver
    props.setdefault("auto.commit.enable", "false")
    if str(props["auto.commit.enable"]).strip().lower() != "false":
        raise ConfigError("auto.commit.enable", props["auto.commit.enable"],
                          "false (the source commits after Spark committed a batch, never on a timer)")
    cfg = ConsumerConfig.from_properties(props)
    assert cfg.group_id is not None and cfg.zookeeper_connect is not None  # both required by from_properties
    starting = src.get("startingOffsets")
    if starting is not None:
        s = starting.strip().lower()
        starting = s if s in ("earliest", "latest") else _offsets_json("startingOffsets", starting, True)
    ending = src.get("endingOffsets", "latest")
    if ending.strip().lower() == "latest":
        ending = "latest"
    else:
        ending = _offsets_json("endingOffsets", ending, False)
    mopt = src.get("maxOffsetsPerTrigger")
    minp, maxr = src.get("minPartitions"), src.get("maxRecordsPerPartition")
    return SourceOptions(
        topics=topics, pattern=pattern, consumer_props=tuple(sorted(props.items())), group=cfg.group_id,
        zookeeper_connect=cfg.zookeeper_connect,
        bootstrap_servers=(src.get("kafka.bootstrap.servers") or "").strip() or None,
        starting=starting, ending=ending,
        max_offsets_per_trigger=_pos_int("maxOffsetsPerTrigger", mopt) if mopt is not None else None,
        fail_on_data_loss=_bool("failOnDataLoss", src.get("failOnDataLoss", "true")),
        poll_timeout_ms=_pos_int("kafkaConsumer.pollTimeoutMs", src.get("kafkaConsumer.pollTimeoutMs", "120000")),
        arrow_batch_size=_pos_int("arrowBatchSize", src.get("arrowBatchSize", "20000")),
        log_end_from_fetch=_log_end(src.get("logEnd", "listOffsets")),
        include_headers=_bool("includeHeaders", src.get("includeHeaders", "false")),
        min_partitions=_pos_int("minPartitions", minp) if minp is not None else None,
        max_records_per_partition=_pos_int("maxRecordsPerPartition", maxr) if maxr is not None else None,
    )


def _log_end(value):
    v = str(value).strip().lower()
    if v not in ("listoffsets", "fetch"):
        raise ConfigError("logEnd", value, "listOffsets (ListOffsets(latest), exact on Apache Kafka) or fetch (the "
                          "high watermark of a fetch response, for brokers whose ListOffsets is wrong, e.g. tansu)")
    return v == "fetch"
