"""MinFetchRate's rates (FetcherThread.fetch_rates_now): Scala's one-minute rate per fetcher thread and broker,
marked as Fetch responses arrive. An unstarted FetcherThread on a fake clock, with the responses reported as its
client's IO thread reports them, its fetch loop's passes (which note its partitions' leaders) run by hand, and the
leaders from a stand-in of kafka-python's metadata lookup (no service involved; the counting against a real broker:
tests/metrics/test_metrics.py)."""
from types import SimpleNamespace

from zkconsumer.consumer.fetcher import FetcherThread
from zkconsumer.core.config import ConsumerConfig


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def _fetcher(leaders, counts_requests=True):
    """A FetcherThread (never started) owning partitions 0.. of topic t, led by *leaders* (partition -> node)."""
    clock = Clock()

    class Fetcher(FetcherThread):
        pass
    Fetcher.clock = staticmethod(clock)
    cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"})
    f = Fetcher(0, "127.0.0.1:9092", cfg)
    f._counts_requests = counts_requests
    f._consumer = SimpleNamespace(_manager=SimpleNamespace(cluster=SimpleNamespace(
        leader_for_partition=lambda tp: leaders.get(tp.partition))))
    f._assignment = {("t", p): None for p in leaders}
    f._restart_meters()  # as applying the assignment does
    return f, clock


def _run(f, clock, seconds, answering, read_every=15.0):
    """*seconds* of 10 Fetch responses a second from each broker in *answering* (the fetch loop passing every 0.1 s),
    read every *read_every* s (None: never); the last reading."""
    end = clock.now + seconds
    next_read = clock.now + (read_every or float("inf"))
    rates = None
    while clock.now < end - 1e-9:
        clock.now += 0.1
        for node in answering:
            f._count_response(node, 0.1)
        f._refresh_leaders()
        if clock.now >= next_read - 1e-9:
            rates = f.fetch_rates_now()
            next_read += read_every
    return rates


def test_a_broker_that_stops_answering_falls_under_one_per_second_within_minutes():
    """Brokers 1 and 2 answer 10 times a second for an hour; then broker 2 stops: its rate is under 1/s within
    ~150 s (an average since the start would read ~9.6/s), broker 1 stays at 10/s."""
    f, clock = _fetcher({0: 1, 1: 2})
    rates = _run(f, clock, 3600, [1, 2])
    assert [round(r, 6) for r in rates] == [10.0, 10.0]
    rates = _run(f, clock, 150, [1])
    assert rates[1] < 1.0 and rates[0] > 9.9


def test_a_reading_without_partitions_changes_nothing():
    """A scrape while the fetcher has no partitions reads nothing and leaves the meters as they were: an answering
    broker still reads its rate right after, a silent one still reads under 1/s."""
    f, clock = _fetcher({0: 1, 1: 2})
    _run(f, clock, 3600, [1, 2])
    _run(f, clock, 150, [1])
    meters = dict(f._broker_meters)
    parts, f._assignment = f._assignment, {}
    assert f.fetch_rates_now() == []
    f._assignment = parts
    assert f._broker_meters == meters
    healthy, silent = f.fetch_rates_now()
    assert healthy > 9.9 and silent < 1.0


def test_a_broker_that_leads_again_is_measured_afresh_however_often_read():
    """Partition 1 moves from broker 2 to broker 4 for 5 minutes, then back: broker 2 reads 0 for its meter's first
    5 s, then its rate (a new Scala fetcher thread), whether MinFetchRate was read during those minutes or not; broker
    4 reads its true rate 5 s after it starts leading (not an hour's average)."""
    results = []
    for read_every in (15.0, None):
        leaders = {0: 1, 1: 2}
        f, clock = _fetcher(leaders)
        _run(f, clock, 3600, [1, 2])
        leaders[1] = 4
        _run(f, clock, 1.0, [1, 4], read_every=None)
        assert min(f.fetch_rates_now()) == 0.0
        assert min(_run(f, clock, 10, [1, 4], read_every=10.0)) > 9.5
        _run(f, clock, 300, [1, 4], read_every=read_every)
        leaders[1] = 2
        _run(f, clock, 1.0, [1, 2], read_every=None)
        assert min(f.fetch_rates_now()) == 0.0
        results.append(_run(f, clock, 10, [1, 2], read_every=10.0))
    assert results[0] == results[1] and min(results[0]) > 9.5


def test_an_assignment_restarts_the_meters():
    """Applying an assignment (every rebalance) starts the meters afresh, as a rebalance closed every Scala fetcher
    thread: 0 for 5 s, then the rate since (not the decayed rate of before)."""
    f, clock = _fetcher({0: 1})
    _run(f, clock, 600, [])
    assert f.fetch_rates_now() == [0.0]
    f._restart_meters()
    assert min(_run(f, clock, 10, [1], read_every=10.0)) > 9.5


def test_no_partitions_no_rate_leaderless_partitions_left_out_and_polls_without_request_counts():
    f, clock = _fetcher({})
    assert f.fetch_rates_now() == []
    f, clock = _fetcher({0: 1, 1: -1, 2: None})  # partitions 1 and 2 have no leader: only broker 1 is fetched from
    assert len(_run(f, clock, 10, [1], read_every=10.0)) == 1
    f, clock = _fetcher({0: 1}, counts_requests=False)  # the librdkafka engine: its fetch loop's polls
    for _ in range(100):
        clock.now += 0.1
        f._poll_meter.mark(clock.now)
    [rate] = f.fetch_rates_now()
    assert 9.5 < rate <= 10.0


def test_a_failing_leader_lookup_keeps_the_brokers_seen_last():
    f, clock = _fetcher({0: 1})
    _run(f, clock, 60, [1])

    def broken(tp):
        raise KeyError(tp.topic)
    f._consumer._manager.cluster.leader_for_partition = broken
    rates = _run(f, clock, 15, [1])
    assert len(rates) == 1 and rates[0] > 9.9


def test_a_kafka_python_that_cannot_name_the_leaders_reads_every_broker_that_answered():
    """Where kafka-python has no leader lookup (``fetch_leaders`` gives None), the brokers read are those that
    have answered since the assignment: each its own rate, one that stops answering falling under 1/s."""
    f, clock = _fetcher({0: 1, 1: 2})
    f._consumer = SimpleNamespace()  # no _manager.cluster.leader_for_partition
    rates = _run(f, clock, 600, [1, 2])
    assert len(rates) == 2 and min(rates) > 9.9
    rates = _run(f, clock, 150, [1])
    assert sorted(rates)[0] < 1.0 and sorted(rates)[1] > 9.9
