"""Owner nodes are ours to delete only, and a lost one is repaired.

* an owner node deleted out of band (an operator, a buggy tool): the member notices (its commits are fenced, or
  the periodic audit) and claims the partition again within seconds; committed offsets advance again;
* an owner node taken by another session meanwhile: the listener hears ``on_lost`` for that partition (its
  delivery has stopped and it may belong to someone else), and ``on_assign`` again once it is claimed back;
* ``release`` never deletes an owner node of another session at the same path.
"""
import threading

from tests.support.consumer_helpers import BackgroundProducer, StreamCollector, connector
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.consumer import RebalanceListener, ownership
from zkconsumer.core.layout import paths


def test_owner_node_deleted_out_of_band_is_claimed_again(services, zk, unique, conns):
    g, t = unique("own"), services.create_topic(unique("own"), 2)
    conn = connector(services, g)
    conns.append(conn)
    [stream] = conn.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    wait_until(lambda: len(conn.owned_partitions()) == 2, 20, message="both partitions owned")
    producer = BackgroundProducer(services.bootstrap_servers, t, 2, batch=2, pause=0.05, tag="own")
    producer.start()
    try:
        path = paths.partition_owner_path(g, t, 0)
        wait_until(lambda: zk.exists(paths.partition_offset_path(g, t, 0)), 10, message="first commit")
        zk.delete(path)  # out of band
        wait_until(lambda: zk.exists(path) is not None and zk.exists(path).ephemeralOwner == conn.zk.client_id[0],
                   15, message="the owner node claimed again by the member")
        before = int(zk.get(paths.partition_offset_path(g, t, 0))[0])
        wait_until(lambda: int(zk.get(paths.partition_offset_path(g, t, 0))[0]) > before, 15,
                   message="commits for the partition advance again")
    finally:
        produced = producer.stop()
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(col.seen(t)), 20, message="nothing lost")


class Hooks(RebalanceListener):
    def __init__(self):
        self.calls = []

    def on_assign(self, partitions):
        self.calls.append(("on_assign", set(partitions)))

    def on_revoke(self, partitions):
        self.calls.append(("on_revoke", set(partitions)))

    def on_lost(self, partitions):
        self.calls.append(("on_lost", set(partitions)))


def test_an_owner_node_taken_out_of_band_is_reported_lost(services, zk, unique, conns):
    g, t = unique("lst"), services.create_topic(unique("lst"), 2)
    hooks = Hooks()
    conn = connector(services, g, listener=hooks)
    conns.append(conn)
    conn.create_message_streams({t: 1})
    wait_until(lambda: len(conn.owned_partitions()) == 2, 20, message="both partitions owned")
    path = paths.partition_owner_path(g, t, 0)
    squatter = zkmod.connect(services.zookeeper_connect)
    try:
        zk.delete(path)  # out of band, and another session takes the node at once
        squatter.create(path, b"somebody-else-0", ephemeral=True)
        conn.rebalancer._verify_owners = True  # the audit's check, now rather than in 30 s
        conn.rebalancer.request("test: audit")
        wait_until(lambda: ("on_lost", {(t, 0)}) in hooks.calls, 15, message="on_lost for the taken partition")
        assert (t, 0) not in conn.owned_partitions()
        squatter.delete(path)
        wait_until(lambda: (t, 0) in conn.owned_partitions(), 15, message="the partition claimed back")
        wait_until(lambda: hooks.calls[-1] == ("on_assign", {(t, 0), (t, 1)}), 15, message="on_assign again")
    finally:
        zkmod.close(squatter)
    assert [name for name, _ in hooks.calls] == ["on_assign", "on_lost", "on_assign"], hooks.calls


def test_release_never_deletes_another_sessions_node(services, zk, unique):
    g, t = unique("rel"), "t"
    mine = zkmod.connect(services.zookeeper_connect)
    other = zkmod.connect(services.zookeeper_connect)
    try:
        ours, theirs = paths.partition_owner_path(g, t, 0), paths.partition_owner_path(g, t, 1)
        mine.create(ours, b"me-0", ephemeral=True, makepath=True)
        other.create(theirs, b"successor-0", ephemeral=True, makepath=True)
        ownership.release(mine, g, [(t, 0), (t, 1)])
        assert zk.exists(ours) is None
        assert zk.exists(theirs) is not None and zk.get(theirs)[0] == b"successor-0"
    finally:
        zkmod.close(mine)
        zkmod.close(other)


def _member_waiting_for_a_squatter(services, conns, g, t, partition, backoff_ms, waits):
    """(member, squatter's kazoo client, owner path): a foreign session holds the owner node of *partition*; the
    member has waited for it *waits* times."""
    squatter = zkmod.connect(services.zookeeper_connect)
    path = paths.partition_owner_path(g, t, partition)
    squatter.create(path, b"somebody-else-0", ephemeral=True, makepath=True)
    conn = connector(services, g, **{"rebalance.backoff.ms": str(backoff_ms)})
    conns.append(conn)
    threading.Thread(target=lambda: conn.create_message_streams({t: 1}), daemon=True).start()
    wait_until(lambda: conn.rebalancer is not None and conn.rebalancer.stats["claim_waits"] >= waits, 30,
               interval=0.01, message="%d claim wait(s)" % waits)
    return conn, squatter, path


