"""A fetch loop that keeps failing is retried and, when the failure persists, reaches the application: the
stream's iterator raises FetchError naming the partitions (a fetcher thread that died would leave its partitions
silently unconsumed). The failure is injected into our own fetch loop (a subclass that raises while handing chunks
over), the services are real."""
from consumer_helpers import FAST_PROPS, produce_tracked, wait_until
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer import ZookeeperConsumerConnector
from zkconsumer.consumer.fetcher import FetcherManager, FetcherThread
from zkconsumer.errors import FetchError


class FailingFetcher(FetcherThread):
    failures_left = 5

    def _put(self, q, chunk):
        if FailingFetcher.failures_left > 0:
            FailingFetcher.failures_left -= 1
            raise RuntimeError("injected fault")
        return super()._put(q, chunk)


class Member(ZookeeperConsumerConnector):
    def _make_fetchers(self):
        return FetcherManager(self.config, self._kafka_bootstrap(), on_error=self._on_fetch_error,
                              thread_class=FailingFetcher)


def test_persistent_fetch_failure_surfaces_then_consumption_resumes(services, unique, conns):
    t = services.create_topic(unique("ff"), 1)
    produced = produce_tracked(services.bootstrap_servers, t, 20, partition=0, tag="ff")
    conn = Member(ConsumerConfig.from_properties(dict(FAST_PROPS, **{
        "group.id": unique("ff"), "zookeeper.connect": services.zookeeper_connect, "consumer.timeout.ms": "500"})))
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    errors, got = [], []

    def pull():
        try:
            got.append(next(stream))
        except FetchError as e:
            errors.append(e)
        except Exception:  # consumer.timeout.ms: nothing yet
            pass
        return len(got) == 20
    wait_until(pull, 60, interval=0, message="all 20 records after the fault cleared")
    assert errors, "the persistent fetch failure never reached the application"
    assert "%s-0" % t in str(errors[0]) and "injected fault" in str(errors[0])
    assert conn.last_fetch_error is not None
    assert [r.offset for r in got] == [o for _, o, _ in produced]
