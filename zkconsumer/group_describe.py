"""``groups describe``: one row per partition of a ZooKeeper-coordinated group, in the column set of Kafka's modern
``kafka-consumer-groups --describe`` (GROUP, TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID,
HOST, CLIENT-ID), with the offsets read from wherever the group keeps them.

Where the offsets are read (``offsets_storage``):

* ``zookeeper`` / ``kafka``: that store;
* ``dual``: the greater of the two, what a dual-commit member resumes from;
* ``auto`` (default): what the live zkconsumer members publish about themselves (their member info nodes): all
  ``zookeeper`` -> ZooKeeper, all ``kafka`` without dual commit -> Kafka, anything else -> ``dual``. JVM members
  publish nothing; with none of ours live, ``dual`` is used when Kafka can be asked, else ZooKeeper.

HOST and CLIENT-ID come from our members' info nodes; for a JVM member HOST is taken from its consumer id
(``group_host-timestamp-uuid``, what the Scala consumer generates when ``consumer.id`` is not set), CLIENT-ID is
unknown (``None``). Rows also carry both stores' offsets and the member's storage mode (``--json``).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from kazoo.exceptions import NoNodeError

from .errors import ZkConsumerError, ZnodeFormatError
from .groups import group_topics, live_members, log_end_offsets, owners, require_group, topic_partitions, zk_offsets
from .layout import paths
from .layout.member_info import MemberInfo, decode_member_info

__all__ = ["DescribeRow", "describe", "member_infos", "host_of_consumer_id", "STORAGES"]

log = logging.getLogger(__name__)

TP = Tuple[str, int]
STORAGES = ("auto", "zookeeper", "kafka", "dual")
_GENERATED_ID = re.compile(r"^(?P<host>.+)-\d{10,}-[0-9a-f]{8}$")


@dataclass
class DescribeRow:
    group: str
    topic: Optional[str]
    partition: Optional[int]
    current_offset: Optional[int]
    log_end_offset: Optional[int]
    lag: Optional[int]
    consumer_id: Optional[str]
    host: Optional[str] = None
    client_id: Optional[str] = None
    owner: Optional[str] = None
    zookeeper_offset: Optional[int] = None
    kafka_offset: Optional[int] = None
    offsets_from: str = "zookeeper"
    # zookeeper | dual | kafka | None (a JVM member: unknown)
    member_storage: Optional[str] = None

    def as_dict(self):
        return dict(self.__dict__)


def host_of_consumer_id(group: str, consumer_id: str) -> Optional[str]:
    """The host in a consumer id the Scala consumer generated (``group_host-timestamp-uuid8``); None otherwise."""
    prefix = group + "_"
    if not consumer_id.startswith(prefix):
        return None
    m = _GENERATED_ID.match(consumer_id[len(prefix):])
    return m.group("host") if m else None


def member_infos(zk, group) -> Dict[str, MemberInfo]:
    """``{consumer_id: MemberInfo}`` of the zkconsumer members that published one (malformed nodes are logged)."""
    base = paths.group_member_info_dir(group)
    try:
        children = zk.get_children(base)
    except NoNodeError:
        return {}
    pending = {cid: zk.get_async(base + "/" + cid) for cid in children}
    out = {}
    for cid, res in pending.items():
        try:
            data, _ = res.get()
            out[cid] = decode_member_info(data, base + "/" + cid)
        except NoNodeError:
            continue
        except ZnodeFormatError as e:
            log.warning("%s", e)
    return out


def _consumer_of(owner: Optional[str]) -> Optional[str]:
    if not owner:
        return None
    i = owner.rfind("-")
    return owner[:i] if i > 0 else owner


def _choose_storage(requested: str, infos: Dict[str, MemberInfo], members, can_ask_kafka: bool) -> str:
    if requested != "auto":
        return requested
    known = {infos[cid].mode for cid in members if cid in infos}
    everyone_said = bool(members) and all(cid in infos for cid in members)
    if everyone_said and known == {"zookeeper"}:
        return "zookeeper"
    if not can_ask_kafka:
        return "zookeeper"
    return "kafka" if everyone_said and known == {"kafka"} else "dual"


def describe(zk, group, bootstrap_servers=None, offsets_storage="auto", security=None) -> List[DescribeRow]:
    """One row per partition of every topic of the group, then one per live member that owns nothing (partition
    columns ``None``). Without *bootstrap_servers* the log-end offset, lag and Kafka offsets are ``None`` (and the
    offsets come from ZooKeeper)."""
    if offsets_storage not in STORAGES:
        raise ValueError("offsets storage %r (expected one of %s)" % (offsets_storage, ", ".join(STORAGES)))
    group = require_group(zk, group)
    if offsets_storage in ("kafka", "dual") and not bootstrap_servers:
        raise ZkConsumerError("reading group %s's offsets from %s needs the Kafka brokers" % (group, offsets_storage))
    members = live_members(zk, group)
    infos = member_infos(zk, group)
    own = owners(zk, group)
    zoffs = zk_offsets(zk, group)
    parts = [(t, p) for t in group_topics(zk, group, members) for p in topic_partitions(zk, t)]
    parts = sorted(set(parts) | set(zoffs) | set(own))
    storage = _choose_storage(offsets_storage, infos, members, bool(bootstrap_servers))
    koffs: Dict[TP, int] = {}
    if storage != "zookeeper" and parts:
        from .offsets.kafka import KafkaOffsetStore
        store = KafkaOffsetStore(bootstrap_servers, group, security=security)
        try:
            koffs = store.fetch(parts)
        finally:
            store.close()
    leo = log_end_offsets(bootstrap_servers, parts, security=security) if bootstrap_servers and parts else {}

    def current(tp):
        z, k = zoffs.get(tp), koffs.get(tp)
        if storage == "zookeeper":
            return z
        if storage == "kafka":
            return k
        return max((v for v in (z, k) if v is not None), default=None)

    def who(cid):
        info = infos.get(cid) if cid else None
        if info is not None:
            return info.host, info.client_id, info.mode
        return (host_of_consumer_id(group, cid) if cid else None), None, None

    rows = []
    for tp in parts:
        cur, end = current(tp), leo.get(tp)
        lag = end - cur if cur is not None and end is not None else None
        cid = _consumer_of(own.get(tp))
        host, client_id, mode = who(cid)
        rows.append(DescribeRow(group, tp[0], tp[1], cur, end, lag, cid, host, client_id, own.get(tp),
                                zoffs.get(tp), koffs.get(tp), storage, mode))
    owning = {_consumer_of(o) for o in own.values()}
    for cid in members:
        if cid not in owning:
            host, client_id, mode = who(cid)
            rows.append(DescribeRow(group, None, None, None, None, None, cid, host, client_id, None, None, None,
                                    storage, mode))
    return rows
