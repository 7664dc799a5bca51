"""Tests for zkconsumer.layout codecs."""

import json
import uuid

import pytest
from hypothesis import given, strategies as st

from zkconsumer.errors import InvalidNameError, ZnodeFormatError
from zkconsumer.layout import (BrokerRegistration, ConsumerRegistration, ConsumerThreadId, ControllerInfo,
                               PartitionState, TopicAssignment, decode_broker_registration, decode_consumer_registration,
                               decode_controller, decode_controller_epoch, decode_offset, decode_owner,
                               decode_partition_state, decode_topic_assignment, encode_broker_registration,
                               encode_consumer_registration, encode_controller, encode_controller_epoch,
                               encode_offset, encode_owner, encode_partition_state, encode_topic_assignment,
                               json_escape_string, make_consumer_id)

topics = st.from_regex(r"[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,30}", fullmatch=True)
int32 = st.integers(min_value=0, max_value=2 ** 31 - 1)

# ---- sample data in the Scala writers' formats -----------------------------------------------------------------
# a 0.8.2 broker's registration (ZkUtils.registerBrokerInZk), a topic's partition map, a partition's state
BROKER_V1 = b'{"jmx_port":-1,"timestamp":"1420070400000","host":"broker1","version":1,"port":9092}'
TOPIC_V1 = b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
STATE = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}'
# consumer registrations (ZookeeperConsumerConnector.registerConsumerInZK) and an owner node's data (a thread id)
REG_STATIC = b'{"version":1,"subscription":{"orders":2,"clicks":1},"pattern":"static","timestamp":"1441925175123"}'
REG_WILDCARD = b'{"version":1,"subscription":{"mirror\\\\..*":4},"pattern":"white_list","timestamp":"1441925175123"}'
OWNER = b"mygroup_host1-1441925174996-4bd8d65c-0"
BROKER_V4 = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h:9092"],'
             b'"jmx_port":-1,"host":"h","timestamp":"1500000000000","port":9092,"version":4}')


def test_wildcard_sample_holds_the_escaped_regex():
    assert REG_WILDCARD.decode() == '{"version":1,"subscription":{"mirror\\\\..*":4},"pattern":"white_list",' \
                                    '"timestamp":"1441925175123"}'
    # i.e. the two characters \\ in the stored JSON: WildcardTopicCount.getTopicCountMap's JSONEscapeString
    assert '"mirror\\\\..*"' in REG_WILDCARD.decode()


# ---- broker registration ---------------------------------------------------------------------------------------

def test_broker_v1_sample():
    b = decode_broker_registration(BROKER_V1, "/brokers/ids/1")
    assert (b.broker_id, b.host, b.port, b.version, b.jmx_port, b.timestamp) == (1, "broker1", 9092, 1, -1,
                                                                                    "1420070400000")
    assert b.plaintext_endpoint() == ("broker1", 9092)
    assert encode_broker_registration(b) == BROKER_V1


