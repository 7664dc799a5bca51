"""zkconsumer.zookeeper.multi: the one-pass setData/check multi-op is byte-identical to kazoo's transaction, its
answer is ALL_OK only when every operation succeeded (else kazoo's own per-operation results), and the offset store
using it behaves as before against a real ZooKeeper: failures, fences, races and chroots."""
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError, RuntimeInconsistency
from kazoo.protocol.serialization import CheckVersion, SetData, Transaction, multiheader_struct, stat_struct

from zkconsumer.errors import OwnershipLostError
from zkconsumer.core.layout import partition_offset_path, partition_owner_path
from zkconsumer.offsets import OwnershipFence, ZooKeeperOffsetStore
from zkconsumer.zookeeper import multi as zk_multi

paths = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="/"),
                min_size=1, max_size=30).map(lambda s: "/consumers/g/offsets/" + s)


def _ours(ops, fenced):
    parts = []
    for path, data, owner in ops:
        if fenced:
            parts.append(zk_multi.check_op(owner, 0))
        parts.append(zk_multi.set_data(zk_multi.set_data_prefix(path), data))
    return zk_multi.SetDataMulti(parts, len(ops) * (2 if fenced else 1), fenced)


def _kazoo(ops, fenced):
    out = []
    for path, data, owner in ops:
        if fenced:
            out.append(CheckVersion(owner, 0))
        out.append(SetData(path, data, -1))
    return Transaction(out)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(paths, st.integers(0, 2 ** 63 - 1).map(lambda n: b"%d" % n) | st.binary(max_size=40),
                              paths), min_size=1, max_size=30),
       fenced=st.booleans())
def test_byte_identical_to_kazoos_transaction(ops, fenced):
    assert _ours(ops, fenced).serialize() == bytes(_kazoo(ops, fenced).serialize())


def _answer(results):
    """A multi answer as ZooKeeper writes it: per result a header then its body, then the closing header."""
    b = b""
    for kind, err in results:
        b += multiheader_struct.pack(kind, False, err)
        if kind == 5:
            b += stat_struct.pack(*range(11))
        elif kind == -1:
            b += struct.pack(">i", err)
    return b + multiheader_struct.pack(-1, True, -1)


def test_all_ok_only_when_every_operation_succeeded():
    ops = [("/a/%d" % i, b"1", "/o/%d" % i) for i in range(3)]
    assert _ours(ops, False).deserialize(_answer([(5, 0)] * 3), 0) == [zk_multi.ALL_OK]
    assert _ours(ops, True).deserialize(b"xx" + _answer([(13, 0), (5, 0)] * 3), 2) == [zk_multi.ALL_OK]
    # a failed multi: every result is an error result; kazoo's parser reports them, one exception each
    failed = _ours(ops, True).deserialize(_answer([(-1, 0), (-1, 0), (-1, -103), (-1, -2), (-1, -2), (-1, -2)]), 0)
    assert not zk_multi.all_ok(failed) and len(failed) == 6
    assert [type(r) for r in failed[1:4]] == [RolledBackError, BadVersionError, RuntimeInconsistency]
    # the wrong count of results, or a result of another kind, is never taken for success
    assert not zk_multi.all_ok(_ours(ops, False).deserialize(_answer([(5, 0)] * 2), 0))
    assert not zk_multi.all_ok(_ours(ops, False).deserialize(_answer([(5, 0), (5, 0), (2, 0)]), 0))
    assert not zk_multi.all_ok([True])
    assert "3 operations" in repr(_ours(ops, False)) and len(repr(_ours(ops * 100, False))) < 80


