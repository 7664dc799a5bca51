"""Options of the ``zkconsumer`` data source: parsed and validated once, kept as plain picklable data.

Names follow Spark's Kafka source where they mean the same thing (``assign``, ``subscribe``, ``subscribePattern``,
``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``kafka.bootstrap.servers``,
``kafkaConsumer.pollTimeoutMs``, ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``, ``groupIdPrefix``,
``includeHeaders``, ``minPartitions``, ``maxRecordsPerPartition``, the timestamp options,
``minOffsetsPerTrigger``/``maxTriggerDelay``, ``kafka.*``: :mod:`zkconsumer.spark.kafka_options`); every
legacy consumer property (``zookeeper.connect``, ``group.id``, ``offsets.storage``, ``dual.commit.enabled``, ...:
:data:`zkconsumer.core.config.KNOWN_KEYS`) is accepted as an option too. Spark lower-cases option names, so matching is
case-insensitive. A bad value raises :class:`~zkconsumer.errors.ConfigError` naming the option, the value and what
is allowed.
"""
from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple, Union

from ..core.config import KNOWN_KEYS, ConsumerConfig
from ..errors import ConfigError, InvalidNameError
from ..core.kafka_security import SECURITY_KEYS, KafkaSecurity
from ..core.layout.names import validate_partition, validate_topic
from .kafka_options import kafka_client_config, warn_once

if TYPE_CHECKING:
    from ..zookeeper.auth import ZkAuth

# our option name (as documented) -> lower-case key Spark hands us
SOURCE_OPTIONS = ("assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "maxOffsetsPerTrigger",
                  "failOnDataLoss", "kafka.bootstrap.servers", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
                  "fetchOffset.retryIntervalMs", "groupIdPrefix", "arrowBatchSize",
                  "logEnd", "includeHeaders", "minPartitions", "maxRecordsPerPartition", "startingTimestamp",
                  "startingOffsetsByTimestamp", "endingTimestamp", "endingOffsetsByTimestamp",
                  "startingOffsetsByTimestampStrategy", "minOffsetsPerTrigger", "maxTriggerDelay", "ownerReaper",
                  "groupSettleTimeoutMs")
_LOWER = {k.lower(): k for k in SOURCE_OPTIONS}
_CONSUMER_KEYS = {k.lower(): k for k in KNOWN_KEYS}

