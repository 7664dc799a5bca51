"""Spark source messages/s on local[2] (after session start and a warm-up query) vs raw kafka-python reading the
same [start, end) ranges in the same run (zkconsumer.spark.throughput.measure)."""
import os
import sys

from .common import Result, unique


def run(cluster, quick=False, log=print):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from zkconsumer.spark.job import make_session
    from zkconsumer.spark.throughput import measure
    total, partitions = (300_000 if quick else 1_000_000), 4
    topic = cluster.create_topic(unique("bench-spark"), partitions)
    log("spark: producing %d messages of 100 B to %d partitions" % (total, partitions))
    cluster.produce_fast(topic, partitions, total)
    spark = make_session("zkconsumer-bench")
    try:
        res = measure(spark, {"zookeeper.connect": cluster.zookeeper_connect, "group.id": unique("bench-spark"),
                              "subscribe": topic, "kafka.bootstrap.servers": cluster.bootstrap_servers,
                              "startingOffsets": "earliest"}, repeat=1 if quick else 3)
    finally:
        spark.stop()
    log("spark: %s" % res)
    return [Result("spark source messages/s (local[2], after start, %dk x 100 B, %d partitions)"
                   % (total // 1000, partitions), res["source_rows_per_s"], "msg/s", res["raw_rows_per_s"],
                   res["ratio"], ">= 0.5x kafka-python", res["ratio"] >= 0.5,
                   "baseline: one kafka-python KafkaConsumer (assign + seek + poll, large fetches) reading the same "
                   "ranges; first query after session start took %.1f s" % res["first_run_s"])]
