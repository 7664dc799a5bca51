"""What an executor task of the Spark source does with its ``[start, end)`` (``kafka_io.read_range``), against the
real Apache Kafka of the test session, without Spark: ``kafkaConsumer.pollTimeoutMs`` bounds each wait for records
(Spark's per-poll timeout), never the whole task; OffsetOutOfRange is handled as Spark's ``KafkaDataConsumer``:
never a row outside the planned range, and a message naming what is gone."""
import time

import pytest

from spark_support import delete_records, recreate_topic

pytestmark = pytest.mark.spark


def _read(services, topic, start, end, **kw):
    from zkconsumer.spark.kafka_io import read_range
    return read_range(services.bootstrap_servers, topic, 0, start, end, **kw)


def _offsets(batches):
    return [o for b in batches for o in b.column("offset").to_pylist()]


def test_poll_timeout_bounds_each_wait_not_the_whole_task(services, unique):
    """The range's records arrive 10 at a time, 0.5 s apart (6 s in all): each wait is far below the 2.5 s poll
    timeout, the whole read three times longer; and Spark taking its time with the batches does not count."""
    import threading
    topic = services.create_topic(unique("rt"), 1)

    def produce():
        for _ in range(12):
            services.produce(topic, 10)
            time.sleep(0.5)
    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    got = []
    try:
        for batch in _read(services, topic, 0, 120, poll_timeout_ms=2500, batch_rows=5):
            got.extend(batch.column("offset").to_pylist())
            time.sleep(0.1)
    finally:
        writer.join(60)
    assert got == list(range(120))
    # records that never come (the range ends past the log end): the task fails once no record came for that long
    from zkconsumer.errors import ZkConsumerError
    with pytest.raises(ZkConsumerError, match=r"no record of %s-0 at offset 120 arrived within 1200 ms "
                                              r"\(kafkaConsumer.pollTimeoutMs" % topic):
        _offsets(_read(services, topic, 100, 130, poll_timeout_ms=1200))


def test_offsets_aged_out_of_the_log(services, unique):
    from zkconsumer.spark.kafka_io import DataLossError
    topic = services.create_topic(unique("ra"), 1)
    services.produce(topic, 30)
    delete_records(services, topic, 0, 10)                          # offsets 0..9 are gone (as after retention)
    with pytest.raises(DataLossError, match=r"offsets \[5, 10\) of %s-0 are not in the log any more \(the log now "
                                            r"holds \[10, 30\)\).*failOnDataLoss=false" % topic):
        _offsets(_read(services, topic, 5, 20))
    assert _offsets(_read(services, topic, 5, 20, fail_on_data_loss=False)) == list(range(10, 20))
    assert _offsets(_read(services, topic, 2, 8, fail_on_data_loss=False)) == []


def test_log_truncated_below_the_planned_range_never_yields_rows_below_it(services, zk, unique):
    """A range planned on the old log, read after the topic was recreated with fewer records (its log end, 5, below
    the planned start, 20): the rows 0..4 of the new log are not in [20, 30) and must not be read."""
    from zkconsumer.spark.kafka_io import DataLossError
    topic = services.create_topic(unique("rx"), 1)
    services.produce(topic, 30)
    recreate_topic(services, zk, topic)
    services.produce(topic, 5)
    with pytest.raises(DataLossError, match=r"offsets \[20, 30\) of %s-0 are not in the log any more \(the log now "
                                            r"holds \[0, 5\)\)" % topic):
        _offsets(_read(services, topic, 20, 30))
    assert _offsets(_read(services, topic, 20, 30, fail_on_data_loss=False)) == []
