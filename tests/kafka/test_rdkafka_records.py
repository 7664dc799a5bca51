"""zkconsumer._rdkafka_records, the librdkafka engine's Message-to-ConsumerRecord converter in C, against the Python
loop of zkconsumer.kafka.librdkafka (``_from_messages_py``), on confluent-kafka Message objects hypothesis makes
(confluent-kafka's own test constructor); and the fetch queue backoff the engine gives librdkafka.

The C converter is what the engine uses (``librdkafka.CONVERTER == "c"``); .ci/bootstrap builds it with the package.
"""
import sys

import pytest
from confluent_kafka import KafkaError as RdError
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from zkconsumer.core.config import ConsumerConfig
from zkconsumer.kafka import librdkafka

C, PY = librdkafka._from_messages_c, librdkafka._from_messages_py
EOF = RdError._PARTITION_EOF


class Duck:
    """A stand-in for a Message with the same methods (its own: a Python object read through its methods)."""

    def __init__(self, m):
        self._m = m

    def __getattr__(self, name):
        return getattr(self._m, name)


class Override(Message):
    """A Message whose value() is not its value field: read through its methods too."""

    def value(self):
        v = super().value()
        return None if v is None else v[::-1]


def test_the_c_converter_is_built_and_in_use():
    assert C is not None, ("zkconsumer._rdkafka_records (zkconsumer/_rdkafka_records.c) is not built: install a C "
                           "compiler and Python's headers (apt-get install gcc python3-dev) and run .ci/bootstrap")
    assert librdkafka.CONVERTER == "c" and librdkafka.from_messages is C


blobs = st.one_of(st.none(), st.binary(max_size=20))
headers = st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=5), blobs), max_size=3))
records = st.builds(lambda topic, partition, offset, key, value, hs, ts_type, ts: Message(
    topic=topic, partition=partition, offset=offset, key=key, value=value, headers=hs, timestamp=(ts_type, ts)),
    st.sampled_from(["a", "b", "topic-é"]), st.integers(0, 3), st.integers(0, 2 ** 62), blobs, blobs, headers,
    st.integers(0, 2), st.integers(-1, 2 ** 62))
errors = st.builds(lambda code: Message(error=RdError(code)),
                   st.sampled_from([EOF, EOF, RdError.OFFSET_OUT_OF_RANGE, RdError._TRANSPORT]))
overridden = st.builds(lambda m: Override(topic=m.topic(), partition=m.partition(), offset=m.offset(), key=m.key(),
                                           value=m.value(), headers=m.headers(), timestamp=m.timestamp()), records)
batches = st.lists(st.one_of(records, records, records, errors, records.map(Duck), overridden), max_size=30)


def _plain(result):
    """(records by partition as plain tuples, error code or None): comparable across the two converters"""
    out, err = result
    return ({tuple(tp): [tuple(r) for r in recs] for tp, recs in out.items()},
            None if err is None else err.code())


@settings(max_examples=400, deadline=None)
@given(batches)
def test_c_and_python_agree(msgs):
    c, py = C(msgs, ConsumerRecord, TopicPartition, EOF), PY(msgs, ConsumerRecord, TopicPartition, EOF)
    assert _plain(c) == _plain(py)
    for tp, recs in c[0].items():
        assert type(tp) is TopicPartition and all(type(r) is ConsumerRecord for r in recs)
    stop = next((i for i, m in enumerate(msgs) if m.error() is not None and m.error().code() != EOF), len(msgs))
    assert (c[1] is None) == (stop == len(msgs))  # the first error that is not EOF stops the conversion
    assert sum(len(v) for v in c[0].values()) == sum(1 for m in msgs[:stop] if m.error() is None)


