"""The group member as the engine's threads see it: what the rebalancer drives and shutdown releases.

:class:`Member` is the seam between the connector (the library API, its streams and fetchers) and the code that
changes ownership (:mod:`.rebalancer`, :mod:`.shutdown`), declared the way kafka-python's ``BaseCoordinator``
declares what its subclasses implement. :class:`~.connector.ZookeeperConsumerConnector` implements it; a member
that coordinates and fetches nothing (the Spark driver's ``zkconsumer.spark.member.GroupMember``) overrides the
delivery pair and has :class:`~.fetcher.NoFetchers`.

Threads: :meth:`Member.stop_delivery` is called by the rebalancer with its ownership lock held (and by shutdown);
:meth:`Member.start_delivery`, :meth:`Member.listener_call` and :meth:`Member.commit_partitions` without it
(a listener hook may wait for application threads that commit); :meth:`Member.recheck_join_guards` from the
rebalancer's thread before it registers again.
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Set, Tuple

if TYPE_CHECKING:
    from ..core.config import ConsumerConfig
    from ..core.layout.codecs import ConsumerRegistration
    from ..core.layout.member_info import MemberInfo
    from ..offsets import CommitResult, OffsetStore
    from .connector import RebalanceListener
    from .fetcher import Fetchers
    from .lease import SessionLease
    from .partition_info import PartitionTopicInfo
    from .rebalancer import Rebalancer

__all__ = ["Member"]

TP = Tuple[str, int]


class Member(abc.ABC):
    """A member of a ZooKeeper-coordinated group, for its rebalancer and its shutdown.

    Attributes (set when the member is made, ``registration`` when it subscribes, ``rebalancer`` and ``fetchers``
    when it starts): ``config``, ``group``, ``consumer_id``, ``zk`` (its kazoo client), ``registration`` (what it
    registers in ``/consumers/[g]/ids``), ``member_info``, ``listener`` (the application's
    :class:`~.connector.RebalanceListener`), ``lease`` (:class:`~.lease.SessionLease`), ``offset_store``,
    ``fetchers`` (:class:`~.fetcher.Fetchers`) and ``rebalancer``.
    """

    config: ConsumerConfig
    group: str
    consumer_id: str
    zk: Any
    registration: Optional[ConsumerRegistration]
    member_info: MemberInfo
    listener: RebalanceListener
    lease: SessionLease
    offset_store: OffsetStore
    fetchers: Fetchers
    rebalancer: Optional[Rebalancer]

    @abc.abstractmethod
    def stop_delivery(self, timeout: Optional[float] = None) -> None:
        """Nothing fetched so far is handed out any more: a new generation, the streams fenced, the fetchers
        stopped (within *timeout* seconds when given), the queues cleared."""

    @abc.abstractmethod
    def start_delivery(self, parts: Dict[TP, PartitionTopicInfo]) -> None:
        """Deliver *parts* (the member's partitions after a rebalance) under the current generation, each from its
        consumed position."""

    @abc.abstractmethod
    def commit_partitions(self, partitions: Iterable[TP], raise_errors: bool = False,
                          until: Optional[float] = None) -> Optional[CommitResult]:
        """Commit the consumed positions of those of *partitions* the member owns; None when nothing was written
        (nothing to commit, or the session lease did not come back). *until*: shutdown's own commit, which waits
        for a stale lease to be renewed until that ``time.monotonic()`` though shutdown has begun."""

    @abc.abstractmethod
    def listener_call(self, name: str, partitions: Set[TP]) -> None:
        """Call the listener's hook *name* (``on_revoke``, ``on_assign`` or ``on_lost``); an exception it raises is
        logged, never raised."""

    @abc.abstractmethod
    def recheck_join_guards(self) -> None:
        """Before registering again after a session expiry: the checks that may have changed meanwhile (a
        broker-coordinated group of the same id): raises :class:`~zkconsumer.errors.GroupConflictError` or
        :class:`~zkconsumer.errors.SplitBrainUnknownError` to refuse."""
