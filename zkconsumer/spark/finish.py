"""Finishing a streaming query: commit its last finished batch, **then** let its group member go.

Spark calls the source's ``commit`` one batch late and never for the last batch, so when a query stops the group's
stored offsets may be one batch behind the checkpoint. The source commits that batch and leaves the group itself
when it is stopped between batches (:mod:`.leave`); stopped while a batch was planned, it cannot tell whether Spark
committed that batch and keeps its owner nodes until someone deletes them (or its ZooKeeper session ends).
Released before the last batch is committed, they would let another member claim the partitions and read that
batch again from the stored offsets. So the application releases the member itself, after the final commit:

    opts = name_member(opts)                        # a consumer.id of the application's own
    q = spark.readStream.format("zkconsumer").options(**opts).load()....start()
    q.awaitTermination()                            # (or q.stop())
    finish_query(opts, checkpoint)                  # commit the last finished batch (fenced), then release

:func:`name_member` also tells the query listener (:class:`~zkconsumer.spark.listener.ReleaseOnTermination`) that this
member is released by the application, and the member's reaper releases it only if the driver dies
(:mod:`._reaper`). The example job (:mod:`zkconsumer.spark.job`) works this way.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Dict, Mapping

log = logging.getLogger("zkconsumer.spark")

# consumer ids the application releases itself (finish_query), not the listener
_HELD: set = set()
_LOCK = threading.Lock()

__all__ = ["name_member", "finish_query", "released_by_application"]


def name_member(options: Mapping[str, str]) -> Dict[str, str]:
    """``options`` with a ``consumer.id`` of the application's own (``spark-<host>-<millis>-<uuid8>``, kept when one
    is given), so :func:`commit_batch` and :func:`finish_query` know exactly which member's partitions are the
    query's; the member is marked as released by the application (the query listener leaves it alone)."""
    from ..core.layout.codecs import make_consumer_id
    from .member import spark_consumer_id
    from .options import parse_options
    opts = dict(options)
    if not any(k.lower() == "consumer.id" for k in opts):
        group = parse_options(opts).group
        opts["consumer.id"] = spark_consumer_id(group)
    parsed = parse_options(opts)
    with _LOCK:
        _HELD.add(make_consumer_id(parsed.group, parsed.consumer_config.consumer_id))
    return opts


def released_by_application(consumer_id: str) -> bool:
    with _LOCK:
        return consumer_id in _HELD


def finish_query(options: Mapping[str, str], checkpoint: str, source_index: int = 0,
                 filesystem: str = "auto") -> Dict[str, Any]:
    """After the query terminated: commit the end offsets of its last finished batch (``<checkpoint>/commits``) with
    :func:`~zkconsumer.spark.commit_batch`, fenced by the member's owner nodes (still there), then delete the
    member's registration and owner nodes so the group rebalances. ``options`` must name the member
    (:func:`name_member`). Returns commit_batch's report plus ``"released"``: the nodes deleted."""
    from ._reaper import release_member
    from .commit import commit_batch, last_committed_end, own_member_id
    from .options import parse_options
    opts = parse_options(options)
    member = own_member_id(opts)
    if member is None:
        from ..errors import ConfigError
        raise ConfigError("consumer.id", None, "set (name_member(options) gives the query a consumer.id of its "
                          "own), so that finish_query knows which member to release")
    try:
        report: Dict[str, Any] = commit_batch(opts, last_committed_end(checkpoint, source_index, filesystem),
                                              member=member)
    finally:
        report_released = release_member(opts.zookeeper_connect, opts.group, member, auth=opts.zk_auth())
        with _LOCK:
            _HELD.discard(member)
    report["released"] = report_released
    log.info("query finished: last batch committed (%s), member %s released (%d node(s))",
             report["committed"] or "unchanged", member, len(report_released))
    return report
