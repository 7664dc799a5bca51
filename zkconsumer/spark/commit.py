"""Driver helpers: plan a batch read, commit end offsets after the output is written, read Spark checkpoints.

Batch (read the group's unconsumed range once, commit after the output is durable)::

    plan = plan_batch(opts)                               # committed offset (else startingOffsets) -> log end
    df = (spark.read.format("zkconsumer").options(**opts)
          .option("startingOffsets", plan.start_json).option("endingOffsets", plan.end_json).load())
    ... write df ...
    commit_batch(opts, plan.end)                          # only now do legacy tools see the progress

Streaming: ``commit(end)`` of the source lags one batch and is never called for the last batch, so after an
``availableNow`` query terminated (or after ``stop()``), commit the last finished batch yourself::

    commit_batch(opts, last_committed_end(checkpoint_dir))
"""
from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any, Dict, Tuple

from .offsets import from_spark, to_spark
from .options import SourceOptions, parse_options

log = logging.getLogger("zkconsumer.spark")

TP = Tuple[str, int]


@dataclasses.dataclass
class BatchPlan:
    start: Dict[TP, int]
    end: Dict[TP, int]
    bootstrap: str

    @property
    def start_json(self) -> str:
        return json.dumps(to_spark(self.start))

    @property
    def end_json(self) -> str:
        return json.dumps(to_spark(self.end))

    @property
    def total(self) -> int:
        return sum(max(0, self.end[tp] - self.start.get(tp, self.end[tp])) for tp in self.end)


def _opts(options) -> SourceOptions:
    return options if isinstance(options, SourceOptions) else parse_options(options)


def plan_batch(options) -> BatchPlan:
    """The ranges a batch read covers: per partition of the subscribed topics (or the ``assign`` ones), from the
    group's committed offset (or ``startingOffsets``: JSON entries win, ``earliest``/``latest`` apply where nothing
    is committed) to the log end (or ``endingOffsets`` JSON, ``endingTimestamp``, ``endingOffsetsByTimestamp``).
    ``options``: the source's option dict or parsed :class:`SourceOptions`."""
    from ..zookeeper import client as zkmod
    from ..offsets import make_offset_store
    from ..zookeeper.client import bootstrap_from_zk
    from .cluster import offsets_at, partitions_to_read, require_all_partitions, resolve_start
    opts = _opts(options)
    zk = zkmod.connect(opts.zookeeper_connect, auth=opts.zk_auth(), give_up_after_ms=zkmod.ONE_SHOT_GIVE_UP_MS)
    probe = None
    try:
        bootstrap = opts.bootstrap_servers or bootstrap_from_zk(zk, opts.zookeeper_connect,
                                                                opts.kafka_security.protocol)
        tps = partitions_to_read(zk, opts)
        cfg = opts.consumer_config
        store = make_offset_store(cfg, zk, bootstrap_servers=bootstrap if cfg.offsets_storage == "kafka" else None,
                                  strict=False)
        try:
            stored = store.fetch(tps)
        finally:
            store.close()
        probe = opts.log_end_probe(bootstrap)
        overrides = opts.starting if isinstance(opts.starting, dict) else None
        if opts.starting_by_timestamp is not None:
            require_all_partitions("startingOffsetsByTimestamp", opts.starting_by_timestamp, tps)
        if opts.ending_by_timestamp is not None:
            require_all_partitions("endingOffsetsByTimestamp", opts.ending_by_timestamp, tps)
        start = resolve_start(stored, tps, opts.default_reset(streaming=False), probe, overrides,
                              opts.starting_by_timestamp, opts.no_match_latest)
        ends = probe.log_ends(tps)
        if opts.ending_timestamp is not None or opts.ending_by_timestamp is not None:
            # endingTimestamp / endingOffsetsByTimestamp: no record that new -> the log end (as Spark)
            at: Dict[TP, int] = opts.ending_by_timestamp or {tp: int(opts.ending_timestamp or 0) for tp in tps}
            by_time = offsets_at(probe, {tp: at[tp] for tp in tps}, False, True)
            ends = {tp: min(ends[tp], by_time[tp]) for tp in tps}
        if isinstance(opts.ending, dict):
            for tp in tps:
                e = opts.ending.get(tp)
                if e is not None and e >= 0:
                    ends[tp] = min(ends[tp], e) if e > ends[tp] else e
        explicit_end = set(opts.ending) if isinstance(opts.ending, dict) else set()
        if opts.ending_timestamp is not None or opts.ending_by_timestamp is not None:
            # an end chosen by time may be before a committed offset: nothing to read
            explicit_end = set(tps)
        gone = sorted(tp for tp in tps if start[tp] > ends[tp] and tp not in explicit_end)
        if gone:
            from .kafka_io import DataLossError
            msg = ("the start offset is past the log end for %s (topic deleted and recreated, or the log "
                   "truncated): data may have been lost" % ", ".join("%s-%d (start %d, log end %d)"
                                                                     % (t, p, start[(t, p)], ends[(t, p)])
                                                                     for t, p in gone))
            if opts.fail_on_data_loss:
                raise DataLossError(msg + ". Set failOnDataLoss=false to read nothing from them.")
            log.warning("%s; reading nothing from them (failOnDataLoss=false)", msg)
        end = {tp: max(ends[tp], start[tp]) for tp in tps}
        return BatchPlan(start, end, bootstrap)
    finally:
        if probe is not None:
            probe.close()
        zkmod.close(zk)