def test_broker_v4_encode_exact_and_roundtrip():
    reg = BrokerRegistration(broker_id=0, host="h", port=9092, endpoints=["PLAINTEXT://h:9092"],
                             listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"}, timestamp="1500000000000")
    assert encode_broker_registration(reg) == BROKER_V4
    assert decode_broker_registration(BROKER_V4, "/brokers/ids/0") == reg
    # derived endpoints / protocol map give the same bytes
    assert encode_broker_registration(BrokerRegistration(0, "h", 9092, timestamp="1500000000000")) == BROKER_V4


def test_broker_v2_v3_v5_and_field_order():
    v2 = b'{"jmx_port":-1,"timestamp":"1453314838548","endpoints":["PLAINTEXT://b2:9092"],"host":"b2","version":2,"port":9092}'
    b = decode_broker_registration(v2, "/brokers/ids/2")
    assert b.endpoints == ["PLAINTEXT://b2:9092"] and b.plaintext_endpoint() == ("b2", 9092)
    assert encode_broker_registration(b) == v2
    v3 = b'{"version":3,"port":9092,"host":"b3","rack":null,"endpoints":["PLAINTEXT://b3:9092"],"jmx_port":9999}'
    b = decode_broker_registration(v3, "/brokers/ids/3")
    assert b.rack is None and b.jmx_port == 9999 and b.timestamp is None
    v3r = b'{"rack":"r1","endpoints":["PLAINTEXT://b3:9092"],"version":3,"port":9092,"host":"b3"}'
    assert decode_broker_registration(v3r, "/brokers/ids/3").rack == "r1"
    v5 = (b'{"features":{},"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SSL"},'
          b'"endpoints":["INTERNAL://10.0.0.5:9092","EXTERNAL://kafka.example.com:9093"],"jmx_port":-1,'
          b'"port":9092,"host":"10.0.0.5","version":5,"timestamp":"1600000000000","future_field":[1]}')
    b = decode_broker_registration(v5, "/brokers/ids/5")
    assert b.version == 5 and b.features == {} and b.extra == {"future_field": [1]}
    assert [e.security_protocol for e in b.parsed_endpoints()] == ["PLAINTEXT", "SSL"]
    # no listener *named* PLAINTEXT: falls back to top-level host/port
    assert b.plaintext_endpoint() == ("10.0.0.5", 9092)
    assert decode_broker_registration(encode_broker_registration(b), "/brokers/ids/5") == b


def test_broker_hazards_empty_host():
    # 0.9.0.1: no PLAINTEXT listener -> empty endpoint / null host, port -1 (KafkaHealthcheck.register)
    ssl_only = (b'{"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://b:9093"],"jmx_port":-1,'
                b'"host":null,"timestamp":"1","port":-1,"version":4}')
    assert decode_broker_registration(ssl_only, "/brokers/ids/1").plaintext_endpoint() is None
    empty_ep = b'{"endpoints":["PLAINTEXT://:9092"],"host":"fallback","port":9092,"version":2}'
    assert decode_broker_registration(empty_ep, "/brokers/ids/1").plaintext_endpoint() == ("fallback", 9092)
    empty_all = b'{"endpoints":["PLAINTEXT://:9092"],"host":"","port":9092,"version":2}'
    assert decode_broker_registration(empty_all, "/brokers/ids/1").plaintext_endpoint() is None
    ipv6 = b'{"endpoints":["PLAINTEXT://[::1]:9092"],"version":2}'
    assert decode_broker_registration(ipv6, "/brokers/ids/1").plaintext_endpoint() == ("::1", 9092)


@given(broker_id=int32, host=st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True),
       port=st.integers(1, 65535), version=st.sampled_from([1, 2, 3, 4, 5]),
       rack=st.one_of(st.none(), st.text(min_size=1, max_size=10)), ts=st.integers(0, 2 ** 45))
def test_broker_roundtrip(broker_id, host, port, version, rack, ts):
    reg = BrokerRegistration(broker_id, host, port, timestamp=str(ts), version=version,
                             rack=rack if version >= 3 else None)
    back = decode_broker_registration(encode_broker_registration(reg), "/brokers/ids/%d" % broker_id)
    assert (back.broker_id, back.host, back.port, back.version, back.rack, back.timestamp) == \
        (broker_id, host, port, version, reg.rack, str(ts))
    assert back.plaintext_endpoint() == (host, port)


# ---- malformed data: every decoder names the path --------------------------------------------------------------

DECODERS = [decode_broker_registration, decode_topic_assignment, decode_partition_state, decode_consumer_registration,
            decode_controller, decode_offset, decode_owner, decode_controller_epoch]
COMMON_BAD = [b"", b"   ", b"\xff\xfe\x00", b"{not json", b"\xc3\x28"]


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("data", COMMON_BAD)
def test_common_malformed(decoder, data):
    path = "/some/znode/path-%s" % decoder.__name__
    with pytest.raises(ZnodeFormatError) as info:
        decoder(data, path)
    assert path in str(info.value) and info.value.path == path


JSON_DECODERS = [decode_broker_registration, decode_topic_assignment, decode_partition_state,
                 decode_consumer_registration, decode_controller]


@pytest.mark.parametrize("decoder", JSON_DECODERS)
@pytest.mark.parametrize("data", [b"[]", b"1", b'"x"', b"null", b"true", b"{}", b"NaN"])
def test_wrong_json_type_or_missing_fields(decoder, data):
    with pytest.raises(ZnodeFormatError) as info:
        decoder(data, "/p/q")
    assert "/p/q" in str(info.value)