EARLIEST, LATEST = -2, -1


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """Validated options (plain data: safe to pickle to executors)."""
    # subscribe
    topics: Tuple[str, ...]
    # subscribePattern (Java regex, whole-name match)
    pattern: Optional[str]
    # may hold sasl.jaas.config
    consumer_props: Tuple[Tuple[str, str], ...] = dataclasses.field(repr=False)
    group: str
    zookeeper_connect: str
    bootstrap_servers: Optional[str]
    # "earliest" | "latest" | None (not given) | {(t, p): -2/-1/offset}
    starting: object
    # "latest" | {(t, p): -1/offset}
    ending: object
    max_offsets_per_trigger: Optional[int]
    fail_on_data_loss: bool
    poll_timeout_ms: int
    arrow_batch_size: int
    # logEnd=fetch: brokers whose ListOffsets(latest) is wrong (tansu)
    log_end_from_fetch: bool = False
    # includeHeaders: a headers array<struct<key,value>> column
    include_headers: bool = False
    # minPartitions: at least this many Spark tasks per batch
    min_partitions: Optional[int] = None
    # maxRecordsPerPartition: at most this many offsets per task
    max_records_per_partition: Optional[int] = None
    # Spark's precedence: startingTimestamp, else startingOffsetsByTimestamp, else startingOffsets (same for ending):
    # the one that wins is kept, the others are None
    # startingTimestamp (ms): where nothing is committed
    starting_timestamp: Optional[int] = None
    # startingOffsetsByTimestamp (overrides)
    starting_by_timestamp: Optional[Dict[Tuple[str, int], int]] = None
    # endingTimestamp (ms), batch only
    ending_timestamp: Optional[int] = None
    # endingOffsetsByTimestamp, batch only
    ending_by_timestamp: Optional[Dict[Tuple[str, int], int]] = None
    # startingOffsetsByTimestampStrategy=latest (default error)
    no_match_latest: bool = False
    # minOffsetsPerTrigger
    min_offsets_per_trigger: Optional[int] = None
    # maxTriggerDelay (default 15m)
    max_trigger_delay_ms: int = 15 * 60 * 1000
    # kafka.* passthrough as kafka-python kwargs (may hold secrets: never in repr or logs)
    kafka_params: Tuple[Tuple[str, object], ...] = dataclasses.field(default=(), repr=False)
    # endingOffsets / endingOffsetsByTimestamp (refused by streaming)
    ending_given: Tuple[str, ...] = ()
    # ownerReaper: start the member's reaper process
    owner_reaper: bool = True
    # assign: these partitions, no group membership
    assign: Optional[Tuple[Tuple[str, int], ...]] = None
    # fetchOffset.numRetries
    fetch_offset_retries: int = 3
    # fetchOffset.retryIntervalMs
    fetch_offset_retry_interval_ms: int = 10
    # the Kafka clients' client.id (groupIdPrefix names it)
    client_id: str = "zkconsumer-spark"
    # groupSettleTimeoutMs: how long a plan that needs the member's partitions (the first batch,
    # Trigger.AvailableNow) waits for the group, plus zookeeper.session.timeout.ms, before the query fails
    group_settle_timeout_ms: int = 60000

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
        from ..zookeeper.auth import from_config
        return from_config(self.consumer_config)

    def default_reset(self, streaming: bool) -> Union[str, int]:
        """Where partitions without a committed offset start: ``startingTimestamp`` (the int, milliseconds) or
        ``startingOffsets`` if given, else the group's ``auto.offset.reset`` if given (smallest -> earliest,
        largest -> latest), else Spark's default (latest for streaming, earliest for batch)."""
        if self.starting_timestamp is not None:
            return self.starting_timestamp
        if self.starting in ("earliest", "latest"):
            return self.starting
        props = dict(self.consumer_props)
        if "auto.offset.reset" in props:
            return "earliest" if props["auto.offset.reset"].strip() == "smallest" else "latest"
        return "latest" if streaming else "earliest"

    def topic_filter(self):
        from ..core.subscription.topic_filter import Whitelist
        return Whitelist(self.pattern) if self.pattern is not None else None

    def log_end_probe(self, bootstrap: str):
        """The driver's :class:`~zkconsumer.spark.kafka_io.LogEndProbe` with these options' Kafka settings."""
        from .kafka_io import LogEndProbe
        return LogEndProbe(bootstrap, from_fetch=self.log_end_from_fetch, security=self.kafka_security,
                           kafka_params=self.kafka_params, client_id=self.client_id)


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


def _json_object(name, value, allowed, empty_ok=False):
    """The JSON object of an option (non-empty unless ``empty_ok``), else ConfigError (naming the option and what
    is allowed)."""
    try:
        obj = json.loads(value)
    except (TypeError, ValueError, RecursionError):
        # RecursionError: nested thousands deep
        obj = None
    if not isinstance(obj, dict) or not (obj or empty_ok):
        raise ConfigError(name, value, allowed)
    return obj


def _topic(name, value, allowed, topic):
    try:
        validate_topic(topic)
    except InvalidNameError as e:
        raise ConfigError(name, value, allowed, "topic %r: %s" % (topic, e.reason)) from None


