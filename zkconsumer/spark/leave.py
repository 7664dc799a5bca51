"""Leaving the group when Spark stops the streaming source: commit the last batch Spark's commit log holds, **then**
release the member's owner nodes; where the source cannot tell which batch that is, leave the nodes in place.

Spark 4.x stops a query's source (``PythonMicroBatchStream.stop`` -> ``PythonStreamingSourceRunner.stop``) by
destroying the source runner's process (``PythonWorkerFactory.stopWorker``: ``ProcessHandle.destroy``, SIGTERM on
Unix) and closing its socket. The runner (``pyspark.sql.streaming.python_streaming_source_runner.main``) calls the
reader's ``stop()`` in the ``finally`` of its loop, which runs only when the loop ends by an exception; Python's
default SIGTERM action ends the process before that. :func:`stop_on_sigterm` turns SIGTERM into an exception in the
runner's main thread, so ``stop()`` runs in the runner process on the driver: when the query is stopped
(``query.stop()``), when a ``Trigger.AvailableNow`` run ends, when the query fails, and when the driver's JVM dies
(the socket closes).

Spark never tells the source which batches its commit log holds (the source does not see the checkpoint), but the
order of its calls does (``MicroBatchExecution``): ``latestOffset(start, limit)`` is asked only once the batch that
ends at ``start`` is in the commit log, and a batch runs only after ``partitions(start, end)`` planned its tasks.
So :class:`CommitLogView` knows:

* nothing planned since the last ``latestOffset(start)``: the commit log ends at ``start``. ``stop()`` commits it
  (fenced, forward only) and, once the store holds it, releases the member: another member continues exactly there;
* a batch planned since (``partitions(start, end)``, ``end != start``): it may or may not be in the commit log (the
  query may have stopped while it ran, or after it was committed but before the next ``latestOffset``). ``stop()``
  commits ``start`` but leaves the owner nodes: released, they would let another member read that batch again if it
  was committed. They go when the application releases the member after its own commit
  (:func:`~zkconsumer.spark.finish_query`), when the driver dies (the reaper), or with the ZooKeeper session.

With ``asyncProgressTrackingEnabled`` (``AsyncProgressTrackingMicroBatchExecution``) the commit log is written in the
background, to storage only every ``asyncProgressTrackingCheckpointIntervalMs``: ``latestOffset(start)`` then means
that the sink has written the batch ending at ``start`` (batches still run one after another), not that the stored
commit log holds it. Nothing is skipped: a restart runs again from the stored logs, and where the group's offset is
ahead of that checkpoint the source continues from the group's offset (see :mod:`.stream`).
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any, Dict, Optional, Tuple

log = logging.getLogger("zkconsumer.spark")

TP = Tuple[str, int]

#: the module Spark runs (``python -m``) as the streaming source's process on the driver
RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"
#: once Spark asked the process to end, ``stop()`` has this long (SIGALRM then ends the process)
STOP_BOUND_S = 60


class SourceStopped(SystemExit):
    """Raised in the runner's main thread by SIGTERM: Spark is stopping the source."""


# stop() under way (a SIGTERM then must not interrupt it); set by stop(), only read by the handler
_in_stop = threading.Event()
# SIGTERM seen: a plain flag the handler sets without a lock. A handler runs in the main thread between any two
# bytecodes, so one that takes a lock (Event.set) deadlocks the process when a second SIGTERM lands while the first
# holds it, and stop() then never runs (Spark can end the runner with SIGTERM twice)
_stopping = [False]


def _on_sigterm(signum: int, frame: Any) -> None:
    first = not _stopping[0]
    _stopping[0] = True
    if first:
        signal.alarm(STOP_BOUND_S)
    if first and not _in_stop.is_set():
        raise SourceStopped(0)


def stop_begins() -> None:
    """The reader's ``stop()`` has begun, whatever ended the runner's loop: a SIGTERM from now on does not interrupt
    it (Spark may close the socket first, ending the loop, and send SIGTERM while ``stop()`` runs); the process
    still exits once it is done (:func:`exit_if_stopped_by_spark`)."""
    _in_stop.set()


