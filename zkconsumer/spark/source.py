"""The ``zkconsumer`` Python data source (``pyspark.sql.datasource``, pyspark>=4.2).

Where things run: ``partitions``/``latestOffset``/``commit``/``initialOffset`` run in a
long-lived Python process on the driver (the streaming source runner) - the :class:`GroupMember` lives there;
``read`` runs on executors and depends only on the :class:`RangePartition` it gets (no ZooKeeper, one Kafka
consumer per task).  Nothing live is ever pickled: clients are created lazily and dropped by ``__getstate__``.

Streaming offsets are ``{"topic": {"partition": next_offset}}`` holding exactly the partitions the member owned
when the batch was planned.  A batch reads ``[start[p], end[p])`` for partitions present in both.  The rules:

* partition owned but absent from ``start`` (first batch after a rebalance gave it to us): it is *adopted* - the
  end offset is its start (the group's committed offset, else ``startingOffsets``); nothing is read from it in that
  batch, the next batches read from there;
* partition in ``start`` no longer owned: absent from ``end`` (dropped; its successor continues from the store);
* checkpoint vs store: on the first plan of a query run and for partitions (re)claimed since the previous plan,
  the store is read; where it is **ahead** of the checkpointed offset (the group moved on: another member
  progressed, or an operator moved offsets forward) the partition is dropped for one batch and re-adopted from
  the store (logged); where it is behind (the normal one-batch commit lag, or a rollback) the checkpoint wins, so
  nothing is lost and nothing is committed backwards;
* ``commit(end)`` (Spark calls it for batch N-1 while planning batch N, never for the last batch) writes ``end`` for
  partitions still owned, fenced by the owner nodes, and only where it moves the stored offset forward.
"""
from __future__ import annotations

import logging
from typing import Dict, Optional

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from .options import SourceOptions, parse_options
from .offsets import from_spark, rate_limit, to_spark

log = logging.getLogger("zkconsumer.spark")

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"  # includeHeaders=true (as Spark's Kafka source)


class RangePartition(InputPartition):
    """``[start, end)`` of one Kafka partition and where to read it (picklable plain data)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, start: int, end: int):
        super().__init__((topic, partition, start, end))
        self.bootstrap, self.topic, self.partition, self.start, self.end = bootstrap, topic, partition, start, end

    def __repr__(self):
        return "RangePartition(%s-%d [%d, %d))" % (self.topic, self.partition, self.start, self.end)


def _read(opts: SourceOptions, part: RangePartition):
    from .kafka_io import read_range
    return read_range(part.bootstrap, part.topic, part.partition, part.start, part.end,
                      poll_timeout_ms=opts.poll_timeout_ms, fail_on_data_loss=opts.fail_on_data_loss,
                      batch_rows=opts.arrow_batch_size, include_headers=opts.include_headers,
                      security=opts.kafka_security, kafka_params=opts.kafka_params)


def _tasks(opts: SourceOptions, bootstrap: str, start, end):
    """One :class:`RangePartition` per Kafka partition with something to read, split further by
    ``maxRecordsPerPartition`` / ``minPartitions``."""
    from .offsets import split_ranges
    ranges = {tp: (start[tp], end[tp]) for tp in end if tp in start}
    return [RangePartition(bootstrap, t, p, s, e) for (t, p), s, e in
            split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)]


class ZkConsumerDataSource(DataSource):
    """Register with ``spark.dataSource.register(ZkConsumerDataSource)``; format name ``zkconsumer``."""

    @classmethod
    def name(cls):
        return "zkconsumer"

    def schema(self):
        return SCHEMA + ", " + HEADERS_COLUMN if parse_options(self.options).include_headers else SCHEMA

    def reader(self, schema):
        return ZkBatchReader(parse_options(self.options))

    def streamReader(self, schema):
        return ZkStreamReader(parse_options(self.options))


class ZkBatchReader(DataSourceReader):
    """Batch read of the group's unconsumed range: committed offset (else ``startingOffsets``) -> log end (else
    ``endingOffsets``). Commits nothing: see :func:`zkconsumer.spark.plan_batch` / :func:`commit_batch`."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts

    def partitions(self):
        from .commit import plan_batch
        plan = plan_batch(self.opts)
        parts = _tasks(self.opts, plan.bootstrap, plan.start, plan.end)
        return parts or [RangePartition(plan.bootstrap, "", 0, 0, 0)]

    def read(self, partition):
        return _read(self.opts, partition)


class ZkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self._member = None
        self._probe = None
        self._bootstrap = opts.bootstrap_servers
        self._first_plan = True
        self._seen_claims = 0
        self._target: Optional[Dict] = None  # AvailableNow: log ends recorded at prepareForTriggerAvailableNow
        self._last_trigger_ms = 0.0          # minOffsetsPerTrigger: when the last batch was let through
        self._latest_seen: Dict = {}         # log ends of the last plan (reportLatestOffset)
        self._topic_created: Dict = {}       # topic -> czxid of /brokers/topics/<t> when first read
        self._stale_commit: Dict = {}        # tp -> offset it was reset to after data loss (see commit)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_member"] = state["_probe"] = None
        return state

    # -- driver-side plumbing (runner process only) ------------------------------------------------------------
    def _ensure_member(self):
        if self._member is None:
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
            from .. import zk as zkmod
            from ..zk import bootstrap_from_zk
            zk = zkmod.connect(self.opts.zookeeper_connect, auth=self.opts.zk_auth())
            try:
                self._bootstrap = bootstrap_from_zk(zk, self.opts.zookeeper_connect,
                                                    self.opts.kafka_security.protocol)
            finally:
                zkmod.close(zk)
        return self._bootstrap

    def _get_probe(self):
        if self._probe is None:
            from .kafka_io import LogEndProbe
            self._probe = LogEndProbe(self._get_bootstrap(), from_fetch=self.opts.log_end_from_fetch,
                                      security=self.opts.kafka_security, kafka_params=self.opts.kafka_params)
        return self._probe

    def _ownership(self):
        snap = self._ensure_member().wait_ownership(timeout=0.0 if not self._first_plan else 60.0)
        return snap

    def _adopt(self, tps, overrides=None, ts_overrides=None, initial=False):
        from .cluster import resolve_start
        if not tps:
            return {}
        stored = self._member.offset_store.fetch(list(tps))
        # startingOffsetsByTimestampStrategy=error applies when the query starts (as in Spark); a partition
        # adopted later whose records are all older than startingTimestamp starts at its log end
        out = resolve_start(stored, tps, self.opts.default_reset(streaming=True), self._get_probe(), overrides,
                            ts_overrides, self.opts.no_match_latest or not initial)
        ends = self._get_probe().log_ends(tps)
        past = {tp: ends[tp] for tp in tps if out[tp] > ends[tp]}
        if past:  # e.g. the group's offset of a topic deleted and recreated since
            out.update(self._data_loss(past, out, "the group's offset"))
        self._note_topics(tps)
        for tp in sorted(out):
            log.info("adopting %s-%d at %d (%s)", tp[0], tp[1], out[tp],
                     "group offset" if stored.get(tp) == out[tp] else "no group offset: startingOffsets")
        if self._target is not None:
            for tp in tps:
                self._target.setdefault(tp, None)
        return out

    # -- DataSourceStreamReader --------------------------------------------------------------------------------
    def _refuse_batch_options(self):
        """As Spark's Kafka source: the ending options are for batch reads (raised from the first planning call:
        an exception in ``streamReader`` surfaces only as "Python worker failed to connect back")."""
        if self.opts.ending_given:
            from ..errors import ConfigError
            raise ConfigError(self.opts.ending_given[0], "...", "not valid in streaming queries (batch reads only, "
                              "as in Spark's Kafka source)")

    def initialOffset(self):
        self._refuse_batch_options()
        snap = self._ownership()
        if snap is None:
            log.warning("no completed rebalance yet: starting with no partitions")
            return {}
        owned, _claimed, claims = snap
        overrides = self.opts.starting if isinstance(self.opts.starting, dict) else None
        if self.opts.starting_by_timestamp is not None:
            from .cluster import require_all_partitions
            require_all_partitions("startingOffsetsByTimestamp", self.opts.starting_by_timestamp, owned)
        start = self._adopt(sorted(owned), overrides, self.opts.starting_by_timestamp, initial=True)
        self._first_plan = False
        self._seen_claims = claims
        return to_spark(start)

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
        import time
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
        snap = self._ownership()
        owned = snap[0] if snap else set()
        self._target = dict(self._get_probe().log_ends(owned))
        log.info("Trigger.AvailableNow: reading up to %s", to_spark(self._target))

    def latestOffset(self, start, limit):
        self._refuse_batch_options()
        start_d = from_spark(start)
        snap = self._ownership()
        if snap is None:  # a rebalance is under way: no new batch until it is done
            return to_spark(start_d)
        owned, claimed_at, claims = snap
        recheck = [tp for tp in start_d if tp in owned and (self._first_plan or claimed_at[tp] > self._seen_claims)]
        dropped = set()
        if recheck:
            stored = self._member.offset_store.fetch(recheck)
            for tp in recheck:
                if stored.get(tp) is not None and stored[tp] > start_d[tp]:
                    log.warning("group %s: stored offset of %s-%d (%d) is ahead of the checkpoint (%d): the group "
                                "moved on; re-adopting the partition from the stored offset (dropped for one batch)",
                                self.opts.group, tp[0], tp[1], stored[tp], start_d[tp])
                    dropped.add(tp)
        for tp in sorted(set(start_d) - owned):
            log.info("%s-%d is no longer owned by this member: dropped from the next batch", *tp)
        cont = sorted(tp for tp in start_d if tp in owned and tp not in dropped)
        new = sorted(tp for tp in owned if tp not in start_d)
        ends = self._get_probe().log_ends(cont) if cont else {}
        behind = self._confirm_behind(ends, start_d)
        self._latest_seen = dict(ends)
        latest, reset = {}, {}
        if behind:
            reset = self._data_loss({tp: ends[tp] for tp in behind}, start_d, "the offset this query reached")
        self._note_topics(cont)
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
        self._first_plan = False
        self._seen_claims = claims
        return to_spark(end)

    def _topic_czxid(self, topic):
        from ..layout import paths
        st = self._ensure_member().zk.exists(paths.topic_path(topic))
        return st.czxid if st is not None else None

    def _note_topics(self, tps):
        """Remember the creation (czxid of ``/brokers/topics/<t>``) of the topics read, to tell a recreated topic
        from a truncated log later."""
        for t in sorted({t for t, _ in tps} - set(self._topic_created)):
            self._topic_created[t] = self._topic_czxid(t)

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
        recreated = set()
        for t in sorted({t for t, _ in ends}):
            now = self._topic_czxid(t)
            if self._topic_created.get(t) is not None and now is not None and now != self._topic_created[t]:
                recreated.add(t)
                self._topic_created[t] = now
        out = dict(ends)
        starts = self._get_probe().earliest([tp for tp in ends if tp[0] in recreated])
        out.update(starts)
        for tp in sorted(ends):
            log.warning("%s; %s-%d continues from %d (%s, failOnDataLoss=false)", msg, tp[0], tp[1], out[tp],
                        "the recreated topic's start" if tp in starts else "the new log end")
        # Spark commits the batch planned before this one (ending at the old offsets) next: not to the store
        self._stale_commit.update(out)
        try:  # the stored offsets belong to data that is gone: else they would look "ahead of the checkpoint"
            res = self._ensure_member().reset_offsets(out)
            if res.failed:
                log.warning("could not reset the group's offsets of %s", ", ".join("%s-%d" % tp for tp in res.failed))
        except Exception as e:
            log.warning("could not reset the group's offsets to %s: %s", to_spark(out), e)
        return out

    def _confirm_behind(self, ends, start_d, attempts=3, pause=0.5):
        """Partitions whose log end is behind the offset the query reached, confirmed by asking again (a high
        watermark lags briefly after a leader change; Spark's Kafka source retries for the same reason). Updates
        ``ends`` with the last answers."""
        import time
        behind = {tp for tp, e in ends.items() if e < start_d[tp]}
        for _ in range(attempts):
            if not behind:
                break
            time.sleep(pause)
            ends.update(self._get_probe().log_ends(sorted(behind)))
            behind = {tp for tp in behind if ends[tp] < start_d[tp]}
        return behind

    def reportLatestOffset(self):
        """The log ends seen by the last plan (Spark shows them as the source's ``latestOffset`` in the query's
        progress), plus the member's identity for :class:`~zkconsumer.spark.listener.ReleaseOnTermination`."""
        if self._member is None:
            return None
        from .listener import member_entry
        out = to_spark(self._latest_seen)
        out.update(member_entry(self.opts.zookeeper_connect, self.opts.group, self._member.consumer_id))
        return out

    def partitions(self, start, end):
        s, e = from_spark(start), from_spark(end)
        bootstrap = self._get_bootstrap()
        return _tasks(self.opts, bootstrap, s, e)

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
        except Exception as e:  # never fail the query over a derived copy of the offsets
            log.warning("committing %s to the group's offset store failed: %s", to_spark(offsets), e)
            return
        if result.failed:
            log.warning("offset commit failed for %s", "; ".join("%s-%d: %s" % (tp[0], tp[1], err)
                                                                for tp, err in sorted(result.failed.items())))
        else:
            log.info("committed %s to group %s", to_spark(offsets), self.opts.group)

    def stop(self):
        if self._probe is not None:
            self._probe.close()
        if self._member is not None:
            self._member.shutdown()
            self._member = None