def _offsets_json(name, value, allow_earliest):
    """Spark's JSON form ``{"topic": {"0": 23, "1": -1}}`` -> {(t, p): offset}."""
    allowed = ("'earliest', 'latest' or JSON like {\"topic\":{\"0\":23,\"1\":-1}} (-2 = earliest, -1 = latest)"
               if allow_earliest else "'latest' or JSON like {\"topic\":{\"0\":23,\"1\":-1}} (-1 = latest)")
    obj = _json_object(name, value, allowed, empty_ok=True)
    out = {}
    for t, parts in obj.items():
        _topic(name, value, allowed, t)
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


def _timestamp(name, value):
    try:
        ts = int(str(value).strip())
    except ValueError:
        ts = -1
    # Spark: "Expected a single long value"
    if ts < 0:
        raise ConfigError(name, value, "a single long value: a timestamp in milliseconds since the epoch")
    return ts


def _timestamps_json(name, value):
    """Spark's ``{"topic": {"0": 1700000000000, ...}}`` -> {(t, p): timestamp ms}."""
    allowed = "JSON like {\"topic\":{\"0\":1700000000000,\"1\":1700000000000}} (timestamps in ms)"
    obj = _json_object(name, value, allowed)
    out = {}
    for t, parts in obj.items():
        if not isinstance(parts, dict):
            raise ConfigError(name, value, allowed, "topic %r must map to {partition: timestamp}" % t)
        for p, ts in parts.items():
            try:
                pi = int(p)
            except (TypeError, ValueError):
                raise ConfigError(name, value, allowed, "partition %r of %r is not an integer" % (p, t)) from None
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise ConfigError(name, value, allowed, "bad timestamp %r for %s-%s" % (ts, t, p))
            out[(t, pi)] = ts
    return out


def _duration_ms(name, value):
    """Spark's time strings (``Utils.timeStringAsMs``): ``500ms``, ``30s``, ``15m``, ``1h``, ``1d``; a bare
    number is milliseconds."""
    import re
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", str(value).lower())
    if not m:
        raise ConfigError(name, value, "a duration like 500ms, 30s, 15m, 1h or 1d (a bare number is milliseconds)")
    unit = {None: 1, "ms": 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000, "d": 86400000}[m.group(2)]
    return int(m.group(1)) * unit


def _check_timestamp_ranges(start, end):
    """Spark's ``checkOffsetLimitValidity`` for by-timestamp starts and ends: same partitions, start <= end."""
    if start is None or end is None:
        return
    if set(start) != set(end):
        raise ConfigError("startingOffsetsByTimestamp/endingOffsetsByTimestamp", None,
                          "the same topic-partitions in both",
                          "only in one: %s" % ", ".join("%s-%d" % tp for tp in sorted(set(start) ^ set(end))))
    for tp in sorted(start):
        if start[tp] > end[tp]:
            raise ConfigError("startingOffsetsByTimestamp", start[tp], "a timestamp <= the ending timestamp "
                              "%d of %s-%d in endingOffsetsByTimestamp" % (end[tp], tp[0], tp[1]))


