"""The streaming source with ``assign``: the listed partitions, read as with Kafka's ``assign()``.

:class:`AssignedPartitions` stands in for the :class:`~zkconsumer.spark.member.GroupMember`: the partitions are fixed
by the option, so nothing is registered in ``/consumers/[g]/ids`` and no owner node is claimed (a member that
takes no part in the rebalance must not hold owner nodes: the group's members would wait for them forever). The
group's offsets are still its offsets: read when a partition is adopted, committed forward after Spark committed a
batch, except for partitions a live member of the group owns (it is consuming them; its commits win).
"""
from __future__ import annotations

import logging
from typing import Dict, Optional, Set, Tuple

from ..offsets import CommitResult
from . import keepalive
from .options import SourceOptions

log = logging.getLogger("zkconsumer.spark")

TP = Tuple[str, int]


class AssignedPartitions:
    """Duck-typed like GroupMember for the source: ``ownership``, ``wait_ownership``, ``offset_store``,
    ``commit_forward``, ``reset_offsets``, ``keep_alive``, ``zk``, ``consumer_id`` (None), ``shutdown``."""

    consumer_id: Optional[str] = None

    def __init__(self, opts: SourceOptions, bootstrap: Optional[str] = None):
        from .. import zk as zkmod
        from ..offsets import make_offset_store
        self.opts = opts
        self.config = opts.consumer_config
        self.group = opts.group
        self.zk = zkmod.connect(opts.zookeeper_connect, auth=opts.zk_auth())
        self._bootstrap = bootstrap
        self._keepalive: Optional[keepalive.OffsetKeepAlive] = None
        try:
            kafka = self.config.offsets_storage == "kafka"
            self.offset_store = make_offset_store(self.config, self.zk, strict=False,
                                                  bootstrap_servers=self._kafka_bootstrap() if kafka else None)
            self._check_partitions()
        except BaseException:
            zkmod.close(self.zk)
            raise

    def _kafka_bootstrap(self) -> str:
        if self._bootstrap is None:
            from ..zk import bootstrap_from_zk
            self._bootstrap = bootstrap_from_zk(self.zk, self.opts.zookeeper_connect, self.opts.kafka_security.protocol)
        return self._bootstrap

    def _existing(self) -> Set[TP]:
        from .topic_history import topic_nodes
        nodes = topic_nodes(self.zk, {t for t, _ in self.opts.assign or ()})
        out = set()
        for t, p in self.opts.assign or ():
            node = nodes.get(t)
            if node is not None and p < node[1]:
                out.add((t, p))
        return out

    def _check_partitions(self) -> None:
        from .cluster import partitions_to_read
        partitions_to_read(self.zk, self.opts)

    def ownership(self, stale_wait: float = 0.0):
        """(the assigned partitions that exist now, {tp: 0}, 1): fixed, never revoked."""
        owned = self._existing()
        return owned, {tp: 0 for tp in owned}, 1

    def wait_ownership(self, timeout: float = 0.0):
        return self.ownership()

    def _owned_by_members(self, tps) -> Dict[TP, str]:
        from .fence import owner_nodes
        return {tp: owner for tp, (owner, _s) in owner_nodes(self.zk, self.group, tps).items()}

    def commit_forward(self, offsets: Dict[TP, int]) -> CommitResult:
        """Forward-only commit, skipping partitions a live member of the group owns."""
        from .commit import forward_only
        busy = self._owned_by_members(offsets)
        for tp in sorted(busy):
            log.info("not committing %s-%d=%d: owned by %s, a member of group %s", tp[0], tp[1], offsets[tp],
                     busy[tp], self.group)
        result = forward_only(self.offset_store, {tp: o for tp, o in offsets.items() if tp not in busy})
        if self._keepalive is not None:
            self._keepalive.wrote(tp for tp in result.committed if tp not in result.unchanged)
        return result

    def reset_offsets(self, offsets: Dict[TP, int]) -> CommitResult:
        busy = self._owned_by_members(offsets)
        return self.offset_store.commit({tp: o for tp, o in offsets.items() if tp not in busy})

    def keep_alive(self, partitions):
        """As GroupMember.keep_alive, for the partitions no member of the group owns."""
        if self.config.offsets_storage != "kafka":
            return None
        if self._keepalive is None:
            self._keepalive = keepalive.for_config(self.config, self._kafka_bootstrap())
        due = self._keepalive.due(partitions)
        if not due:
            return None
        busy = self._owned_by_members(due)
        return self._keepalive.refresh(self.offset_store, [tp for tp in due if tp not in busy])

    def shutdown(self) -> None:
        from .. import zk as zkmod
        try:
            self.offset_store.close()
        finally:
            zkmod.close(self.zk)