def test_the_store_writes_through_it_and_reads_back(zk, unique):
    g, t = unique("g"), unique("t")
    store = ZooKeeperOffsetStore(zk, g)
    assert zk_multi.supported(zk)
    store.commit({(t, p): 1 for p in range(50)}).raise_for_errors()  # creates: kazoo's transaction
    before = store.stats["transactions"]
    r = store.commit({(t, p): 100 + p for p in range(50)})
    assert r.ok and len(r.committed) == 50 and store.stats["transactions"] == before + 1
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, p) for p in range(50)]) == {(t, p): 100 + p for p in range(50)}
    request = next(store._set_data_multis([(t, 0), (t, 1)], {(t, 0): 5, (t, 1): 6}, None))[1]
    assert zk_multi.all_ok(zk_multi.submit(zk, request).get(timeout=10))
    assert zk.get(partition_offset_path(g, t, 1))[0] == b"6"


def test_a_node_deleted_behind_the_stores_back_is_created_again(zk, unique):
    g, t = unique("g"), unique("t")
    store = ZooKeeperOffsetStore(zk, g)
    store.commit({(t, p): 1 for p in range(5)}).raise_for_errors()
    zk.delete(partition_offset_path(g, t, 3))  # the cache still says "exists": the setData multi-op fails
    r = store.commit({(t, p): 2 for p in range(5)})
    assert r.ok and r.committed == {(t, p): 2 for p in range(5)}
    assert [zk.get(partition_offset_path(g, t, p))[0] for p in range(5)] == [b"2"] * 5


def test_fenced_sets_refuse_only_the_lost_partition(zk, unique):
    g, t = unique("g"), unique("t")
    owners = {(t, p): partition_owner_path(g, t, p) for p in range(4)}
    for path in owners.values():
        zk.create(path, b"me-0", ephemeral=True, makepath=True)
    store = ZooKeeperOffsetStore(zk, g)
    fence = OwnershipFence(zk.client_id[0], owners)
    store.commit({tp: 1 for tp in owners}, fence=fence).raise_for_errors()
    zk.set(owners[(t, 2)], b"someone-else-0")  # replaced after the fence read it: check(version 0) fails
    r = store.commit({tp: 2 for tp in owners}, fence=fence)
    assert r.committed == {(t, 0): 2, (t, 1): 2, (t, 3): 2}
    assert isinstance(r.failed[(t, 2)], OwnershipLostError) and "replaced or modified" in str(r.failed[(t, 2)])
    assert zk.get(partition_offset_path(g, t, 2))[0] == b"1"
    zk.delete(owners[(t, 1)])
    r = store.commit({(t, 0): 3, (t, 1): 3}, fence=fence)
    assert r.committed == {(t, 0): 3} and "vanished" in str(r.failed[(t, 1)])


def test_chunks_stay_below_zookeepers_limits(zk, unique):
    g, t = unique("g"), unique("t" * 20)
    store = ZooKeeperOffsetStore(zk, g)
    offsets = {(t, p): p for p in range(5000)}
    store.commit(offsets).raise_for_errors()
    chunks = list(store._set_data_multis(list(offsets), offsets, None))
    assert len(chunks) == 2 and sum(len(c) for c, _ in chunks) == 5000  # 4,000 operations at most per multi-op
    assert all(len(req.serialize()) <= 512 * 1024 for _, req in chunks)
    r = store.commit({tp: off + 1 for tp, off in offsets.items()})
    assert r.ok and zk.get(partition_offset_path(g, t, 4999))[0] == b"5000"


def test_a_failed_multi_reports_kazoos_errors(zk, unique):
    g, t = unique("g"), unique("t")
    store = ZooKeeperOffsetStore(zk, g)
    store.commit({(t, 0): 1}).raise_for_errors()
    path = partition_offset_path(g, t, 0)
    request = zk_multi.SetDataMulti([zk_multi.set_data(zk_multi.set_data_prefix(path), b"2"),
                                     zk_multi.set_data(zk_multi.set_data_prefix(path + "x"), b"2")], 2, False)
    results = zk_multi.submit(zk, request).get(timeout=10)
    assert [type(r) for r in results] == [RolledBackError, NoNodeError]
    assert zk.get(path)[0] == b"1"
