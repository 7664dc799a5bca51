"""The streaming reader of the ``zkconsumer`` data source (``DataSourceStreamReader`` with Trigger.AvailableNow).

``initialOffset``/``latestOffset``/``partitions``/``commit`` run in a long-lived Python process on the driver (the
streaming source runner), where the group member lives: a :class:`~zkconsumer.spark.member.GroupMember`, or with
``assign`` an :class:`~zkconsumer.spark.assigned.AssignedPartitions`; ``read`` runs on executors
(:mod:`zkconsumer.spark.source`). Nothing live is ever pickled: clients are created lazily, dropped by
``__getstate__``.

Offsets are ``{"topic": {"partition": next_offset}}`` holding exactly the partitions the member owned when the batch
was planned. A batch reads ``[start[p], end[p])`` for partitions present in both. The rules, at the semantics of
Spark's Kafka source (``KafkaMicroBatchStream``, ``KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets``):

* a partition owned but absent from ``start`` is *adopted*: its end is its start, nothing is read from it in that
  batch, the next batches read from there. The start is the group's committed offset; without one,
  ``startingOffsets`` (or the timestamp options) for the partitions of the query's first batch (``initialOffset``),
  and the partition's **first offset** for every partition that joins later (Spark: "newly discovered partitions
  during a query will start at earliest"): a partition added to a topic, a new topic matching ``subscribePattern``,
  a partition a rebalance gave us. A partition created since the run started should start at 0; a higher first
  offset means records were deleted before the query could read them: data loss ("Added partition ... starts from
  X instead of 0");
* a partition in ``start`` no longer owned is dropped (its new owner continues from the store); if its topic was
  deleted, its unread records are lost: data loss ("... are gone");
* checkpoint vs store: on the first plan of a query run and for partitions (re)claimed since the previous plan, the
  store is read; where it is **ahead** of the checkpointed offset (another member progressed, or an operator moved
  offsets forward) the partition is dropped for one batch and re-adopted from the store (logged); where it is
  behind (the normal one-batch commit lag, or a rollback) the checkpoint wins. Both steps are in the offsets Spark
  logs (the dropped partition is absent from that batch's end, the next batch's end holds the store's offset), so a
  batch Spark replays after a driver restart (``partitions(start, end)`` of the offset log's last batch) reads the
  same range; under ``Trigger.AvailableNow`` the run goes on past the dropped batch (its end differs from its
  start) and reads the partition from the store's offset;
* a log end behind the offset the query reached (asked ``fetchOffset.numRetries`` times,
  ``fetchOffset.retryIntervalMs`` apart, as Spark does): data loss; a topic recreated since continues from its
  start, a truncated log from its new end, and the group's stored offset is reset there (a reset the store did not
  take, the partition not owned at that moment, is written once it is, and the stale offset meanwhile counts as
  the reset one);
* ``commit(end)`` (Spark calls it for batch N-1 while planning batch N, never for the last batch) writes ``end`` for
  partitions still owned, fenced by the owner nodes, only where it moves the stored offset forward; ``stop()`` commits
  the end of the last batch in Spark's commit log, then the member leaves the group (:mod:`.leave`);
* Spark ends a ``Trigger.AvailableNow`` run at the first plan that reports no new data, so that plan must never be
  an empty range that is not empty: under AvailableNow, and for the query's first batch, a plan waits for the group
  (a rebalance under way, a ZooKeeper session not yet confirmed) and fails the query if it does not settle within
  ``groupSettleTimeoutMs`` (60 s) plus the session timeout; other triggers plan no batch meanwhile and ask again;
* with ``offsets.storage=kafka`` the unchanged offsets of idle partitions are re-committed before Kafka's retention
  deletes them (:mod:`.keepalive`).

Data loss fails the query with ``failOnDataLoss=true`` (the default); with ``false`` it is logged and the query goes
on without what is gone.
"""
from __future__ import annotations