def forward_only(store, offsets: Dict[TP, int], fence=None):
    """Commit the ``offsets`` that move the stored offset forward, through ``fence`` if given; the others are left
    as they are and reported ``unchanged`` with the stored value (an offset is never moved backwards). With a dual
    store, an offset that one store already holds and the other is behind (a commit whose ZooKeeper write failed
    after Kafka's) is written again, so ZooKeeper catches up; one behind either store is not."""
    from ..offsets import CommitResult
    from ..offsets.dual import DualOffsetStore
    result = CommitResult()
    if not offsets:
        return result
    parts = list(offsets)
    if isinstance(store, DualOffsetStore):  # {tp: (ZooKeeper's, Kafka's)}
        both = store.fetch_both(parts)
        behind = {tp: min(-1 if v is None else v for v in both[tp]) for tp in parts}
        stored = {tp: max(v for v in both[tp] if v is not None) for tp in parts if both[tp] != (None, None)}
    else:
        stored = store.fetch(parts)
        behind = stored
    forward = {tp: o for tp, o in offsets.items()
               if stored.get(tp) is None or o > stored[tp] or (o == stored[tp] and behind.get(tp, o) < o)}
    for tp in set(offsets) - set(forward):
        result.unchanged.add(tp)
        result.committed[tp] = stored[tp]
        if stored[tp] > offsets[tp]:
            log.info("not committing %s-%d=%d: the store already holds %d (never moving backwards)", tp[0], tp[1],
                     offsets[tp], stored[tp])
    if forward:
        result.merge(store.commit(forward, fence=fence) if fence is not None else store.commit(forward))
    return result


def own_member_id(opts: SourceOptions):
    """The consumer id of this application's Spark member: ``<group>_<consumer.id>`` when ``consumer.id`` is given,
    else None (any Spark member of the group, ``<group>_spark-...``, counts as the application's)."""
    from ..core.layout.codecs import make_consumer_id
    cfg = opts.consumer_config
    return make_consumer_id(opts.group, cfg.consumer_id) if cfg.consumer_id else None


def commit_batch(options, end_offsets, skip_owned_by_others: bool = True, member=None) -> Dict[str, Dict]:
    """Write ``end_offsets`` (``{(t, p): next}``, Spark's ``{"t": {"p": n}}`` dict or JSON text) to the group's
    offset store (zookeeper / kafka / dual per the options) from the driver, **after** the output is durable.

    Never moves an offset backwards. The application's own partitions are those whose owner node belongs to its
    Spark member: ``member`` (a consumer id), else ``<group>_<consumer.id>`` when the options set ``consumer.id``,
    else any Spark member of the group (``<group>_spark-...``). Their commit is **fenced** by the member's owner
    nodes (:mod:`.fence`): a partition another member claimed in the meantime is skipped, one whose owner node
    was deleted meanwhile (released: nobody owns it) is committed as unowned. A
    partition owned by another member is skipped (``skip_owned_by_others``: that member is consuming it and its own
    commits win); a partition nobody owns is committed. Returns ``{"committed": {...}, "unchanged": {...},
    "skipped": {...}, "failed": {...}}`` keyed ``"topic-partition"``.
    """
    from ..zookeeper import client as zkmod
    from ..errors import OwnershipLostError
    from ..offsets import make_offset_store
    from ..zookeeper.client import bootstrap_from_zk
    from .fence import member_fence, owner_nodes
    opts = _opts(options)
    offsets = end_offsets if isinstance(end_offsets, dict) and all(isinstance(k, tuple) for k in end_offsets) \
        else from_spark(end_offsets)
    report: Dict[str, Dict[str, Any]] = {"committed": {}, "unchanged": {}, "skipped": {}, "failed": {}}
    if not offsets:
        return report
    name = lambda tp: "%s-%d" % tp  # noqa: E731
    own = member or own_member_id(opts)

    def ours(consumer):
        return consumer == own if own else consumer.startswith(opts.group + "_spark-")
    zk = zkmod.connect(opts.zookeeper_connect, auth=opts.zk_auth(), give_up_after_ms=zkmod.ONE_SHOT_GIVE_UP_MS)
    try:
        cfg = opts.consumer_config
        bootstrap = None
        if cfg.offsets_storage == "kafka":
            bootstrap = opts.bootstrap_servers or bootstrap_from_zk(zk, opts.zookeeper_connect,
                                                                    opts.kafka_security.protocol)
        store = make_offset_store(cfg, zk, bootstrap_servers=bootstrap, strict=False)
        try:
            todo = dict(offsets)
            # twice at most: a partition whose fenced write was refused because its owner node went away meanwhile
            # (the member released: nobody owns it now) is committed as an unowned one; one claimed by another
            # member since is skipped
            for attempt in (1, 2):
                unowned: Dict[TP, int] = {}
                # (member, its session) -> offsets
                fenced: Dict[Tuple[str, int], Dict[TP, int]] = {}
                owners = owner_nodes(zk, opts.group, todo)
                for tp, off in todo.items():
                    owner = owners.get(tp)
                    if owner is None or not skip_owned_by_others and not ours(owner[0]):
                        unowned[tp] = off
                    elif ours(owner[0]):
                        fenced.setdefault(owner, {})[tp] = off
                    else:
                        report["skipped"][name(tp)] = "owned by %s" % owner[0]
                results = [forward_only(store, unowned)] + [
                    forward_only(store, offs, fence=member_fence(opts.group, session, offs))
                    for (_member, session), offs in sorted(fenced.items())]
                todo = {}
                for res in results:
                    for tp, o in res.committed.items():
                        report["unchanged" if tp in res.unchanged else "committed"][name(tp)] = o
                    for tp, e in res.failed.items():
                        if attempt == 1 and isinstance(e, OwnershipLostError):
                            todo[tp] = offsets[tp]
                        else:
                            report["failed"][name(tp)] = str(e)
                if not todo:
                    break
        finally:
            store.close()
    finally:
        zkmod.close(zk)
    log.info("commit_batch for group %s: %s", opts.group, report)
    return report


