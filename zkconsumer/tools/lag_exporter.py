"""Group lag for monitoring (``zkconsumer exporter``): committed-offset lag per group, topic and partition of
ZooKeeper-coordinated groups, from the store each group's phase says it uses, kept in one watch-driven cache.

**Where a group's offsets are read.** The phase ``zkmigrate`` recorded (``/consumers/G/zkconsumer/migration``):
``zookeeper`` -> ZooKeeper, ``dual`` -> the greater of ZooKeeper and Kafka (what a dual-commit member resumes
from), ``kafka`` and ``cutover`` -> Kafka. Without a record, what the live members publish (their member info
nodes: all ``zookeeper`` -> ZooKeeper, all Kafka-only -> Kafka), else ``dual``. So lag keeps meaning the same
thing through a migration and after it (a monitor of ZooKeeper offsets alone sees them freeze in the Kafka phase).

**The cache.** ZooKeeper is never read per scrape. A worker thread sets a watch on every node it reads and reads a
node again only when its watch fires: ``/consumers`` (the groups), per selected group ``offsets``,
``offsets/T`` and each ``offsets/T/P`` (the committed offsets, as Burrow's ``kafka_zk`` module watches them),
``owners/T`` (who owns what), ``ids`` (the live members), their registrations and member info nodes and the phase
record, ``/brokers/topics/T`` (partition counts, shared by the groups) and, once a member subscribes with a
whitelist or blacklist, ``/brokers/topics`` (the topics its filter is evaluated against). Kafka has no watches: every ``interval_s`` one
refresh reads the log start and end offsets of every partition of every group in one ListOffsets pass, the Kafka
offsets of the groups that use Kafka (an OffsetFetch each), the broker-side groups (ListGroups, and DescribeGroups
of the ones that share a name with a live ZooKeeper group: split brain) and, every ``expiry_interval_s``, when
the Kafka offsets of the groups that use Kafka and have no live member expire (their partition of
``__consumer_offsets``; see :mod:`zkconsumer.offsets.expiry`). A scrape renders the cache.

**Metrics** (the names and labels of kafka-lag-exporter where it has one; every series has ``cluster_name``):
``kafka_consumergroup_group_offset`` and ``kafka_consumergroup_group_lag`` {group, topic, partition,
member_host, consumer_id, client_id}, ``kafka_consumergroup_group_max_lag`` {group, is_simple_consumer: true
when the group has no live member}, ``kafka_consumergroup_group_sum_lag`` {group},
``kafka_consumergroup_group_topic_sum_lag`` {group, topic}, ``kafka_partition_latest_offset`` and
``kafka_partition_earliest_offset`` {topic, partition}; ours: ``zkconsumer_group_offsets_store`` {group, store}
(1 for where the offsets were read), ``zkconsumer_group_phase`` {group, phase}, ``zkconsumer_group_members``,
``zkconsumer_group_partitions``, ``zkconsumer_group_unowned_partitions`` (of the topics the live members subscribe
to: a topic the group only has old offsets for is nobody's to own), ``zkconsumer_group_split_brain``,
``zkconsumer_group_offsets_expire_timestamp_seconds``, and the exporter's own ``zkconsumer_exporter_*`` (among them
``zkconsumer_exporter_last_refresh_timestamp_seconds``: while Kafka cannot be read the lag is computed from old log
ends and shrinks as the members commit, so a stale exporter hides lag).
kafka-lag-exporter's ``..._lag_seconds`` (an interpolation of time lag) is not exported.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

from ..errors import RebalanceError, ZkConsumerError, ZnodeFormatError
from ..core.layout.codecs import decode_consumer_registration
from ..core.layout.member_info import decode_member_info
from ..core.subscription.topic_count import consumers_per_topic, is_wildcard

__all__ = ["LagCache", "LagCollector", "store_of"]

log = logging.getLogger(__name__)

TP = Tuple[str, int]
_CONSUMERS = "/consumers"
_TOPICS = "/brokers/topics"
_PHASE_STORES = {"zookeeper": "zookeeper", "dual": "dual", "kafka": "kafka", "cutover": "kafka"}


def store_of(phase: Optional[str], member_modes: List[Optional[str]]) -> str:
    """Where a group's committed offsets are read: its recorded phase's store, else its live members' (all
    ``zookeeper`` or all ``kafka``), else ``dual`` (the greater of both)."""
    if phase in _PHASE_STORES:
        return _PHASE_STORES[phase]
    if member_modes and all(m == "zookeeper" for m in member_modes):
        return "zookeeper"
    if member_modes and all(m == "kafka" for m in member_modes):
        return "kafka"
    return "dual"


@dataclass
class _Group:
    offset_topics: Set[str] = field(default_factory=set)
    zk_offsets: Dict[TP, int] = field(default_factory=dict)
    owners: Dict[TP, str] = field(default_factory=dict)
    members: Set[str] = field(default_factory=set)
    modes: Dict[str, Tuple[Optional[str], Optional[str], Optional[str]]] = field(default_factory=dict)
    # consumer id -> (subscription, pattern)
    registrations: Dict[str, Tuple[Any, str]] = field(default_factory=dict)
    # the topics the live members' registrations name or match
    subscribed: Set[str] = field(default_factory=set)
    phase: Optional[str] = None
    kafka_offsets: Dict[TP, int] = field(default_factory=dict)
    split_brain: bool = False
    expires_ms: Optional[int] = None


class LagCache:
    """The watch-driven cache of the selected groups (``select(group) -> bool``).

    :param zk: a started kazoo client (the cache sets watches through it; it is not closed here).
    :param bootstrap_servers: the brokers (``host:port,...``), for log ends and Kafka offsets.
    :param interval_s: seconds between Kafka refreshes.
    :param expiry_interval_s: seconds between reads of the expiry of stopped Kafka groups' offsets (0: never).
    """

    def __init__(self, zk: Any, select: Callable[[str], bool], bootstrap_servers: Optional[str] = None,
                 security: Any = None, interval_s: float = 30.0, expiry_interval_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time) -> None:
        self.zk = zk
        self.select = select
        self.bootstrap_servers = bootstrap_servers
        self.security = security
        self.interval_s = interval_s
        self.expiry_interval_s = expiry_interval_s
        self.clock = clock
        self.wall_clock = wall_clock
        self.lock = threading.Lock()
        self.groups: Dict[str, _Group] = {}
        self.partition_counts: Dict[str, int] = {}
        # /brokers/topics, watched once a wildcard member is seen
        self.all_topics: Optional[List[str]] = None
        self.log_start: Dict[TP, int] = {}
        self.log_end: Dict[TP, int] = {}
        self.zk_reads = 0
        self.refreshes = 0
        self.refresh_seconds = 0.0
        self.refresh_errors = 0
        self.last_refresh_error: Optional[str] = None
        #: when (unix time) the last Kafka refresh succeeded: the log ends, and so every lag, are that old
        self.last_refresh_ok: Optional[float] = None
        self._queue: "queue.Queue[Optional[Tuple[str, str]]]" = queue.Queue()
        self._pending: Set[Tuple[str, str]] = set()
        self._busy = 0
        self._stop = threading.Event()
        self._refreshed = threading.Event()
        self._next_expiry = 0.0
        self._kafka: Optional[Tuple[Any, Any]] = None
        self._threads: List[threading.Thread] = []
        self._expired = False

    # -- life cycle --------------------------------------------------------------------------------------------

    def start(self, refresh_loop: bool = True) -> "LagCache":
        """Start watching (and, with *refresh_loop*, refreshing from Kafka every interval_s)."""
        from kazoo.protocol.states import KazooState
        self.zk.add_listener(lambda state: self._on_state(state, KazooState))
        self._enqueue("children", _CONSUMERS)
        self._threads = [threading.Thread(target=self._work, name="lag-exporter-zk", daemon=True)]
        if self.bootstrap_servers and refresh_loop:
            self._threads.append(threading.Thread(target=self._refresh_loop, name="lag-exporter-kafka",
                                                  daemon=True))
        for t in self._threads:
            t.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._queue.put(None)
        for t in self._threads:
            t.join(10)
        self._close_kafka()

    def _close_kafka(self) -> None:
        if self._kafka is not None:
            for client in self._kafka:
                try:
                    from ..kafka.internals import close_quietly
                    close_quietly(client)
                except Exception:  # noqa: BLE001
                    pass
            self._kafka = None

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """True once every queued ZooKeeper read is done (tests, ``--once``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self._pending and not self._busy:
                    return True
            time.sleep(0.02)
        return False

    def wait_refreshed(self, timeout: float = 60.0) -> bool:
        """True once a Kafka refresh finished after this call."""
        self._refreshed.clear()
        return self._refreshed.wait(timeout)

    def _on_state(self, state: Any, states: Any) -> None:
        if state == states.LOST:
            # every watch is gone with the session: rebuild once connected again
            self._expired = True
        elif state == states.CONNECTED and self._expired:
            self._expired = False
            with self.lock:
                self.groups.clear()
                self.partition_counts.clear()
                self.all_topics = None
            self._enqueue("children", _CONSUMERS)

    # -- ZooKeeper: read a node, watch it, read it again when it changes ------------------------------------

    def _enqueue(self, kind: str, path: str) -> None:
        with self.lock:
            if (kind, path) in self._pending:
                return
            self._pending.add((kind, path))
        self._queue.put((kind, path))

    def _watcher(self, kind: str, path: str) -> Callable[[Any], None]:
        return lambda event: None if self._stop.is_set() else self._enqueue(kind, path)

    def _work(self) -> None:
        while not self._stop.is_set():
            task = self._queue.get()
            if task is None:
                return
            with self.lock:
                # an event from now on queues it again
                self._pending.discard(task)
                self._busy += 1
            kind, path = task
            try:
                self._handle(kind, path)
            except Exception as e:  # noqa: BLE001  (a connection loss: the watch or the next event brings it back)
                log.debug("lag exporter: reading %s failed: %r", path, e)
                if not self._stop.is_set():
                    time.sleep(0.2)
                    self._enqueue(kind, path)
            finally:
                with self.lock:
                    self._busy -= 1

    def _children(self, path: str) -> Optional[List[str]]:
        """The children of path with a watch; None (and an existence watch) when it does not exist."""
        from kazoo.exceptions import NoNodeError
        self.zk_reads += 1
        try:
            return self.zk.get_children(path, watch=self._watcher("children", path))
        except NoNodeError:
            self.zk_reads += 1
            if self.zk.exists(path, watch=self._watcher("children", path)) is not None:
                # created meanwhile
                self._enqueue("children", path)
            return None

    def _data(self, path: str, watch: bool = True) -> Optional[bytes]:
        from kazoo.exceptions import NoNodeError
        self.zk_reads += 1
        try:
            data, _ = self.zk.get(path, watch=self._watcher("data", path) if watch else None)
            return bytes(data)
        except NoNodeError:
            if watch:
                self.zk_reads += 1
                if self.zk.exists(path, watch=self._watcher("data", path)) is not None:
                    self._enqueue("data", path)
            return None

    def _handle(self, kind: str, path: str) -> None:
        parts = path.strip("/").split("/")
        if path == _CONSUMERS:
            self._on_groups(self._children(path) or [])
        elif path == _TOPICS:
            self._on_all_topics(self._children(path) or [])
        elif parts[0] == "brokers" and len(parts) == 3:
            self._on_topic_partitions(parts[2], self._data(path))
        elif parts[0] != "consumers" or len(parts) < 3:
            return
        else:
            group, rest = parts[1], parts[2:]
            with self.lock:
                if group not in self.groups:
                    # no longer selected or gone
                    return
            if rest == ["offsets"]:
                self._on_offset_topics(group, self._children(path) or [])
            elif rest[0] == "offsets" and len(rest) == 2:
                self._on_offset_partitions(group, rest[1], self._children(path))
            elif rest[0] == "offsets" and len(rest) == 3:
                self._on_offset(group, (rest[1], int(rest[2])), path, self._data(path))
            elif rest == ["owners"]:
                for t in self._children(path) or []:
                    self._enqueue("children", path + "/" + t)
            elif rest[0] == "owners" and len(rest) == 2:
                self._on_owners(group, rest[1], path, self._children(path))
            elif rest == ["ids"]:
                self._on_members(group, self._children(path))
            elif rest == ["zkconsumer", "migration"]:
                self._on_phase(group, path, self._data(path))

    def _on_groups(self, names: List[str]) -> None:
        wanted = {g for g in names if self.select(g)}
        with self.lock:
            new = wanted - set(self.groups)
            for g in set(self.groups) - wanted:
                del self.groups[g]
            for g in new:
                self.groups[g] = _Group()
        for g in sorted(new):
            base = "%s/%s" % (_CONSUMERS, g)
            self._enqueue("children", base + "/offsets")
            self._enqueue("children", base + "/owners")
            self._enqueue("children", base + "/ids")
            self._enqueue("data", base + "/zkconsumer/migration")

    def _on_offset_topics(self, group: str, topics: List[str]) -> None:
        with self.lock:
            g = self.groups.get(group)
            if g is None:
                return
            new = set(topics) - g.offset_topics
            gone = g.offset_topics - set(topics)
            g.offset_topics = set(topics)
            for tp in [tp for tp in g.zk_offsets if tp[0] in gone]:
                del g.zk_offsets[tp]
        for t in sorted(new):
            self._enqueue("children", "%s/%s/offsets/%s" % (_CONSUMERS, group, t))
            self._watch_topic(t)

    def _on_offset_partitions(self, group: str, topic: str, children: Optional[List[str]]) -> None:
        parts = {int(c) for c in children or [] if c.isdigit()}
        with self.lock:
            g = self.groups.get(group)
            if g is None or topic not in g.offset_topics:
                return
            known = {p for t, p in g.zk_offsets if t == topic}
            for p in known - parts:
                g.zk_offsets.pop((topic, p), None)
        for p in sorted(parts - known):
            self._enqueue("data", "%s/%s/offsets/%s/%d" % (_CONSUMERS, group, topic, p))

    def _on_offset(self, group: str, tp: TP, path: str, data: Optional[bytes]) -> None:
        value: Optional[int] = None
        if data is not None:
            try:
                value = int(data.decode("ascii").strip())
            except (UnicodeDecodeError, ValueError):
                log.warning("lag exporter: %s is not an offset: %r", path, data[:40])
        with self.lock:
            g = self.groups.get(group)
            if g is None:
                return
            if value is None:
                g.zk_offsets.pop(tp, None)
            else:
                g.zk_offsets[tp] = value

    def _on_owners(self, group: str, topic: str, path: str, children: Optional[List[str]]) -> None:
        owners: Dict[TP, str] = {}
        for c in children or []:
            if c.isdigit():
                data = self._data(path + "/" + c, watch=False)
                if data is not None:
                    owners[(topic, int(c))] = data.decode("utf-8", "replace")
        with self.lock:
            g = self.groups.get(group)
            if g is None:
                return
            for tp in [tp for tp in g.owners if tp[0] == topic]:
                del g.owners[tp]
            g.owners.update(owners)
        self._watch_topic(topic)

    def _on_members(self, group: str, children: Optional[List[str]]) -> None:
        ids = set(children or [])
        modes: Dict[str, Tuple[Optional[str], Optional[str], Optional[str]]] = {}
        registrations: Dict[str, Tuple[Any, str]] = {}
        for cid in ids:
            reg_path = "%s/%s/ids/%s" % (_CONSUMERS, group, cid)
            reg = self._data(reg_path, watch=False)
            if reg is not None:
                try:
                    r = decode_consumer_registration(reg, reg_path)
                    registrations[cid] = (r.subscription, r.pattern)
                except ZnodeFormatError as e:
                    log.warning("lag exporter: %s", e)
            path = "%s/%s/zkconsumer/members/%s" % (_CONSUMERS, group, cid)
            data = self._data(path, watch=False)
            if data is None:
                modes[cid] = (None, None, None)
                continue
            try:
                info = decode_member_info(data, path)
                modes[cid] = (info.mode, info.host, info.client_id)
            except ZnodeFormatError as e:
                log.warning("lag exporter: %s", e)
                modes[cid] = (None, None, None)
        with self.lock:
            g = self.groups.get(group)
            if g is not None:
                g.members, g.modes, g.registrations = ids, modes, registrations
        self._resolve_subscriptions(group)

    def _resolve_subscriptions(self, group: str) -> None:
        """The topics the group's live members subscribe to (a wildcard against /brokers/topics, as the members
        evaluate it), each of them watched for its partition count."""
        with self.lock:
            g = self.groups.get(group)
            if g is None:
                return
            registrations, all_topics = dict(g.registrations), self.all_topics
        if all_topics is None and any(is_wildcard(sub, pattern) for sub, pattern in registrations.values()):
            # its answer resolves the wildcard groups again
            self._enqueue("children", _TOPICS)
        try:
            subscribed = set(consumers_per_topic(registrations, all_topics or []))
        except RebalanceError as e:
            # registrations that contradict each other: the members say so too
            log.warning("lag exporter: the subscriptions of group %s: %s", group, e)
            subscribed = set()
        with self.lock:
            g = self.groups.get(group)
            if g is None:
                return
            g.subscribed = subscribed
        for t in sorted(subscribed):
            self._watch_topic(t)

    def _on_all_topics(self, topics: List[str]) -> None:
        with self.lock:
            self.all_topics = sorted(topics)
            wildcard = [name for name, g in self.groups.items()
                        if any(is_wildcard(sub, pattern) for sub, pattern in g.registrations.values())]
        for name in wildcard:
            self._resolve_subscriptions(name)

    def _on_phase(self, group: str, path: str, data: Optional[bytes]) -> None:
        phase = None
        if data is not None:
            try:
                obj = json.loads(data.decode("utf-8"))
                phase = obj.get("phase") if isinstance(obj, dict) and isinstance(obj.get("phase"), str) else None
            except (UnicodeDecodeError, ValueError, RecursionError):
                log.warning("lag exporter: unreadable phase record %s", path)
        with self.lock:
            g = self.groups.get(group)
            if g is not None:
                g.phase = phase

    def _watch_topic(self, topic: str) -> None:
        with self.lock:
            if topic in self.partition_counts:
                return
            self.partition_counts[topic] = 0
        self._enqueue("data", "/brokers/topics/" + topic)

    def _on_topic_partitions(self, topic: str, data: Optional[bytes]) -> None:
        count = 0
        if data is not None:
            try:
                obj = json.loads(data.decode("utf-8"))
                count = len(obj.get("partitions") or {}) if isinstance(obj, dict) else 0
            except (UnicodeDecodeError, ValueError, RecursionError, AttributeError):
                log.warning("lag exporter: unreadable partition map /brokers/topics/%s", topic)
        with self.lock:
            self.partition_counts[topic] = count

    # -- Kafka: a refresh every interval_s -------------------------------------------------------------------

    def _clients(self) -> Tuple[Any, Any]:
        if self._kafka is None:
            from kafka import KafkaConsumer
            from ..kafka.metadata import admin_client
            from ..core.kafka_security import PLAINTEXT
            security = self.security or PLAINTEXT
            consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, client_id="zkconsumer-exporter",
                                     group_id=None, enable_auto_commit=False, **security.client_kwargs())
            self._kafka = (consumer, admin_client(self.bootstrap_servers, client_id="zkconsumer-exporter",
                                                  security=security))
        return self._kafka

    def _refresh_loop(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.interval_s)

    def refresh(self) -> None:
        """One Kafka pass: log ranges, Kafka offsets of the groups that use Kafka, split brain, expiries."""
        t0 = time.monotonic()
        try:
            self._refresh()
            self.last_refresh_error = None
            self.last_refresh_ok = self.wall_clock()
        except Exception as e:  # noqa: BLE001  (an unreachable broker: the next refresh tries again)
            self.refresh_errors += 1
            self.last_refresh_error = str(e)
            log.warning("lag exporter: the Kafka refresh failed (next in %.0f s): %s", self.interval_s, e)
            self._close_kafka()
        finally:
            self.refreshes += 1
            self.refresh_seconds += time.monotonic() - t0
            self._refreshed.set()

    def _refresh(self) -> None:
        from kafka import TopicPartition
        consumer, admin = self._clients()
        with self.lock:
            snapshot = {name: (set(g.zk_offsets) | set(g.owners), store_of(g.phase, [m[0] for m in g.modes.values()]),
                               bool(g.members)) for name, g in self.groups.items()}
            counts = dict(self.partition_counts)
        # every partition of the groups' topics as /brokers/topics has them: offsets left behind for a topic that
        # was deleted (or a partition it no longer has) get no log range, and never make Kafka fail the pass
        tps = set()
        for parts, _, _ in snapshot.values():
            tps |= {(t, p) for t in {t for t, _ in parts} for p in range(counts.get(t, 0))}
        tplist = [TopicPartition(t, p) for t, p in sorted(tps)]
        start = consumer.beginning_offsets(tplist) if tplist else {}
        end = consumer.end_offsets(tplist) if tplist else {}
        kafka_offsets = self._kafka_offsets(admin, [n for n, (_, store, _) in snapshot.items() if store != "zookeeper"])
        split = self._split_brain(admin, [n for n, (_, _, live) in snapshot.items() if live])
        expiries = self._expiries({n for n, (_, store, live) in snapshot.items()
                                   if store == "kafka" and not live and kafka_offsets.get(n)})
        with self.lock:
            self.log_start = {(tp.topic, tp.partition): o for tp, o in start.items() if o is not None}
            self.log_end = {(tp.topic, tp.partition): o for tp, o in end.items() if o is not None}
            for name, g in self.groups.items():
                g.kafka_offsets = kafka_offsets.get(name, {})
                g.split_brain = name in split
                if expiries is not None:
                    g.expires_ms = expiries.get(name)

    @staticmethod
    def _kafka_offsets(admin: Any, groups: List[str]) -> Dict[str, Dict[TP, int]]:
        """The groups' Kafka offsets: one OffsetFetch per coordinator for all of them (v8, KIP-709); group by group
        when that fails (an older broker, or one group's error)."""
        def parse(got: Dict[Any, Any]) -> Dict[TP, int]:
            return {(tp.topic, tp.partition): meta.offset for tp, meta in got.items()
                    if meta.offset is not None and meta.offset >= 0}
        if not groups:
            return {}
        try:
            return {g: parse(offs) for g, offs in admin.list_group_offsets({g: None for g in groups}).items()}
        except Exception as e:  # noqa: BLE001
            log.debug("lag exporter: batched OffsetFetch failed (%r); asking group by group", e)
        out = {}
        for g in groups:
            try:
                out[g] = parse(admin.list_group_offsets({g: None}).get(g, {}))
            except Exception as e:  # noqa: BLE001
                log.warning("lag exporter: the Kafka offsets of %s: %s", g, e)
        return out

    @staticmethod
    def _split_brain(admin: Any, live: List[str]) -> Set[str]:
        """Groups with live ZooKeeper members and an active broker-side group of the same id (ListGroups of the
        non-empty states, then DescribeGroups of those only: members, not Empty/Dead)."""
        if not live:
            return set()
        # kafka-python's GroupState member names: its value_for() maps "CompletingRebalance" to no member
        active = ["STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "ASSIGNING", "RECONCILING"]
        listed = {d.get("group_id") for d in admin.list_groups(states_filter=active)}
        both = sorted(set(live) & listed)
        if not both:
            return set()
        out = set()
        for name, d in admin.describe_groups(both).items():
            if d.get("members") and d.get("group_state") not in ("Empty", "Dead"):
                out.add(name)
        return out

    def _expiries(self, groups: Set[str]) -> Optional[Dict[str, int]]:
        """{group: epoch ms when its first Kafka offset expires} of the stopped groups in the Kafka phase that have
        Kafka offsets (one pass over each partition of __consumer_offsets that holds one of them), every
        expiry_interval_s (None between reads, and when the read failed: the last figures stay)."""
        now = self.clock()
        if self.expiry_interval_s <= 0 or now < self._next_expiry:
            return None
        self._next_expiry = now + self.expiry_interval_s
        from ..offsets.expiry import offsets_retention_ms, read_commit_logs
        out: Dict[str, int] = {}
        if not groups:
            return out
        retention = offsets_retention_ms(self.bootstrap_servers, security=self.security)
        try:
            logs = read_commit_logs(self.bootstrap_servers, groups, security=self.security)
        except ZkConsumerError as e:
            log.warning("lag exporter: the commit times of %d group(s): %s", len(groups), e)
            return None
        for g, commits in logs.items():
            times = [c.committed_ms for c in commits.values() if not c.removed and c.committed_ms is not None]
            if times:
                out[g] = min(times) + retention
        return out


class LagCollector:
    """A prometheus_client collector rendering a :class:`LagCache` (nothing is read at scrape time)."""

    def __init__(self, cache: LagCache, cluster_name: str) -> None:
        self.cache = cache
        self.cluster_name = cluster_name

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        from .group_describe import host_of_consumer_id
        c, cn = self.cache, self.cluster_name
        part_labels = ["cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id"]
        offset = GaugeMetricFamily("kafka_consumergroup_group_offset", "The committed offset of the group for this "
                                   "partition (read where the group's phase says it commits)", labels=part_labels)
        lag = GaugeMetricFamily("kafka_consumergroup_group_lag", "The log end offset minus the group's committed "
                                "offset", labels=part_labels)
        max_lag = GaugeMetricFamily("kafka_consumergroup_group_max_lag", "The largest lag of the group",
                                    labels=["cluster_name", "group", "is_simple_consumer"])
        sum_lag = GaugeMetricFamily("kafka_consumergroup_group_sum_lag", "The sum of the group's lags",
                                    labels=["cluster_name", "group"])
        topic_sum = GaugeMetricFamily("kafka_consumergroup_group_topic_sum_lag", "The sum of the group's lags per "
                                      "topic", labels=["cluster_name", "group", "topic"])
        latest = GaugeMetricFamily("kafka_partition_latest_offset", "The log end offset of the partition",
                                   labels=["cluster_name", "topic", "partition"])
        earliest = GaugeMetricFamily("kafka_partition_earliest_offset", "The log start offset of the partition",
                                     labels=["cluster_name", "topic", "partition"])
        store_m = GaugeMetricFamily("zkconsumer_group_offsets_store", "Where the group's offsets are read "
                                    "(zookeeper, dual = the greater of both, kafka): 1",
                                    labels=["cluster_name", "group", "store"])
        phase_m = GaugeMetricFamily("zkconsumer_group_phase", "The migration phase zkmigrate recorded for the "
                                    "group: 1", labels=["cluster_name", "group", "phase"])
        members_m = GaugeMetricFamily("zkconsumer_group_members", "Live members (children of /consumers/G/ids)",
                                      labels=["cluster_name", "group"])
        parts_m = GaugeMetricFamily("zkconsumer_group_partitions", "Partitions of the topics the group has "
                                    "offsets or owners for", labels=["cluster_name", "group"])
        unowned_m = GaugeMetricFamily("zkconsumer_group_unowned_partitions", "Partitions of the topics the live "
                                      "members subscribe to that have no owner node", labels=["cluster_name", "group"])
        split_m = GaugeMetricFamily("zkconsumer_group_split_brain", "1 while the group has live ZooKeeper members "
                                    "and an active broker-side group of the same id", labels=["cluster_name", "group"])
        expiry_m = GaugeMetricFamily("zkconsumer_group_offsets_expire_timestamp_seconds", "When the first of the "
                                     "group's Kafka offsets expires on the broker (groups that use Kafka and have "
                                     "no live member)", labels=["cluster_name", "group"])
        with c.lock:
            log_end, log_start = dict(c.log_end), dict(c.log_start)
            counts = dict(c.partition_counts)
            groups = {n: (dict(g.zk_offsets), dict(g.kafka_offsets), dict(g.owners), set(g.members), dict(g.modes),
                          g.phase, g.split_brain, g.expires_ms, set(g.subscribed)) for n, g in c.groups.items()}
        seen_tps: Set[TP] = set()
        for name, (zoffs, koffs, owners, members, modes, phase, split, expires, subscribed) in sorted(groups.items()):
            store = store_of(phase, [m[0] for m in modes.values()])
            store_m.add_metric([cn, name, store], 1.0)
            if phase:
                phase_m.add_metric([cn, name, phase], 1.0)
            members_m.add_metric([cn, name], len(members))
            topics = {t for t, _ in zoffs} | {t for t, _ in owners} | {t for t, _ in koffs}
            partitions = {(t, p) for t in topics for p in range(counts.get(t, 0))} | set(zoffs) | set(owners)
            parts_m.add_metric([cn, name], len(partitions))
            # a topic the group keeps old offsets for (unsubscribed, deleted) is nobody's to own
            wanted = {(t, p) for t in subscribed for p in range(counts.get(t, 0))} if members else set()
            unowned_m.add_metric([cn, name], len(wanted - set(owners)))
            split_m.add_metric([cn, name], 1.0 if split else 0.0)
            if expires is not None:
                expiry_m.add_metric([cn, name], expires / 1000.0)
            lags: List[int] = []
            per_topic: Dict[str, int] = {}
            for tp in sorted(partitions):
                z, k = zoffs.get(tp), koffs.get(tp)
                cur = z if store == "zookeeper" else k if store == "kafka" else \
                    max((v for v in (z, k) if v is not None), default=None)
                if cur is None:
                    continue
                owner = owners.get(tp)
                cid = owner.rsplit("-", 1)[0] if owner and "-" in owner else (owner or "")
                mode = modes.get(cid, (None, None, None))
                host = mode[1] or (host_of_consumer_id(name, cid) if cid else None) or ""
                labels = [cn, name, tp[0], str(tp[1]), host, cid, mode[2] or ""]
                offset.add_metric(labels, cur)
                end = log_end.get(tp)
                if end is not None:
                    value = max(0, end - cur)
                    lag.add_metric(labels, value)
                    lags.append(value)
                    per_topic[tp[0]] = per_topic.get(tp[0], 0) + value
                seen_tps.add(tp)
            if lags:
                max_lag.add_metric([cn, name, "false" if members else "true"], max(lags))
                sum_lag.add_metric([cn, name], sum(lags))
                for t, v in sorted(per_topic.items()):
                    topic_sum.add_metric([cn, name, t], v)
        for tp in sorted(set(log_end) | set(log_start)):
            if tp in log_end:
                latest.add_metric([cn, tp[0], str(tp[1])], log_end[tp])
            if tp in log_start:
                earliest.add_metric([cn, tp[0], str(tp[1])], log_start[tp])
        yield from (offset, lag, max_lag, sum_lag, topic_sum, latest, earliest, store_m, phase_m, members_m, parts_m,
                    unowned_m, split_m, expiry_m)
        yield GaugeMetricFamily("zkconsumer_exporter_groups", "Groups the exporter watches", value=len(groups))
        yield CounterMetricFamily("zkconsumer_exporter_zookeeper_reads", "ZooKeeper reads the cache made "
                                  "(each sets a watch; a node is read again only when it changes)", value=c.zk_reads)
        yield CounterMetricFamily("zkconsumer_exporter_refreshes", "Kafka refreshes (log ends, Kafka offsets)",
                                  value=c.refreshes)
        yield CounterMetricFamily("zkconsumer_exporter_refresh_seconds", "Time spent in Kafka refreshes",
                                  value=c.refresh_seconds)
        yield CounterMetricFamily("zkconsumer_exporter_refresh_errors", "Kafka refreshes that failed",
                                  value=c.refresh_errors)
        if c.last_refresh_ok is not None:
            yield GaugeMetricFamily("zkconsumer_exporter_last_refresh_timestamp_seconds", "When the last Kafka "
                                    "refresh succeeded: the log end offsets, and so every lag, are that old",
                                    value=c.last_refresh_ok)