def stop_on_sigterm() -> bool:
    """In Spark's streaming source runner process (and its main thread) only: make SIGTERM raise
    :class:`SourceStopped`, so the runner calls the reader's ``stop()``. Returns whether it was installed."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if getattr(spec, "name", None) != RUNNER_MODULE or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not _on_sigterm:
        signal.signal(signal.SIGTERM, _on_sigterm)
    return True


class CommitLogView:
    """What the order of Spark's calls tells about its commit log (see the module's docstring)."""

    def __init__(self) -> None:
        # the end of the last batch the commit log holds (None: no latestOffset asked in this run)
        self.done: Optional[Dict[TP, int]] = None
        # (start, end) of a batch planned since: maybe in the commit log, maybe not
        self.pending: Optional[Tuple[Dict[TP, int], Dict[TP, int]]] = None

    def asked(self, start: Dict[TP, int]) -> None:
        """``latestOffset(start, limit)``: the batch ending at ``start`` is in the commit log."""
        self.done = dict(start)
        self.pending = None

    def planned(self, start: Dict[TP, int], end: Dict[TP, int]) -> None:
        """``partitions(start, end)`` returned: a batch with data will run (an empty range changes nothing)."""
        if any(end[tp] != start.get(tp, end[tp]) for tp in end):
            self.pending = (dict(start), dict(end))


def leave(reader: Any) -> bool:
    """``stop()`` of the streaming reader, with a live member: write the data-loss resets the store has not taken yet
    (``failOnDataLoss=false``), commit the end of the last batch Spark's commit log certainly holds (through the
    reader's ``commit``: fenced, forward only), then, when nothing planned since may be in the commit log too and the
    store holds that end, release the member's owner nodes and registration. Returns whether the member was shut
    down. (With ``assign`` there are no owner nodes: it always is.) The caller has called :func:`stop_begins`."""
    from .offsets import to_spark
    member, view = reader._member, reader._commit_log
    # the member's ownership, read once for the resets and the check of the store below
    snap = None
    if reader._unwritten_reset:
        # a data-loss reset the store has not taken (the partition was not owned then) is written first: left
        # stale, a stored offset past the log end would make the partition's next owner reset to the log end
        # (auto.offset.reset=largest) and skip what the query had not read
        snap = member.ownership(stale_wait=5.0)
        if snap is not None:
            try:
                reader._write_unwritten_resets(snap[0])
            except Exception as e:
                log.warning("writing the group's data-loss resets of %s failed: %s",
                            sorted(reader._unwritten_reset), e)
    done = view.pending[0] if view.pending is not None else view.done
    if done:
        reader.commit(to_spark(done))
    if member.consumer_id is not None:
        if view.pending is not None:
            start, end = view.pending
            log.warning("the query stopped after batch %s -> %s was planned: whether Spark committed it is not known "
                        "here, so member %s keeps its owner nodes (released by finish_query, by the reaper if the "
                        "driver dies, or with its ZooKeeper session) rather than let another member read it again",
                        to_spark(start), to_spark(end), member.consumer_id)
            _hold(member)
            return False
        if done and not _store_holds(member, done, snap):
            log.warning("the end of the query's last batch %s is not in the group's offset store: member %s keeps "
                        "its owner nodes (released with its ZooKeeper session)", to_spark(done), member.consumer_id)
            _hold(member)
            return False
    member.shutdown()
    log.info("query stopped: %s committed %s to group %s and left it", member.consumer_id or "the source",
             to_spark(done or {}), reader.opts.group)
    return True


def _hold(member: Any) -> None:
    """The member keeps its ZooKeeper session, and with it its owner nodes and registration, but takes part in no
    rebalance any more: whoever releases it (the application, the listener) must not see it claim again."""
    rb = member.rebalancer
    if rb is not None:
        rb.stop()
        rb.join(5.0)


def _store_holds(member: Any, offsets: Dict[TP, int], snap: Any = None) -> bool:
    """Whether the store holds at least ``offsets`` for every one of them the member still owns (``snap``: its
    ownership read already, else read here)."""
    if snap is None:
        snap = member.ownership(stale_wait=5.0)
    if snap is None:
        return False
    owned = [tp for tp in offsets if tp in snap[0]]
    try:
        stored = member.offset_store.fetch(owned) if owned else {}
    except Exception as e:
        log.warning("reading the group's offsets of %s failed: %s", owned, e)
        return False
    return all(stored.get(tp) is not None and stored[tp] >= offsets[tp] for tp in owned)


def stopped_by_spark() -> bool:
    """Whether Spark has asked this process to end (a SIGTERM came)."""
    return _stopping[0]


def exit_if_stopped_by_spark() -> None:
    """After ``stop()``: a process Spark asked to end exits now (the runner would only report the exception on the
    socket Spark closed)."""
    if stopped_by_spark():
        logging.shutdown()
        os._exit(0)
