"""Fencing the application's commits (:func:`~zkconsumer.spark.commit_batch`) by the owner nodes of the Spark
source's group member, which lives in another process (the streaming source's) with its own ZooKeeper session.

:class:`MemberFence` is the member's own :class:`~zkconsumer.offsets.OwnershipFence` seen from outside: a commit for a
partition is refused when its owner node is gone or belongs to another ZooKeeper session than the member's when the
fence was made (another member claimed it since), and the ZooKeeper store pairs each write with ``check(owner, 0)``
in the same multi-op, so an owner node deleted between that check and the write refuses it too.
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

from kazoo.exceptions import NoNodeError

from ..layout import paths
from ..offsets import OwnershipFence

TP = Tuple[str, int]


class MemberFence(OwnershipFence):
    """The ownership of one member (its owner nodes, created by its ZooKeeper session ``member_session``)."""

    def session_matches(self, zk) -> bool:
        """The committing client's session is never the member's: ownership is proven by the nodes alone."""
        return True


def owner_nodes(zk, group: str, partitions: Iterable[TP]) -> Dict[TP, Tuple[str, int]]:
    """``{(t, p): (owner consumer id, ZooKeeper session of the owner node)}`` for the owned ones of ``partitions``,
    read in one pipelined round."""
    pending = {tp: zk.get_async(paths.partition_owner_path(group, tp[0], tp[1])) for tp in set(partitions)}
    out = {}
    for tp, res in pending.items():
        try:
            data, stat = res.get()
        except NoNodeError:
            continue
        owner = (data or b"").decode("utf-8", "replace")
        consumer, sep, n = owner.rpartition("-")
        out[tp] = (consumer if sep and n.isdigit() else owner, stat.ephemeralOwner)
    return out


def member_fence(group: str, session: int, partitions: Iterable[TP]) -> MemberFence:
    return MemberFence(session, {tp: paths.partition_owner_path(group, tp[0], tp[1]) for tp in partitions})
