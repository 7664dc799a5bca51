"""The embedded local cluster (real ZooKeeper + tansu broker + registry mirror) used by the demo and the tests."""
from .cluster import LocalCluster, default_dir  # noqa: F401
