"""MinFetchRate (FetcherManager.fetch_rates): Scala's smallest one-minute rate per fetcher thread and broker, read
from fetcher threads that report what they fetch from (fake threads and a fake clock: no service involved; the
counting itself is shown against a real broker in tests/metrics/test_metrics.py)."""
from types import SimpleNamespace

from zkconsumer.consumer.fetcher import FetcherManager


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _manager(clock, threads=1):
    made = []

    class FakeThread:
        def __init__(self, index, *args):
            self.started_at = clock()
            self.sources = {}
            made.append(self)

        def start(self):
            pass

        def fetch_sources(self):
            return dict(self.sources)

    config = SimpleNamespace(num_consumer_fetchers=threads, fetch_engine="kafka-python")
    return FetcherManager(config, "unused:9092", thread_class=FakeThread, clock=clock), made


def test_a_broker_that_stops_answering_falls_under_one_per_second_within_minutes():
    """Brokers 1 and 2 answer 10 fetches a second for an hour (read every 15 s, as a scraper does); then broker 2
    stops: MinFetchRate falls under 1/s within ~2.5 minutes (an average since the start would read ~9.6/s), while
    broker 1 stays at 10/s."""
    clock = Clock()
    m, [f] = _manager(clock)
    counts = {1: 0, 2: 0}
    for _ in range(240):
        clock.now += 15
        counts = {1: counts[1] + 150, 2: counts[2] + 150}
        f.sources = dict(counts)
        rates = m.fetch_rates()
    assert sorted(round(r, 6) for r in rates) == [10.0, 10.0]
    for _ in range(10):  # 150 s with broker 2 silent
        clock.now += 15
        counts[1] += 150
        f.sources = dict(counts)
        rates = m.fetch_rates()
    assert min(rates) < 1.0 and max(rates) > 9.9


def test_fetchers_without_partitions_do_not_count_and_none_reads_zero():
    """A fetcher thread with no partitions reports no source (Scala shut such threads down): it neither drags the
    minimum to 0 nor counts; with no source at all the member's MinFetchRate is 0 (the connector's min of [])."""
    clock = Clock()
    m, (busy, idle) = _manager(clock, threads=2)
    clock.now += 10
    busy.sources = {7: 100}
    assert m.fetch_rates() == [10.0]
    busy.sources = {}
    clock.now += 10
    assert m.fetch_rates() == []


def test_a_broker_newly_fetched_from_starts_from_the_fetchers_start():
    """A broker that becomes a leader of the fetcher's partitions later is measured from the fetcher's start, so
    its first reading is an average, not a burst over the last instant; readings under a second apart reuse it."""
    clock = Clock()
    m, [f] = _manager(clock)
    clock.now += 100
    f.sources = {3: 0}
    assert m.fetch_rates() == [0.0]
    f.sources = {3: 0, 4: 50}
    assert sorted(m.fetch_rates()) == [0.0, 0.5]
    clock.now += 0.5
    f.sources = {3: 0, 4: 5000}
    assert sorted(m.fetch_rates()) == [0.0, 0.5]
