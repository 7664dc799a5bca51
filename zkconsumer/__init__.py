"""zkconsumer: Kafka's ZooKeeper-coordinated (pre-0.9) high-level consumer groups in Python.

The public API is :class:`ConsumerConfig` and :class:`ZookeeperConsumerConnector` (``from zkconsumer import
ConsumerConfig, ZookeeperConsumerConnector``). They are imported when first used, so that importing the pure core
(:mod:`zkconsumer.core`) does not import kazoo or kafka-python.

The packages, by layer: :mod:`zkconsumer.core` (pure: configuration, the ZooKeeper layout, subscriptions,
assignors), :mod:`zkconsumer.zookeeper` and :mod:`zkconsumer.kafka` (the adapters of kazoo and kafka-python),
:mod:`zkconsumer.offsets` (the offset stores), :mod:`zkconsumer.consumer` (the engine: connector, rebalancer,
ownership, fetchers, streams), :mod:`zkconsumer.tools` (operations on groups), :mod:`zkconsumer.metrics`, and the
surfaces :mod:`zkconsumer.cli`, :mod:`zkconsumer.spark` and :mod:`zkconsumer.local`; :mod:`zkconsumer.errors` is
the exception tree every layer raises from.
"""
import importlib
from typing import Any

try:
    from importlib.metadata import PackageNotFoundError, version as _version
    try:
        __version__ = _version("zkconsumer")
    except PackageNotFoundError:
        # running from a source tree that was never installed
        __version__ = "0+unknown"
except ImportError:  # pragma: no cover
    __version__ = "0+unknown"

__all__ = ["ConsumerConfig", "ZookeeperConsumerConnector", "__version__"]


# where each public name is defined; imported on first use (importlib: type checkers of the core do not follow it)
_PUBLIC = {"ConsumerConfig": ".core.config", "ZookeeperConsumerConnector": ".consumer.connector"}


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    return getattr(importlib.import_module(_PUBLIC[name], __name__), name)
