"""ConsumerGroupDescribe (API key 69): how a broker describes a group that uses the consumer group protocol of
KIP-848 (``group.protocol=consumer``, Kafka 4.0+; Kafka 3.7-3.9 KRaft with
``group.coordinator.rebalance.protocols`` including ``consumer``).

kafka-python 3.0 knows the API key but has no schema for it. These two classes are kafka-python ``ApiMessage``
classes like its own, built from the JSON specs beside this module (``ConsumerGroupDescribeRequest.json``,
``ConsumerGroupDescribeResponse.json``, written from Apache Kafka's specs of the same name): versions 0-1, all
flexible. A request built without a version is sent at the highest version both sides know, so a broker without
API 69 fails it with ``IncompatibleBrokerVersion`` before anything is sent.
"""
from __future__ import annotations

import sys

from kafka.protocol.api_message import ApiMessage

__all__ = ["ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse", "CONSUMER_GROUP_DESCRIBE_KEY"]

CONSUMER_GROUP_DESCRIBE_KEY = 69

_HERE = sys.modules[__name__]


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass
