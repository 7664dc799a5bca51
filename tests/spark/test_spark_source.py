"""zkconsumer.spark: the PySpark data source against real ZooKeeper + broker, in one local[2] SparkSession."""
import json
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.spark

from tests.support.spark_support import owners as _owners, produced_set, set_zk_offsets as _set_zk_offsets  # noqa: E402
from tests.support.spark_support import source_options as _opts, zk_offsets  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402
from zkconsumer.core.layout import paths  # noqa: E402


def test_batch_reads_committed_to_log_end(spark, services, zk, unique):
    topic, group = services.create_topic(unique("sb"), 2), unique("g")
    services.produce(topic, 40)
    _set_zk_offsets(zk, group, topic, {0: 3})        # partition 1: nothing committed -> earliest
    from zkconsumer.spark import plan_batch, commit_batch
    opts = _opts(services, group, topic)
    plan = plan_batch(opts)
    assert plan.total == 37
    df = (spark.read.format("zkconsumer").options(**opts).load())
    rows = df.select("partition", "offset", "value", "topic", "key").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    want = sorted([(0, o) for o in range(3, plan.end[(topic, 0)])] + [(1, o) for o in range(plan.end[(topic, 1)])])
    assert got == want
    assert all(json.loads(r.value)["key"] == r.key.decode() for r in rows)
    assert zk_offsets(zk, group, topic) == {0: 3}  # batch read commits nothing
    rep = commit_batch(opts, plan.end)
    assert zk_offsets(zk, group, topic) == {0: plan.end[(topic, 0)], 1: plan.end[(topic, 1)]}
    assert not rep["failed"]
    assert spark.read.format("zkconsumer").options(**opts).load().count() == 0
    commit_batch(opts, {(topic, 0): 1})                # never backwards
    assert zk_offsets(zk, group, topic)[0] == plan.end[(topic, 0)]


def test_bad_options_are_clear(services, unique):
    from zkconsumer.errors import ConfigError
    from zkconsumer.spark.options import parse_options
    base = {"zookeeper.connect": services.zookeeper_connect, "group.id": "g"}
    with pytest.raises(ConfigError, match="subscribe"):
        parse_options(base)
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger"):
        parse_options(dict(base, subscribe="t", maxOffsetsPerTrigger="0"))
    with pytest.raises(ConfigError, match="startingOffsets"):
        parse_options(dict(base, subscribe="t", startingOffsets="yesterday"))
    with pytest.raises(ConfigError, match="offsets.storage"):
        parse_options(dict(base, subscribe="t", **{"offsets.storage": "redis"}))
    with pytest.raises(ConfigError, match="bogus"):
        parse_options(dict(base, subscribe="t", bogus="1"))


