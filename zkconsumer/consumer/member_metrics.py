"""What a member tells its metrics: one read-only snapshot, taken at scrape time.

:meth:`ZookeeperConsumerConnector.metrics_snapshot <.connector.ZookeeperConsumerConnector.metrics_snapshot>` reads
the plain counters the consume path keeps (per fetched chunk, per fetch response, per commit) and the rebalancer's
state into a :class:`MemberMetrics`; the Prometheus collector (``zkconsumer.metrics.member``) reads nothing else of
the member (:class:`MetricsSource` is all it needs), and ``metrics()`` gives the same figures under the Scala
consumer's JMX names (:meth:`MemberMetrics.jmx`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Protocol, Tuple

__all__ = ["FetchCounters", "MemberMetrics", "MetricsSource"]

TP = Tuple[str, int]


@dataclass(frozen=True)
class FetchCounters:
    """What a member's fetcher threads did since they started, summed over the threads."""

    #: Fetch requests answered, as Scala's FetchRequestRateAndTimeMs counted them (an idle fetcher sends one per
    #: broker per idle watch wait, fetch.idle.wait.ms by default, where Scala's sent one every fetch.wait.max.ms);
    #: the librdkafka engine, whose client does not report them, counts its fetch loop's polls (records, or 20 ms
    #: without any)
    requests: int = 0
    #: the time from each of those requests to its answer (librdkafka engine: the polls' time)
    seconds: float = 0.0
    #: fetch errors, retried or not
    errors: int = 0


@dataclass(frozen=True)
class MemberMetrics:
    """A member's metrics at one moment (counters are totals since the member was made: rates are the scraper's)."""

    group: str
    consumer_id: str
    client_id: str
    #: the fetch.engine: kafka-python or librdkafka
    engine: str
    #: the rebalancer's state (``NEW`` before the member starts)
    state: str
    #: ``{(topic, partition): messages behind the high watermark}`` of the owned partitions (Scala ConsumerLag)
    consumer_lag: Dict[TP, int]
    #: the smallest one-minute rate (per second) of Fetch requests answered, over each fetcher thread's brokers of its
    #: partitions (Scala MinFetchRate: a broker that stops answering falls towards 0 within minutes; 0 for 5 s after
    #: a rebalance); the librdkafka engine's: of its fetch loop's polls (they go on while a broker is silent); 0
    #: without partitions
    min_fetch_rate: float
    #: messages and their key + value bytes fetched into the streams (Scala MessagesPerSec, BytesPerSec)
    messages: int
    bytes: int
    #: ``{topic: (messages, bytes)}``: the same per topic
    topic_counts: Dict[str, Tuple[int, int]]
    #: fetched chunks waiting in the streams' queues (Scala FetchQueueSize)
    queued_chunks: int
    fetch: FetchCounters
    #: offset commits written to ZooKeeper, to Kafka's offset manager, and commits in which a partition failed
    zookeeper_commits: int
    kafka_commits: int
    commit_failures: int
    #: ZooKeeper sessions the member lost
    session_expiries: int
    #: completed rebalances, the time spent in rebalance attempts (to the microsecond), attempts that failed (Scala
    #: RebalanceRateAndTime)
    rebalances: int
    rebalance_seconds: float
    failed_rebalance_attempts: int
    #: partitions owned (Scala OwnedPartitionsCount)
    owned_partitions: int
    #: how long the current claim has waited for owner nodes other members hold (to the millisecond; 0: it waits for
    #: none)
    claim_wait_seconds: float
    #: ``{owner node path: {"owner": its data, "session": "0x..."}}`` the claim waits for; None before the start
    claim_wait_owners: Optional[Dict[str, Dict[str, Any]]]
    #: dual commit writes ZooKeeper alone (Kafka's offset manager down past dual.commit.kafka.outage.ms)
    offsets_degraded: bool

    @property
    def max_lag(self) -> int:
        """The largest ConsumerLag (Scala MaxLag)."""
        return max(self.consumer_lag.values(), default=0)

    def jmx(self) -> Dict[str, Any]:
        """The figures the Scala consumer has, by their JMX names (what ``connector.metrics()`` returns)."""
        return {"group": self.group, "consumer_id": self.consumer_id, "client_id": self.client_id,
                "state": self.state,
                "ConsumerLag": dict(self.consumer_lag), "MaxLag": self.max_lag,
                "MinFetchRate": self.min_fetch_rate,
                "MessagesPerSec": self.messages, "BytesPerSec": self.bytes,
                "ZooKeeperCommitsPerSec": self.zookeeper_commits, "KafkaCommitsPerSec": self.kafka_commits,
                "RebalanceRateAndTime": {"count": self.rebalances, "seconds": self.rebalance_seconds,
                                         "failed_attempts": self.failed_rebalance_attempts},
                "OwnedPartitionsCount": self.owned_partitions,
                "ClaimWait": {"seconds": self.claim_wait_seconds, "owners": dict(self.claim_wait_owners)}
                if self.claim_wait_owners is not None else {},
                "offsets_degraded": self.offsets_degraded}


class MetricsSource(Protocol):
    """What a metrics exporter needs of a member (:class:`~.connector.ZookeeperConsumerConnector` has it)."""

    def metrics_snapshot(self) -> MemberMetrics:
        """The member's metrics now."""
