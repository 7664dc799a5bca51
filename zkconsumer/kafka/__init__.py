"""The Kafka adapter (kafka-python, and confluent-kafka for ``fetch.engine=librdkafka``).

* :mod:`.metadata` - cluster metadata (brokers, topics, partition leaders) through an admin client;
* :mod:`.connect_errors` - what a failed connection means, in one line (TLS, SASL, unreachable);
* :mod:`.broker_group` - the broker-side group of the same name (classic and KIP-848), read;
* :mod:`.protocol` - Kafka messages zkconsumer builds itself (OffsetCommit in one pass, ConsumerGroupDescribe);
* :mod:`.record_batch` and :mod:`.fast_records` - the record batch v2 decoder and its place on kafka-python's fetch
  path; :mod:`.librdkafka` - the librdkafka fetch client behind the same fetcher loop;
* :mod:`.internals` - every use of kafka-python's (and kazoo's) non-public APIs, in one module.
"""
