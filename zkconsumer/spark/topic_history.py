"""What a streaming query run has seen of its topics in ZooKeeper (``/brokers/topics/<t>``), to tell the data-loss
cases of Spark's Kafka source apart (``KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets``):

* a partition **added during the run** (its topic had fewer partitions when the run started, or the topic did not
  exist then: a new topic matched by ``subscribePattern``, or a topic deleted and created again) is read from its
  first offset; if that is not 0, records were deleted before the query could read them ("Added partition ...
  starts from X instead of 0");
* a topic whose node is **gone** was deleted: its partitions' unread records are lost ("... are gone");
* a topic whose node is **a new one** (another ``czxid``) was deleted and recreated: a log end behind the query's
  offset is the new topic's, read from its start, not a truncated log.

Partitions only grow in Kafka, so "added during the run" is: ``p >=`` the topic's partition count at the start, or a
topic node created (``czxid``) after it.
"""
from __future__ import annotations

import logging
from typing import Dict, Iterable, Optional, Set, Tuple

from kazoo.exceptions import NoNodeError

from ..layout import codecs, paths

log = logging.getLogger("zkconsumer.spark")

TP = Tuple[str, int]


def topic_nodes(zk, topics: Iterable[str]) -> Dict[str, Optional[Tuple[int, int]]]:
    """``{topic: (czxid, partition count) or None when the topic has no node}``, read in one pipelined round."""
    pending = {t: zk.get_async(paths.topic_path(t)) for t in sorted(set(topics))}
    out: Dict[str, Optional[Tuple[int, int]]] = {}
    for t, res in pending.items():
        try:
            data, stat = res.get()
        except NoNodeError:
            out[t] = None
            continue
        try:
            n = len(codecs.decode_topic_assignment(data, paths.topic_path(t)).partition_ids())
        except Exception as e:
            # a node being written; counted as no partitions known
            log.debug("cannot read %s: %s", paths.topic_path(t), e)
            n = 0
        out[t] = (stat.czxid, n)
    return out


class TopicHistory:
    """Per query run (one streaming reader on the driver): the topics' nodes at the run's start and since."""

    def __init__(self) -> None:
        self.at_start: Optional[Dict[str, Optional[Tuple[int, int]]]] = None
        # topic -> czxid when first read by this run
        self.created: Dict[str, Optional[int]] = {}

    def start_run(self, zk, topics: Iterable[str]) -> None:
        """Remember the topics as they are when the run plans its first batch."""
        self.at_start = topic_nodes(zk, topics)
        for t, node in self.at_start.items():
            self.created.setdefault(t, node[0] if node else None)

    def added_during_run(self, zk, tps: Iterable[TP]) -> Set[TP]:
        """The partitions of ``tps`` that did not exist when the run started."""
        tps = set(tps)
        if not tps or self.at_start is None:
            return set()
        now = topic_nodes(zk, {t for t, _ in tps})
        out = set()
        for t, p in tps:
            before, node = self.at_start.get(t), now.get(t)
            if before is None or (node is not None and node[0] != before[0]) or p >= before[1]:
                out.add((t, p))
        return out

    def missing(self, zk, topics: Iterable[str]) -> Set[str]:
        """The topics of ``topics`` that have no node (deleted)."""
        return {t for t, node in topic_nodes(zk, topics).items() if node is None}

    def note(self, zk, topics: Iterable[str]) -> None:
        """Remember the node (``czxid``) of topics read for the first time."""
        new = set(topics) - set(self.created)
        if new:
            for t, node in topic_nodes(zk, new).items():
                self.created[t] = node[0] if node else None

    def recreated(self, zk, topics: Iterable[str]) -> Set[str]:
        """Topics whose node is another than the one noted (deleted and created again since); noted anew."""
        out = set()
        for t, node in topic_nodes(zk, topics).items():
            if node is not None and self.created.get(t) is not None and node[0] != self.created[t]:
                out.add(t)
                self.created[t] = node[0]
        return out
