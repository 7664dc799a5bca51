"""Throughput of the ``zkconsumer`` source vs raw kafka-python on the same ranges.

    from zkconsumer.spark.throughput import measure
    measure(spark, {"zookeeper.connect": ..., "group.id": "g", "subscribe": "t"})

``python -m zkconsumer.spark.throughput [--messages 200000] [--partitions 4]`` runs it against the local cluster
(``zkconsumer local up``), creating and filling a fresh topic.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def raw_kafka_python(bootstrap, ranges, poll_timeout_s=120.0):
    """One KafkaConsumer reading every ``[start, end)`` (what one Python process does without Spark)."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none", max_poll_records=20000, max_partition_fetch_bytes=16 << 20,
                      fetch_max_bytes=64 << 20, fetch_max_wait_ms=100)
    try:
        todo = {TopicPartition(t, p): (s, e) for (t, p), (s, e) in ranges.items() if e > s}
        c.assign(list(todo))
        for tp, (s, _) in todo.items():
            c.seek(tp, s)
        n, nbytes, deadline = 0, 0, time.monotonic() + poll_timeout_s
        while todo and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=500).items():
                end = todo.get(tp, (0, 0))[1]
                for r in recs:
                    if r.offset < end:
                        n += 1
                        nbytes += len(r.value or b"")
                if tp in todo and c.position(tp) >= end:
                    del todo[tp]
                    c.pause(tp)
        return n, nbytes
    finally:
        from ..kafka.internals import close_quietly
        close_quietly(c, autocommit=False)


def _raw_partition(task):
    """Spark task: raw kafka-python reading one partition's ``[start, end)`` -> (rows, bytes)."""
    bootstrap, topic, partition, start, end = task
    return raw_kafka_python(bootstrap, {(topic, partition): (start, end)})


def raw_in_executors(spark, bootstrap, ranges):
    """Raw kafka-python in the executors: one Spark task per partition, each one KafkaConsumer reading its range
    (the same distribution as the source's, without the source)."""
    tasks = [(bootstrap, t, p, s, e) for (t, p), (s, e) in sorted(ranges.items()) if e > s]
    out = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(_raw_partition).collect()
    return sum(n for n, _ in out), sum(b for _, b in out)


def measure(spark, options, repeat=2, raw="driver"):
    """Plan the group's current range once, read it with the source and with raw kafka-python; returns rows,
    seconds and rows/s of both and ``ratio`` = source / raw (best of ``repeat``). ``raw="driver"``: one
    KafkaConsumer in this process (a ``local[...]`` session); ``raw="executors"``: one per partition as Spark tasks
    (a cluster: the same executors the source runs in)."""
    if raw not in ("driver", "executors"):
        raise ValueError("raw must be 'driver' or 'executors', not %r" % (raw,))
    from . import ZkConsumerDataSource, plan_batch
    from pyspark.sql import functions as F
    spark.dataSource.register(ZkConsumerDataSource)
    plan = plan_batch(options)
    ranges = {tp: (plan.start[tp], plan.end[tp]) for tp in plan.end}
    opts = dict(options, startingOffsets=plan.start_json, endingOffsets=plan.end_json)

    def query(i):
        # a new DataFrame each time (and a different, always-true filter) so nothing planned or read is reused
        df = spark.read.format("zkconsumer").options(**opts).load()
        return df.where(F.col("offset") > -1 - i).agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b"))

    t0 = time.perf_counter()
    # warm-up: Python workers, imports, JIT
    query(0).collect()
    warm = time.perf_counter() - t0
    spark_best = raw_best = None
    rows = raw_rows = None
    for i in range(repeat):
        t0 = time.perf_counter()
        r = query(i + 1).collect()[0]
        dt = time.perf_counter() - t0
        rows = r["n"]
        spark_best = dt if spark_best is None else min(spark_best, dt)
        t0 = time.perf_counter()
        if raw == "driver":
            raw_rows, _ = raw_kafka_python(plan.bootstrap, ranges)
        else:
            raw_rows, _ = raw_in_executors(spark, plan.bootstrap, ranges)
        dt = time.perf_counter() - t0
        raw_best = dt if raw_best is None else min(raw_best, dt)
    return {"rows": rows, "first_run_s": round(warm, 3), "raw_rows": raw_rows, "partitions": len(ranges),
            "source_s": round(spark_best, 3), "raw_s": round(raw_best, 3),
            "source_rows_per_s": round(rows / spark_best), "raw_rows_per_s": round(raw_rows / raw_best),
            "ratio": round((rows / spark_best) / (raw_rows / raw_best), 2), "raw": raw}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m zkconsumer.spark.throughput")
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--zookeeper", default=None)
    ap.add_argument("--bootstrap-server", dest="bootstrap", default=None)
    args = ap.parse_args(argv)
    import uuid
    from ..cli.common import resolve_bootstrap, resolve_zookeeper
    from ..local import tools
    from .job import make_session
    zk = resolve_zookeeper(args.zookeeper)
    bootstrap = resolve_bootstrap(args.bootstrap)
    topic = "bench-spark-%s" % uuid.uuid4().hex[:8]
    tools.create_or_grow_topic(bootstrap, topic, args.partitions)
    tools.wait_for_zk_topic(zk, topic, args.partitions)
    tools.produce(bootstrap, topic, args.messages, size=args.size)
    spark = make_session("zkconsumer-throughput")
    try:
        res = measure(spark, {"zookeeper.connect": zk, "group.id": "bench-%s" % topic, "subscribe": topic,
                              "kafka.bootstrap.servers": bootstrap, "startingOffsets": "earliest"})
    finally:
        spark.stop()
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
