"""Hypothesis bad-input pass over everything zkconsumer reads from outside (issue 10 item 3): znode data written by
other members, brokers and tools, ``.properties`` files and ``--property`` values, ``zkmigrate import`` files and
the Spark source's options. For any input: no crash (only the documented error type, with a message naming the
znode path / key / file line), no partial write. ``tests/test_bad_input.py`` holds the hand-picked corpus run
through the real CLI; this file lets hypothesis pick the inputs.
"""
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

from zkconsumer.config import KNOWN_KEYS, ConsumerConfig
from zkconsumer.consumer.leave_grace import decode_marker
from zkconsumer.errors import ConfigError, PropertiesSyntaxError, ZkConsumerError, ZnodeFormatError
from zkconsumer.layout import codecs, parse_offset_path, parse_zk_connect
from zkconsumer.layout.member_info import decode_member_info
from zkconsumer.properties import load_properties, parse_properties, parse_property_override

# -- strategies ------------------------------------------------------------------------------------------------------
json_scalars = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats(allow_nan=False,
                allow_infinity=False) | st.text(max_size=20) | st.sampled_from(["9092", "-1", "PLAINTEXT://h:1",
                                                                                   "static", "white_list", ""]))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8) | st.sampled_from(["0", "1", "version"]), inner,
                                             max_size=4), max_leaves=12)

# the fields each codec reads, so that hypothesis gets past "missing field" and into the typed checks
FIELDS = {
    "broker": ["version", "host", "port", "endpoints", "rack", "listener_security_protocol_map", "jmx_port",
               "timestamp", "features"],
    "topic": ["version", "partitions", "adding_replicas", "removing_replicas"],
    "state": ["leader", "leader_epoch", "isr", "controller_epoch", "version"],
    "registration": ["version", "subscription", "pattern", "timestamp"],
    "controller": ["brokerid", "version", "timestamp"],
    "member": ["version", "host", "client_id", "offsets_storage", "dual_commit", "pid", "library",
               "auto_commit_interval_ms"],
    "marker": ["version", "grace_ms", "registration"],
}


def objects_with(fields):
    """JSON objects whose keys are mostly the codec's own fields, with arbitrary (often almost right) values."""
    near = {"version": st.integers(-2, 6), "port": st.integers(-5, 70000),
            "endpoints": st.lists(st.sampled_from(["PLAINTEXT://h:9092", "SSL://[::1]:1", "x", "A://:0",
                                                   "PLAINTEXT://h:99999999999999999999"]), max_size=3),
            "partitions": st.dictionaries(st.sampled_from(["0", "1", "01", "-1", "a", "9" * 30]),
                                          st.lists(st.integers(-3, 3) | json_scalars, max_size=3), max_size=3),
            "subscription": st.dictionaries(st.text(max_size=6), st.integers(-2, 3) | json_scalars, max_size=3),
            "pattern": st.sampled_from(["static", "white_list", "black_list", "x"]),
            "offsets_storage": st.sampled_from(["zookeeper", "kafka", "x"]), "dual_commit": st.booleans(),
            "isr": st.lists(st.integers(-3, 3), max_size=3), "grace_ms": st.integers(-5, 10 ** 20)}
    return st.fixed_dictionaries({}, optional={f: (near.get(f, json_values) | json_values) for f in fields})


def as_bytes(v):
    return json.dumps(v).encode("utf-8")


garbage = (st.binary(max_size=200)
           | st.text(max_size=80).map(lambda s: s.encode("utf-8", "surrogatepass"))
           | json_values.map(as_bytes)
           | st.sampled_from([b"[" * 5000, b'{"a":' * 5000, b"9" * 5000, b"-" + b"1" * 5000, b"\x00",
                              b"*" + b"9" * 5000 + b"*x", b"consumer-" + b"9" * 5000, b"\xed\xa0\x80"]))

PATH = "/consumers/g/some/znode/path"


def _assert_clean(call, expected=(ZnodeFormatError,), needle=PATH):
    try:
        call()
    except expected as e:
        assert needle in str(e), "the error does not name %r: %s" % (needle, e)
        return e
    return None


# -- (1) znode codecs: arbitrary bytes and JSON-ish values --------------------------------------------------------
ZNODE_DECODERS = {
    "broker registration": lambda d: codecs.decode_broker_registration(d, PATH).plaintext_endpoint(),
    "topic partition map": lambda d: codecs.decode_topic_assignment(d, PATH).partition_ids(),
    "partition state": lambda d: codecs.decode_partition_state(d, PATH),
    "consumer registration": lambda d: codecs.decode_consumer_registration(d, PATH),
    "consumer registration (0.7 forms)": lambda d: codecs.decode_consumer_registration(d, PATH, allow_legacy=True),
    "controller": lambda d: codecs.decode_controller(d, PATH),
    "controller epoch": lambda d: codecs.decode_controller_epoch(d, PATH),
    "owner": lambda d: codecs.decode_owner(d, PATH),
    "offset": lambda d: codecs.decode_offset(d, PATH),
    "member info": lambda d: decode_member_info(d, PATH),
    "leave marker": lambda d: decode_marker(d, PATH),
}
KIND_FIELDS = {"broker registration": "broker", "topic partition map": "topic", "partition state": "state",
               "consumer registration": "registration", "consumer registration (0.7 forms)": "registration",
               "controller": "controller", "member info": "member", "leave marker": "marker"}


@pytest.mark.parametrize("kind", sorted(ZNODE_DECODERS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=garbage)
def test_znode_decoders_on_arbitrary_bytes(kind, data):
    _assert_clean(lambda: ZNODE_DECODERS[kind](data))


@pytest.mark.parametrize("kind", sorted(KIND_FIELDS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_znode_decoders_on_almost_right_json(kind, data):
    obj = data.draw(objects_with(FIELDS[KIND_FIELDS[kind]]))
    if kind == "leave marker" and data.draw(st.booleans()):
        obj["registration"] = data.draw(objects_with(FIELDS["registration"]))
    _assert_clean(lambda: ZNODE_DECODERS[kind](as_bytes(obj)))


@settings(max_examples=300, deadline=None)
@given(path=st.text(max_size=60) | st.builds(lambda parts: "/consumers/" + "/".join(parts),
                                              st.lists(st.text(max_size=10) | st.just("offsets"), max_size=5)))
def test_offset_paths(path):
    e = _assert_clean(lambda: parse_offset_path(path), needle="")
    if e is not None:
        assert path in str(e) or repr(path) in str(e)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60) | st.from_regex(r"[a-z0-9.:,/\[\]-]{0,40}", fullmatch=True))
def test_zookeeper_connect_strings(text):
    _assert_clean(lambda: parse_zk_connect(text), expected=(ZkConsumerError,), needle="")
