"""Prometheus exposition of a member's metrics, named after the Scala consumer's JMX metrics that legacy dashboards
use (``kafka.consumer:type=ConsumerFetcherManager,name=MaxLag`` and friends).

Everything is read from the connector at scrape time: the consume path only keeps plain counters (per fetched chunk,
per fetch response and per commit), so a scrape costs the consumer nothing in between. Counters carry the ``...PerSec``
meters (use ``rate()``); gauges the rest. Every series has the labels ``group``, ``client_id`` and ``host`` (this
machine's name), which survive a restart; the generated consumer id, which does not, is a label of
``zkconsumer_info`` only (with ``version``, ``decoder``: c, python or kafka-python, and ``engine``: the
fetch.engine).

=========================================================  =============================================
Prometheus name                                            Scala JMX metric
=========================================================  =============================================
``zkconsumer_consumer_lag{topic,partition}``               ``ConsumerLag`` (FetcherLagMetrics)
``zkconsumer_max_lag``                                     ``MaxLag`` (ConsumerFetcherManager)
``zkconsumer_min_fetch_rate``                              ``MinFetchRate`` (ConsumerFetcherManager)
``zkconsumer_messages_total``                              ``MessagesPerSec`` (ConsumerTopicMetrics, AllTopics)
``zkconsumer_bytes_total``                                 ``BytesPerSec`` (ConsumerTopicMetrics, AllTopics)
``zkconsumer_topic_messages_total{topic}``                 ``MessagesPerSec`` (ConsumerTopicMetrics, per topic)
``zkconsumer_topic_bytes_total{topic}``                    ``BytesPerSec`` (ConsumerTopicMetrics, per topic)
``zkconsumer_fetch_requests_total``                        ``FetchRequestRateAndTimeMs`` (FetchRequestAndResponseMetrics)
``zkconsumer_fetch_request_seconds_total``                 ``FetchRequestRateAndTimeMs``: the time
``zkconsumer_fetch_queue_chunks``                          ``FetchQueueSize`` (the streams' queued chunks)
``zkconsumer_zookeeper_commits_total``                     ``ZooKeeperCommitsPerSec``
``zkconsumer_kafka_commits_total``                         ``KafkaCommitsPerSec``
``zkconsumer_commit_failures_total``                       (ours: commits with a partition that failed)
``zkconsumer_fetch_errors_total``                          (ours: fetch errors, each retried)
``zkconsumer_session_expiries_total``                      (ours: ZooKeeper sessions lost)
``zkconsumer_rebalances_total`` / ``..._seconds_total``    ``RebalanceRateAndTime``
``zkconsumer_owned_partitions``                            ``OwnedPartitionsCount``
``zkconsumer_state{state}``                                (ours: the rebalancer's state, 1 for the current)
``zkconsumer_claim_wait_seconds``                          (ours: how long a claim has waited for others' owner nodes)
``zkconsumer_offsets_degraded``                            (ours: dual commit writing ZooKeeper alone)
``zkconsumer_info{consumer_id,version,decoder,engine}``    (ours: always 1)
=========================================================  =============================================
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, List, Optional, Tuple

if TYPE_CHECKING:
    from ..consumer.member_metrics import MetricsSource
    from .server import MetricsServer

__all__ = ["MetricsCollector", "start_metrics_server"]

STATES = ("NEW", "STARTING", "IDLE", "SETTLING", "ASSIGNING", "RELEASING", "CLAIMING", "FETCHING", "BACKOFF",
          "DEGRADED", "SUSPENDED", "LOST", "STOPPED")


def _host() -> str:
    import socket
    return socket.gethostname()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("zkconsumer")
    except PackageNotFoundError:
        return "unknown"


class MetricsCollector:
    """A prometheus_client collector for one member (register it in a ``CollectorRegistry``): it reads the member's
    :meth:`~zkconsumer.consumer.connector.ZookeeperConsumerConnector.metrics_snapshot` at every scrape, and nothing
    else of it."""

    def __init__(self, connector: MetricsSource) -> None:
        self.connector = connector
        self.host = _host()
        self.version = _version()

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily as Counter, GaugeMetricFamily as Gauge
        from ..kafka.fast_records import decoder_in_use
        m = self.connector.metrics_snapshot()
        names = ["group", "client_id", "host"]
        base = [m.group, m.client_id, self.host]

        def series(kind: Any, name: str, doc: str, value: float) -> Any:
            family = kind(name, doc, labels=names)
            family.add_metric(base, value)
            return family

        def per(kind: Any, name: str, doc: str, labels: List[str], rows: Iterable[Tuple[List[str], float]]) -> Any:
            """A family with *labels* besides the member's: *rows* are (their values, the sample)."""
            family = kind(name, doc, labels=names + labels)
            for values, value in rows:
                family.add_metric(base + values, value)
            return family

        yield per(Gauge, "zkconsumer_info", "This member: its consumer id, zkconsumer's version, the record decoder "
                  "(c, python, kafka-python) and the fetch.engine", ["consumer_id", "version", "decoder", "engine"],
                  [([m.consumer_id, self.version, decoder_in_use(), m.engine], 1.0)])
        yield per(Gauge, "zkconsumer_consumer_lag", "Messages behind the log end per owned partition (Scala "
                  "ConsumerLag)", ["topic", "partition"],
                  [([t, str(p)], v) for (t, p), v in sorted(m.consumer_lag.items())])
        yield series(Gauge, "zkconsumer_max_lag", "Largest ConsumerLag of this member (Scala MaxLag)", m.max_lag)
        yield series(Gauge, "zkconsumer_min_fetch_rate", "Smallest one-minute rate of Fetch requests answered, per "
                     "fetcher thread and broker of its partitions (Scala MinFetchRate; an idle fetcher's watch asks each "
                     "broker once per its wait, fetch.idle.wait.ms, 1 s by default, where Scala asked every "
                     "fetch.wait.max.ms; the librdkafka engine counts its polls)", m.min_fetch_rate)
        yield series(Counter, "zkconsumer_messages", "Messages fetched into the streams, all topics (Scala "
                     "MessagesPerSec, AllTopics)", m.messages)
        yield series(Counter, "zkconsumer_bytes", "Key and value bytes fetched into the streams, all topics (Scala "
                     "BytesPerSec, AllTopics)", m.bytes)
        topics = sorted(m.topic_counts.items())
        yield per(Counter, "zkconsumer_topic_messages", "Messages fetched into the streams per topic (Scala "
                  "MessagesPerSec per topic)", ["topic"], [([t], n) for t, (n, _) in topics])
        yield per(Counter, "zkconsumer_topic_bytes", "Key and value bytes fetched into the streams per topic (Scala "
                  "BytesPerSec per topic)", ["topic"], [([t], b) for t, (_, b) in topics])
        yield series(Counter, "zkconsumer_fetch_requests", "Fetch requests the fetcher threads sent and had answered "
                     "(Scala FetchRequestRateAndTimeMs; the librdkafka engine counts its polls)", m.fetch.requests)
        yield series(Counter, "zkconsumer_fetch_request_seconds", "Time from each of those fetch requests to its "
                     "answer, summed (Scala FetchRequestRateAndTimeMs; while idle each up to the idle watch's wait, "
                     "fetch.idle.wait.ms by default)",
                     m.fetch.seconds)
        yield series(Gauge, "zkconsumer_fetch_queue_chunks", "Fetched chunks waiting in the streams' queues (Scala "
                     "FetchQueueSize; at most queued.max.message.chunks per stream)", m.queued_chunks)
        yield series(Counter, "zkconsumer_fetch_errors", "Fetch errors (each retried; persisting ones reach the "
                     "streams as FetchError)", m.fetch.errors)
        yield series(Counter, "zkconsumer_zookeeper_commits", "Offset commits written to ZooKeeper (Scala "
                     "ZooKeeperCommitsPerSec)", m.zookeeper_commits)
        yield series(Counter, "zkconsumer_kafka_commits", "Offset commits written to Kafka's offset manager (Scala "
                     "KafkaCommitsPerSec)", m.kafka_commits)
        yield series(Counter, "zkconsumer_commit_failures", "Offset commits in which a partition failed",
                     m.commit_failures)
        yield series(Counter, "zkconsumer_session_expiries", "ZooKeeper sessions this member lost (each followed by "
                     "a re-registration)", m.session_expiries)
        yield series(Counter, "zkconsumer_rebalances", "Completed rebalances (Scala RebalanceRateAndTime)",
                     m.rebalances)
        yield series(Counter, "zkconsumer_rebalance_seconds", "Time spent in rebalance attempts (Scala "
                     "RebalanceRateAndTime)", m.rebalance_seconds)
        yield series(Counter, "zkconsumer_failed_rebalance_attempts", "Rebalance attempts that failed and were "
                     "retried", m.failed_rebalance_attempts)
        yield series(Gauge, "zkconsumer_owned_partitions", "Partitions this member owns (Scala "
                     "OwnedPartitionsCount)", m.owned_partitions)
        yield per(Gauge, "zkconsumer_state", "The member's rebalancer state (1 = current)", ["state"],
                  [([s], 1.0 if m.state == s else 0.0) for s in STATES])
        yield series(Gauge, "zkconsumer_claim_wait_seconds", "How long the member's claim has waited for owner nodes "
                     "other members hold (0 when it waits for none)", m.claim_wait_seconds)
        yield series(Gauge, "zkconsumer_offsets_degraded", "1 while dual commit writes ZooKeeper alone (Kafka's "
                     "offset manager down past dual.commit.kafka.outage.ms)", 1.0 if m.offsets_degraded else 0.0)