def read_checkpoint_offsets(checkpoint: str, batch_id: int, source_index: int = 0,
                            filesystem: str = "auto") -> Dict[TP, int]:
    """End offsets of batch ``batch_id`` from ``<checkpoint>/offsets/<batch_id>``.

    ``checkpoint`` is the query's ``checkpointLocation`` as given to Spark: a path or any URI Spark can write to.
    It is read through Spark's Hadoop file system when a SparkContext is active here (the driver, e.g. inside
    ``foreachBatch``), else through :mod:`pyarrow.fs`; ``filesystem="hadoop"``/``"pyarrow"`` forces one (see
    :mod:`zkconsumer.spark.checkpoint`). Spark's internal format (v1 in 4.2/4.3): line 1 ``v1``, line 2 batch
    metadata, then one JSON line per source (``source_index``)."""
    from .checkpoint import checkpoint_files, read_offset_log_entry
    line = read_offset_log_entry(checkpoint_files(checkpoint, filesystem), batch_id, source_index)
    return _offsets_of(line, "%s/offsets/%d" % (str(checkpoint).rstrip("/"), batch_id))


def last_committed_end(checkpoint: str, source_index: int = 0, filesystem: str = "auto") -> Dict[TP, int]:
    """End offsets of the newest batch in ``<checkpoint>/commits`` (i.e. whose output Spark finished writing);
    ``{}`` when no batch finished yet. Same ``checkpoint`` and ``filesystem`` rules as
    :func:`read_checkpoint_offsets`."""
    from .checkpoint import checkpoint_files, read_offset_log_entry
    files = checkpoint_files(checkpoint, filesystem)
    ids = files.batch_ids("commits")
    if not ids:
        return {}
    line = read_offset_log_entry(files, ids[-1], source_index)
    return _offsets_of(line, "%s/offsets/%d" % (str(checkpoint).rstrip("/"), ids[-1]))


def _offsets_of(line, where) -> Dict[TP, int]:
    """The source's offsets in a checkpoint's offset log line; ValueError naming the file when they are not (a
    checkpoint of another source, or a damaged file), like the offset log's other format errors."""
    from ..core.layout.names import is_legal_name

    def bad(why):
        return ValueError("%s: not offsets of the zkconsumer source ({\"topic\": {\"partition\": offset}}): %s"
                          % (where, why))
    if line is None:
        return {}
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as e:
        # RecursionError: nested thousands deep
        raise bad("not JSON (%s)" % str(e)[:100]) from None
    if not isinstance(obj, dict):
        raise bad("not a JSON object")
    out: Dict[TP, int] = {}
    for t, parts in obj.items():
        if not is_legal_name(t) or not isinstance(parts, dict):
            raise bad("topic %r" % (t[:100],))
        for p, off in parts.items():
            if not (p == "0" or (p[:1] in "123456789" and p.isdigit() and p.isascii() and len(p) <= 10)) \
                    or isinstance(off, bool) or not isinstance(off, int) or off < 0:
                raise bad("partition %r of %r: offset %r" % (p[:20], t, off if isinstance(off, int) else "?"))
            out[(t, int(p))] = off
    return out
