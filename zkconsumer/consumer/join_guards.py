"""The checks a member makes before it registers in ``/consumers/[g]/ids`` (and, for the split-brain guard, before
every re-registration after a session expiry). Each refuses with :class:`~zkconsumer.errors.GroupConflictError`
(or ``SplitBrainUnknownError``) and nothing written:

* the cutover fence: ``zkmigrate cutover`` handed the group to broker-coordinated consumers
  (``cutover.fence``);
* split brain: the broker-side group of the same id is active, so both protocols would hand out the same
  partitions (``split.brain.check``, ``split.brain.check.timeout.ms``);
* stale offsets: a member on ZooKeeper storage where Kafka holds newer offsets, or beside Kafka-only members
  (``offsets.storage.switch.check``).

Each takes what it reads explicitly: the member's kazoo client, its config (the group and the checks' settings),
and where needed its consumer id, its registration and ``brokers`` (a function returning the bootstrap servers: the
ones given, else those registered in ZooKeeper).
"""
import dataclasses
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Hashable, List, Optional, Tuple

from kazoo.exceptions import NoAuthError, NoNodeError

from ..errors import ConfigError, GroupConflictError, ZkConsumerError, ZnodeFormatError
from ..core.layout import codecs, paths
from ..zookeeper.retry import retry_until_connected
from .registration import live_members, member_infos
from .single_flight import SingleFlight

if TYPE_CHECKING:
    from ..core.config import ConsumerConfig
    from ..core.layout.codecs import ConsumerRegistration
    from ..kafka.broker_group import BrokerGroup

__all__ = ["preflight_checks", "refuse_split_brain", "refuse_cut_over_group", "refuse_stale_zookeeper_offsets",
           "kafka_ahead"]

log = logging.getLogger(__name__)

#: the bootstrap servers to ask, read when needed
Brokers = Callable[[], Any]
_Offsets = Dict[Tuple[str, int], int]


def _group_of(config: "ConsumerConfig") -> str:
    """The member's group id (the connector refuses a config without one)."""
    if not config.group_id:
        raise ConfigError("group.id", config.group_id, "a group id (required)")
    return config.group_id


def preflight_checks(zk: Any, config: "ConsumerConfig", consumer_id: str,
                     registration: "Optional[ConsumerRegistration]", brokers: Brokers) -> None:
    """The checks before the first registration, side by side (each waits on its own broker round trips; in a
    row they made a joining member's start ~2x slower): the storage switch check in a helper thread, the
    split-brain guard here. A refusal of the guard is raised at once (the read-only storage check is left to
    finish on its own: with an unreachable broker it could take its whole timeout); otherwise the storage
    check's refusal, if any. A check that loses its connection to ZooKeeper is made again once the connection is
    back (within ``zookeeper.connection.timeout.ms``; a mass start loads the ensemble)."""
    box: Dict[str, BaseException] = {}

    def again(what: str, check: Callable[[], None]) -> None:
        retry_until_connected(zk, check, config.zookeeper_connection_timeout_ms, "%s: %s" % (consumer_id, what))

    def storage_check() -> None:
        try:
            again("the storage check", lambda: refuse_stale_zookeeper_offsets(zk, config, consumer_id, registration,
                                                                             brokers))
        except BaseException as e:  # handed to the starting thread
            box["error"] = e
    t = threading.Thread(target=storage_check, daemon=True, name="%s-storage-check" % consumer_id)
    t.start()
    again("the split-brain check", lambda: refuse_split_brain(zk, config, brokers))
    t.join()
    if "error" in box:
        raise box["error"]


#: the longest one request of the split-brain check waits for its answer
CHECK_REQUEST_TIMEOUT_MS = 10000
#: the longest the split-brain check's client bootstraps (room for a loaded machine, but not the whole
#: split.brain.check.timeout.ms: kafka-python's bootstrap retries a refused SASL login until its timeout, and only
#: its failure lets the member find that the credentials, not an outage, are at fault: refused at once)
CHECK_BOOTSTRAP_TIMEOUT_MS = 15000


def _servers_text(servers: Any) -> str:
    return servers if isinstance(servers, str) else ",".join(servers)