def test_confluent_messages_are_read_from_their_fields_other_objects_through_their_methods():
    """The converter reads a Message's fields directly only where they are what its methods return: confluent-kafka's
    own Message (this confluent-kafka's layout), not a stand-in nor a subclass that overrides a method."""
    from zkconsumer._rdkafka_records import reads_fields
    m = Message(topic="t", partition=3, offset=2 ** 40, key=b"k", value=b"v", headers=[("h", b"1")],
                timestamp=(1, 2 ** 41))
    assert reads_fields(m), "confluent-kafka's Message layout changed: the librdkafka engine converts ~2x slower"
    assert not reads_fields(Duck(m)) and not reads_fields(object())
    assert not reads_fields(Override(topic="t", partition=3, offset=1, value=b"ab", timestamp=(1, 5)))
    mixed = [m, Duck(m), Override(topic="t", partition=3, offset=1, value=b"ab", timestamp=(1, 5)), m]
    assert _plain(C(mixed, ConsumerRecord, TopicPartition, EOF)) == _plain(PY(mixed, ConsumerRecord, TopicPartition,
                                                                             EOF))
    assert [r.value for r in C(mixed, ConsumerRecord, TopicPartition, EOF)[0][TopicPartition("t", 3)]] == \
        [b"v", b"v", b"ba", b"v"]


def test_fields_of_one_record():
    m = Message(topic="t", partition=2, offset=7, key=b"k", value=None, headers=[("é", b"xy"), ("h", None)],
                timestamp=(2, 1234))
    (tp, [r]), = C([m], ConsumerRecord, TopicPartition, EOF)[0].items()
    assert tp == TopicPartition("t", 2)
    assert r == ConsumerRecord("t", 2, -1, 7, 1234, 1, b"k", None, [("é", b"xy"), ("h", None)], None, 1, -1, 5)
    (_, [r]), = C([Message(topic="t", partition=0, offset=0, timestamp=(1, 5))], ConsumerRecord, TopicPartition,
                  EOF)[0].items()
    assert (r.timestamp_type, r.headers, r.serialized_key_size, r.serialized_header_size) == (0, [], -1, -1)


def test_one_partition_interleaved_keeps_one_list_in_order():
    msgs = [Message(topic="t", partition=p, offset=o, timestamp=(1, 0)) for o, p in enumerate([0, 1, 0, 0, 1])]
    out, err = C(msgs, ConsumerRecord, TopicPartition, EOF)
    assert err is None and {tp.partition: [r.offset for r in recs] for tp, recs in out.items()} == {0: [0, 2, 3],
                                                                                                  1: [1, 4]}


def test_bad_arguments_are_errors_not_crashes():
    with pytest.raises(TypeError, match="record_cls"):
        C([], dict, TopicPartition, EOF)
    with pytest.raises(TypeError):
        C(None, ConsumerRecord, TopicPartition, EOF)
    with pytest.raises(AttributeError):
        C([object()], ConsumerRecord, TopicPartition, EOF)


def test_no_reference_is_leaked():
    msgs = [Message(topic="t", partition=0, offset=i, key=b"k", value=b"v" * 10, headers=[("h", b"1")],
                    timestamp=(1, 99)) for i in range(50)] + [Message(error=RdError(EOF))]
    objects = [msgs[0].value(), msgs[0].topic(), msgs[0].key(), msgs[0].headers(), msgs[-1].error()]
    for _ in range(3):  # warm caches
        C(msgs, ConsumerRecord, TopicPartition, EOF)
    before = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    refs = [sys.getrefcount(o) for o in objects]
    for _ in range(100):
        out, _ = C(msgs, ConsumerRecord, TopicPartition, EOF)
        del out
    assert [sys.getrefcount(o) for o in objects] == refs
    if before is not None:  # a debug build counts every reference
        assert sys.gettotalrefcount() - before < 100


@pytest.mark.parametrize("wait_ms,want", [(100, 100), (0, 10), (5000, 1000)])
def test_the_fetch_queue_backoff_follows_fetch_wait_max_ms(wait_ms, want):
    cfg = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:1",
                                          "fetch.wait.max.ms": str(wait_ms), "socket.timeout.ms": "30000"})
    assert librdkafka.client_settings(cfg, "127.0.0.1:9")["fetch.queue.backoff.ms"] == want