import logging
import time
from typing import Dict, Optional

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from ..errors import ZkConsumerError
from .leave import CommitLogView, exit_if_stopped_by_spark, leave, stop_begins, stop_on_sigterm, stopped_by_spark
from .offsets import from_spark, rate_limit, to_spark
from .options import SourceOptions
from .source import _read, _tasks
from .topic_history import TopicHistory

log = logging.getLogger("zkconsumer.spark")

_GO_ON = "Set the source option failOnDataLoss=false to go on without it"


class GroupNotSettledError(ZkConsumerError):
    """The member's partitions are not known (a rebalance under way, the ZooKeeper session not confirmed) where a
    plan cannot go without them."""


def _names(tps) -> str:
    return ", ".join("%s-%d" % tp for tp in sorted(tps))


class ZkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self._member = None
        self._probe = None
        self._bootstrap = opts.bootstrap_servers
        self._first_plan = True
        self._seen_claims = 0
        # AvailableNow: log ends recorded at prepareForTriggerAvailableNow
        self._target: Optional[Dict] = None
        # minOffsetsPerTrigger: when the last batch was let through
        self._last_trigger_ms = 0.0
        # log ends of the last plan (reportLatestOffset)
        self._latest_seen: Dict = {}
        # the topics' ZooKeeper nodes as this run saw them
        self._topics = TopicHistory()
        # tp -> offset it was reset to after data loss (see commit)
        self._stale_commit: Dict = {}
        # tp -> (stale stored offset, offset it was reset to): data-loss resets the store did not take (see _stored)
        self._unwritten_reset: Dict = {}
        # which batch Spark's commit log holds, as the order of its calls shows (see stop)
        self._commit_log = CommitLogView()
        stop_on_sigterm()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_member"] = state["_probe"] = None
        return state

    # -- driver-side plumbing (runner process only) ------------------------------------------------------------
    def _ensure_member(self):
        if self._member is None:
            if self.opts.assign is not None:
                from .assigned import AssignedPartitions
                self._member = AssignedPartitions(self.opts, self._bootstrap)
                log.info("zkconsumer source reads %s of group %s (assign: no group membership)",
                         _names(self.opts.assign), self.opts.group)
                return self._member
            from .member import GroupMember
            m = GroupMember(self.opts.consumer_config, bootstrap_servers=self.opts.bootstrap_servers,
                            reaper=self.opts.owner_reaper)
            try:
                if self._bootstrap is None:
                    self._bootstrap = m._kafka_bootstrap()
                m.join(topics=self.opts.topics, topic_filter=self.opts.topic_filter())
            except BaseException:
                m.shutdown()
                raise
            log.info("zkconsumer source joined group %s as %s", self.opts.group, m.consumer_id)
            self._member = m
        return self._member

    def _get_bootstrap(self):
        if self._bootstrap is None:
            from ..zookeeper import client as zkmod
            from ..zookeeper.client import bootstrap_from_zk
            zk = zkmod.connect(self.opts.zookeeper_connect, auth=self.opts.zk_auth(),
                               give_up_after_ms=zkmod.ONE_SHOT_GIVE_UP_MS)
            try:
                self._bootstrap = bootstrap_from_zk(zk, self.opts.zookeeper_connect,
                                                    self.opts.kafka_security.protocol)
            finally:
                zkmod.close(zk)
        return self._bootstrap

    def _get_probe(self):
        if self._probe is None:
            self._probe = self.opts.log_end_probe(self._get_bootstrap())
        return self._probe

    def _offsets(self, what, fetch):
        """``fetch(probe)`` with Spark's retries (``fetchOffset.numRetries`` attempts, ``fetchOffset.retryIntervalMs``
        apart, a new client each time)."""
        from kafka.errors import KafkaError
        attempts = self.opts.fetch_offset_retries
        for attempt in range(1, attempts + 1):
            try:
                return fetch(self._get_probe())
            except (KafkaError, OSError) as e:
                if attempt >= attempts:
                    raise
                log.warning("fetching %s failed (attempt %d of %d, fetchOffset.numRetries): %s", what, attempt,
                            attempts, e)
                if self._probe is not None:
                    self._probe.close()
                    self._probe = None
                time.sleep(self.opts.fetch_offset_retry_interval_ms / 1000.0)

    def _log_ends(self, tps):
        tps = sorted(tps)
        return self._offsets("the log ends of %s" % _names(tps), lambda p: p.log_ends(tps)) if tps else {}

    def _ownership(self, must: bool = False):
        """(owned, {tp: claim number}, claims) of the member. ``must``: wait for the group to settle and fail the
        query if it does not (the first batch, Trigger.AvailableNow); else None while it is rebalancing (the first
        plan of a run waits up to a minute first)."""
        member = self._ensure_member()
        if not must:
            return member.wait_ownership(timeout=60.0 if self._first_plan else 0.0)
        wait = self.opts.group_settle_timeout_ms / 1000.0 + self.opts.consumer_config.zookeeper_session_timeout_ms / 1000.0
        snap = member.wait_ownership(timeout=wait)
        if snap is None:
            raise GroupNotSettledError(
                "group %s: the partitions of member %s are not known after %.0f s (a rebalance under way, or the "
                "ZooKeeper session not confirmed): %s cannot be planned without them (a plan with no new data would "
                "end a Trigger.AvailableNow run with the backlog unread)"
                % (self.opts.group, member.consumer_id, wait,
                   "the query's first batch" if self._target is None else "a Trigger.AvailableNow batch"))
        return snap

    def _report_loss(self, message):
        """Data loss: fail the query (failOnDataLoss=true) or log it and go on."""
        from .kafka_io import DataLossError
        if self.opts.fail_on_data_loss:
            raise DataLossError("%s. %s." % (message, _GO_ON))
        log.warning("%s (failOnDataLoss=false: going on without it)", message)

    def _run_topics(self):
        from .cluster import resolve_topics
        return resolve_topics(self._member.zk, self.opts)

    def _adopt(self, tps, initial=False):
        """Start offsets of partitions joining the plan (see the module's rules)."""
        from .cluster import resolve_start
        if not tps:
            return {}
        stored = self._stored(tps)
        if initial:
            overrides = self.opts.starting if isinstance(self.opts.starting, dict) else None
            out = self._offsets("the start offsets of %s" % _names(tps), lambda probe: resolve_start(
                stored, tps, self.opts.default_reset(streaming=True), probe, overrides,
                self.opts.starting_by_timestamp, self.opts.no_match_latest))
            fallback = "startingOffsets"
        else:
            out = self._offsets("the first offsets of %s" % _names(tps),
                                lambda probe: resolve_start(stored, tps, "earliest", probe))
            fallback = "its first offset"
            added = self._topics.added_during_run(self._member.zk, [tp for tp in tps if stored.get(tp) is None])
            for tp in sorted(added):
                if out[tp] != 0:
                    self._report_loss("Added partition %s-%d starts from %d instead of 0. Some data may have been "
                                      "missed" % (tp[0], tp[1], out[tp]))
        ends = self._log_ends(tps)
        past = {tp: ends[tp] for tp in tps if out[tp] > ends[tp]}
        # e.g. the group's offset of a topic deleted and recreated since
        if past:
            out.update(self._data_loss(past, out, "the group's offset"))
        self._topics.note(self._member.zk, {t for t, _ in tps})
        for tp in sorted(out):
            if tp in past:
                why = "its start offset was past the log end: data loss"
            else:
                why = "group offset" if stored.get(tp) == out[tp] else "no group offset: " + fallback
            log.info("adopting %s-%d at %d (%s)", tp[0], tp[1], out[tp], why)
        if self._target is not None:
            for tp in tps:
                self._target.setdefault(tp, None)
        return out

    # -- DataSourceStreamReader --------------------------------------------------------------------------------
    def _refuse_batch_options(self):
        """As Spark's Kafka source (``KafkaSourceProvider.validateStreamOptions``): endingOffsets and
        endingOffsetsByTimestamp are refused, endingTimestamp is ignored (raised from the first planning call: an
        exception in ``streamReader`` surfaces only as "Python worker failed to connect back")."""
        from ..errors import ConfigError
        from .kafka_options import warn_once
        for key, what in (("endingOffsets", "ending offset"), ("endingOffsetsByTimestamp", "ending timestamp")):
            if key in self.opts.ending_given:
                raise ConfigError(key, "...", "%s not valid in streaming queries (batch reads only, as in Spark's "
                                  "Kafka source)" % what)
        if self.opts.ending_timestamp is not None:
            warn_once("endingTimestamp is ignored by streaming queries (as by Spark's Kafka source)")

    def initialOffset(self):
        self._refuse_batch_options()
        owned, _claimed, claims = self._ownership(must=True)
        self._topics.start_run(self._member.zk, self._run_topics())
        if self.opts.starting_by_timestamp is not None:
            from .cluster import require_all_partitions
            require_all_partitions("startingOffsetsByTimestamp", self.opts.starting_by_timestamp, owned)
        start = self._adopt(sorted(owned), initial=True)
        self._record_start(start)
        self._first_plan = False
        self._seen_claims = claims
        return to_spark(start)

    def _record_start(self, start):
        """Commit the query's start offsets of partitions the group has no offset for (those that followed
        ``startingOffsets``), before Spark plans batch 0. Spark's offset log holds only the end of each batch: a query
        restarted before batch 0 finished asks ``initialOffset`` again for its start (Spark's own Kafka source keeps
        its initial offsets in the checkpoint for this), and ``latest`` resolved again then would skip batch 0's
        records. With the start in the store the restart finds it there; a member that takes the partition over
        meanwhile starts there too, not at its ``auto.offset.reset``. Fenced and forward only; a partition revoked
        meanwhile is left to its new owner (the next plan drops it). Fails the query if the store refuses."""
        stored = self._member.offset_store.fetch(list(start))
        todo = {tp: off for tp, off in start.items() if stored.get(tp) is None}
        if not todo:
            return
        from ..errors import OwnershipLostError
        result = self._member.commit_forward(todo)
        failed = {tp: e for tp, e in result.failed.items() if not isinstance(e, OwnershipLostError)}
        if failed:
            raise ZkConsumerError(
                "group %s: cannot commit the query's start offsets (%s) to the group's offset store: %s. Without "
                "them a restart of the query's first batch could not find its start" % (
                    self.opts.group, _names(failed), "; ".join(str(e) for e in failed.values())))
        log.info("recorded the query's start offsets in group %s: %s", self.opts.group, to_spark(todo))

    def getDefaultReadLimit(self):
        n = self.opts.max_offsets_per_trigger
        if n:
            return ReadMaxRows(n)
        m = self.opts.min_offsets_per_trigger
        return ReadMinRows(m) if m else ReadAllAvailable()

    def _delay_batch(self, start_d, latest, limit) -> bool:
        """``minOffsetsPerTrigger`` / ``maxTriggerDelay`` (Spark's ``KafkaMicroBatchStream.delayBatch``): skip this
        trigger while fewer than ``minOffsetsPerTrigger`` new offsets are available, unless ``maxTriggerDelay``
        passed since the last batch (the first trigger of a query run never waits). Not under
        ``Trigger.AvailableNow`` or when Spark asks for everything (``ReadAllAvailable``)."""
        if not self.opts.min_offsets_per_trigger or self._target is not None or isinstance(limit, ReadAllAvailable):
            return False
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        new = sum(max(0, latest[tp] - start_d[tp]) for tp in latest)
        if new < self.opts.min_offsets_per_trigger:
            log.debug("delaying the batch: %d new offsets < minOffsetsPerTrigger %d", new,
                      self.opts.min_offsets_per_trigger)
            return True
        self._last_trigger_ms = now
        return False

    def prepareForTriggerAvailableNow(self):
        self._target = {}
        owned = self._ownership(must=True)[0]
        self._target = dict(self._log_ends(owned))
        log.info("Trigger.AvailableNow: reading up to %s", to_spark(self._target))

    def latestOffset(self, start, limit):
        self._refuse_batch_options()
        start_d = from_spark(start)
        self._commit_log.asked(start_d)
        snap = self._ownership(must=self._target is not None)
        # a rebalance is under way: no new batch until it is done (never under AvailableNow)
        if snap is None:
            return to_spark(start_d)
        owned, claimed_at, claims = snap
        zk = self._member.zk
        if self._first_plan:
            self._topics.start_run(zk, self._run_topics())
        # a deleted topic's partitions leave the member's assignment: only partitions that left it, or join it, are
        # looked up (a plan runs up to 100 times a second while a query is idle); one deleted while still owned makes
        # the log-end read below fail, and is looked up then
        changed = (set(start_d) - owned) | (owned - set(start_d))
        gone_topics = self._topics.missing(zk, {t for t, _ in changed}) if changed else set()
        self._deleted(start_d, gone_topics)
        owned = {tp for tp in owned if tp[0] not in gone_topics}
        recheck = [tp for tp in start_d if tp in owned and (self._first_plan or claimed_at[tp] > self._seen_claims)]
        # one read of the store: the rechecked partitions', and the owned ones' with a data-loss reset to write
        # again (:meth:`_stored` writes those)
        unwritten = [tp for tp in self._unwritten_reset if tp in owned and tp not in recheck]
        dropped = set()
        if recheck or unwritten:
            stored = self._stored(recheck + unwritten)
            for tp in recheck:
                if stored.get(tp) is not None and stored[tp] > start_d[tp]:
                    log.warning("group %s: stored offset of %s-%d (%d) is ahead of the checkpoint (%d): the group "
                                "moved on; re-adopting the partition from the stored offset (dropped for one batch)",
                                self.opts.group, tp[0], tp[1], stored[tp], start_d[tp])
                    dropped.add(tp)
        for tp in sorted(tp for tp in set(start_d) - owned if tp[0] not in gone_topics):
            log.info("%s-%d is no longer owned by this member: dropped from the next batch", *tp)
        cont = sorted(tp for tp in start_d if tp in owned and tp not in dropped)
        new = sorted(tp for tp in owned if tp not in start_d)
        try:
            ends = self._log_ends(cont)
        except Exception:
            # a topic deleted since the check above: its partitions have no log end any more
            gone = self._topics.missing(zk, {t for t, _ in cont})
            if not gone:
                raise
            self._deleted(start_d, gone)
            cont = [tp for tp in cont if tp[0] not in gone]
            new = [tp for tp in new if tp[0] not in gone]
            ends = self._log_ends(cont)
        behind = self._confirm_behind(ends, start_d)
        self._latest_seen = dict(ends)
        latest, reset = {}, {}
        if behind:
            reset = self._data_loss({tp: ends[tp] for tp in behind}, start_d, "the offset this query reached")
        self._topics.note(zk, {t for t, _ in cont})
        for tp in cont:
            e = ends[tp]
            if tp in behind:
                continue
            if self._target is not None:
                tgt = self._target.get(tp)
                if tgt is None:
                    tgt = self._target[tp] = e
                e = min(e, tgt)
            latest[tp] = max(e, start_d[tp])
        if self._delay_batch(start_d, latest, limit):
            latest = {tp: start_d[tp] for tp in latest}
        elif isinstance(limit, ReadMaxRows):
            latest = rate_limit({tp: start_d[tp] for tp in latest}, latest, int(limit.max_rows))
        latest.update(reset)
        end = dict(latest)
        end.update(self._adopt(new))
        self._keep_alive(cont)
        self._first_plan = False
        self._seen_claims = claims
        return to_spark(end)

    def _deleted(self, start_d, gone_topics):
        """Partitions of the last batch whose topic was deleted: their unread records are lost (Spark: "... are
        gone")."""
        deleted = sorted(tp for tp in start_d if tp[0] in gone_topics)
        if deleted:
            self._report_loss("%s are gone (topic deleted). Some data may have been missed" % _names(deleted))

    def _keep_alive(self, tps):
        try:
            self._member.keep_alive(tps)
        except Exception as e:
            # never fail the query over a derived copy of the offsets
            log.warning("re-committing the unchanged offsets of idle partitions failed: %s", e)

    def _data_loss(self, ends, reached, what):
        """Partitions whose log end is behind ``reached`` (``{tp: log end}``): fail (``failOnDataLoss=true``) or
        return where to continue: a topic recreated since we noted it (its ZooKeeper node is a new one) from its
        start, so nothing written to the new topic is skipped; a truncated log (or a topic not seen before) from the
        new log end (as Spark's Kafka source)."""
        from .kafka_io import DataLossError
        desc = ", ".join("%s-%d (log end %d, %s %d)" % (tp[0], tp[1], e, what, reached[tp])
                         for tp, e in sorted(ends.items()))
        msg = ("the log end is behind %s for %s: the topic was deleted and recreated, or the log truncated; data "
               "may have been lost" % (what, desc))
        if self.opts.fail_on_data_loss:
            raise DataLossError(msg + ". Set failOnDataLoss=false to continue (a recreated topic from its start, "
                                "a truncated log from its new end).")
        recreated = self._topics.recreated(self._member.zk, {t for t, _ in ends})
        out = dict(ends)
        starts = self._offsets("the first offsets of recreated topics",
                               lambda probe: probe.earliest([tp for tp in ends if tp[0] in recreated]))
        out.update(starts)
        for tp in sorted(ends):
            log.warning("%s; %s-%d continues from %d (%s, failOnDataLoss=false)", msg, tp[0], tp[1], out[tp],
                        "the recreated topic's start" if tp in starts else "the new log end")
        # Spark commits the batch planned before this one (ending at the old offsets) next: not to the store
        self._stale_commit.update(out)
        # the stored offsets belong to data that is gone: else they would look "ahead of the checkpoint"
        self._reset_store(out)
        return out

    def _reset_store(self, offsets):
        """Write ``offsets`` to the group's store, backwards too, after data loss. A partition the member does not
        own at this moment (a rebalance started since the plan's ownership snapshot: a topic deleted and recreated
        makes the group rebalance) or whose write fails keeps its stale stored offset: it is remembered with the
        offset it should have been reset to (:meth:`_stored`)."""
        try:
            res = self._ensure_member().reset_offsets(offsets)
            written = set(res.committed)
            if res.failed:
                log.warning("could not reset the group's offsets of %s", "; ".join(
                    "%s-%d: %s" % (tp[0], tp[1], e) for tp, e in sorted(res.failed.items())))
        except Exception as e:
            log.warning("could not reset the group's offsets to %s: %s", to_spark(offsets), e)
            written = set()
        for tp in written:
            self._unwritten_reset.pop(tp, None)
        missed = sorted(set(offsets) - written)
        if not missed:
            return
        try:
            stale = self._member.offset_store.fetch(missed)
        except Exception as e:
            log.warning("could not read the group's offsets of %s: %s", _names(missed), e)
            return
        for tp in missed:
            if stale.get(tp) is not None and stale[tp] != offsets[tp]:
                self._unwritten_reset[tp] = (stale[tp], offsets[tp])
                log.info("the group's offset of %s-%d stays %d for now (not owned by this member at the moment, or "
                         "the write failed); it counts as %d and is reset when the member owns the partition", tp[0],
                         tp[1], stale[tp], offsets[tp])

    def _stored(self, tps):
        """The group's stored offsets of ``tps``, except where a data-loss reset was not written (:meth:`_reset_store`)
        and the store still holds the stale offset: there the offset it was reset to, written again now. Else a
        recreated topic's partition re-claimed after the reset would look "ahead of the checkpoint", be re-adopted
        from the stale offset, and that offset (past the new log end, its topic already noted as recreated) would
        count as a truncated log: the query would continue from the new log end, skipping the new topic's records.
        A stored offset that changed since (another member moved the group on) counts as it is."""
        stored = self._member.offset_store.fetch(list(tps))
        redo = {}
        for tp in tps:
            if tp not in self._unwritten_reset:
                continue
            was, reset_to = self._unwritten_reset[tp]
            if stored.get(tp) == was:
                stored[tp] = redo[tp] = reset_to
            else:
                del self._unwritten_reset[tp]
        if redo:
            self._reset_store(redo)
        return stored

    def _write_unwritten_resets(self, owned):
        """Write the data-loss resets the store has not taken yet (see :meth:`_stored`) for the partitions of
        ``owned`` (the member's owned set)."""
        pending = [tp for tp in self._unwritten_reset if tp in owned]
        if pending:
            self._stored(pending)

    def _confirm_behind(self, ends, start_d):
        """Partitions whose log end is behind the offset the query reached, confirmed by asking again
        (``fetchOffset.numRetries`` attempts, ``fetchOffset.retryIntervalMs`` apart: Spark's
        ``KafkaOffsetReaderAdmin.fetchLatestOffsets`` retries "incorrect offsets" the same way). Updates ``ends``."""
        behind = {tp for tp, e in ends.items() if e < start_d[tp]}
        for _ in range(self.opts.fetch_offset_retries - 1):
            if not behind:
                break
            time.sleep(self.opts.fetch_offset_retry_interval_ms / 1000.0)
            ends.update(self._log_ends(behind))
            behind = {tp for tp in behind if ends[tp] < start_d[tp]}
        return behind

    def reportLatestOffset(self):
        """The log ends seen by the last plan (Spark shows them as the source's ``latestOffset`` in the query's
        progress), plus the member's identity for :class:`~zkconsumer.spark.listener.ReleaseOnTermination`."""
        if self._member is None:
            return None
        from .listener import member_entry
        out = to_spark(self._latest_seen)
        if self._member.consumer_id is not None:
            out.update(member_entry(self.opts.zookeeper_connect, self.opts.group, self._member.consumer_id))
        return out

    def partitions(self, start, end):
        s, e = from_spark(start), from_spark(end)
        tasks = _tasks(self.opts, self._get_bootstrap(), s, e)
        self._commit_log.planned(s, e)
        return tasks

    def read(self, partition):
        return _read(self.opts, partition)

    def commit(self, end):
        offsets = from_spark(end)
        for tp in sorted(set(self._stale_commit) & set(offsets)):
            # after a data-loss reset: ends before the batch that starts at the reset offset are of the old log
            if offsets[tp] == self._stale_commit[tp]:
                del self._stale_commit[tp]
            else:
                del offsets[tp]
        if not offsets:
            return
        try:
            result = self._ensure_member().commit_forward(offsets)
        except Exception as e:
            # never fail the query over a derived copy of the offsets
            log.warning("committing %s to the group's offset store failed: %s", to_spark(offsets), e)
            return
        if result.failed:
            log.warning("offset commit failed for %s", "; ".join("%s-%d: %s" % (tp[0], tp[1], err)
                                                                for tp, err in sorted(result.failed.items())))
        else:
            log.info("committed %s to group %s", to_spark(offsets), self.opts.group)

    def stop(self):
        """Spark stops the source (see :mod:`.leave`): the last batch its commit log holds is committed, then the
        member leaves the group, unless a batch planned since may be committed too."""
        stop_begins()
        try:
            if self._probe is not None:
                self._probe.close()
            if self._member is not None:
                try:
                    leave(self)
                finally:
                    self._member = None
        except Exception:
            if stopped_by_spark():  # the exit below ends the process: the error is told here or never
                log.exception("stopping the source failed")
            raise
        finally:
            exit_if_stopped_by_spark()
