"""Example pipeline: ``python -m zkconsumer.spark.job --group G --topic T --output DIR --checkpoint DIR``.

Reads the group's topics through the ``zkconsumer`` source (the job's streaming source is a real member of the
legacy group), parses the JSON values (``{"key", "seq", "ts", ...}``), counts messages per key per minute in every
micro-batch (``--output-format records``: writes the records themselves instead: topic, partition, offset, key,
value, timestamp), writes them as Parquet (``<output>/batch_id=N/``, overwritten if Spark replays batch N, so the
output is idempotent per batch) and then commits the batch's end offsets to the group's offset store:

* the job's member has a ``consumer.id`` of its own (:func:`name_member`), so its commits are fenced by exactly its
  owner nodes;
* commit-after-output: inside ``foreachBatch``, after the Parquet files are written, the batch's end offsets (from
  ``<checkpoint>/offsets/<batchId>``) are committed with :func:`commit_batch` - exact, no replay window;
* the source's own ``commit(end)`` also runs (one batch late) and never moves offsets backwards, so both agree;
* when the query ends (``--available-now`` done, SIGTERM, or a failure), :func:`finish_query` commits the last
  finished batch once more (Spark never calls the source's commit for it) and only then releases the member's owner
  nodes, so no other member can claim the partitions and read that batch again.

``--batch`` instead reads the group's unconsumed range once with ``spark.read`` (:func:`run_batch`) and commits its
end offsets after writing. On a cluster, submit this file: ``PYTHONPATH=$PWD/zkconsumer.zip spark-submit --master
spark://HOST:7077 --py-files zkconsumer.zip .../zkconsumer/spark/job.py --group G ...`` (the streaming source's
process on the driver does not see ``--py-files``, see :mod:`zkconsumer.spark.standalone`); a streaming run stops
gracefully on SIGTERM (the query stops, its last batch is committed).

Defaults: ZooKeeper from ``--zookeeper``, ``$ZK_CONNECT`` or the running local cluster (``zkconsumer local up``);
brokers are discovered from ZooKeeper unless ``--bootstrap-server`` / ``$KAFKA_BOOTSTRAP`` is given.
Totals per key and minute are the sum of the per-batch rows: ``SELECT key, minute, sum(count) ... GROUP BY``.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Optional

log = logging.getLogger("zkconsumer.spark.job")


def build_options(args) -> dict:
    from ..cli.common import KAFKA_ENV, resolve_zookeeper
    from ..core.properties import parse_property_override
    opts = {"zookeeper.connect": resolve_zookeeper(args.zookeeper), "group.id": args.group}
    if args.topics:
        opts["subscribe"] = ",".join(args.topics)
    else:
        opts["subscribePattern"] = args.pattern
    bootstrap = args.bootstrap or os.environ.get(KAFKA_ENV)
    if bootstrap:
        opts["kafka.bootstrap.servers"] = bootstrap
    if args.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    if args.starting_offsets:
        opts["startingOffsets"] = args.starting_offsets
    for p in args.properties:
        k, v = parse_property_override(p)
        opts[k] = v
    return opts


def counts_per_key_per_minute(df):
    from pyspark.sql import functions as F
    value_schema = "key string, seq long, ts long"
    parsed = df.select(F.from_json(F.col("value").cast("string"), value_schema).alias("v"), "timestamp")
    event_time = F.coalesce(F.timestamp_millis(F.col("v.ts")), F.col("timestamp"))
    return (parsed.select(F.coalesce(F.col("v.key"), F.lit("<unparsed>")).alias("key"),
                          F.date_trunc("minute", event_time).alias("minute"))
            .groupBy("key", "minute").count())


def records(df):
    """The records themselves, for an archive (and for checking exactly what was read)."""
    return df.select("topic", "partition", "offset", "key", "value", "timestamp")


OUTPUTS = {"counts": counts_per_key_per_minute, "records": records}


def run(spark, opts: dict, output: str, checkpoint: str, available_now: bool = True, trigger_seconds: float = 10.0,
        timeout: Optional[float] = None, output_format: str = "counts"):
    """Start the pipeline on ``spark``; with ``available_now`` wait for it to finish (then :func:`finish_query`) and
    return the query. A streaming run is finished by the caller: give ``opts`` from :func:`name_member` and call
    ``finish_query(opts, checkpoint)`` after stopping the query (``run`` names the member when ``opts`` does not)."""
    from . import ZkConsumerDataSource, commit_batch, finish_query, name_member, read_checkpoint_offsets
    spark.dataSource.register(ZkConsumerDataSource)
    # a consumer.id of the job's own: finish_query releases it after the last commit
    opts = name_member(opts)
    transform = OUTPUTS[output_format]

    def write_then_commit(batch_df, batch_id):
        transform(batch_df).write.mode("overwrite").parquet(os.path.join(output, "batch_id=%d" % batch_id))
        # commit-after-output: this batch's end offsets, now that its output is durable
        end = read_checkpoint_offsets(checkpoint, batch_id)
        report = commit_batch(opts, end)
        log.info("batch %d written; offsets committed: %s", batch_id, report["committed"] or "(unchanged)")

    writer = (spark.readStream.format("zkconsumer").options(**opts).load()
              .writeStream.foreachBatch(write_then_commit).option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else \
        writer.trigger(processingTime="%g seconds" % trigger_seconds)
    query = writer.start()
    if available_now:
        try:
            query.awaitTermination(timeout)
        finally:
            if not query.isActive:
                # the last batch committed, then the member released
                finish_query(opts, checkpoint)
        if query.exception() is not None:
            raise query.exception()
    return query


def run_batch(spark, opts: dict, output: str, output_format: str = "counts"):
    """One batch read of the group's unconsumed range (committed offset -> log end, fixed when planned), the same
    counts written to ``<output>/batch_id=range-<digest of the start offsets>/``, then the end offsets committed.

    The directory is named after the start offsets, i.e. the group's committed offsets when the run began: a run that
    died after writing and before committing plans the same start again and overwrites its own output.
    Returns the :class:`~zkconsumer.spark.BatchPlan`."""
    import hashlib
    from . import ZkConsumerDataSource, commit_batch, plan_batch
    spark.dataSource.register(ZkConsumerDataSource)
    plan = plan_batch(opts)
    if plan.total == 0:
        log.info("batch: nothing to read (the group's committed offsets are at the log end)")
        return plan
    df = (spark.read.format("zkconsumer").options(**opts)
          .option("startingOffsets", plan.start_json).option("endingOffsets", plan.end_json).load())
    digest = hashlib.sha1(plan.start_json.encode()).hexdigest()[:12]
    OUTPUTS[output_format](df).write.mode("overwrite").parquet(os.path.join(output, "batch_id=range-%s" % digest))
    report = commit_batch(opts, plan.end)
    log.info("batch: %d record(s) written; offsets committed: %s", plan.total, report["committed"] or "(unchanged)")
    return plan


def make_session(app="zkconsumer-job", master=None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    b = SparkSession.builder.appName(app).config("spark.ui.showConsoleProgress", "false") \
        .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
    # under spark-submit (it starts this Python with PYSPARK_GATEWAY_PORT set) the master is spark-submit's --master
    if master or not (os.environ.get("SPARK_MASTER") or os.environ.get("PYSPARK_GATEWAY_PORT")):
        b = b.master(master or "local[2]")
    return b.getOrCreate()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m zkconsumer.spark.job", description=__doc__.split("\n\n")[0])
    ap.add_argument("--zookeeper", default=None, help="ZooKeeper connect [default: $ZK_CONNECT or the local cluster]")
    ap.add_argument("--bootstrap-server", dest="bootstrap", default=None,
                    help="Kafka bootstrap servers [default: $KAFKA_BOOTSTRAP or discovered from ZooKeeper]")
    ap.add_argument("--group", required=True, help="legacy consumer group (group.id)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--topic", dest="topics", action="append", help="topic (repeatable)")
    src.add_argument("--pattern", help="subscribePattern (Java regex)")
    ap.add_argument("--output", required=True, help="Parquet output directory")
    ap.add_argument("--output-format", choices=sorted(OUTPUTS), default="counts",
                    help="counts: messages per key per minute; records: the records themselves [default: counts]")
    ap.add_argument("--checkpoint", default=None,
                    help="Spark checkpoint location, a path or URI (keep it across runs; required unless --batch)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--available-now", action="store_true", help="Trigger.AvailableNow: process the backlog, stop")
    mode.add_argument("--batch", action="store_true",
                      help="one batch read (spark.read) of the unconsumed range, then commit (no checkpoint used)")
    ap.add_argument("--trigger-seconds", type=float, default=10.0, help="micro-batch interval when streaming")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--starting-offsets", choices=("earliest", "latest"), default=None,
                    help="for partitions without a committed offset [default: auto.offset.reset, else latest]")
    ap.add_argument("--property", dest="properties", action="append", default=[], metavar="KEY=VALUE",
                    help="legacy consumer property, e.g. offsets.storage=kafka (repeatable)")
    ap.add_argument("--master", default=None,
                    help="Spark master [default: spark-submit's --master, else local[2]]")
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    if not args.batch and not args.checkpoint:
        ap.error("--checkpoint is required (unless --batch)")
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kafka", "kazoo", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from . import name_member
    opts = name_member(build_options(args))
    spark = make_session(master=args.master)
    try:
        if args.batch:
            run_batch(spark, opts, args.output, args.output_format)
            return 0
        stop = _stop_on_signals() if not args.available_now else None
        q = run(spark, opts, args.output, args.checkpoint, available_now=args.available_now,
                trigger_seconds=args.trigger_seconds, output_format=args.output_format)
        if not args.available_now:
            from . import finish_query
            try:
                try:
                    while not stop.is_set() and not q.awaitTermination(0.5):
                        pass
                except KeyboardInterrupt:
                    pass
                log.info("stopping the query (%s)", stop.reason or "interrupted")
                q.stop()
            finally:
                report = finish_query(opts, args.checkpoint)
                log.info("stopped; last batch committed: %s; member released", report["committed"] or "(unchanged)")
            if q.exception() is not None:
                raise q.exception()
        return 0
    finally:
        spark.stop()


def _stop_on_signals():
    """SIGTERM (and SIGINT) ask a running streaming job to stop gracefully: the query stops, then its last batch is
    committed (Spark never calls the source's commit for it). Returns the event the main loop watches."""
    import signal
    import threading
    stop = threading.Event()
    stop.reason = None

    def handler(signum, _frame):
        stop.reason = signal.Signals(signum).name
        stop.set()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
    return stop


if __name__ == "__main__":
    # run as a file (spark-submit .../zkconsumer/spark/job.py): use the package's module
    if not __package__:
        from zkconsumer.spark.job import main as _main
        sys.exit(_main())
    sys.exit(main())
