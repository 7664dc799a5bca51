"""zkconsumer.kafka.protocol.offset_commit: the one-pass OffsetCommit encoding is byte-identical to kafka-python's for
every version it handles (2-5) and falls back to kafka-python's for the others; the answer to such a request is
read with struct exactly as kafka-python reads it (pure; the live broker path is in test_offsets_kafka.py and
test_offsets_dual.py)."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest as Stock
from kafka.protocol.consumer import OffsetCommitResponse

from zkconsumer.kafka.protocol.offset_commit import OffsetCommitRequest, OffsetCommitResult, _Reader, make_request

_Topic = Stock.OffsetCommitRequestTopic
_Partition = _Topic.OffsetCommitRequestPartition


def _stock(group, offsets, version):
    by_topic = {}
    for (t, p), off in sorted(offsets.items()):
        by_topic.setdefault(t, []).append(_Partition(partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                                                     committed_metadata=""))
    r = Stock(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
              retention_time_ms=-1, topics=[_Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
              max_version=8)
    r.with_header(correlation_id=11, client_id="zk-c")
    return r.encode(version=version, header=True, framed=True)


names = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x24F), min_size=1, max_size=20)


@settings(max_examples=150, deadline=None)
@given(group=names, offsets=st.dictionaries(st.tuples(names, st.integers(0, 2 ** 31 - 1)),
                                            st.integers(0, 2 ** 63 - 1), max_size=40),
       version=st.integers(0, 8))
def test_byte_identical_to_kafka_python(group, offsets, version):
    mine = make_request(group, offsets)
    mine.with_header(correlation_id=11, client_id="zk-c")
    assert mine.encode(version=version, header=True, framed=True) == _stock(group, offsets, version)


def test_a_simple_consumer_commit_capped_at_v5():
    r = make_request("g", {("t", 1): 7, ("t", 0): 5, ("u", 2): 9})
    assert isinstance(r, OffsetCommitRequest) and r.generation_id_or_member_epoch == -1 and r.member_id == ""
    assert r.offsets_by_topic == {"t": [(0, 5), (1, 7)], "u": [(2, 9)]}
    assert r._max_version == 5 and r.expect_response()  # the version the client may pick goes up to 5


_Answer = OffsetCommitResponse.OffsetCommitResponseTopic
_AnswerPartition = _Answer.OffsetCommitResponsePartition


class _Buffer:
    """What kafka-python's parser hands a response class: a buffer read in order."""

    def __init__(self, data):
        self.data, self.pos = bytes(data), 0

    def read(self, n=-1):
        end = len(self.data) if n < 0 else self.pos + n
        out, self.pos = self.data[self.pos:end], end
        return out


@settings(max_examples=150, deadline=None)
@given(answer=st.dictionaries(names, st.dictionaries(st.integers(0, 2 ** 31 - 1), st.sampled_from([0, 3, 16, 25, 87]),
                                                     max_size=20), max_size=5),
       throttle=st.integers(0, 2 ** 31 - 1), version=st.integers(2, 5))
def test_the_answer_is_read_like_kafka_python_reads_it(answer, throttle, version):
    stock = OffsetCommitResponse(throttle_time_ms=throttle, topics=[
        _Answer(name=t, partitions=[_AnswerPartition(partition_index=p, error_code=c) for p, c in ps.items()])
        for t, ps in answer.items()])
    body = bytes(stock.encode(version=version))
    reader = _Reader(version)
    assert reader.parse_header(_Buffer(struct.pack(">i", 42))).correlation_id == 42
    got = reader.decode(_Buffer(body))
    assert isinstance(got, OffsetCommitResult) and got.correlation_id == 42
    assert got.error_codes == {(t, p): c for t, ps in answer.items() for p, c in ps.items()}
    assert got.throttle_time_ms == (throttle if version >= 3 else 0)
    for cut in (body[:-1], body + b"\0"):  # truncated or trailing bytes: an error kafka-python's parser reports
        with pytest.raises((ValueError, struct.error)):
            _Reader(version).decode(_Buffer(cut))


def test_only_this_requests_answer_is_read_by_the_fast_reader():
    r = make_request("g", {("t", 0): 1})
    r.with_header(correlation_id=5, client_id="c")
    for version, fast in ((5, True), (2, True), (1, False), (8, False)):
        r.API_VERSION = version
        assert r.header.request_api_version == version and r.header.correlation_id == 5
        assert isinstance(r.header.get_response_class(), _Reader) is fast
    stock = Stock(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  retention_time_ms=-1, topics=[], max_version=8)
    stock.with_header(correlation_id=6, client_id="c")
    stock.API_VERSION = 5
    assert stock.header.get_response_class() is OffsetCommitResponse[5]  # other OffsetCommits: kafka-python's


def _answer(topics, version=5):
    """The bytes of an OffsetCommit answer: ``topics`` ``[(name, [(partition, error code)])]``, in that order."""
    stock = OffsetCommitResponse(throttle_time_ms=0, topics=[
        _Answer(name=t, partitions=[_AnswerPartition(partition_index=p, error_code=c) for p, c in ps])
        for t, ps in topics])
    return _Reader(version).decode(_Buffer(bytes(stock.encode(version=version))))


@settings(max_examples=150, deadline=None)
@given(offsets=st.dictionaries(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 50)),
                               st.integers(0, 2 ** 40), min_size=1, max_size=30),
       data=st.data())
def test_acknowledges_exactly_the_requests_partitions_all_committed(offsets, data):
    """The broker lists partitions in its own order: any order acknowledges the request when every code is 0 and
    the partitions are exactly the request's; a missing, extra or failed partition, or a missing topic, does not."""
    request = make_request("g", offsets)
    topics = [(t, data.draw(st.permutations([(p, 0) for p, _ in entries])))
              for t, entries in request.offsets_by_topic.items()]
    topics = data.draw(st.permutations(topics))
    assert _answer(topics).acknowledges(request.offsets_by_topic)
    name, parts = topics[0]
    wrong = data.draw(st.sampled_from(["fail", "drop", "extra", "topic", "twice"] if len(parts) > 1 else
                                      ["fail", "extra", "topic", "twice"]))
    if wrong == "fail":
        i = data.draw(st.integers(0, len(parts) - 1))
        parts = parts[:i] + [(parts[i][0], data.draw(st.sampled_from([3, 16, 25, 87])))] + parts[i + 1:]
    elif wrong == "drop":
        parts = parts[1:]
    elif wrong == "extra":
        parts = parts + [(max(p for p, _ in parts) + 1, 0)]
    bad = ([] if wrong == "topic" else [(name, parts)]) + topics[1:]
    if wrong == "twice":  # the first topic answered twice instead of the last one (or in addition to it)
        bad = [(name, parts)] + topics[:-1] if len(topics) > 1 else [(name, parts), (name, parts)]
    got = _answer(bad)
    assert not got.acknowledges(request.offsets_by_topic)
    assert got.error_codes == {(t, p): c for t, ps in bad for p, c in ps}  # the slow path still reports each code
