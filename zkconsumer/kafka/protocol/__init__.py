"""Kafka protocol messages kafka-python does not define, in its 3.0 style: an ``ApiMessage`` class per message,
its schema read from a JSON message spec shipped next to the module (``load_json=`` this package)."""
