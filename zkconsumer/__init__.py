"""zkconsumer: Kafka's ZooKeeper-coordinated (pre-0.9) high-level consumer groups in Python."""
try:
    from importlib.metadata import PackageNotFoundError, version as _version
    try:
        __version__ = _version("zkconsumer")
    except PackageNotFoundError:
        # running from a source tree that was never installed
        __version__ = "0+unknown"
except ImportError:  # pragma: no cover
    __version__ = "0+unknown"
