"""The streaming source at the semantics of Spark's own Kafka source, on the shared local[2] session against the real
ZooKeeper + Apache Kafka: partitions and topics that join a running query start at earliest (and one that does not
start at 0 is data loss), a deleted topic is data loss, Trigger.AvailableNow never ends on a plan made while the group
rebalances, the member is released only after the query's last commit and commit_batch is fenced by its owner nodes,
and idle partitions' offsets in Kafka are re-committed before the broker's retention deletes them.

Every check of what was read compares the exact set of (topic, partition, offset) read with what was produced."""
import re
import threading
import time

import pytest

from tests.support.migrate_support import delete_topic
from tests.support.spark_support import (delete_records, member_ids, owners, produced_set, set_zk_offsets,
                                         source_options, zk_offsets)
from tests.support.spark_support import start_collecting as _start
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths

pytestmark = pytest.mark.spark


def _progressed(q, n=1):
    return len(q.recentProgress) >= n


def test_a_new_topic_matched_by_the_pattern_starts_at_earliest(spark, services, unique, tmp_path):
    """Default startingOffsets (latest): the topic that exists at the start is read from where the query started;
    a topic created while it runs is read from its first record, including what was written to it before the member
    claimed it (rebalance.settle.ms=3000 holds the claim back while the records are written)."""
    prefix = unique("np")
    first = services.create_topic(prefix + "-a", 1)
    services.produce(first, 5)                                   # before the query: not read (latest)
    opts = source_options(services, unique("g"), None, startingOffsets=None, subscribePattern=prefix + "-.*",
                          **{"rebalance.settle.ms": "3000"})
    del opts["subscribe"]
    rows = []
    q = _start(spark, opts, str(tmp_path / "ck"), rows)
    try:
        wait_until(lambda: _progressed(q, 2), 120, lambda: q.exception())
        second = services.create_topic(prefix + "-b", 2)
        services.produce(second, 10)
        services.produce(first, 3)
        want = {(first, p, o) for p, o in produced_set(services, first, 1, since={0: 5})} | \
            {(second, p, o) for p, o in produced_set(services, second, 2)}
        assert len(want) == 13
        wait_until(lambda: set(rows) >= want, 120, lambda: (sorted(want - set(rows)), q.exception()))
        time.sleep(1)
        assert sorted(rows) == sorted(want)                      # exactly: nothing skipped, nothing twice
    finally:
        q.stop()


@pytest.mark.parametrize("fail", [True, False])
def test_an_added_partition_that_does_not_start_at_zero_is_data_loss(spark, services, zk, unique, tmp_path, fail):
    """Spark: "Added partition ... starts from X instead of 0". The partition is added while the query runs (default
    startingOffsets: latest; the first partition starts from the group's offset) and 4 of its records are deleted
    before the member claims it: failOnDataLoss fails the query, else the partition is read from its first record."""
    topic, group = services.create_topic(unique("ap"), 1), unique("g")
    services.produce(topic, 4)
    set_zk_offsets(zk, group, topic, {0: 0})
    opts = source_options(services, group, topic, startingOffsets=None, failOnDataLoss=str(fail).lower(),
                          **{"rebalance.settle.ms": "3000"})
    rows = []
    q = _start(spark, opts, str(tmp_path / "ck"), rows)
    try:
        wait_until(lambda: len(rows) >= 4, 120, lambda: q.exception())
        services.create_topic(topic, 2)
        services.produce(topic, 10, partition=1)
        delete_records(services, topic, 1, 4)
        if fail:
            with pytest.raises(Exception, match=r"Added partition %s-1 starts from 4 instead of 0.*failOnDataLoss"
                               % topic):
                q.awaitTermination(120)
            return
        want = {(topic, 0, o) for o in range(4)} | {(topic, 1, o) for o in range(4, 10)}
        wait_until(lambda: set(rows) >= want, 120, lambda: (sorted(want - set(rows)), q.exception()))
        time.sleep(1)
        assert sorted(rows) == sorted(want) and q.isActive
    finally:
        q.stop()


