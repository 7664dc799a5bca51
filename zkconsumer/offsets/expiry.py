"""When do a group's offsets in Kafka's offset manager expire?

The broker deletes committed offsets ``offsets.retention.minutes`` after they stop being refreshed (1 day before
Kafka 2.0, 7 days after). A ZooKeeper-coordinated group commits to Kafka without joining a broker-side group
(generation -1, no protocol), so each offset expires ``retention`` after *its own* last commit (Kafka's
``GroupMetadataManager``: offsets of a group without a protocol type expire by their commit timestamp). A running
member re-commits every offset each ``auto.commit.interval.ms`` (Kafka commits are unfiltered); a stopped or weekly
group, or offsets written by ``zkmigrate copy`` that no consumer uses in time, simply vanish.

OffsetFetch does not say when an offset was committed, so the commit timestamps are read where the broker keeps
them: the group's partition of ``__consumer_offsets`` (``abs(groupId.hashCode) % partitions``, Java's String hash),
whose records are ``key = (version, group, topic, partition)`` and ``value = (version, offset, [leader epoch],
metadata, commit timestamp, [expire timestamp])`` (value versions 0-4; Kafka's ``GroupMetadataManager`` /
``OffsetCommitValue``). The retention comes from the brokers' ``offsets.retention.minutes`` (DescribeConfigs); when
it cannot be read (no DescribeConfigs right) the shortest default, 1 day, is assumed, and the callers say so.
"""
from __future__ import annotations

import logging
import struct
import time
from typing import Dict, Iterable, NamedTuple, Optional, Tuple

from ..errors import ClusterUnavailableError

__all__ = ["java_string_hash", "offsets_topic_partition", "parse_commit_record", "parse_commit", "read_commit_times",
           "read_commit_log", "read_commit_logs", "read_group_activity", "parse_group_record_key", "LastCommit", "offsets_retention_ms", "read_offsets_retention",
           "Retention", "OFFSETS_TOPIC", "SHORTEST_RETENTION_MINUTES"]

