"""Release the source's group member when its query stops, from a ``StreamingQueryListener`` on the driver.

The member lives in the streaming source's Python process (started by the JVM); Spark ends that process with SIGTERM
when the query stops, and the source leaves the group by itself after committing the last batch of Spark's commit
log, except when the query stopped while a batch was planned (:mod:`.leave`: then it keeps its owner nodes). The
listener runs in the application's own Python process: the source names its member in the offsets it reports for
the query's progress (``reportLatestOffset``: under the key :data:`MEMBER_KEY`, which is not a legal topic name, next
to the latest offsets), the listener remembers it per query run, and ``onQueryTerminated`` deletes the member's
registration and owner nodes (:func:`~zkconsumer.spark.release_member`), so the group rebalances at once.

This releases the member before anything can commit the query's last batch (Spark never calls the source's
``commit`` for it): another member that claims the partitions then reads that batch again, unless it was committed
inside the batch (commit-after-output in ``foreachBatch``). A member named with
:func:`~zkconsumer.spark.name_member` is left to the application, which releases it after the final commit
(:func:`~zkconsumer.spark.finish_query`). A killed driver (no listener runs) relies on the member's reaper process
(:mod:`._reaper`); a member that has not reported progress yet (a query stopped before its first trigger completed),
or an application that did not install the listener, on its ZooKeeper session's end.
"""
from __future__ import annotations

import json
import logging
import threading
from typing import Any, Dict, List, Tuple

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger("zkconsumer.spark")

# a space: never a Kafka topic name, so it cannot clash with offsets
MEMBER_KEY = "zkconsumer member"


def member_entry(zookeeper_connect: str, group: str, consumer_id: str) -> Dict[str, Dict[str, str]]:
    """What the source adds to its reported latest offset so the listener can find its member."""
    return {MEMBER_KEY: {"zookeeper": zookeeper_connect, "group": group, "id": consumer_id}}


class ReleaseOnTermination(StreamingQueryListener):
    """Deletes the group members of a query's ``zkconsumer`` sources when that query terminates."""

    def __init__(self) -> None:
        # runId -> {(zookeeper, group, consumer_id)}
        self._members: Dict[str, set] = {}
        self._lock = threading.Lock()
        # (group, consumer id, deleted paths), newest last
        self.released: List[Tuple[str, str, List[str]]] = []

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        found = set()
        for src in p.sources:
            try:
                latest = json.loads(src.latestOffset) if src.latestOffset else None
            except (TypeError, ValueError):
                continue
            m = latest.get(MEMBER_KEY) if isinstance(latest, dict) else None
            if isinstance(m, dict) and {"zookeeper", "group", "id"} <= set(m):
                found.add((m["zookeeper"], m["group"], m["id"]))
        if found:
            with self._lock:
                self._members.setdefault(str(p.runId), set()).update(found)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        from ._reaper import release_member
        from .finish import released_by_application
        with self._lock:
            members = self._members.pop(str(event.runId), set())
        for zk_connect, group, consumer_id in sorted(members):
            if released_by_application(consumer_id):
                log.info("query %s terminated: group member %s of %s is released by the application (finish_query)",
                         event.id, consumer_id, group)
                continue
            try:
                deleted = release_member(zk_connect, group, consumer_id)
            except Exception as e:
                # the reaper and the ZooKeeper session remain
                log.warning("could not release group member %s of %s: %s", consumer_id, group, e)
                continue
            self.released.append((group, consumer_id, deleted))
            log.info("query %s terminated: released group member %s of %s (%d node(s))", event.id, consumer_id,
                     group, len(deleted))


_INSTALLED: Dict[int, ReleaseOnTermination] = {}


def install_release_listener(spark: Any) -> ReleaseOnTermination:
    """Add the :class:`ReleaseOnTermination` listener to ``spark.streams`` (once per session; returns it)."""
    key = id(spark)
    if key not in _INSTALLED:
        listener = ReleaseOnTermination()
        spark.streams.addListener(listener)
        _INSTALLED[key] = listener
    return _INSTALLED[key]