def test_a_deleted_topic_is_data_loss(spark, services, zk, unique, tmp_path):
    """Two queries on the same two topics, one with failOnDataLoss=true (the default), one false; one topic is
    deleted: the first fails naming its partition ("... are gone"), the second goes on with the other topic."""
    doomed, kept = services.create_topic(unique("dt"), 1), services.create_topic(unique("dk"), 1)
    services.produce(doomed, 5)
    services.produce(kept, 5)
    strict_rows, lax_rows = [], []
    strict = _start(spark, source_options(services, unique("g"), "%s,%s" % (doomed, kept)), str(tmp_path / "c1"),
                    strict_rows)
    lax = _start(spark, source_options(services, unique("g"), "%s,%s" % (doomed, kept), failOnDataLoss="false"),
                 str(tmp_path / "c2"), lax_rows)
    try:
        wait_until(lambda: len(strict_rows) >= 10 and len(lax_rows) >= 10, 120,
                   lambda: (strict.exception(), lax.exception()))
        delete_topic(services, zk, doomed)
        with pytest.raises(Exception, match=r"%s-0.* are gone \(topic deleted\).*failOnDataLoss=false" % doomed):
            strict.awaitTermination(120)
        services.produce(kept, 4)
        want = {(doomed, 0, o) for o in range(5)} | {(kept, 0, o) for o in range(9)}
        wait_until(lambda: set(lax_rows) >= want, 120, lambda: (sorted(want - set(lax_rows)), lax.exception()))
        assert sorted(lax_rows) == sorted(want) and lax.isActive
    finally:
        strict.stop()
        lax.stop()


def test_available_now_waits_for_a_rebalance_instead_of_ending(spark, services, zk, unique, tmp_path):
    """While batch 0 is written, a partition is added to the topic and a previous owner (a ghost owner node) holds
    it for 5 s: the member's rebalance cannot complete meanwhile. A plan made then must not report "no new data"
    (Spark would end the Trigger.AvailableNow run with the backlog unread): every record is read, exactly once."""
    topic, group = services.create_topic(unique("an"), 2), unique("g")
    services.produce(topic, 40)
    want = {(topic, p, o) for p, o in produced_set(services, topic, 2)}
    ghost = paths.partition_owner_path(group, topic, 2)
    released = threading.Event()

    def hold_the_new_partition(df, batch_id):
        if batch_id == 0:
            zk.create(ghost, b"%s_ghost-0" % group.encode(), ephemeral=True, makepath=True)
            services.create_topic(topic, 3)
            threading.Timer(5.0, lambda: (zk.delete(ghost), released.set())).start()

    rows = []
    q = _start(spark, source_options(services, group, topic, maxOffsetsPerTrigger=5), str(tmp_path / "ck"), rows,
               trigger="availableNow", each=hold_the_new_partition)
    assert q.awaitTermination(240), "the query did not end"
    assert q.exception() is None, q.exception()
    assert released.is_set()
    assert sorted(rows) == sorted(want), (len(rows), len(want))


def test_the_member_is_released_after_the_last_commit(spark, services, zk, unique, tmp_path):
    """The source's own commit lags a batch and never runs for the last one, and the member's owner nodes must
    outlive the commit of the last batch, or another member could claim the partitions and read it again from the
    stored offsets. At the end of a Trigger.AvailableNow run (name_member; the query listener installed, which
    leaves a named member to the application) the source commits the run's last batch itself and then releases its
    member; the application's finish_query afterwards finds nothing left to commit."""
    from zkconsumer.spark import finish_query, install_release_listener, last_committed_end, name_member, plan_batch
    install_release_listener(spark)
    topic, group = services.create_topic(unique("rl"), 2), unique("g")
    services.produce(topic, 30)
    opts = name_member(source_options(services, group, topic, maxOffsetsPerTrigger=8,
                                      **{"zookeeper.session.timeout.ms": "30000"}))
    ckpt, rows = str(tmp_path / "ck"), []
    q = _start(spark, opts, ckpt, rows, trigger="availableNow")
    assert q.awaitTermination(240) and q.exception() is None, q.exception()
    assert sorted((t, p, o) for t, p, o in rows) == sorted((topic, p, o) for p, o in produced_set(services, topic, 2))
    end = {p: o for (_t, p), o in last_committed_end(ckpt).items()}
    assert sum(end.values()) == 30
    wait_until(lambda: not owners(zk, group, topic) and not member_ids(zk, group), 20,
               lambda: (owners(zk, group, topic), member_ids(zk, group)))        # not the 30 s session's end
    assert zk_offsets(zk, group, topic) == end
    report = finish_query(opts, ckpt)
    assert not report["failed"] and not report["committed"], report
    assert zk_offsets(zk, group, topic) == end
    assert plan_batch(source_options(services, group, topic)).total == 0    # a successor reads nothing again


