"""Prometheus exposition of a member's metrics, named after the Scala consumer's JMX metrics that legacy dashboards
use (``kafka.consumer:type=ConsumerFetcherManager,name=MaxLag`` and friends).

Everything is read from :meth:`ZookeeperConsumerConnector.metrics` at scrape time: the consume path only keeps
plain counters (per fetched chunk and per commit), so a scrape costs the consumer nothing in between. Counters
carry the ``...PerSec`` meters (use ``rate()``); gauges the rest. Every series has the labels ``group``,
``client_id`` and ``consumer_id``.

=====================================================  =============================================
Prometheus name                                        Scala JMX metric
=====================================================  =============================================
``zkconsumer_consumer_lag{topic,partition}``           ``ConsumerLag`` (FetcherLagMetrics)
``zkconsumer_max_lag``                                 ``MaxLag`` (ConsumerFetcherManager)
``zkconsumer_min_fetch_rate``                          ``MinFetchRate`` (ConsumerFetcherManager)
``zkconsumer_messages_total``                          ``MessagesPerSec`` (ConsumerTopicMetrics)
``zkconsumer_bytes_total``                             ``BytesPerSec`` (ConsumerTopicMetrics)
``zkconsumer_zookeeper_commits_total``                 ``ZooKeeperCommitsPerSec``
``zkconsumer_kafka_commits_total``                     ``KafkaCommitsPerSec``
``zkconsumer_rebalances_total`` / ``..._seconds_total``  ``RebalanceRateAndTime``
``zkconsumer_owned_partitions``                        ``OwnedPartitionsCount``
``zkconsumer_state{state}``                            (ours: the rebalancer's state, 1 for the current)
``zkconsumer_claim_wait_seconds``                      (ours: how long a claim has waited for others' owner nodes)
``zkconsumer_offsets_degraded``                        (ours: dual commit writing ZooKeeper alone)
=====================================================  =============================================
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Optional

if TYPE_CHECKING:
    from .metrics_server import MetricsServer

__all__ = ["MetricsCollector", "start_metrics_server"]

STATES = ("NEW", "STARTING", "IDLE", "SETTLING", "ASSIGNING", "RELEASING", "CLAIMING", "FETCHING", "BACKOFF",
          "DEGRADED", "SUSPENDED", "LOST", "STOPPED")


class MetricsCollector:
    """A prometheus_client collector for one connector (register it in a ``CollectorRegistry``)."""

    def __init__(self, connector: Any) -> None:
        self.connector = connector

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        m = self.connector.metrics()
        names = ["group", "client_id", "consumer_id"]
        base = [m["group"], m["client_id"], m["consumer_id"]]

        def gauge(name: str, doc: str, value: float) -> Any:
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(base, value)
            return g

        def counter(name: str, doc: str, value: float) -> Any:
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(base, value)
            return c

        lag = GaugeMetricFamily("zkconsumer_consumer_lag", "Messages behind the log end per owned partition "
                                "(Scala ConsumerLag)", labels=names + ["topic", "partition"])
        for (t, p), v in sorted(m["ConsumerLag"].items()):
            lag.add_metric(base + [t, str(p)], v)
        yield lag
        yield gauge("zkconsumer_max_lag", "Largest ConsumerLag of this member (Scala MaxLag)", m["MaxLag"])
        yield gauge("zkconsumer_min_fetch_rate", "Fetch passes per second of the slowest fetcher thread (Scala "
                    "MinFetchRate)", m["MinFetchRate"])
        yield counter("zkconsumer_messages", "Messages fetched into the streams (Scala MessagesPerSec)",
                      m["MessagesPerSec"])
        yield counter("zkconsumer_bytes", "Key and value bytes fetched into the streams (Scala BytesPerSec)",
                      m["BytesPerSec"])
        yield counter("zkconsumer_zookeeper_commits", "Offset commits written to ZooKeeper (Scala "
                      "ZooKeeperCommitsPerSec)", m["ZooKeeperCommitsPerSec"])
        yield counter("zkconsumer_kafka_commits", "Offset commits written to Kafka's offset manager (Scala "
                      "KafkaCommitsPerSec)", m["KafkaCommitsPerSec"])
        rb = m["RebalanceRateAndTime"]
        yield counter("zkconsumer_rebalances", "Completed rebalances (Scala RebalanceRateAndTime)", rb["count"])
        yield counter("zkconsumer_rebalance_seconds", "Time spent in rebalance attempts (Scala "
                      "RebalanceRateAndTime)", rb["seconds"])
        yield counter("zkconsumer_failed_rebalance_attempts", "Rebalance attempts that failed and were retried",
                      rb["failed_attempts"])
        yield gauge("zkconsumer_owned_partitions", "Partitions this member owns (Scala OwnedPartitionsCount)",
                    m["OwnedPartitionsCount"])
        st = GaugeMetricFamily("zkconsumer_state", "The member's rebalancer state (1 = current)",
                               labels=names + ["state"])
        for s in STATES:
            st.add_metric(base + [s], 1.0 if m["state"] == s else 0.0)
        yield st
        yield gauge("zkconsumer_claim_wait_seconds", "How long the member's claim has waited for owner nodes other "
                    "members hold (0 when it waits for none)", (m.get("ClaimWait") or {}).get("seconds", 0.0))
        yield gauge("zkconsumer_offsets_degraded", "1 while dual commit writes ZooKeeper alone (Kafka's offset "
                    "manager down past dual.commit.kafka.outage.ms)", 1.0 if m["offsets_degraded"] else 0.0)


def start_metrics_server(connector: Any, port: int, addr: str = "0.0.0.0",
                         registry: Optional[Any] = None) -> "MetricsServer":
    """Serve the metrics of *connector* on *addr*:*port* (0: a free port) from a thread of its own; returns the
    :class:`~zkconsumer.metrics_server.MetricsServer` (``.port``, ``.registry``, ``.close()``). Needs the
    ``prometheus_client`` package (``pip install 'zkconsumer[metrics]'``)."""
    try:
        from prometheus_client import CollectorRegistry
    except ImportError as e:
        from .errors import ConfigError
        raise ConfigError("--metrics-port", str(port), "a port, with prometheus_client installed",
                          "pip install 'zkconsumer[metrics]' (%s)" % e) from e
    from .metrics_server import MetricsServer
    registry = registry or CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(connector))
    return MetricsServer(registry, port, addr=addr)
