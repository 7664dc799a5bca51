"""The ZooKeeper-coordinated consumer engine: connector, rebalancer, fetchers, streams."""
from .connector import RebalanceListener, ZookeeperConsumerConnector  # noqa: F401
from ..core.subscription.topic_filter import Blacklist, Whitelist  # noqa: F401
