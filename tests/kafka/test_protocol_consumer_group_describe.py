"""ConsumerGroupDescribe (API key 69) against bytes written out by hand from Kafka's message spec (flexible in every
version: compact arrays and strings are length + 1 as an unsigned varint, null is 0, each struct ends in its tagged
fields), and how its answer becomes a BrokerGroup. Pure: no broker (the real one is in test_kip848.py)."""
import uuid

import pytest

from zkconsumer.kafka.broker_group import BrokerGroup, _consumer_protocol
from zkconsumer.errors import BrokerGroupDescribeError, ClusterUnavailableError
from zkconsumer.kafka.protocol.consumer_group_describe import (CONSUMER_GROUP_DESCRIBE_KEY,
                                                               ConsumerGroupDescribeRequest,
                                                               ConsumerGroupDescribeResponse)

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def _s(text):  # compact string
    return bytes([len(text) + 1]) + text.encode()


def _i32(n):
    return n.to_bytes(4, "big", signed=True)


def response_bytes(version, error=0, message=None, state="Stable", top_tags=b"\x00"):
    member = (_s("m-1") + b"\x00" + b"\x00" + _i32(7) + _s("client-a") + _s("/127.0.0.1")
              + b"\x02" + _s("t")                      # SubscribedTopicNames ["t"]
              + b"\x00"                                # SubscribedTopicRegex null
              + b"\x02" + TOPIC_ID.bytes + _s("t") + b"\x03" + _i32(0) + _i32(2) + b"\x00"  # Assignment: t [0, 2]
              + b"\x00"                                # Assignment's tagged fields
              + b"\x01" + b"\x00"                      # TargetAssignment: no partitions
              + (b"\x01" if version >= 1 else b"")     # MemberType (v1+): 1 = consumer
              + b"\x00")
    group = (error.to_bytes(2, "big", signed=True) + (b"\x00" if message is None else _s(message)) + _s("g")
             + _s(state) + _i32(3) + _i32(3) + _s("uniform")
             + (b"\x02" + member if error == 0 else b"\x01")
             + _i32(-2147483648) + b"\x00")
    return _i32(0) + b"\x02" + group + top_tags


def test_request_encodes_as_the_spec_says_in_both_versions():
    assert ConsumerGroupDescribeRequest.API_KEY == CONSUMER_GROUP_DESCRIBE_KEY == 69
    for v in (0, 1):
        req = ConsumerGroupDescribeRequest[v](group_ids=["g1", "g2"], include_authorized_operations=True)
        assert req.encode() == b"\x03" + _s("g1") + _s("g2") + b"\x01" + b"\x00"
    assert ConsumerGroupDescribeRequest.max_version == 1
    assert ConsumerGroupDescribeRequest.flexible_version_q(0) and ConsumerGroupDescribeResponse.flexible_version_q(1)


@pytest.mark.parametrize("version", [0, 1])
def test_response_decodes_and_encodes_back(version):
    data = _i32(42) + b"\x00" + response_bytes(version)  # flexible response header: correlation id, tagged fields
    resp = ConsumerGroupDescribeResponse.decode(data, version=version, header=True)
    assert resp.header.correlation_id == 42
    g, = resp.groups
    assert (g.error_code, g.error_message, g.group_id, g.group_state) == (0, None, "g", "Stable")
    assert (g.group_epoch, g.assignment_epoch, g.assignor_name, g.authorized_operations) == (3, 3, "uniform",
                                                                                            -2147483648)
    m, = g.members
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host) == \
        ("m-1", None, None, 7, "client-a", "/127.0.0.1")
    assert m.subscribed_topic_names == ["t"] and m.subscribed_topic_regex is None
    tp, = m.assignment.topic_partitions
    assert (tp.topic_id, tp.topic_name, tp.partitions) == (TOPIC_ID, "t", [0, 2])
    assert m.target_assignment.topic_partitions == []
    if version >= 1:
        assert m.member_type == 1
    assert resp.API_VERSION == version and resp.encode(header=True) == data


def test_unknown_tagged_fields_are_skipped():
    # a newer broker may add tagged fields: tag 5, 2 bytes, at the top level
    resp = ConsumerGroupDescribeResponse.decode(response_bytes(1, top_tags=b"\x01\x05\x02ab"), version=1)
    assert resp.groups[0].members[0].client_id == "client-a"


def _classic():
    return BrokerGroup("g", "Dead", "", [], None, None)


def test_answer_maps_to_an_active_consumer_protocol_group():
    bg = _consumer_protocol("g", ConsumerGroupDescribeResponse.decode(response_bytes(1), version=1), _classic())
    assert bg.active and bg.group_type == "consumer" and bg.protocol_type == "consumer" and bg.state == "Stable"
    assert bg.members == [{"member_id": "m-1", "client_id": "client-a", "client_host": "/127.0.0.1",
                           "member_epoch": 7, "member_type": "consumer", "assignment": {"t": [0, 2]}}]
    assert bg.as_dict()["group_type"] == "consumer" and "KIP-848" in bg.describe_protocol()
    for state, active in (("Assigning", True), ("Reconciling", True), ("Empty", False), ("Dead", False)):
        resp = ConsumerGroupDescribeResponse.decode(response_bytes(0, state=state), version=0)
        assert _consumer_protocol("g", resp, _classic()).active is active, state


def test_not_found_keeps_the_classic_answer_and_retriable_errors_are_reported():
    classic = _classic()
    resp = ConsumerGroupDescribeResponse.decode(response_bytes(1, error=69, message="Group g not found.", state=""),
                                                version=1)
    assert _consumer_protocol("g", resp, classic) is classic
    # Kafka 3.9 in ZooKeeper mode lists API 69 but answers UNSUPPORTED_VERSION (35): no consumer-protocol groups there
    resp = ConsumerGroupDescribeResponse.decode(response_bytes(1, error=35, state=""), version=1)
    assert _consumer_protocol("g", resp, classic) is classic
    resp = ConsumerGroupDescribeResponse.decode(response_bytes(1, error=14, state=""), version=1)  # LOAD_IN_PROGRESS
    bg = _consumer_protocol("g", resp, classic)
    assert bg.error == "CoordinatorLoadInProgressError" and not bg.active


def test_other_errors_raise_naming_the_group():
    resp = ConsumerGroupDescribeResponse.decode(response_bytes(1, error=30, message="no", state=""), version=1)
    with pytest.raises(BrokerGroupDescribeError) as info:
        _consumer_protocol("g", resp, _classic())
    assert "group g" in str(info.value) and "GroupAuthorizationFailedError" in str(info.value)
    assert isinstance(info.value, ClusterUnavailableError)  # verify/status report it; the guard refuses on it