def _assign_json(value) -> Tuple[Tuple[str, int], ...]:
    """Spark's ``assign`` JSON ``{"topicA": [0, 1], "topicB": [2, 4]}`` -> sorted ((t, p), ...)."""
    allowed = 'JSON like {"topicA":[0,1],"topicB":[2,4]}: the topic-partitions to read'
    obj = _json_object("assign", value, allowed)
    out = set()
    for t, parts in obj.items():
        _topic("assign", value, allowed, t)
        if not isinstance(parts, list) or not parts:
            raise ConfigError("assign", value, allowed, "topic %r must map to a list of partitions" % t)
        for p in parts:
            if isinstance(p, bool) or not isinstance(p, int) or p < 0:
                raise ConfigError("assign", value, allowed, "bad partition %r of %r" % (p, t))
            out.add((t, p))
    return tuple(sorted(out))


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate Spark's (case-insensitive) option map."""
    src: Dict[str, str] = {}
    props: Dict[str, str] = {}
    kafka: Dict[str, str] = {}
    given_as_kafka = set()
    for k, v in options.items():
        lk = str(k).lower()
        if lk in _LOWER:
            src[_LOWER[lk]] = v
        elif (security_key := _kafka_security_option(lk)) is not None:
            props[security_key] = v
            given_as_kafka.add("kafka." + security_key)
        elif lk.startswith("kafka."):
            kafka[lk[len("kafka."):]] = v
        elif lk in _CONSUMER_KEYS:
            props[_CONSUMER_KEYS[lk]] = v
        else:
            # a mistyped secret key stays secret
            shown = "[hidden]" if "jaas" in lk or "password" in lk else v
            raise ConfigError(k, shown, "not an option of the zkconsumer source; allowed: %s and the legacy consumer "
                              "properties (zookeeper.connect, group.id, offsets.storage, dual.commit.enabled, ...)"
                              % ", ".join(SOURCE_OPTIONS))
    subscribe, pattern, assign = src.get("subscribe"), src.get("subscribePattern"), src.get("assign")
    given = [k for k, v in (("assign", assign), ("subscribe", subscribe), ("subscribePattern", pattern)) if v is not None]
    if len(given) != 1:
        raise ConfigError("/".join(given) if given else "assign/subscribe/subscribePattern",
                          "set" if given else None,
                          "exactly one of assign (JSON of topic-partitions), subscribe (comma-separated topics) or "
                          "subscribePattern (Java regex)")
    assigned = _assign_json(assign) if assign is not None else None
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
    elif assigned is not None:
        topics = tuple(sorted({t for t, _ in assigned}))
    else:
        from ..core.subscription.java_regex import compile_java_regex
        # exactly one of assign, subscribe, subscribePattern
        assert pattern is not None
        try:
            compile_java_regex(pattern, key="subscribePattern")
        except Exception as e:
            raise ConfigError("subscribePattern", pattern, "a Java regular expression", str(e)) from None
    # group config: validated here so a typo fails at load() on the driver
    props.setdefault("auto.commit.enable", "false")
    if str(props["auto.commit.enable"]).strip().lower() != "false":
        raise ConfigError("auto.commit.enable", props["auto.commit.enable"],
                          "false (the source commits after Spark committed a batch, never on a timer)")
    try:
        cfg = ConsumerConfig.from_properties(props)
    except ConfigError as e:
        # name the option as the user wrote it (kafka.ssl.keystore.password)
        if "kafka." + e.key in given_as_kafka:
            raise ConfigError("kafka." + e.key, e.value, e.allowed, e.detail) from None
        raise
    # both required by from_properties
    assert cfg.group_id is not None and cfg.zookeeper_connect is not None
    strategy = src.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError("startingOffsetsByTimestampStrategy", src["startingOffsetsByTimestampStrategy"],
                          "error (fail when no offset matches a starting timestamp) or latest (start such a "
                          "partition at its log end)")
    # Spark's precedence (KafkaSourceProvider.getKafkaOffsetRangeLimit): the global timestamp, else the timestamps
    # per partition, else startingOffsets / endingOffsets
    starting: object = None
    start_ts = start_by_ts = None
    if src.get("startingTimestamp") is not None:
        start_ts = _timestamp("startingTimestamp", src["startingTimestamp"])
    elif src.get("startingOffsetsByTimestamp") is not None:
        start_by_ts = _timestamps_json("startingOffsetsByTimestamp", src["startingOffsetsByTimestamp"])
    elif src.get("startingOffsets") is not None:
        s = src["startingOffsets"].strip().lower()
        starting = s if s in ("earliest", "latest") else _offsets_json("startingOffsets", src["startingOffsets"], True)
    ending: object = "latest"
    end_ts = end_by_ts = None
    if src.get("endingTimestamp") is not None:
        end_ts = _timestamp("endingTimestamp", src["endingTimestamp"])
    elif src.get("endingOffsetsByTimestamp") is not None:
        end_by_ts = _timestamps_json("endingOffsetsByTimestamp", src["endingOffsetsByTimestamp"])
    elif src.get("endingOffsets") is not None and src["endingOffsets"].strip().lower() != "latest":
        ending = _offsets_json("endingOffsets", src["endingOffsets"], False)
    _check_timestamp_ranges(start_by_ts, end_by_ts)
    mopt = src.get("maxOffsetsPerTrigger")
    minopt = src.get("minOffsetsPerTrigger")
    max_per_trigger = _pos_int("maxOffsetsPerTrigger", mopt) if mopt is not None else None
    min_per_trigger = _pos_int("minOffsetsPerTrigger", minopt) if minopt is not None else None
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise ConfigError("minOffsetsPerTrigger", minopt, "at most maxOffsetsPerTrigger (%d)" % max_per_trigger,
                          "the value of minOffsetsPerTrigger is higher than maxOffsetsPerTrigger")
    minp, maxr = src.get("minPartitions"), src.get("maxRecordsPerPartition")
    kafka_params = kafka_client_config(kafka)
    prefix = src.get("groupIdPrefix")
    if prefix is not None and not prefix.strip():
        raise ConfigError("groupIdPrefix", prefix, "a non-empty prefix")
    if prefix is not None and "group_id" in kafka_params:
        warn_once("Option groupIdPrefix will be ignored as option kafka.group.id has been set.")
        prefix = None
    return SourceOptions(
        topics=topics, pattern=pattern, consumer_props=tuple(sorted(props.items())), group=cfg.group_id,
        zookeeper_connect=cfg.zookeeper_connect,
        bootstrap_servers=(src.get("kafka.bootstrap.servers") or "").strip() or None,
        starting=starting, ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=_bool("failOnDataLoss", src.get("failOnDataLoss", "true")),
        poll_timeout_ms=_pos_int("kafkaConsumer.pollTimeoutMs", src.get("kafkaConsumer.pollTimeoutMs", "120000")),
        arrow_batch_size=_pos_int("arrowBatchSize", src.get("arrowBatchSize", "20000")),
        log_end_from_fetch=_log_end(src.get("logEnd", "listOffsets")),
        include_headers=_bool("includeHeaders", src.get("includeHeaders", "false")),
        min_partitions=_pos_int("minPartitions", minp) if minp is not None else None,
        max_records_per_partition=_pos_int("maxRecordsPerPartition", maxr) if maxr is not None else None,
        starting_timestamp=start_ts, starting_by_timestamp=start_by_ts, ending_timestamp=end_ts,
        ending_by_timestamp=end_by_ts, no_match_latest=strategy == "latest",
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms("maxTriggerDelay", src.get("maxTriggerDelay", "15m")),
        kafka_params=tuple(sorted(kafka_params.items())),
        ending_given=tuple(k for k in ("endingOffsets", "endingOffsetsByTimestamp") if k in src),
        owner_reaper=_bool("ownerReaper", src.get("ownerReaper", "true")),
        assign=assigned,
        fetch_offset_retries=_pos_int("fetchOffset.numRetries", src.get("fetchOffset.numRetries", "3")),
        fetch_offset_retry_interval_ms=_pos_int("fetchOffset.retryIntervalMs",
                                                src.get("fetchOffset.retryIntervalMs", "10"), lo=0),
        client_id=prefix.strip() if prefix is not None else "zkconsumer-spark",
        group_settle_timeout_ms=_pos_int("groupSettleTimeoutMs", src.get("groupSettleTimeoutMs", "60000"), lo=0),
    )


def _log_end(value):
    v = str(value).strip().lower()
    if v not in ("listoffsets", "fetch"):
        raise ConfigError("logEnd", value, "listOffsets (ListOffsets(latest), exact on Apache Kafka) or fetch (the "
                          "high watermark of a fetch response, for brokers whose ListOffsets is wrong, e.g. tansu)")
    return v == "fetch"
