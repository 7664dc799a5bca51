"""zkconsumer.kafka.protocol.fetch_v4: the idle watch's Fetch v4 request is byte-identical to kafka-python's, and its
reader gives what kafka-python decodes from the same answer (pure; the watch against a real broker:
tests/kafka/test_idle_watch.py)."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse

from zkconsumer.kafka.protocol.fetch_v4 import FetchAnswerError, decode_response, encode_request

_Topic = FetchRequest.FetchTopic
_Partition = _Topic.FetchPartition
_Answer = FetchResponse.FetchableTopicResponse
_AnswerPartition = _Answer.PartitionData
_Aborted = _AnswerPartition.AbortedTransaction

names = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x24F), min_size=1, max_size=20)
int32 = st.integers(0, 2 ** 31 - 1)
int64 = st.integers(0, 2 ** 63 - 1)


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.tuples(names, int32, int64), max_size=30, unique_by=lambda x: (x[0], x[1])),
       correlation=int32, client=st.text(max_size=20), wait=int32, min_bytes=int32, max_bytes=int32,
       partition_max=int32, isolation=st.integers(0, 1))
def test_byte_identical_to_kafka_python(parts, correlation, client, wait, min_bytes, max_bytes, partition_max,
                                        isolation):
    by_topic = {}
    for t, p, off in parts:
        by_topic.setdefault(t, []).append(_Partition(partition=p, fetch_offset=off, partition_max_bytes=partition_max))
    stock = FetchRequest(replica_id=-1, max_wait_ms=wait, min_bytes=min_bytes, max_bytes=max_bytes,
                         isolation_level=isolation, topics=[_Topic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                         max_version=4)
    stock.with_header(correlation_id=correlation, client_id=client)
    mine = encode_request(correlation, client, wait, min_bytes, max_bytes, parts, partition_max, isolation)
    assert mine == bytes(stock.encode(version=4, header=True, framed=True))


answers = st.lists(st.tuples(names, int32, st.integers(-1, 100), int64, st.one_of(st.none(), st.lists(
    st.tuples(int64, int64), max_size=3)), st.one_of(st.none(), st.binary(max_size=40))),
    max_size=20, unique_by=lambda x: (x[0], x[1]))


@settings(max_examples=150, deadline=None)
@given(parts=answers, correlation=int32)
def test_reads_what_kafka_python_decodes(parts, correlation):
    by_topic = {}
    for t, p, err, hw, aborted, records in parts:
        by_topic.setdefault(t, []).append(_AnswerPartition(
            partition_index=p, error_code=err, high_watermark=hw, last_stable_offset=hw,
            aborted_transactions=None if aborted is None else [_Aborted(producer_id=a, first_offset=b)
                                                               for a, b in aborted],
            records=records))
    body = bytes(FetchResponse(throttle_time_ms=0, responses=[_Answer(topic=t, partitions=ps)
                                                              for t, ps in by_topic.items()]).encode(version=4))
    got_correlation, got = decode_response(struct.pack(">i", correlation) + body)
    assert got_correlation == correlation
    stock = FetchResponse.decode(body, version=4)
    assert got == {(r.topic, p.partition_index): (p.error_code, p.high_watermark,
                                                  -1 if p.records is None else len(p.records))
                   for r in stock.responses for p in r.partitions}


@pytest.mark.parametrize("cut", [0, 5, 9, 14, 20])
def test_a_cut_answer_is_an_error_not_a_guess(cut):
    body = bytes(FetchResponse(throttle_time_ms=0, responses=[_Answer(topic="t", partitions=[_AnswerPartition(
        partition_index=0, error_code=0, high_watermark=3, last_stable_offset=3, aborted_transactions=None,
        records=b"xyz")])]).encode(version=4))
    whole = struct.pack(">i", 1) + body
    decode_response(whole)
    with pytest.raises(FetchAnswerError):
        decode_response(whole[:len(whole) - 1 - cut])