class _BrokerGroupAsker:
    """Asks about the broker-side group of a ``(servers, group, security)`` key, on one kept connection."""

    def __init__(self, key: Hashable) -> None:
        from zkconsumer.kafka.broker_group import BrokerGroupClient
        parts: Tuple[Any, ...] = key  # type: ignore[assignment]
        self.group: str = parts[1]
        self.client = BrokerGroupClient(parts[0], parts[2])

    def ask(self, deadline: float) -> "BrokerGroup":
        # every request within the asking's deadline (at least 1 s from now): an answer after it reaches no caller,
        # and the callers waiting for the next asking wait for this one to end
        deadline = max(deadline, time.monotonic() + 1.0)
        left_ms = int((deadline - time.monotonic()) * 1000)
        return self.client.describe(self.group, min(left_ms, CHECK_BOOTSTRAP_TIMEOUT_MS),
                                    min(left_ms, CHECK_REQUEST_TIMEOUT_MS), deadline=deadline)

    def close(self) -> None:
        self.client.close()


#: the split-brain checks of this process: members of one group checking at the same time share one DescribeGroups
SPLIT_BRAIN_CHECKS: "SingleFlight[BrokerGroup]" = SingleFlight(_BrokerGroupAsker, name="split-brain-check")


@dataclasses.dataclass(frozen=True)
class _OffsetsKey:
    """What one OffsetFetch of the storage check depends on: the members of a group asking with equal ones share."""
    servers: str
    group: str
    security: Any
    backoff_ms: int
    socket_timeout_ms: int
    max_retries: int
    client_id: str
    partitions: FrozenSet[Tuple[str, int]]


class _KafkaOffsetsAsker:
    """Fetches a group's offsets in Kafka for the storage check, on one kept offset store."""

    def __init__(self, key: Hashable) -> None:
        from ..offsets.kafka import KafkaOffsetStore
        k: _OffsetsKey = key  # type: ignore[assignment]
        self.partitions = sorted(k.partitions)
        self.store = KafkaOffsetStore(k.servers, k.group, security=k.security)
        self.store.backoff_ms, self.store.socket_timeout_ms = k.backoff_ms, k.socket_timeout_ms
        self.store.max_retries, self.store.client_id = k.max_retries, k.client_id

    def ask(self, deadline: float) -> "_Offsets":
        return self.store.fetch(self.partitions)

    def close(self) -> None:
        self.store.close()


#: the storage checks of this process: members of one group asking at the same time share one OffsetFetch
STORAGE_CHECKS: "SingleFlight[_Offsets]" = SingleFlight(_KafkaOffsetsAsker, name="storage-check")


def _storage_check_wait_s(key: _OffsetsKey) -> float:
    """How long a storage check waits for a shared OffsetFetch: what the store's own timeouts allow it (the
    bootstrap, then per attempt a FindCoordinator and an OffsetFetch, each within
    ``offsets.channel.socket.timeout.ms``, and the backoffs between attempts), and 5 s more; an asking that hangs
    past it is left behind (:class:`SingleFlight`)."""
    attempts = 1 + key.max_retries
    return (key.socket_timeout_ms * (1 + 2 * attempts) + key.backoff_ms * key.max_retries) / 1000.0 + 5.0


