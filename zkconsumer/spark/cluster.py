"""Driver-side reads of the legacy cluster layout: topics, partitions, brokers, committed offsets."""
from __future__ import annotations

import logging
from typing import Dict, Iterable, List, Tuple, Union

from kazoo.exceptions import NoNodeError

from ..errors import ConfigError, ZkConsumerError, ZnodeFormatError
from ..layout import codecs, paths
from ..topic_filter import is_internal_topic

log = logging.getLogger(__name__)

TP = Tuple[str, int]


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


def partitions_to_read(zk, opts) -> List[TP]:
    """Every partition of the subscribed topics, or with ``assign`` the listed ones (each must exist: ConfigError
    naming the missing ones)."""
    tps = topic_partitions(zk, resolve_topics(zk, opts))
    if opts.assign is None:
        return tps
    missing = sorted(set(opts.assign) - set(tps))
    if missing:
        raise ConfigError("assign", None, "partitions that exist", "no such partition: %s"
                          % ", ".join("%s-%d" % tp for tp in missing))
    return sorted(opts.assign)


class NoOffsetForTimestampError(ZkConsumerError, ValueError):
    """A starting timestamp matched no offset (every record of the partition is older) and
    ``startingOffsetsByTimestampStrategy`` is ``error``."""


def require_all_partitions(option: str, listed: Iterable[TP], tps: Iterable[TP]) -> None:
    """Spark's rule for ``starting/endingOffsetsByTimestamp``: every partition read must be listed."""
    missing = sorted(set(tps) - set(listed))
    if missing:
        raise ConfigError(option, None, "a timestamp for every partition read (as in Spark's Kafka source)",
                          "missing: %s" % ", ".join("%s-%d" % tp for tp in missing))


def offsets_at(probe, timestamps: Dict[TP, int], starting: bool, no_match_latest: bool) -> Dict[TP, int]:
    """Offsets for ``{tp: timestamp ms}`` through ListOffsets by timestamp (Spark's ``offsetsForTimes``). Where
    no record is that new: an end goes to the log end; a start fails (``startingOffsetsByTimestampStrategy``
    ``error``, Spark's message) or goes to the log end (``latest``)."""
    found = probe.offsets_for_times(timestamps)
    out = {tp: o for tp, o in found.items() if o is not None}
    none = sorted(tp for tp in timestamps if out.get(tp) is None)
    if none and starting and not no_match_latest:
        tp = none[0]
        raise NoOffsetForTimestampError(
            "No offset matched from request of topic-partition %s-%d and timestamp %d (every record is older). "
            "Set startingOffsetsByTimestampStrategy=latest to start such partitions at the log end."
            % (tp[0], tp[1], timestamps[tp]))
    if none:
        out.update(probe.log_ends(none))
    return out


def resolve_start(store_offsets: Dict, tps, default_reset: Union[str, int], probe, overrides=None,
                  ts_overrides=None, no_match_latest: bool = False) -> Dict:
    """Start offsets for partitions being adopted: an explicit ``startingOffsets`` JSON entry (-2/-1/offset) or
    ``startingOffsetsByTimestamp`` entry, else the group's committed offset, else ``default_reset`` (earliest /
    latest / a ``startingTimestamp`` in ms)."""
    overrides = overrides or {}
    ts_overrides = ts_overrides or {}
    out, need_early, need_late, need_ts = {}, [], [], {}
    for tp in tps:
        if tp in ts_overrides:
            need_ts[tp] = ts_overrides[tp]
            continue
        o = overrides.get(tp)
        if o is None:
            o = store_offsets.get(tp)
            if o is None:
                if isinstance(default_reset, int):
                    need_ts[tp] = default_reset
                    continue
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
    if need_ts:
        out.update(offsets_at(probe, need_ts, True, no_match_latest))
    return out
