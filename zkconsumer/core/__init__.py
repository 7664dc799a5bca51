"""The pure core: no sockets, no threads, no clients. It imports the standard library, ``regex`` (Java regexes) and
:mod:`zkconsumer.errors`; the one optional dependency is ``cryptography``, for PKCS12 key stores.

* :mod:`.properties` - ``.properties`` files (``java.util.Properties`` syntax);
* :mod:`.config` - :class:`~zkconsumer.core.config.ConsumerConfig`, every key of the old consumer, validated;
* :mod:`.kafka_security` and :mod:`.keystores` - the Kafka clients' TLS and SASL settings (validated with the rest of
  the configuration; the stores are the Java client's JKS, PKCS12 and PEM files);
* :mod:`.layout` - the ZooKeeper layout: names, paths, ``zookeeper.connect``, a codec for every znode;
* :mod:`.subscription` - what a member subscribes to: topic filters (Java regexes), thread ids per topic;
* :mod:`.assignors` - the ``range`` and ``roundrobin`` partition assignors.
"""
