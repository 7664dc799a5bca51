"""bench/consume.py: every client's read is checked (the JVM clients' too) and ends when records stop coming, and a
client whose read failed has no row from its other reads."""
import pytest

from bench import common, consume, goals


def _client(key, samples, failure=""):
    c = consume.Client(key, key + " label", None)
    c.samples, c.failure = list(samples), failure
    return c


def test_a_client_that_failed_a_later_read_has_a_void_row():
    by = {"zk": _client("zk", [900.0, 1000.0]), "ck": _client("ck", [500.0, 600.0], "ck failed: read check")}
    row = consume._peer_row("consume.confluent", "consume vs ck", by, "zk", "ck")
    assert "void" in row.metric and row.met is False and row.ratio is None and "read check" in row.note
    by["ck"].failure = ""
    assert consume._peer_row("consume.confluent", "consume vs ck", by, "zk", "ck").met is True
    by["zk"].failure = "zkconsumer failed: timed out"
    row = consume._peer_row("consume.java", "consume vs java", by, "zk", "ck")
    assert "void" in row.metric and row.met is None and "timed out" in row.note  # a reported row: void, no goal
    by["zk"].failure = ""
    by["zk-m15"] = _client("zk-m15", [950.0, 990.0], "scraped read failed")
    by["zk-m100"] = _client("zk-m100", [800.0, 850.0])
    rows = {r.key: r for r in consume._metrics_rows(by)}
    assert "void" in rows["metrics.15s"].metric and rows["metrics.15s"].met is False
    assert rows["metrics.stress"].ratio == pytest.approx(0.869, abs=0.001)
    assert goals.GOALS[rows["metrics.15s"].key].headline


def test_pykafka_gets_the_most_prefetch_librdkafka_lets_it_start_with():
    """queued_max_messages is librdkafka's queued.min.messages for pykafka's rdkafka consumer: the most that starts
    (the fetch size as small as librdkafka accepts with pykafka's receive.message.max.bytes, the queue's kbytes
    under librdkafka's cap)."""
    fetch, queued = consume.PYKAFKA_TUNED["fetch_message_max_bytes"], consume.PYKAFKA_TUNED["queued_max_messages"]
    assert fetch * (consume.PARTITIONS + 1) >= 50 * 1024 * 1024 + 512 > (fetch - 1) * (consume.PARTITIONS + 1)
    assert queued * fetch // 1024 <= 2_097_151 < (queued + 1) * fetch // 1024
    assert consume.PYKAFKA_TUNED["use_rdkafka"] is True


def test_the_java_row_compares_zkconsumer_over_consumer_performances_window():
    """ConsumerPerformance's fetch.nMsg.sec runs from its group join's end, its first fetch inside: zkconsumer's
    figure in that row runs from its streams' creation returning, not from its first record."""
    by = {"zk": _client("zk", [1000.0, 1200.0]), "java": _client("java", [900.0, 1000.0])}
    by["zk"].extras = [{"ready_rate": 800.0}, {"ready_rate": 850.0}]
    by["java"].extras = [{"rebalance_ms": 3000.0}, {"rebalance_ms": 3100.0}]
    row = consume._java_row("consume vs java", by)
    assert (row.value, row.baseline, row.ratio, row.key, row.met) == (825, 950, 0.87, "consume.java", None)
    assert "first to last record: median 1100" in row.note
    by["java"].failure = "ConsumerPerformance failed"
    assert "void" in consume._java_row("consume vs java", by, "consume.reported").metric


def test_pure_python_pykafka_is_beside_a_missing_rdkafka_figure_in_quick_runs_too():
    def keys(quick, why):
        return {c.key for c in consume.clients(None, True, quick, why)}
    assert "pk" in keys(True, "") and "pk-py" not in keys(True, "")  # quick: the rdkafka figure alone
    assert {"pk", "pk-py"} <= keys(False, "")
    assert "pk" not in keys(True, "not built") and "pk-py" in keys(True, "not built")
    assert {c.key for c in consume.clients(None, False, True, "")} == {"zk", "ck", "java"}  # the data variants


@pytest.fixture(scope="module")
def backlog(services):
    """(cluster, topic, total, ends): 1,000 records of 100 B over the suite's 8 partitions."""
    cluster = common.Cluster(None, zk_connect=services.zookeeper_connect, bootstrap=services.bootstrap_servers)
    topic, ends = consume._produce(cluster, consume.Variant("uncompressed 100 B"), 1000, lambda _m: None)
    jvms = consume._Jvms()
    yield cluster, topic, 1000, ends, jvms
    jvms.close()


def _readers(jvms):
    assert consume._pykafka_available() == ""
    return {"zkconsumer": consume._zkconsumer,
            "zkconsumer, librdkafka": lambda *a: consume._zkconsumer(*a, engine="librdkafka"),
            "confluent-kafka": consume._confluent, "kafka-python": consume._kafka_python,
            "pykafka": consume._pykafka, "the Scala consumer": lambda *a: consume._scala(jvms, *a),
            "ConsumerPerformance": lambda *a: consume._java(jvms, *a)}


def test_every_client_reads_the_backlog_and_a_short_read_fails_its_check_within_the_read_timeout(backlog,
                                                                                                monkeypatch):
    cluster, topic, total, ends, jvms = backlog
    for name, read in _readers(jvms).items():
        rate, extra = read(cluster, topic, total, ends)
        assert rate > 0, name
        if name == "zkconsumer":
            assert 0 < extra["ready_rate"] < rate  # its window from the streams' creation holds the first fetch
    # told partition 0 holds one record more than it does: every client waits READ_TIMEOUT_MS for it, then its
    # check fails: no reader waits forever for a record that never comes, nor gives up without a reason
    monkeypatch.setattr(consume, "READ_TIMEOUT_MS", 3000)
    more = [ends[0] + 1] + ends[1:]
    for name, read in _readers(jvms).items():
        with pytest.raises(consume.ReadCheckFailed, match="expected %d" % (total + 1)):
            read(cluster, topic, total + 1, more)
    monkeypatch.setattr(consume, "READ_TIMEOUT_MS", 30000)
    rate, _ = consume._scala(jvms, cluster, topic, total, ends)  # its JVM still answers
    assert rate > 0
