"""The ``zkconsumer`` Python data source (``pyspark.sql.datasource``, pyspark>=4.2): the DataSource, the batch reader
and what the executors run.

Where things run: the streaming reader (:mod:`zkconsumer.spark.stream`) plans micro-batches in a long-lived Python
process on the driver, where the group member lives; ``read`` runs on executors and depends only on the
:class:`RangePartition` it gets (no ZooKeeper, one Kafka consumer per task: :func:`zkconsumer.spark.kafka_io.read_range`).
Nothing live is ever pickled.
"""
from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .options import SourceOptions, parse_options

log = logging.getLogger("zkconsumer.spark")

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")
# includeHeaders=true (as Spark's Kafka source)
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"


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
                      security=opts.kafka_security, kafka_params=opts.kafka_params, client_id=opts.client_id)


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
        from .stream import ZkStreamReader
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
