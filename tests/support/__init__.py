"""What the test modules share (none of it a test module): members and producers (``consumer_helpers``), clusters of
a test's own and delivery checks (``chaos_support``), Scala-consumer members and Kafka's tools (``jvm_helpers``,
their Java sources in ``jvm/``), the ``zkmigrate`` and ``zkconsumer`` CLIs run in-process or as children
(``migrate_support``), test PKI (``tls_support``), a ZooKeeper relay the test can hold (``zk_relay``), the Spark
tests' helpers (``spark_support``, ``spark_probe_app``), the session's choice of services (``service_selection``)
and the docs' commands (``docs_commands``)."""
import os

#: the repository's root (README.md, docs/, .ci/, bench/)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