def test_commit_batch_recognises_its_member_and_is_fenced(services, zk, unique):
    """commit_batch commits the partitions of the application's member, named by consumer.id (a user-set one, without
    the spark- marker, included), skips those of any other member (another Spark member too), and its write is fenced
    by the owner node: a node of another session refuses it."""
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.offsets import make_offset_store
    from zkconsumer.spark import commit_batch
    from zkconsumer.spark.member import GroupMember
    topic, group = services.create_topic(unique("cf"), 2), unique("g")
    services.produce(topic, 20)
    tps = {(topic, 0): 3, (topic, 1): 4}

    def member(consumer_id):
        cfg = ConsumerConfig.from_properties({"zookeeper.connect": services.zookeeper_connect, "group.id": group,
                                              "consumer.id": consumer_id})
        m = GroupMember(cfg, bootstrap_servers=services.bootstrap_servers, reaper=False).join(topics=[topic])
        wait_until(lambda: m.ownership() and len(m.ownership()[0]) == 2, 30, "the member to own both partitions")
        return m

    opts = dict(source_options(services, group, topic), **{"consumer.id": "etl-1"})
    m = member("etl-1")
    try:
        report = commit_batch(opts, tps)
        assert report["committed"] == {"%s-0" % topic: 3, "%s-1" % topic: 4} and not report["skipped"], report
    finally:
        m.shutdown()
    m = member("spark-other")
    try:
        report = commit_batch(dict(opts, **{"consumer.id": "spark-mine"}), {(topic, 0): 9})
        assert report["skipped"] == {"%s-0" % topic: "owned by %s_spark-other" % group} and not report["committed"]
        assert zk_offsets(zk, group, topic) == {0: 3, 1: 4}
        # the fence itself: the owner node is spark-other's; a fence for another session refuses the write
        from zkconsumer.spark.commit import forward_only
        from zkconsumer.spark.fence import member_fence, owner_nodes
        (_owner, session), = owner_nodes(zk, group, [(topic, 0)]).values()
        cfg = ConsumerConfig.from_properties({"zookeeper.connect": services.zookeeper_connect, "group.id": group})
        store = make_offset_store(cfg, zk)
        res = forward_only(store, {(topic, 0): 9}, fence=member_fence(group, session + 1, [(topic, 0)]))
        assert (topic, 0) in res.failed and "session" in str(res.failed[(topic, 0)])
        res = forward_only(store, {(topic, 0): 9}, fence=member_fence(group, session, [(topic, 0)]))
        assert res.committed == {(topic, 0): 9} and not res.failed
    finally:
        m.shutdown()
    set_zk_offsets(zk, group, topic, {0: 9})


def test_idle_partitions_offsets_in_kafka_are_kept_alive(spark, services, unique, tmp_path):
    """offsets.storage=kafka: Kafka deletes an offset offsets.retention.minutes after its last commit, and a
    partition that receives nothing is never committed again by forward-only commits. The member re-commits it
    (unchanged) every auto.commit.interval.ms (2 s here; default 60 s, at most half the retention): its commit
    timestamp in __consumer_offsets moves on while the query runs idle."""
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.offsets import make_offset_store
    from zkconsumer.offsets.expiry import read_commit_times
    from zkconsumer.spark import commit_batch, last_committed_end, read_checkpoint_offsets
    topic, group = services.create_topic(unique("ka"), 2), unique("g")
    services.produce(topic, 10)
    opts = source_options(services, group, topic, **{"offsets.storage": "kafka", "dual.commit.enabled": "false",
                                                     "auto.commit.interval.ms": "2000"})
    ckpt, rows = str(tmp_path / "ck"), []
    q = _start(spark, opts, ckpt, rows, each=lambda df, b: commit_batch(opts, read_checkpoint_offsets(ckpt, b)))
    cfg = ConsumerConfig.from_properties({"zookeeper.connect": services.zookeeper_connect, "group.id": group,
                                          "offsets.storage": "kafka", "dual.commit.enabled": "false"})
    store = make_offset_store(cfg, None, bootstrap_servers=services.bootstrap_servers)
    try:
        tps = [(topic, 0), (topic, 1)]
        wait_until(lambda: sorted(rows) == sorted((topic, p, o) for p, o in produced_set(services, topic, 2)),
                   120, lambda: q.exception())
        ends = wait_until(lambda: (lambda e: e if sum(e.values()) == 10 else None)(last_committed_end(ckpt)), 60,
                          "the checkpoint to commit all 10 records")
        wait_until(lambda: store.fetch(tps) == ends, 60, lambda: (store.fetch(tps), ends))
        first = read_commit_times(services.bootstrap_servers, group, tps)
        time.sleep(6)                                          # the query is idle: nothing new to read or commit
        later = read_commit_times(services.bootstrap_servers, group, tps)
        assert all(later[tp] > first[tp] for tp in tps), (first, later)
        assert store.fetch(tps) == ends                        # the same offsets, committed again
    finally:
        q.stop()
        store.close()


