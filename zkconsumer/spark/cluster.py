"""Driver-side reads of the legacy cluster layout: topics, partitions, brokers, committed offsets."""
from __future__ import annotations

import logging
from typing import Dict, List, Tuple

from kazoo.exceptions import NoNodeError

from ..errors import ZnodeFormatError
from ..layout import codecs, paths
from ..topic_filter import is_internal_topic

log = logging.getLogger(__name__)


def resolve_topics(zk, opts) -> List[str]:
    if opts.pattern is None:
        return list(opts.topics)
    flt = opts.topic_filter()
    try:
        all_topics = zk.get_children(paths.broker_topics_path())
    except NoNodeError:
        all_topics = []
    excl = opts.consumer_config.exclude_internal_topics
    return sorted(t for t in all_topics if flt.is_topic_allowed(t, excl) and not (excl and is_internal_topic(t)))


def topic_partitions(zk, topics) -> List[Tuple[str, int]]:
    out: List[Tuple[str, int]] = []
    for t in topics:
        try:
            data, _ = zk.get(paths.topic_path(t))
        except NoNodeError:
            log.warning("topic %s does not exist (no %s): nothing to read", t, paths.topic_path(t))
            continue
        try:
            out.extend((t, p) for p in codecs.decode_topic_assignment(data, paths.topic_path(t)).partition_ids())
        except ZnodeFormatError as e:
            log.warning("skipping topic %s: %s", t, e)
    return sorted(out)


def resolve_start(store_offsets: Dict, tps, default_reset: str, probe, overrides=None) -> Dict:
    """Start offsets for partitions being adopted: explicit ``startingOffsets`` JSON entry (-2/-1/offset), else the
    group's committed offset, else ``default_reset`` (earliest / latest)."""
    overrides = overrides or {}
    out, need_early, need_late = {}, [], []
    for tp in tps:
        o = overrides.get(tp)
        if o is None:
            o = store_offsets.get(tp)
            if o is None:
                o = -2 if default_reset == "earliest" else -1
        if o == -2:
            need_early.append(tp)
        elif o == -1:
            need_late.append(tp)
        else:
            out[tp] = o
    if need_early:
        out.update(probe.earliest(need_early))
    if need_late:
        out.update(probe.log_ends(need_late))
    return out