def start_metrics_server(connector: MetricsSource, port: int, addr: str = "127.0.0.1",
                         registry: Optional[Any] = None, tls: Optional[Any] = None) -> "MetricsServer":
    """Serve the metrics of *connector* on *addr*:*port* (0: a free port; loopback unless told otherwise; *tls*: an
    ``ssl.SSLContext`` from :func:`zkconsumer.metrics.server.tls_context` for HTTPS) from threads of its own;
    returns the :class:`~zkconsumer.metrics.server.MetricsServer` (``.port``, ``.url``, ``.registry``,
    ``.close()``). Needs the ``prometheus_client`` package (``pip install 'zkconsumer[metrics]'``)."""
    from .server import MetricsServer
    registry = registry or new_registry("--metrics-port", str(port))
    registry.register(MetricsCollector(connector))
    return MetricsServer(registry, port, addr=addr, tls=tls)


def new_registry(option: str, value: str) -> Any:
    """An empty ``CollectorRegistry``, or a ConfigError naming *option* that says to install the metrics extra."""
    try:
        from prometheus_client import CollectorRegistry
    except ImportError as e:
        from ..errors import ConfigError
        raise ConfigError(option, value, "a port, with prometheus_client installed",
                          "pip install 'zkconsumer[metrics]' (%s)" % e) from e
    return CollectorRegistry(auto_describe=False)
