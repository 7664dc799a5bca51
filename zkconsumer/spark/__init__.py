"""PySpark 4.2+ data source ``zkconsumer``: Spark jobs consuming a legacy ZooKeeper-coordinated group.

    from zkconsumer.spark import ZkConsumerDataSource
    spark.dataSource.register(ZkConsumerDataSource)
    df = (spark.readStream.format("zkconsumer")
          .option("zookeeper.connect", "127.0.0.1:2181").option("group.id", "g")
          .option("subscribe", "orders").load())

See the Spark section of README.md for options, the commit-after-output path and the checkpoint-vs-store rule.
Importing this package checks the pyspark version (``pyspark>=4.2``: admission control / Trigger.AvailableNow).
"""

MIN_PYSPARK = (4, 2)


def _check_pyspark():
    try:
        import pyspark
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("zkconsumer.spark needs pyspark>=4.2 with pyarrow (pip install 'zkconsumer[spark]'): %s"
                          % e) from e
    parts = []
    for x in pyspark.__version__.split(".")[:2]:
        digits = "".join(c for c in x if c.isdigit())
        parts.append(int(digits or 0))
    if tuple(parts) < MIN_PYSPARK:
        raise ImportError("zkconsumer.spark needs pyspark>=4.2 (found %s): the Python data source API before 4.2 has "
                          "no latestOffset(start, limit) admission control, so maxOffsetsPerTrigger and "
                          "Trigger.AvailableNow cannot be honoured" % pyspark.__version__)
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise ImportError("zkconsumer.spark needs pyarrow (pip install 'pyspark[sql]'): %s" % e) from e


_check_pyspark()

from .source import ZkConsumerDataSource, SCHEMA  # noqa: E402
from .commit import BatchPlan, plan_batch, commit_batch, read_checkpoint_offsets, last_committed_end  # noqa: E402,E501
from .listener import ReleaseOnTermination, install_release_listener  # noqa: E402
from .finish import finish_query, name_member  # noqa: E402

__all__ = ["ZkConsumerDataSource", "SCHEMA", "plan_batch", "commit_batch", "read_checkpoint_offsets",
           "last_committed_end", "release_member", "BatchPlan", "ReleaseOnTermination", "install_release_listener",
           "finish_query", "name_member"]


def __getattr__(name: str):
    # the reaper's module is imported when asked for: its process runs it with ``python -m``, which would otherwise
    # find it already imported by this package and warn (runpy's RuntimeWarning)
    if name == "release_member":
        from ._reaper import release_member
        return release_member
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