def _run_available_now(spark, opts, ckpt, zk=None, group=None, topic=None, n=2):
    """Run an availableNow query with foreachBatch; returns ([(batch_id, rows)], [zk offsets seen in each batch])."""
    batches, seen = [], []

    def each(df, batch_id):
        rows = [(r.partition, r.offset, r.value) for r in df.select("partition", "offset", "value").collect()]
        batches.append((batch_id, rows))
        if zk is not None:
            seen.append((batch_id, zk_offsets(zk, group, topic)))

    q = (spark.readStream.format("zkconsumer").options(**opts).load()
         .writeStream.foreachBatch(each).option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    assert q.awaitTermination(120), "query did not terminate"
    assert q.exception() is None, q.exception()
    return batches, seen


def test_streaming_commits_follow_batches_and_restart_continues(spark, services, zk, unique, tmp_path):
    from zkconsumer.spark import commit_batch, last_committed_end, read_checkpoint_offsets
    topic, group = services.create_topic(unique("ss"), 2), unique("g")
    services.produce(topic, 30)
    opts = _opts(services, group, topic, maxOffsetsPerTrigger=8)
    ckpt = str(tmp_path / "ckpt")
    batches, seen = _run_available_now(spark, opts, ckpt, zk, group, topic)
    data_batches = [(b, rows) for b, rows in batches if rows]
    assert len(data_batches) >= 4 and all(len(rows) <= 8 for _, rows in batches)   # maxOffsetsPerTrigger holds
    first = sorted((p, o) for _, rows in batches for p, o, _ in rows)
    assert first == sorted(produced_set(services, topic, 2))                          # every record once
    # the group's ZooKeeper offsets follow the batches: while batch N is written, batch N-1 is committed
    for b, offs in seen:
        if b >= 1:
            want = {p: o for (t, p), o in read_checkpoint_offsets(ckpt, b - 1).items()}
            assert {p: o for p, o in offs.items() if p in want} == want, (b, offs, want)
    # owner nodes and the registration go away when the query ends: the application did not release the member
    # (finish_query), so they end with its ZooKeeper session (6 s; the reaper only acts when the driver died)
    wait_until(lambda: not _owners(zk, group, topic), 20, lambda: _owners(zk, group, topic))
    assert not zk.get_children(paths.group_ids_path(group))
    # commit-after-output for the last batch (Spark never calls commit for it)
    last = last_committed_end(ckpt)
    commit_batch(opts, last)
    ends = {p: o for (t, p), o in last.items()}
    assert sum(ends.values()) == 30 and zk_offsets(zk, group, topic) == ends
    # restart from the checkpoint: only the new messages, none lost, none twice
    services.produce(topic, 12)
    batches2, _ = _run_available_now(spark, opts, ckpt)
    second = sorted((p, o) for _, rows in batches2 for p, o, _ in rows)
    assert second == sorted(produced_set(services, topic, 2, since={p: o for (_t, p), o in last.items()}))
    assert all(o >= ends[p] for p, o in second)
    commit_batch(opts, last_committed_end(ckpt))
    assert sum(zk_offsets(zk, group, topic).values()) == 42


def test_spark_member_and_plain_consumer_share_partitions(spark, services, zk, unique, tmp_path):
    import threading
    from zkconsumer.core.assignors import range_assign
    topic, group = services.create_topic(unique("sh"), 4), unique("g")
    cmd = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", services.zookeeper_connect, "--group",
           group, "--topic", topic, "--property", "auto.offset.reset=smallest", "--events"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    plain_rows, events = [], []
    threading.Thread(target=lambda: [plain_rows.append(json.loads(line)) for line in proc.stdout], daemon=True).start()
    threading.Thread(target=lambda: [events.append(line) for line in proc.stderr], daemon=True).start()
    spark_rows = []
    q = None
    try:
        wait_until(lambda: len(_owners(zk, group, topic)) == 4, 30, "the plain consumer to claim")
        opts = _opts(services, group, topic)
        q = (spark.readStream.format("zkconsumer").options(**opts).load()
             .writeStream.foreachBatch(lambda df, b: spark_rows.extend(
                 (r.partition, r.offset) for r in df.select("partition", "offset").collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="300 milliseconds").start())
        ids = wait_until(lambda: len(zk.get_children(paths.group_ids_path(group))) == 2
                         and len(set(_owners(zk, group, topic).values())) == 2
                         and len(_owners(zk, group, topic)) == 4 and zk.get_children(paths.group_ids_path(group)), 60,
                         lambda: (zk.get_children(paths.group_ids_path(group)), _owners(zk, group, topic)))
        expected = range_assign({topic: ["%s-0" % c for c in ids]}, {topic: [0, 1, 2, 3]})
        owners = _owners(zk, group, topic)
        assert owners == {p: th for (t, p), th in expected.items()}
        spark_parts = {p for p, th in owners.items() if "_spark-" in th}
        assert len(spark_parts) == 2
        time.sleep(2)  # let the spark member adopt its partitions (one planning round)
        for p in range(4):
            services.produce(topic, 10, partition=p)
        wait_until(lambda: len(spark_rows) + len(plain_rows) >= 40, 60, lambda: (len(spark_rows), len(plain_rows)))
        time.sleep(1)
        assert {p for p, _ in spark_rows} == spark_parts
        assert {r["partition"] for r in plain_rows} == set(range(4)) - spark_parts
        allrows = spark_rows + [(r["partition"], r["offset"]) for r in plain_rows]
        assert sorted(allrows) == sorted(produced_set(services, topic, 4))  # each message read exactly once
        q.stop()
        q = None
        # the spark member's owner nodes are released when the query stops: the plain member takes everything
        wait_until(lambda: set(_owners(zk, group, topic).values()) == {th for th in owners.values()
                                                                       if "_spark-" not in th}
                   and len(_owners(zk, group, topic)) == 4, 20, lambda: _owners(zk, group, topic))
    finally:
        if q is not None:
            q.stop()
        proc.terminate()
        proc.wait(30)


def test_kafka_storage_with_dual_commit_writes_both(spark, services, zk, unique, tmp_path):
    from zkconsumer.offsets.dual import DualOffsetStore
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.offsets import make_offset_store
    from zkconsumer.spark import commit_batch, last_committed_end
    topic, group = services.create_topic(unique("sd"), 2), unique("g")
    services.produce(topic, 20)
    opts = _opts(services, group, topic, maxOffsetsPerTrigger=6,
                 **{"offsets.storage": "kafka", "dual.commit.enabled": "true"})
    ckpt = str(tmp_path / "ckpt")
    cfg = ConsumerConfig.from_properties({"group.id": group, "zookeeper.connect": services.zookeeper_connect,
                                          "offsets.storage": "kafka", "dual.commit.enabled": "true"})
    store = make_offset_store(cfg, zk, bootstrap_servers=services.bootstrap_servers)
    assert isinstance(store, DualOffsetStore)
    try:
        batches, _ = _run_available_now(spark, opts, ckpt)
        assert sorted((p, o) for _, r in batches for p, o, _ in r) == sorted(produced_set(services, topic, 2))
        # source commits wrote both stores. The last one is the source's stop(): Spark ends the runner process with
        # SIGTERM and does not wait for it, so awaitTermination() can return between its Kafka and ZooKeeper writes
        mid = {}

        def agreed():
            mid.update(store.fetch_both([(topic, 0), (topic, 1)]))
            return any(z is not None for z, k in mid.values()) and all(z == k for z, k in mid.values())
        wait_until(agreed, 30, message=lambda: ("both stores to hold the source's commits", mid))
        commit_batch(opts, last_committed_end(ckpt))
        both = store.fetch_both([(topic, 0), (topic, 1)])
        assert all(z == k for z, k in both.values()) and sum(k for _, k in both.values()) == 20, both
    finally:
        store.close()


def test_restart_when_store_is_ahead_of_checkpoint_starts_from_store(spark, services, zk, unique, tmp_path):
    """Trigger.AvailableNow runs on one checkpoint, each ended as docs/spark.md tells applications to (finish_query:
    the last batch committed, then the member released; a member left registered holds its partitions until its
    ZooKeeper session ends, and the next run's member, assigned none of them, reads none). The store ahead of the
    checkpoint: the run reads from the store's offset, everything up to the log end at its start; behind it: the
    checkpoint wins."""
    from zkconsumer.spark import finish_query, name_member
    topic, group = services.create_topic(unique("sa"), 1), unique("g")
    services.produce(topic, 10)
    opts = name_member(_opts(services, group, topic))
    ckpt = str(tmp_path / "ckpt")
    _run_available_now(spark, opts, ckpt, n=1)
    finish_query(opts, ckpt)
    assert zk_offsets(zk, group, topic) == {0: 10} and not _owners(zk, group, topic)
    services.produce(topic, 10)
    _set_zk_offsets(zk, group, topic, {0: 14})           # the group moved on while the query was down
    batches, _ = _run_available_now(spark, opts, ckpt, n=1)
    got = sorted(o for _, rows in batches for _, o, _ in rows)
    assert got == list(range(14, 20))
    finish_query(opts, ckpt)
    assert zk_offsets(zk, group, topic) == {0: 20}
    _set_zk_offsets(zk, group, topic, {0: 12})           # store behind the checkpoint: checkpoint wins
    services.produce(topic, 2)
    batches, _ = _run_available_now(spark, opts, ckpt, n=1)
    assert sorted(o for _, rows in batches for _, o, _ in rows) == [20, 21]
    finish_query(opts, ckpt)


def test_a_dual_commit_whose_zookeeper_write_failed_catches_up_when_run_again(services, zk, unique):
    """commit_batch with dual.commit.enabled=true wrote Kafka and its ZooKeeper write failed (ZooKeeper lost: the
    report's "failed"). Run again with the same end offsets, it writes ZooKeeper up to them; before, the dual store
    read the larger of the two offsets, called the partitions unchanged, and ZooKeeper stayed behind (a Scala member
    taking a partition over read those records again). Kafka ahead of the end offsets is never moved back."""
    from tests.support.consumer_helpers import kafka_commit
    from zkconsumer.spark import commit_batch
    topic, group = services.create_topic(unique("dualcu"), 2), unique("dualcu-g")
    services.produce(topic, 20)
    _set_zk_offsets(zk, group, topic, {0: 3, 1: 3})
    kafka_commit(services.bootstrap_servers, group, {(topic, 0): 8, (topic, 1): 12})   # Kafka written, ZooKeeper not
    opts = _opts(services, group, topic, **{"offsets.storage": "kafka", "dual.commit.enabled": "true"})
    rep = commit_batch(opts, {(topic, 0): 8, (topic, 1): 10})
    assert zk_offsets(zk, group, topic) == {0: 8, 1: 3}, rep       # 1: Kafka's 12 is ahead of the batch's end
    assert rep["committed"] == {"%s-0" % topic: 8} and rep["unchanged"] == {"%s-1" % topic: 12} and not rep["failed"]
