"""zkconsumer.protocol.offset_commit: the one-pass OffsetCommit encoding is byte-identical to kafka-python's for
every version it handles (2-5) and falls back to kafka-python's for the others (pure; the live broker path is in
test_offsets_kafka.py and test_offsets_dual.py)."""
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest as Stock

from zkconsumer.protocol.offset_commit import OffsetCommitRequest, make_request

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