def test_a_long_claim_conflict_keeps_one_watch_per_owner_node(services, zk, unique, conns):
    """A partition held by a foreign live owner node: the member retries its claim again and again (a wait, not a
    failure), and every retry must not add another watcher for that node."""
    import time
    g, t = unique("watch"), services.create_topic(unique("watch"), 1)
    conn, squatter, path = _member_waiting_for_a_squatter(services, conns, g, t, 0, 50, 10)
    try:
        time.sleep(0.5)
        watchers = conn.zk._data_watchers.get(path, set())  # kazoo's registry of data watchers per path
        assert len(watchers) == 1, "%d watchers on %s after %d claim waits" % (
            len(watchers), path, conn.rebalancer.stats["claim_waits"])
        squatter.delete(path)
        wait_until(lambda: len(conn.owned_partitions()) == 1, 20, message="claimed once the squatter left")
    finally:
        zkmod.close(squatter)


def test_a_claim_woken_by_the_release_resumes_without_reading_the_group(services, zk, unique, conns):
    """The deletion of the owner node a claim waits for, with nothing else changed, resumes the attempt at its
    claim: no second read of the group (the default 2 s backoff is far from over when the node goes)."""
    g, t = unique("resume"), services.create_topic(unique("resume"), 2)
    conn, squatter, path = _member_waiting_for_a_squatter(services, conns, g, t, 1, 2000, 1)
    try:
        reads, attempts = conn.rebalancer.stats["zk_reads"], conn.rebalancer.stats["attempts"]
        squatter.delete(path)
        wait_until(lambda: len(conn.owned_partitions()) == 2, 20, interval=0.01,
                   message="both partitions claimed once the squatter left")
        st = conn.rebalancer.stats
        assert st["claim_resumes"] == 1 and st["attempts"] == attempts + 1 and st["zk_reads"] == reads, st
    finally:
        zkmod.close(squatter)


def test_a_claim_makes_an_owner_directory_once_and_again_if_a_tool_removed_it(zk, unique, monkeypatch):
    """``ensure_path`` of /owners/[t] costs a round trip before the claim's multi-op: with the caller's set of
    directories made, a claim makes each once. A directory removed since (a tool's cleanup of an unowned topic)
    fails the multi-op: the claim makes it again and tries once more."""
    g, t = unique("dirs"), "t"
    made = []
    real = zk.ensure_path
    monkeypatch.setattr(zk, "ensure_path", lambda path, *a, **k: made.append(path) or real(path, *a, **k))
    dirs = set()
    mine = {(t, 0): "me-0", (t, 1): "me-0"}
    assert ownership.claim(zk, g, mine, dirs) == set() and dirs == {t}
    assert made == [paths.topic_owners_path(g, t)]
    ownership.release(zk, g, list(mine))
    assert ownership.claim(zk, g, mine, dirs) == set() and len(made) == 1  # not made again
    ownership.release(zk, g, list(mine))
    zk.delete(paths.topic_owners_path(g, t))  # an operator's cleanup of the empty directory
    assert ownership.claim(zk, g, mine, dirs) == set() and len(made) == 2 and dirs == {t}
    assert sorted(zk.get_children(paths.topic_owners_path(g, t))) == ["0", "1"]
    assert all(zk.exists(paths.partition_owner_path(g, t, p)).ephemeralOwner == zk.client_id[0] for p in (0, 1))


def test_owner_nodes_and_their_directory_removed_out_of_band_are_claimed_again(services, zk, unique, conns):
    """The member made its owner directory once; an operator removes its owner nodes and the directory: the member
    notices (the audit, its fenced commits) and claims both partitions again, making the directory again."""
    g, t = unique("own-dir"), services.create_topic(unique("own-dir"), 2)
    conn = connector(services, g)
    conns.append(conn)
    conn.create_message_streams({t: 1})
    wait_until(lambda: len(conn.owned_partitions()) == 2, 20, message="both partitions owned")
    for p in (0, 1):
        zk.delete(paths.partition_owner_path(g, t, p))
    zk.delete(paths.topic_owners_path(g, t))
    session = conn.zk.client_id[0]
    from zkconsumer.consumer.rebalancer import AUDIT_INTERVAL_S

    def owned_again():
        return all((zk.exists(paths.partition_owner_path(g, t, p)) or None) is not None
                   and zk.exists(paths.partition_owner_path(g, t, p)).ephemeralOwner == session for p in (0, 1))
    # the member's next commit is fenced, or its audit (every AUDIT_INTERVAL_S) finds them gone
    wait_until(owned_again, 2 * AUDIT_INTERVAL_S + 15, message="both owner nodes made again by the member")