def test_assign_reads_the_listed_partitions_without_joining_the_group(spark, services, zk, unique, tmp_path):
    """assign: exactly the listed partitions, as Kafka's assign(): no registration and no owner node in the group
    while the query runs; the group's committed offsets are its start and its commits go to the group's store; a
    listed partition that does not exist fails naming it. The batch read takes the same option."""
    from zkconsumer.spark import commit_batch, read_checkpoint_offsets
    topic, group = services.create_topic(unique("as"), 3), unique("g")
    services.produce(topic, 30)
    set_zk_offsets(zk, group, topic, {2: 1})
    opts = source_options(services, group, None, assign='{"%s": [0, 2]}' % topic)
    del opts["subscribe"]
    produced = produced_set(services, topic, 3, since={2: 1})
    want = sorted((topic, p, o) for p, o in produced if p in (0, 2))
    ckpt, rows, seen = str(tmp_path / "ck"), [], []

    def each(df, batch_id):
        seen.append((member_ids(zk, group), owners(zk, group, topic)))
        commit_batch(opts, read_checkpoint_offsets(ckpt, batch_id))
    q = _start(spark, dict(opts, maxOffsetsPerTrigger=8), ckpt, rows, trigger="availableNow", each=each)
    assert q.awaitTermination(240) and q.exception() is None, q.exception()
    assert sorted(rows) == want
    assert seen and all(ids == [] and not own for ids, own in seen), seen
    ends = {p: 1 + max(o for _t, q_, o in rows if q_ == p) for p in (0, 2)}
    assert zk_offsets(zk, group, topic) == ends                  # partition 1 untouched
    batch = spark.read.format("zkconsumer").options(**dict(opts, startingOffsets="earliest")).load()
    assert batch.count() == 0                                    # the group's offsets are at the ends now
    bad = spark.read.format("zkconsumer").options(**dict(opts, assign='{"%s": [0, 7]}' % topic)).load()
    with pytest.raises(Exception, match=r"assign.*no such partition: %s-7" % topic):
        bad.collect()


def test_the_first_batch_is_not_planned_before_the_member_knows_its_partitions(services, zk, unique):
    """initialOffset (run here in the test process, on the real ZooKeeper and Kafka) while a previous owner holds a
    partition the member is assigned: the member cannot finish its first rebalance, and initialOffset fails naming
    the group instead of returning no partitions (those would all start at earliest later, not at startingOffsets;
    under Trigger.AvailableNow the run would end at once)."""
    from zkconsumer.spark import stream
    from zkconsumer.spark.options import parse_options
    topic, group = services.create_topic(unique("fb"), 2), unique("g")
    zk.create(paths.partition_owner_path(group, topic, 1), b"%s_ghost-0" % group.encode(), ephemeral=True,
              makepath=True)
    reader = stream.ZkStreamReader(parse_options(source_options(services, group, topic, ownerReaper="false",
                                                                groupSettleTimeoutMs=2000, **{
        "rebalance.max.retries": "1", "rebalance.backoff.ms": "100", "zookeeper.session.timeout.ms": "6000"})))
    try:
        with pytest.raises(stream.GroupNotSettledError, match="group %s: the partitions of member .* are not known"
                           % group):
            reader.initialOffset()
    finally:
        reader.stop()


def test_a_first_batch_replayed_after_a_restart_starts_where_it_started(services, zk, unique):
    """Spark's offset log holds only the end of each batch: a query restarted before batch 0 finished (a driver killed,
    a sink that failed) replays batch 0 from ``initialOffset()``, asked again (Spark 4.x
    ``MicroBatchExecution.constructNextBatch``/``runBatch``: the previous batch's end, else ``stream.initialOffset``).
    With the default startingOffsets (latest) and a group with no committed offset, the second answer must be the
    first one, not the log end of the restart: else batch 0's records are skipped without a word. The two runs of the
    source are driven here in the test process, as the streaming source runner drives them."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    from zkconsumer.spark import stream
    from zkconsumer.spark.offsets import from_spark
    from zkconsumer.spark.options import parse_options
    topic, group = services.create_topic(unique("rb"), 2), unique("g")
    services.produce(topic, 10)                                 # before the query: not read (latest)
    opts = parse_options(source_options(services, group, topic, startingOffsets=None, ownerReaper="false"))
    first = stream.ZkStreamReader(opts)
    try:
        start = first.initialOffset()
        assert sum(from_spark(start).values()) == 10
        services.produce(topic, 20)                             # batch 0's records
        end = first.latestOffset(start, ReadAllAvailable())
        assert sum(from_spark(end).values()) == 30
    finally:
        first.stop()                                            # the run dies before batch 0 is written
    services.produce(topic, 5)                                  # while it is down
    second = stream.ZkStreamReader(opts)
    try:
        assert second.initialOffset() == start                  # batch 0 is [start, end) again
        tasks = second.partitions(start, end)
        assert sum(t.end - t.start for t in tasks) == 20
    finally:
        member = second._member
        second.stop()                                           # batch 0 is planned: the member keeps its nodes
        member.shutdown()


def test_a_restarted_first_batch_reports_what_retention_deleted_from_it(spark, services, zk, unique, tmp_path):
    """The same replay of batch 0 through Spark: batch 0 ([0, 30), startingOffsets=earliest, a group with no offset)
    fails in the sink; retention deletes its first 10 records; the query restarted on the checkpoint must report
    them lost (failOnDataLoss, the default), as Spark's Kafka source does, not start batch 0 at the new log start."""
    topic, group = services.create_topic(unique("rr"), 1), unique("g")
    services.produce(topic, 30)
    opts = source_options(services, group, topic)
    ckpt, seen = str(tmp_path / "ck"), []

    def sink_down(df, batch_id):
        seen.append((batch_id, df.count()))
        raise RuntimeError("the sink is down")
    q = _start(spark, opts, ckpt, [], each=sink_down)
    with pytest.raises(Exception, match="the sink is down"):
        q.awaitTermination(120)
    assert seen and seen[0] == (0, 30), seen
    delete_records(services, topic, 0, 10)
    rows = []
    q = _start(spark, opts, ckpt, rows)
    try:
        # (the failed run's member holds the partition until its session ends: the restart claims it after that)
        wait_until(lambda: not q.isActive, 240, lambda: (member_ids(zk, group), owners(zk, group, topic)))
        assert re.search(r"offsets \[0, 10\) of %s-0 are not in the log any more" % topic, str(q.exception())), \
            q.exception()
        assert rows == []
    finally:
        q.stop()


