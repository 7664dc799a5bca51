"""All znode data codecs in one namespace: the data of every znode the old consumer and its tools read or write.

The implementations live in :mod:`.brokers` (broker registration, topic assignment, partition state, controller)
and :mod:`.consumers` (consumer registration, owner value / ``ConsumerThreadId``, offsets, consumer ids).
Conventions: every ``decode_*(data: bytes, path: str)`` raises :class:`~zkconsumer.errors.ZnodeFormatError`
naming *path*; every ``encode_*`` returns UTF-8 ``bytes``.
"""

from .brokers import (BrokerRegistration, ControllerInfo, Endpoint, PartitionState, TopicAssignment,
                      decode_broker_registration, decode_controller, decode_controller_epoch,
                      decode_partition_state, decode_topic_assignment, encode_broker_registration,
                      encode_controller, encode_controller_epoch, encode_partition_state, encode_topic_assignment,
                      parse_endpoint)
from .consumers import (BLACK_LIST, PATTERNS, STATIC, WHITE_LIST, ConsumerRegistration, ConsumerThreadId,
                        decode_consumer_registration, decode_offset, decode_owner, encode_consumer_registration,
                        encode_offset, encode_owner, json_escape_string, json_unescape_string, make_consumer_id)

__all__ = [
    "BrokerRegistration", "ControllerInfo", "Endpoint", "PartitionState", "TopicAssignment",
    "decode_broker_registration", "decode_controller", "decode_controller_epoch", "decode_partition_state",
    "decode_topic_assignment", "encode_broker_registration", "encode_controller", "encode_controller_epoch",
    "encode_partition_state", "encode_topic_assignment", "parse_endpoint",
    "BLACK_LIST", "PATTERNS", "STATIC", "WHITE_LIST", "ConsumerRegistration", "ConsumerThreadId",
    "decode_consumer_registration", "decode_offset", "decode_owner", "encode_consumer_registration",
    "encode_offset", "encode_owner", "json_escape_string", "json_unescape_string", "make_consumer_id",
]
