"""MinFetchRate's rates (FetcherThread.fetch_rates_now): Scala's one-minute rate per fetcher thread and broker,
marked as Fetch responses arrive. An unstarted FetcherThread on a fake clock, with the responses reported as its
client's IO thread reports them and its partitions' leaders from a stand-in of kafka-python's metadata lookup (no
service involved; the counting against a real broker: tests/metrics/test_metrics.py)."""
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
    f._assignment = {("t", p): None for p in leaders}
    f._consumer = SimpleNamespace(_manager=SimpleNamespace(cluster=SimpleNamespace(
        leader_for_partition=lambda tp: leaders.get(tp.partition))))
    return f, clock


def _run(f, clock, seconds, answering, read_every=15.0):
    """*seconds* of 10 Fetch responses a second from each broker in *answering*, read every *read_every* s."""
    end, next_read = clock.now + seconds, clock.now + read_every
    rates = None
    while clock.now < end - 1e-9:
        clock.now += 0.1
        for node in answering:
            f._count_response(node, 0.1)
        if clock.now >= next_read - 1e-9:
            rates = f.fetch_rates_now()
            next_read += read_every
    return rates


def test_a_broker_that_stops_answering_falls_under_one_per_second_within_minutes():
    """Brokers 1 and 2 answer 10 times a second for an hour; then broker 2 stops: its rate is under 1/s within
    ~150 s (an average since the start would read ~9.6/s), broker 1 stays at 10/s."""
    leaders = {0: 1, 1: 2}
    f, clock = _fetcher(leaders)
    rates = _run(f, clock, 3600, [1, 2])
    assert [round(r, 6) for r in rates] == [10.0, 10.0]
    rates = _run(f, clock, 150, [1])
    assert rates[1] < 1.0 and rates[0] > 9.9


def test_a_reading_during_a_rebalance_keeps_the_meters():
    """A scrape while the fetcher has no partitions (between a rebalance's stop and its assignment) reads nothing
    and forgets nothing: a broker that had stopped answering still reads under 1/s afterwards."""
    leaders = {0: 1, 1: 2}
    f, clock = _fetcher(leaders)
    _run(f, clock, 3600, [1, 2])
    _run(f, clock, 150, [1])
    parts, f._assignment = f._assignment, {}
    assert f.fetch_rates_now() == []
    f._assignment = parts
    rates = _run(f, clock, 15, [1])
    assert rates[1] < 1.0


def test_a_broker_newly_fetched_from_reads_its_true_rate_after_five_seconds():
    """A partition moved to broker 4 after an hour: broker 4 reads 0 until its meter's first 5 s tick (a new Scala
    fetcher thread did too), then its own rate (10/s), not an average diluted by the hour before; broker 2, led no
    more, leaves the minimum."""
    leaders = {0: 1, 1: 2}
    f, clock = _fetcher(leaders)
    _run(f, clock, 3600, [1, 2])
    leaders[1] = 4
    new, old = sorted(f.fetch_rates_now())
    assert new == 0.0 and old > 9.9
    rates = _run(f, clock, 15, [1, 4], read_every=5.0)
    assert len(rates) == 2 and min(rates) > 9.5


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


def test_a_failing_leader_lookup_reads_the_brokers_seen_last():
    leaders = {0: 1}
    f, clock = _fetcher(leaders)
    _run(f, clock, 60, [1])

    def broken(tp):
        raise KeyError(tp.topic)
    f._consumer.leader_for_partition = None
    f._consumer._manager.cluster.leader_for_partition = broken
    rates = _run(f, clock, 15, [1])
    assert len(rates) == 1 and rates[0] > 9.9