def test_available_now_fails_when_the_group_does_not_settle(services, zk, unique):
    """Trigger.AvailableNow, driven in the test process as the streaming source runner drives it: after the first
    batch a partition is added and a previous owner (a ghost owner node) holds it for good, so the member's
    rebalance cannot complete. The next plan must fail the query naming the group once the wait is over, not report
    "no new data" (Spark would end the run with the backlog unread)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    from zkconsumer.spark import stream
    from zkconsumer.spark.options import parse_options
    topic, group = services.create_topic(unique("af"), 2), unique("g")
    services.produce(topic, 20)
    reader = stream.ZkStreamReader(parse_options(source_options(services, group, topic, ownerReaper="false",
                                                                groupSettleTimeoutMs=2000, **{
        "rebalance.max.retries": "1", "rebalance.backoff.ms": "100", "zookeeper.session.timeout.ms": "6000"})))
    try:
        reader.prepareForTriggerAvailableNow()
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end != start
        zk.create(paths.partition_owner_path(group, topic, 2), b"%s_ghost-0" % group.encode(), ephemeral=True,
                  makepath=True)
        services.produce(topic, 10)                              # a backlog the run must not leave unread
        services.create_topic(topic, 3)
        # the member is rebalancing
        wait_until(lambda: reader._member.ownership() is None, 30, "the member to be rebalancing")
        with pytest.raises(stream.GroupNotSettledError, match="group %s: the partitions of member .* are not known.*"
                           "Trigger.AvailableNow" % group):
            reader.latestOffset(end, ReadAllAvailable())
    finally:
        reader.stop()


def _create(services, topic):
    """Create ``topic`` (1 partition); False while the brokers still refuse it (its deletion not finished)."""
    try:
        return services.create_topic(topic, 1)
    except Exception:
        return False


def test_a_recreated_topic_is_read_from_its_start_when_the_member_released_it_during_the_reset(services, zk, unique):
    """failOnDataLoss=false, driven in the test process as the streaming source runner drives it. The topic is deleted
    and recreated behind the query's offset 20 (the group's stored offset is 20 too). The plan that finds the new log
    end behind 20 continues from the new topic's start and resets the stored offset, but a rebalance (another member
    joins) has taken the partition from the member at that moment, so the store keeps 20. Once the member owns the
    partition again, the next plans must read the new topic from 0: the stale 20 is not "the group moved on", and
    re-adopting the partition from it (past the new log end of a topic already known to be recreated, so taken for a
    truncated log) would skip every record of the new topic."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    from zkconsumer.core.layout import codecs
    from zkconsumer.spark import stream
    from zkconsumer.spark.offsets import from_spark
    from zkconsumer.spark.options import parse_options
    topic, group = services.create_topic(unique("ru"), 1), unique("g")
    tp = (topic, 0)
    services.produce(topic, 20)
    reader = stream.ZkStreamReader(parse_options(source_options(services, group, topic, failOnDataLoss="false",
                                                                ownerReaper="false")))
    # "a" sorts before the Spark member: the range assignor gives it the partition (it never claims it)
    other = paths.consumer_registration_path(group, "%s_a" % group)

    def owned():
        snap = reader._member.ownership()
        return None if snap is None else snap[0]
    try:
        start = reader.initialOffset()
        plans = [reader.latestOffset(start, ReadAllAvailable())]
        assert from_spark(plans[0]) == {tp: 20}
        reader.commit(plans[0])
        assert zk_offsets(zk, group, topic) == {0: 20}
        delete_topic(services, zk, topic)
        wait_until(lambda: owned() == set(), 60, "the member to release the deleted topic's partition")
        wait_until(lambda: _create(services, topic), 60, interval=1.0, message="the topic created again")
        services.produce(topic, 3)
        wait_until(lambda: owned() == {tp}, 60, "the member to claim the recreated topic's partition")
        real_reset = reader._member.reset_offsets

        def reset_after_a_rebalance(offsets):
            zk.create(other, codecs.encode_consumer_registration(codecs.ConsumerRegistration.static({topic: 1})),
                      ephemeral=True, makepath=True)
            wait_until(lambda: owned() == set(), 30, "the member to release the partition to the other member")
            return real_reset(offsets)
        reader._member.reset_offsets = reset_after_a_rebalance

        def plan():
            """True when a new batch was planned (not while the member rebalances); Spark then commits the one
            before."""
            end = reader.latestOffset(plans[-1], ReadAllAvailable())
            if end == plans[-1]:
                return False
            plans.append(end)
            reader.commit(plans[-2])
            return True
        wait_until(plan, 30, "a plan past the rebalance")
        reader._member.reset_offsets = real_reset
        assert from_spark(plans[-1]) == {tp: 0}                   # the new topic from its start
        assert zk_offsets(zk, group, topic) == {0: 20}            # the reset could not be written
        zk.delete(other)
        wait_until(lambda: owned() == {tp}, 60, "the member to claim the partition again")
        services.produce(topic, 2)
        # until the plans reach the log end and have nothing new
        wait_until(lambda: not plan() and from_spark(plans[-1]) == {tp: 5}, 60, lambda: plans)
        read = sorted(o for s, e in zip(plans, plans[1:]) for task in reader.partitions(s, e)
                      for o in range(task.start, task.end))
        assert read == list(range(5)), plans
        reader.commit(plans[-1])
        assert zk_offsets(zk, group, topic) == {0: 5}
    finally:
        reader.stop()
        if zk.exists(other):
            zk.delete(other)