@pytest.mark.parametrize("decoder,data", [
    (decode_broker_registration, b'{"version":1,"host":"h","port":"x"}'),
    (decode_broker_registration, b'{"version":1,"host":"h"}'),
    (decode_broker_registration, b'{"version":1,"port":9092}'),
    (decode_broker_registration, b'{"version":1,"host":7,"port":9092}'),
    (decode_broker_registration, b'{"version":1,"host":"h","port":9092.0}'),
    (decode_broker_registration, b'{"version":1,"host":"h","port":true}'),
    (decode_broker_registration, b'{"version":1,"host":"h","port":70000}'),
    (decode_broker_registration, b'{"host":"h","port":9092}'),
    (decode_broker_registration, b'{"version":"1","host":"h","port":9092}'),
    (decode_broker_registration, b'{"version":0,"host":"h","port":9092}'),
    (decode_broker_registration, b'{"version":2,"host":"h","port":9092}'),
    (decode_broker_registration, b'{"version":2,"endpoints":"PLAINTEXT://h:1"}'),
    (decode_broker_registration, b'{"version":2,"endpoints":[1]}'),
    (decode_broker_registration, b'{"version":2,"endpoints":["h:9092"]}'),
    (decode_broker_registration, b'{"version":4,"endpoints":["X://h:1"],"listener_security_protocol_map":{"Y":"SSL"}}'),
    (decode_broker_registration, b'{"version":4,"endpoints":["X://h:1"],"listener_security_protocol_map":[]}'),
    (decode_broker_registration, b'{"version":3,"endpoints":[],"rack":5}'),
    (decode_topic_assignment, b'{"version":1}'),
    (decode_topic_assignment, b'{"version":1,"partitions":[]}'),
    (decode_topic_assignment, b'{"version":1,"partitions":{"a":[1]}}'),
    (decode_topic_assignment, b'{"version":1,"partitions":{"-1":[1]}}'),
    (decode_topic_assignment, b'{"version":1,"partitions":{"01":[1]}}'),
    (decode_topic_assignment, b'{"version":1,"partitions":{"0":1}}'),
    (decode_topic_assignment, b'{"version":1,"partitions":{"0":["1"]}}'),
    (decode_topic_assignment, b'{"version":2,"partitions":{"0":[1]},"adding_replicas":{"0":"x"}}'),
    (decode_partition_state, b'{"controller_epoch":3,"version":1,"leader_epoch":7,"isr":[1,2]}'),
    (decode_partition_state, b'{"controller_epoch":3,"leader":"1","version":1,"leader_epoch":7,"isr":[1,2]}'),
    (decode_partition_state, b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":1}'),
    (decode_controller, b'{"version":1,"timestamp":"1"}'),
    (decode_controller, b'{"version":1,"brokerid":"1"}'),
    (decode_consumer_registration, b'{"version":1,"subscription":{"t":1},"timestamp":"1"}'),
    (decode_consumer_registration, b'{"version":1,"pattern":"static","timestamp":"1"}'),
    (decode_consumer_registration, b'{"version":1,"subscription":[],"pattern":"static"}'),
    (decode_consumer_registration, b'{"version":1,"subscription":{"t":"2"},"pattern":"static"}'),
    (decode_consumer_registration, b'{"version":1,"subscription":{"t":0},"pattern":"static"}'),
    (decode_consumer_registration, b'{"version":1,"subscription":{"t":1.5},"pattern":"static"}'),
    (decode_consumer_registration, b'{"version":1,"subscription":{"t":1},"pattern":3}'),
    (decode_consumer_registration, b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":[]}'),
    (decode_consumer_registration, b'{"t":1}'),                      # 0.7 form: refused by default
    (decode_consumer_registration, b'*4*whitetopic.*'),
])
def test_field_errors(decoder, data):
    path = "/brokers/ids/42/or/whatever"
    with pytest.raises(ZnodeFormatError) as info:
        decoder(data, path)
    assert path in str(info.value)


# ---- topic assignment ------------------------------------------------------------------------------------------

def test_topic_v1_sample():
    a = decode_topic_assignment(TOPIC_V1, "/brokers/topics/t")
    assert a == TopicAssignment(1, {0: [1, 2], 1: [2, 3]})
    assert encode_topic_assignment(a) == TOPIC_V1


def test_topic_v2_and_sorting():
    data = (b'{"removing_replicas":{"10":[3]},"partitions":{"10":[1,3],"2":[2],"0":[1]},"version":2,'
            b'"adding_replicas":{"10":[1]}}')
    a = decode_topic_assignment(data, "/brokers/topics/t")
    assert a.partition_ids() == [0, 2, 10]
    assert a.adding == {10: [1]} and a.removing == {10: [3]}
    assert encode_topic_assignment(a) == (b'{"version":2,"partitions":{"0":[1],"2":[2],"10":[1,3]},'
                                          b'"adding_replicas":{"10":[1]},"removing_replicas":{"10":[3]}}')
    assert decode_topic_assignment(encode_topic_assignment(a), "/x") == a


@given(st.dictionaries(int32, st.lists(int32, max_size=5), max_size=20), st.sampled_from([1, 2]))
def test_topic_roundtrip(partitions, version):
    a = TopicAssignment(version, partitions)
    back = decode_topic_assignment(encode_topic_assignment(a), "/brokers/topics/t")
    assert back == a and back.partition_ids() == sorted(partitions)


# ---- partition state / controller ------------------------------------------------------------------------------

def test_state_sample():
    s = decode_partition_state(STATE, "/brokers/topics/t/partitions/0/state")
    assert s == PartitionState(leader=1, leader_epoch=7, isr=[1, 2], controller_epoch=3, version=1)
    assert encode_partition_state(s) == STATE


@given(st.integers(-1, 2 ** 31 - 1), int32, st.lists(int32, max_size=5), int32)
def test_state_roundtrip(leader, le, isr, ce):
    s = PartitionState(leader, le, isr, ce)
    assert decode_partition_state(encode_partition_state(s), "/s") == s


def test_controller():
    data = b'{"version":1,"brokerid":1,"timestamp":"1420070400000"}'
    c = decode_controller(data, "/controller")
    assert c == ControllerInfo(1, 1, "1420070400000")
    assert encode_controller(c) == data
    assert decode_controller(b'{"brokerid":2,"timestamp":"1","version":1}', "/controller").broker_id == 2
    assert decode_controller_epoch(b"17", "/controller_epoch") == 17
    assert encode_controller_epoch(17) == b"17"
    with pytest.raises(ZnodeFormatError):
        decode_controller_epoch(b"-1", "/controller_epoch")


# ---- consumer registration -------------------------------------------------------------------------------------

def test_consumer_registration_samples():
    r = decode_consumer_registration(REG_STATIC, "/consumers/g/ids/c")
    assert r == ConsumerRegistration({"orders": 2, "clicks": 1}, "static", "1441925175123", 1)
    assert not r.is_wildcard
    assert encode_consumer_registration(r) == REG_STATIC
    w = decode_consumer_registration(REG_WILDCARD, "/consumers/g/ids/c")
    assert w.is_wildcard and w.pattern == "white_list" and w.num_streams == 4
    assert w.wildcard_regex() == r"mirror\..*"
    assert encode_consumer_registration(w) == REG_WILDCARD


def test_brief_static_sample():
    data = b'{"version":1,"subscription":{"orders":2},"pattern":"static","timestamp":"1441925175123"}'
    assert encode_consumer_registration(decode_consumer_registration(data, "/c")) == data
    assert encode_consumer_registration(ConsumerRegistration.static({"orders": 2}, 1441925175123)) == data
    assert encode_consumer_registration(ConsumerRegistration.static({"orders": 2}), now_ms=1441925175123) == data


def test_consumer_registration_field_order_and_scala_rules():
    r = decode_consumer_registration(b'{"timestamp":"5","pattern":"white_list","subscription":{},"version":1}', "/c")
    assert not r.is_wildcard                                     # empty map -> StaticTopicCount
    r = decode_consumer_registration(b'{"pattern":"weird","subscription":{"a":1}}', "/c")
    assert not r.is_wildcard and r.version == 1 and r.timestamp is None
    r = decode_consumer_registration(b'{"pattern":"static","subscription":{"a":1},"timestamp":1441925175123}', "/c")
    assert r.timestamp == "1441925175123"


def test_jackson_era_double_escaped_regex():
    # 1.1 (Jackson) escapes JSONEscapeString(regex) again: the stored JSON has four backslashes.
    regex = r"mirror\..*"
    jackson = json.dumps({"version": 1, "subscription": {json_escape_string(regex): 4}, "pattern": "black_list",
                          "timestamp": "1"}).encode()
    r = decode_consumer_registration(jackson, "/c")
    assert r.wildcard_regex() == "mirror\\\\..*"                  # what Scala 1.x readers used
    assert r.wildcard_regex(jackson_escaped=True) == regex


@given(st.text(min_size=1, max_size=30), st.integers(1, 100), st.booleans())
def test_wildcard_roundtrip_any_regex(regex, n, white):
    reg = ConsumerRegistration.wildcard(regex, n, white, timestamp=123)
    data = encode_consumer_registration(reg)
    back = decode_consumer_registration(data, "/c")
    assert back.wildcard_regex() == regex and back.num_streams == n and back.pattern == reg.pattern
    # a Jackson reader sees the same thing as our decoder
    assert json.loads(data.decode("utf-8"))["subscription"] == {regex: n}


def test_json_escape_string_matches_scala():
    assert json_escape_string('a"b\\c/d\b\f\n\r\t\x00\x1f\x7f\x9f\xa0\u00e9') == \
        'a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0000\\u001f\\u007f\\u009f\xa0\u00e9'


@given(st.dictionaries(topics, st.integers(1, 2 ** 31 - 1), max_size=8), st.integers(0, 2 ** 45))
def test_static_roundtrip(sub, ts):
    reg = ConsumerRegistration.static(sub, ts)
    data = encode_consumer_registration(reg)
    assert decode_consumer_registration(data, "/c") == reg
    assert data.startswith(b'{"version":1,"subscription":{') and data.endswith(b'"timestamp":"%d"}' % ts)


def test_encode_consumer_registration_rejects():
    for reg in [ConsumerRegistration({"a/b": 1}), ConsumerRegistration({"a": 0}),
                ConsumerRegistration({"a": 1}, "other"), ConsumerRegistration({"a": 1, "b": 1}, "white_list"),
                ConsumerRegistration({"a": True})]:
        with pytest.raises((ValueError, InvalidNameError)):
            encode_consumer_registration(reg, now_ms=1)


def test_legacy_07_forms():
    r = decode_consumer_registration(b'{ "topic1": 4,"topic2": 1 }', "/c", allow_legacy=True)
    assert r == ConsumerRegistration({"topic1": 4, "topic2": 1}, "static", None, 0)
    r = decode_consumer_registration(b"*4*whitetopic.*", "/c", allow_legacy=True)
    assert r.pattern == "white_list" and r.wildcard_regex() == "whitetopic.*" and r.num_streams == 4
    r = decode_consumer_registration(b"!2!black.*", "/c", allow_legacy=True)
    assert r.pattern == "black_list" and r.version == 0
    assert decode_consumer_registration(REG_STATIC, "/c", allow_legacy=True).version == 1


# ---- owners ------------------------------------------------------------------------------------------------------

def test_owner_sample_and_hyphenated_ids():
    assert decode_owner(OWNER, "/consumers/mygroup/owners/t/0") == ("mygroup_host1-1441925174996-4bd8d65c", 0)
    assert encode_owner("mygroup_host1-1441925174996-4bd8d65c", 0) == OWNER
    assert decode_owner("g_my-host-name-1-ab-cd-12", "/o") == ("g_my-host-name-1-ab-cd", 12)
    assert decode_owner(b"g_x-10", "/o") == ("g_x", 10)
    assert decode_owner(b"g_x--1", "/o") == ("g_x-", 1)           # split on the LAST '-'
    with pytest.raises(ZnodeFormatError):
        decode_owner(b"g_x-7\n", "/o")                                # owner data is compared exactly; no strip
    assert ConsumerThreadId.parse(OWNER) == ConsumerThreadId("mygroup_host1-1441925174996-4bd8d65c", 0)


@pytest.mark.parametrize("bad", [b"noindex", b"g_x-", b"g_x-a", b"-1", b"g_x-01", b"g_x-+1",
                                 b"g/x-1", b"..-1", b"", b"g_x-99999999999"])
def test_owner_rejects(bad):
    with pytest.raises(ZnodeFormatError) as info:
        decode_owner(bad, "/consumers/g/owners/t/3")
    assert "/consumers/g/owners/t/3" in str(info.value)


@given(st.text(min_size=1, max_size=40).filter(lambda s: "/" not in s and s not in (".", "..")
                                               and not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f
                                                           or 0xd800 <= ord(c) <= 0xf8ff or ord(c) >= 0xfff0
                                                           for c in s)),
       int32)
def test_owner_roundtrip(consumer_id, n):
    assert decode_owner(encode_owner(consumer_id, n), "/o") == (consumer_id, n)
    assert str(ConsumerThreadId(consumer_id, n)).encode() == encode_owner(consumer_id, n)


def test_thread_id_ordering_is_string_ordering():
    c = "g_host-1-abcdef01"
    ids = [ConsumerThreadId(c, i) for i in (0, 1, 2, 10, 11)]
    assert ConsumerThreadId(c, 10) < ConsumerThreadId(c, 2)
    assert [t.thread_id for t in sorted(ids)] == [0, 1, 10, 11, 2]
    assert ConsumerThreadId("a", 1) < ConsumerThreadId("b", 0)
    # Java compares UTF-16 code units: U+FF61 (one unit) > U+1F600 (surrogate pair starting 0xD83D)
    assert ConsumerThreadId("\U0001F600", 0) < ConsumerThreadId("\uff61", 0)
    assert sorted([ConsumerThreadId(c, 2), ConsumerThreadId(c, 2)]) == [ConsumerThreadId(c, 2)] * 2


# ---- offsets -----------------------------------------------------------------------------------------------------

def test_offset_sample_and_whitespace():
    assert decode_offset(b"4711", "/consumers/g/offsets/t/0") == 4711
    assert decode_offset(b" 4711\n", "/consumers/g/offsets/t/0") == 4711
    assert decode_offset(b"-1", "/o") == -1
    assert decode_offset(b"+5", "/o") == 5
    assert encode_offset(4711) == b"4711" and encode_offset(-1) == b"-1"


@pytest.mark.parametrize("bad", [b"", b"  ", b"1.5", b"abc", b"1_000", b"0x10", "\u0661".encode(), b"1 2",
                                 b"9223372036854775808", b'"5"', b"\xff"])
def test_offset_rejects(bad):
    with pytest.raises(ZnodeFormatError) as info:
        decode_offset(bad, "/consumers/g/offsets/t/9")
    assert "/consumers/g/offsets/t/9" in str(info.value)


@pytest.mark.parametrize("bad", [True, 1.0, "5", 2 ** 63, None])
def test_encode_offset_rejects(bad):
    with pytest.raises(ValueError):
        encode_offset(bad)


@given(st.integers(-(2 ** 63), 2 ** 63 - 1))
def test_offset_roundtrip(n):
    assert decode_offset(encode_offset(n), "/o") == n


# ---- consumer ids ------------------------------------------------------------------------------------------------

def test_make_consumer_id_forms():
    u = uuid.UUID("4bd8d65c-1234-4abc-8def-0123456789ab")
    assert make_consumer_id("mygroup", host="host1", now_ms=1441925174996, uuid=u) == \
        "mygroup_host1-1441925174996-4bd8d65c"
    assert make_consumer_id("mygroup", consumer_id="fixed") == "mygroup_fixed"
    generated = make_consumer_id("g", host="h", now_ms=1)
    assert generated.startswith("g_h-1-") and len(generated.rsplit("-", 1)[1]) == 8


def test_make_consumer_id_java_tohexstring_semantics():
    # negative MSB: Long.toHexString is the two's complement, 16 digits
    neg = uuid.UUID("f47ac10b-58cc-4372-a567-0e02b2c3d479")
    assert make_consumer_id("g", host="h", now_ms=1, uuid=neg) == "g_h-1-f47ac10b"
    # leading zero nibbles are NOT padded, so substring(0,8) is shifted
    lead = uuid.UUID("0047ac10-58cc-4372-a567-0e02b2c3d479")
    assert make_consumer_id("g", host="h", now_ms=1, uuid=lead) == "g_h-1-47ac1058"
    # fewer than 8 hex digits: Java's substring(0,8) throws
    with pytest.raises(ValueError):
        make_consumer_id("g", host="h", now_ms=1, uuid=uuid.UUID("00000000-0000-4000-8000-000000000000"))


def test_make_consumer_id_validates():
    with pytest.raises(InvalidNameError):
        make_consumer_id("../x", consumer_id="c")
    with pytest.raises(InvalidNameError):
        make_consumer_id("g", consumer_id="a/b")
    with pytest.raises(InvalidNameError):
        make_consumer_id("g", host="bad/host", now_ms=1, uuid=uuid.uuid4())
