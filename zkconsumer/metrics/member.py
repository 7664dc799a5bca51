"""Prometheus exposition of a member's metrics, named after the Scala consumer's JMX metrics that legacy dashboards
use (``kafka.consumer:type=ConsumerFetcherManager,name=MaxLag`` and friends).

Everything is read from the connector at scrape time: the consume path only keeps plain counters (per fetched chunk,
per fetch pass and per commit), so a scrape costs the consumer nothing in between. Counters carry the ``...PerSec``
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

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

if TYPE_CHECKING:
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
    """A prometheus_client collector for one connector (register it in a ``CollectorRegistry``)."""

    def __init__(self, connector: Any) -> None:
        self.connector = connector
        self.host = _host()
        self.version = _version()

    def _extra(self) -> Dict[str, Any]:
        """What the Scala consumer's metrics() does not hold, read from the connector's parts now."""
        c = self.connector
        by_topic: Dict[str, List[int]] = {}
        queued = 0
        for s in list(getattr(c, "streams", ())):
            for t, (n, b) in list(getattr(s, "by_topic", {}).items()):
                counts = by_topic.setdefault(t, [0, 0])
                counts[0] += n
                counts[1] += b
            q = getattr(s, "queue", None)
            queued += q.qsize() if q is not None else 0
        fetchers = list(getattr(getattr(c, "fetchers", None), "fetchers", ()) or ())
        rb = getattr(c, "rebalancer", None)
        stats = getattr(rb, "stats", {}) if rb is not None else {}
        from ..kafka.fast_records import decoder_in_use
        return {"by_topic": by_topic, "queued": queued,
                "fetches": sum(getattr(f, "fetches", 0) for f in fetchers),
                "fetch_seconds": sum(getattr(f, "fetch_seconds", 0.0) for f in fetchers),
                "fetch_errors": sum(getattr(f, "errors", 0) for f in fetchers),
                "commit_failures": getattr(c, "commit_counts", {}).get("failed", 0),
                "session_expiries": stats.get("session_expiries", 0),
                "decoder": decoder_in_use(), "engine": getattr(c.config, "fetch_engine", "kafka-python")}

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        m = self.connector.metrics()
        x = self._extra()
        names = ["group", "client_id", "host"]
        base = [m["group"], m["client_id"], self.host]

        def gauge(name: str, doc: str, value: float) -> Any:
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(base, value)
            return g

        def counter(name: str, doc: str, value: float) -> Any:
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(base, value)
            return c

        info = GaugeMetricFamily("zkconsumer_info", "This member: its consumer id, zkconsumer's version, the record "
                                 "decoder (c, python, kafka-python) and the fetch.engine",
                                 labels=names + ["consumer_id", "version", "decoder", "engine"])
        info.add_metric(base + [m["consumer_id"], self.version, x["decoder"], x["engine"]], 1.0)
        yield info
        lag = GaugeMetricFamily("zkconsumer_consumer_lag", "Messages behind the log end per owned partition "
                                "(Scala ConsumerLag)", labels=names + ["topic", "partition"])
        for (t, p), v in sorted(m["ConsumerLag"].items()):
            lag.add_metric(base + [t, str(p)], v)
        yield lag
        yield gauge("zkconsumer_max_lag", "Largest ConsumerLag of this member (Scala MaxLag)", m["MaxLag"])
        yield gauge("zkconsumer_min_fetch_rate", "Fetch passes per second of the slowest fetcher thread (Scala "
                    "MinFetchRate)", m["MinFetchRate"])
        yield counter("zkconsumer_messages", "Messages fetched into the streams, all topics (Scala MessagesPerSec, "
                      "AllTopics)", m["MessagesPerSec"])
        yield counter("zkconsumer_bytes", "Key and value bytes fetched into the streams, all topics (Scala "
                      "BytesPerSec, AllTopics)", m["BytesPerSec"])
        tm = CounterMetricFamily("zkconsumer_topic_messages", "Messages fetched into the streams per topic (Scala "
                                 "MessagesPerSec per topic)", labels=names + ["topic"])
        tb = CounterMetricFamily("zkconsumer_topic_bytes", "Key and value bytes fetched into the streams per topic "
                                 "(Scala BytesPerSec per topic)", labels=names + ["topic"])
        for t, (n, b) in sorted(x["by_topic"].items()):
            tm.add_metric(base + [t], n)
            tb.add_metric(base + [t], b)
        yield tm
        yield tb
        yield counter("zkconsumer_fetch_requests", "Fetch passes of the fetcher threads, one fetch request per "
                      "broker each (Scala FetchRequestRateAndTimeMs: use rate())", x["fetches"])
        yield counter("zkconsumer_fetch_request_seconds", "Time the fetcher threads spent in those fetch passes "
                      "(Scala FetchRequestRateAndTimeMs)", x["fetch_seconds"])
        yield gauge("zkconsumer_fetch_queue_chunks", "Fetched chunks waiting in the streams' queues (Scala "
                    "FetchQueueSize; at most queued.max.message.chunks per stream)", x["queued"])
        yield counter("zkconsumer_fetch_errors", "Fetch errors (each retried; persisting ones reach the streams "
                      "as FetchError)", x["fetch_errors"])
        yield counter("zkconsumer_zookeeper_commits", "Offset commits written to ZooKeeper (Scala "
                      "ZooKeeperCommitsPerSec)", m["ZooKeeperCommitsPerSec"])
        yield counter("zkconsumer_kafka_commits", "Offset commits written to Kafka's offset manager (Scala "
                      "KafkaCommitsPerSec)", m["KafkaCommitsPerSec"])
        yield counter("zkconsumer_commit_failures", "Offset commits in which a partition failed",
                      x["commit_failures"])
        yield counter("zkconsumer_session_expiries", "ZooKeeper sessions this member lost (each followed by a "
                      "re-registration)", x["session_expiries"])
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


def start_metrics_server(connector: Any, port: int, addr: str = "127.0.0.1",
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
