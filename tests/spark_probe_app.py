"""A spark-submit application for tests/test_spark_cluster.py: reports, from inside the tasks, which process ran
each one and where it imported zkconsumer, kafka-python and kazoo from. Prints one JSON line:
{"app": id, "tasks": [...]}."""
import json
import os

from pyspark.sql import SparkSession


def where(_):
    import kafka
    import kazoo
    import zkconsumer
    yield {"pid": os.getpid(), "ppid": os.getppid(), "zkconsumer": zkconsumer.__file__, "kafka": kafka.__file__,
           "kazoo": kazoo.__file__}


if __name__ == "__main__":
    spark = SparkSession.builder.appName("zkconsumer-probe").getOrCreate()
    tasks = spark.sparkContext.parallelize(range(8), 8).mapPartitions(where).collect()
    print("PROBE " + json.dumps({"app": spark.sparkContext.applicationId, "tasks": tasks}))
    spark.stop()