from ..kafka.connect_errors import connect_error
from ..kafka import internals
from ..core.kafka_security import PLAINTEXT

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TP = Tuple[str, int]
#: offsets.retention.minutes' default before Kafka 2.0 (KIP-186 made it 10080): the shortest a broker is likely to
#: run, so what is assumed when the brokers' value cannot be read (offsets refreshed early, old offsets checked)
SHORTEST_RETENTION_MINUTES = 1440


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_topic_partition(group: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` holding *group*: ``Utils.abs(groupId.hashCode) % partitions``, where
    Kafka's ``Utils.abs`` is ``Math.abs`` except that ``Integer.MIN_VALUE`` gives 0."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("record too short")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def string(self) -> Optional[str]:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n]
        if len(s) != n:
            raise ValueError("string too short")
        self.pos += n
        return s.decode("utf-8")

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(">B")
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise ValueError("varint too long")

    def compact_string(self) -> Optional[str]:
        n = self.varint() - 1
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n]
        if len(s) != n:
            raise ValueError("compact string too short")
        self.pos += n
        return s.decode("utf-8")


def parse_commit_record(key: Optional[bytes], value: Optional[bytes]):
    """``(group, topic, partition, commit_timestamp_ms or None)`` for an offset commit record (None = tombstone:
    the offset was deleted or expired); ``None`` for the other records of the topic (group metadata)."""
    parsed = parse_commit(key, value)
    return None if parsed is None else parsed[:3] + (parsed[4],)


def parse_commit(key: Optional[bytes], value: Optional[bytes]):
    """``(group, topic, partition, offset, commit_timestamp_ms)`` for an offset commit record (both None for a
    tombstone); ``None`` for the other records of the topic (group metadata)."""
    if not key or len(key) < 2:
        return None
    r = _Reader(key)
    version = r.take(">h")
    # key versions 0 and 1 are offsets; 2 is group metadata, others are unknown
    if version not in (0, 1):
        return None
    group, topic, partition = r.string(), r.string(), r.take(">i")
    if value is None:
        return group, topic, partition, None, None
    v = _Reader(value)
    vv = v.take(">h")
    offset = v.take(">q")
    if vv in (0, 1, 2):
        v.string()
        ts = v.take(">q")
    elif vv == 3:
        # leader epoch
        v.take(">i")
        v.string()
        ts = v.take(">q")
    elif vv == 4:
        # flexible
        v.take(">i")
        v.compact_string()
        ts = v.take(">q")
    else:
        raise ValueError("offset commit value version %d" % vv)
    return group, topic, partition, offset, ts


def read_commit_times(bootstrap_servers, group: str, partitions: Optional[Iterable[TP]] = None,
                      timeout_s: float = 30.0, security=None) -> Dict[TP, int]:
    """``{(topic, partition): last commit timestamp (epoch ms)}`` of *group*'s offsets in Kafka, read from its
    partition of ``__consumer_offsets`` up to the end (latest record wins, tombstones remove)."""
    return {tp: c.committed_ms for tp, c in read_commit_log(bootstrap_servers, group, partitions, timeout_s,
                                                            security).items()
            if not c.removed and c.committed_ms is not None}


class LastCommit(NamedTuple):
    """The last offset commit of a partition in ``__consumer_offsets`` and whether a tombstone followed it (the
    broker removed the offset: expired, its topic deleted, or OffsetDelete). The values of a removed offset are
    those of its last commit while the log still holds it (compaction drops them later); None when it does not."""
    offset: Optional[int]
    committed_ms: Optional[int]
    removed: bool
    #: ms, the first of the latest run of commits of this offset the log still holds (a keep-alive commits the
    #: same offset again: Kafka's offset has been this one since then; once compaction has dropped the earlier
    #: records of the run, the time of the newest one the log keeps)
    since_ms: Optional[int] = None


def read_commit_log(bootstrap_servers, group: str, partitions: Optional[Iterable[TP]] = None,
                    timeout_s: float = 30.0, security=None) -> Dict[TP, LastCommit]:
    """``{(topic, partition): LastCommit}`` for *group*'s offsets (also the removed ones) from its partition of
    ``__consumer_offsets``, read from the beginning to the end within *timeout_s*."""
    wanted = None if partitions is None else set((t, int(p)) for t, p in partitions)
    out = read_commit_logs(bootstrap_servers, [group], timeout_s, security).get(group, {})
    return out if wanted is None else {tp: c for tp, c in out.items() if tp in wanted}


def parse_group_record_key(key: Optional[bytes]) -> Optional[str]:
    """The group of a record of ``__consumer_offsets`` that is not an offset commit: group metadata (key version 2,
    written as a classic group's members join, sync and leave) and the records of the KIP-848 group coordinator
    (key versions 3 and up, each led by the group id); None for an offset commit or a key that cannot be read."""
    if not key or len(key) < 2:
        return None
    r = _Reader(key)
    try:
        if r.take(">h") < 2:
            return None
        return r.string()
    except (ValueError, struct.error, IndexError, UnicodeDecodeError):
        return None


def read_group_activity(bootstrap_servers, group: str, timeout_s: float = 30.0, security=None) -> Optional[int]:
    """When (epoch ms, the broker's record time) broker-coordinated consumers last changed *group*: the newest
    group record of its partition of ``__consumer_offsets`` (members joining, leaving, rebalancing; compaction keeps
    the newest of each key), or None when the log holds none. ClusterUnavailableError when it cannot be read."""
    latest: Dict[str, int] = {}

    def seen(rec, _mine) -> None:
        g = parse_group_record_key(rec.key)
        if g == group and rec.timestamp is not None:
            latest[g] = max(latest.get(g, 0), int(rec.timestamp))
    _scan(bootstrap_servers, [group], timeout_s, security, seen)
    return latest.get(group)


def read_commit_logs(bootstrap_servers, groups: Iterable[str], timeout_s: float = 30.0,
                     security=None) -> Dict[str, Dict[TP, LastCommit]]:
    """``{group: {(topic, partition): LastCommit}}`` of every group of *groups*, each partition of
    ``__consumer_offsets`` that holds one of them read once, from the beginning to the end (the groups that share
    a partition share its read; *timeout_s* for each partition read). A group without a commit is absent."""
    out: Dict[str, Dict[TP, LastCommit]] = {}

    def seen(rec, mine) -> None:
        try:
            parsed = parse_commit(rec.key, rec.value)
        except ValueError as e:
            log.debug("skipping a record of %s: %s", OFFSETS_TOPIC, e)
            return
        if parsed is None or parsed[0] not in mine:
            return
        commits, key = out.setdefault(parsed[0], {}), (parsed[1], parsed[2])
        if parsed[4] is None:
            last = commits.get(key)
            commits[key] = LastCommit(last.offset if last else None, last.committed_ms if last else None,
                                      True, last.since_ms if last else None)
        else:
            last = commits.get(key)
            same = last is not None and not last.removed and last.offset == parsed[3]
            commits[key] = LastCommit(parsed[3], parsed[4], False,
                                      last.since_ms if same and last is not None else parsed[4])
    _scan(bootstrap_servers, groups, timeout_s, security, seen)
    return out


def _scan(bootstrap_servers, groups: Iterable[str], timeout_s: float, security, seen) -> None:
    """Read each partition of ``__consumer_offsets`` that holds one of *groups* from the beginning to the end,
    calling ``seen(record, groups of its partition)`` for each record."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    groups = set(groups)
    if not groups:
        return
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id="zkconsumer-expiry",
                                 enable_auto_commit=False, exclude_internal_topics=False, group_id=None,
                                 request_timeout_ms=int(min(timeout_s, 30) * 1000) + 1000,
                                 **(security or PLAINTEXT).client_kwargs())
    except (KafkaError, OSError, ValueError) as e:
        raise connect_error("reach Kafka to read %s" % OFFSETS_TOPIC, bootstrap_servers, security, e) from e
    try:
        parts = consumer.partitions_for_topic(OFFSETS_TOPIC)
        if not parts:
            return
        owners: Dict[int, set] = {}
        for g in groups:
            owners.setdefault(offsets_topic_partition(g, len(parts)), set()).add(g)
        tps = [TopicPartition(OFFSETS_TOPIC, p) for p in sorted(owners)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout_s * len(tps)
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise ClusterUnavailableError("reading %d partition(s) of %s for %d group(s) took longer than %.0f s"
                                              % (len(tps), OFFSETS_TOPIC, len(groups), timeout_s * len(tps)))
            for tp, records in consumer.poll(timeout_ms=500).items():
                mine = owners.get(tp.partition, ())
                for rec in records:
                    seen(rec, mine)
    except KafkaError as e:
        raise ClusterUnavailableError("cannot read %s for group(s) %s: %s"
                                      % (OFFSETS_TOPIC, ", ".join(sorted(groups)[:5]), e)) from e
    finally:
        internals.close_quietly(consumer)


class Retention(NamedTuple):
    """The brokers' ``offsets.retention.minutes`` in ms, or (``known`` false) the value assumed because it could not
    be read, and why."""
    ms: int
    known: bool = True
    why: Optional[str] = None

    def describe(self) -> str:
        if self.known:
            return "offsets.retention.minutes=%d" % (self.ms // 60000)
        return ("offsets.retention.minutes unknown (%s), taken as %d, the shortest default (Kafka before 2.0)"
                % (self.why, self.ms // 60000))


def read_offsets_retention(bootstrap_servers, security=None,
                           assume_minutes: int = SHORTEST_RETENTION_MINUTES) -> Retention:
    """The brokers' ``offsets.retention.minutes`` (DescribeConfigs of one broker; it needs DescribeConfigs on the
    cluster), or *assume_minutes* with ``known`` false and the reason when the broker refuses or does not say.
    An unreachable cluster raises :class:`ClusterUnavailableError`."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="zkconsumer-expiry",
                                 **(security or PLAINTEXT).client_kwargs())
    except Exception as e:
        raise connect_error("reach Kafka for offsets.retention.minutes", bootstrap_servers, security, e) from e
    try:
        broker = min(b["broker_id"] for b in admin.describe_cluster()["brokers"])
        res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker),
                                                     {"offsets.retention.minutes": None})], config_filter="all")
        value = _find_config(res, "offsets.retention.minutes")
        # kafka-python leaves a refused resource (CLUSTER_AUTHORIZATION_FAILED) empty
        if value is None:
            return Retention(assume_minutes * 60000, False, "broker %s did not give it: may this Kafka identity "
                                                            "DescribeConfigs on the cluster?" % broker)
        return Retention(int(value) * 60000)
    except Exception as e:
        return Retention(assume_minutes * 60000, False, "DescribeConfigs failed: %s" % e)
    finally:
        internals.close_quietly(admin)


def offsets_retention_ms(bootstrap_servers, default_minutes: int = SHORTEST_RETENTION_MINUTES, security=None) -> int:
    """:func:`read_offsets_retention` in ms; when it cannot be read, *default_minutes* (by default the shortest
    default: whatever waits for an offset's expiry acts early rather than late), with a warning saying so."""
    retention = read_offsets_retention(bootstrap_servers, security, default_minutes)
    if not retention.known:
        log.warning("could not read offsets.retention.minutes from %s (%s); assuming %d minutes", bootstrap_servers,
                    retention.why, default_minutes)
    return retention.ms


def _find_config(obj, name):
    """Dig *name*'s value out of kafka-python's describe_configs answer (its shape varies between versions)."""
    if isinstance(obj, dict):
        if name in obj:
            v = obj[name]
            return v.get("value", v.get("config_value")) if isinstance(v, dict) else v
        for v in obj.values():
            found = _find_config(v, name)
            if found is not None:
                return found
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            found = _find_config(v, name)
            if found is not None:
                return found
    return None