def refuse_split_brain(zk: Any, config: "ConsumerConfig", brokers: Brokers,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> None:
    """Before registering (at start, and again before every re-registration after a session expiry): is the
    broker-side group of the same id active (members, not Empty/Dead)? Then both rebalance protocols would hand
    out the same partitions: GroupConflictError. A broker that does not answer, or has no coordinator yet
    (COORDINATOR_NOT_AVAILABLE while ``__consumer_offsets`` is created), is asked again until
    ``split.brain.check.timeout.ms``; after that the answer is unknown: SplitBrainUnknownError with
    ``split.brain.check=refuse`` (the default), a warning with ``warn``; ``off`` never asks.

    The members of one group in this process that check at the same time share one asking
    (:data:`SPLIT_BRAIN_CHECKS`), whose answer was asked for after each of them began to wait; the connection it
    opens is kept between attempts, so a slow bootstrap is not thrown away by the next attempt."""
    from ..errors import KafkaSecurityError, SplitBrainUnknownError
    refuse_cut_over_group(zk, config)
    group = _group_of(config)
    mode = config.split_brain_check
    if mode == "off":
        return
    timeout = config.split_brain_check_timeout_ms / 1000.0
    deadline = clock() + timeout
    said = False
    while True:
        why = None
        try:
            key = (_servers_text(brokers()), group, config.kafka_security)
            bg = SPLIT_BRAIN_CHECKS.ask(key, time.monotonic() + max(1.0, deadline - clock()),
                                        "the broker-side group %s" % group)
            if bg.error is None or bg.active:
                break
            why = "the broker answered %s for the group" % bg.error  # e.g. COORDINATOR_LOAD_IN_PROGRESS
        except KafkaSecurityError:
            raise  # a refused TLS handshake or SASL login does not heal by asking again
        except ZkConsumerError as e:
            why = str(e)
        if not said and clock() < deadline:
            said = True
            log.warning("split-brain check for group %s: %s; asking again for up to %.0f s", group, why,
                        max(0.0, deadline - clock()))
        if clock() >= deadline:
            if mode == "warn":
                log.warning("could not find out whether group %s is active as a broker-coordinated group "
                            "within %.0f s (%s); joining anyway (split.brain.check=warn)", group, timeout, why)
                return
            raise SplitBrainUnknownError(
                "cannot tell whether group %s is active as a broker-coordinated group (%s; asked for %.0f s, "
                "split.brain.check.timeout.ms): not joining, since both protocols would consume the same "
                "partitions. Set split.brain.check=warn to join when the broker cannot be asked"
                % (group, why, timeout))
        sleep(0.5)
    if bg.active:
        raise GroupConflictError(
            "group %s is already active as a broker-coordinated group (%s, state %s, %d member(s), e.g. %s): a "
            "ZooKeeper-coordinated member would consume the same partitions (split brain); stop those "
            "consumers or use another group.id" % (group, bg.describe_protocol(), bg.state, len(bg.members),
                                                   bg.members[0]["member_id"]))


def refuse_stale_zookeeper_offsets(zk: Any, config: "ConsumerConfig", consumer_id: str,
                                   registration: "Optional[ConsumerRegistration]", brokers: Brokers) -> None:
    """A member on ZooKeeper storage must not start where Kafka holds newer offsets for the group: that is a
    direct kafka -> zookeeper switch, resuming from frozen ZooKeeper offsets (reprocessing everything since the
    Kafka-only phase began) - also the unsafe mix of a ZooKeeper-only member beside Kafka-only ones. The safe
    way back is the dual phase first (``zkmigrate plan --to zookeeper``); ``offsets.storage.switch.check=off``
    skips this. One OffsetFetch at start; a broker that cannot be asked only logs a warning."""
    if config.offsets_storage != "zookeeper" or config.offsets_storage_switch_check == "off":
        return
    group = _group_of(config)
    # quiet: a malformed registration is reported (once, as an error) by the rebalancer's group read
    live = set(live_members(zk, group, quiet=True)) - {consumer_id}
    modes = {m: i.mode for m, i in member_infos(zk, group).items() if m in live}
    kafka_only = sorted(m for m, mode in modes.items() if mode == "kafka")
    if kafka_only:
        raise GroupConflictError(
            "group %s has members on Kafka-only offset storage (%s): a member on offsets.storage=zookeeper "
            "beside them resumes from stale offsets at every hand-over. Go back through the dual phase "
            "('zkmigrate plan --to zookeeper'), or set offsets.storage.switch.check=off"
            % (group, ", ".join(kafka_only[:3])))
    if "dual" in modes.values():
        return  # the rollback's second phase: dual members keep ZooKeeper up to date
    for attempt in (0, 1):
        ahead, zoffs, koffs = kafka_ahead(zk, config, registration, brokers)
        if not ahead:
            return
        if attempt == 0:
            time.sleep(2.0)  # a dual commit in flight writes Kafka a moment before ZooKeeper
    t, p = ahead[0]
    raise GroupConflictError(
        "group %s keeps newer offsets in Kafka than in ZooKeeper for %d partition(s) (e.g. %s-%d: Kafka %d, "
        "ZooKeeper %s): starting with offsets.storage=zookeeper would resume from the older ZooKeeper "
        "offsets. Go back through the dual phase (offsets.storage=kafka, dual.commit.enabled=true; see "
        "'zkmigrate plan --to zookeeper'), copy them ('zkmigrate rollback --execute'), or set "
        "offsets.storage.switch.check=off" % (group, len(ahead), t, p, koffs[(t, p)],
                                               zoffs.get((t, p), "none")))



def kafka_ahead(zk: Any, config: "ConsumerConfig", registration: "Optional[ConsumerRegistration]",
                brokers: Brokers) -> Tuple[List[Tuple[str, int]], _Offsets, _Offsets]:
    """``(partitions where Kafka is ahead of ZooKeeper, ZooKeeper offsets, Kafka offsets)``; nothing when Kafka
    cannot be asked (logged)."""
    from ..offsets import ZooKeeperOffsetStore
    group = _group_of(config)
    try:
        # the topics that count: those with offsets in ZooKeeper, and those this member subscribes to
        try:
            topics = set(zk.get_children(paths.group_offsets_path(group)))
        except NoNodeError:
            topics = set()
        if registration is not None and not registration.is_wildcard:
            topics |= set(registration.subscription)
        parts = sorted(_partitions_with_offsets_or_in_map(zk, group, topics))
        if not parts:
            return [], {}, {}
        # Kafka first: a group without offsets in Kafka (the usual case) costs no read of ZooKeeper's offsets.
        # Members of the group checking at the same time share one OffsetFetch (STORAGE_CHECKS)
        key = _OffsetsKey(_servers_text(brokers()), group, config.kafka_security, config.offsets_channel_backoff_ms,
                          config.offsets_channel_socket_timeout_ms, config.offsets_commit_max_retries,
                          config.client_id or group, frozenset(parts))
        koffs = STORAGE_CHECKS.ask(key, time.monotonic() + _storage_check_wait_s(key),
                                   "group %s's offsets in Kafka" % group)
        zoffs = ZooKeeperOffsetStore(zk, group, strict=False).fetch(sorted(koffs)) if koffs else {}
    except ZkConsumerError as e:
        log.warning("could not compare group %s's Kafka offsets with ZooKeeper's before starting on ZooKeeper "
                    "storage: %s", group, e)
        return [], {}, {}
    ahead = sorted(tp for tp, k in koffs.items() if zoffs.get(tp) is None or k > zoffs[tp])
    return ahead, zoffs, koffs


def _partitions_with_offsets_or_in_map(zk, group: str, topics) -> set:
    """``{(t, p)}`` of *topics*: the partitions of each one's map (``/brokers/topics/T``) and those with an offset
    node of *group* in ZooKeeper, read with all the calls in flight at once (an unreadable map counts as empty:
    the group read reports it)."""
    calls = [(t, zk.get_async(paths.topic_path(t)), zk.get_children_async(paths.topic_offsets_path(group, t)))
             for t in sorted(topics)]
    out = set()
    for t, topic_map, offset_nodes in calls:
        try:
            assignment = codecs.decode_topic_assignment(topic_map.get()[0], paths.topic_path(t))
            out |= {(t, p) for p in assignment.partition_ids()}
        except (NoNodeError, ZnodeFormatError):
            pass
        try:
            out |= {(t, int(p)) for p in offset_nodes.get() if p.isdigit()}
        except NoNodeError:
            pass
    return out


def refuse_cut_over_group(zk: Any, config: "ConsumerConfig") -> None:
    """The fence ``zkmigrate cutover`` leaves: a group handed to broker-coordinated consumers is not joined by a
    ZooKeeper member (an old deployment restarting) unless ``cutover.fence=ignore``. The record's ``fence`` field
    holds it (later records, e.g. a passing ``zkmigrate verify``, carry it over; only a rollback removes it); a
    record with phase ``cutover`` and no ``fence`` field (an older zkmigrate's) is fenced as well."""
    if config.cutover_fence == "ignore":
        return
    group = _group_of(config)
    path = paths.group_migration_path(group)
    try:
        data, _ = zk.get(path)
    except NoNodeError:  # no record: the normal case
        return
    except NoAuthError:
        raise GroupConflictError(
            "cannot read %s (ZooKeeper refused: no READ right on it), so whether group %s was cut over to "
            "broker-coordinated consumers is unknown: not joining. Give this identity READ on it, or set "
            "cutover.fence=ignore" % (path, group)) from None
    # any other error (ZooKeeper unreachable) is raised as it is: the start, or the re-registration, fails
    try:
        rec = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        log.warning("ignoring the unreadable migration record %s (no cutover fence): %s", path, e)
        return
    if not isinstance(rec, dict):
        return
    fence = rec.get("fence")
    if not isinstance(fence, dict):
        if rec.get("phase") != "cutover" or "fence" in rec:
            return
        fence = rec
    raise GroupConflictError(
        "group %s was cut over to broker-coordinated consumers (%s, %s): a ZooKeeper-coordinated member "
        "must not join it; after a deliberate rollback ('zkmigrate rollback --execute' clears the mark) "
        "start again, or set cutover.fence=ignore" % (group, fence.get("by"), fence.get("since")))
