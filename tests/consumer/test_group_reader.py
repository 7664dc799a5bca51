"""The group reader caches registrations and partition maps between attempts (the herd effect: O(N) reads per
member per rebalance became O(changes)); a watch per cached node drops it when it changes or goes, so what is
computed stays what a fresh read computes. Real ZooKeeper."""
import threading

import pytest

from tests.support.waiting import wait_until
from zkconsumer.consumer.group_view import GroupReader, read_group
from zkconsumer.core.layout import codecs, paths


def _register(zk, g, cid, topics):
    reg = codecs.ConsumerRegistration.static({t: 1 for t in topics})
    zk.create(paths.consumer_registration_path(g, cid), codecs.encode_consumer_registration(reg), ephemeral=True,
              makepath=True)


def _count_reads(zk):
    """Count the read requests *zk* sends from now on (kazoo hands every request to ``_call``): exists, getData,
    getChildren, getChildren2."""
    from zkconsumer.kafka.internals import kazoo_observe_requests
    counted = [0]

    def counting(request):
        if getattr(request, "type", None) in (3, 4, 8, 12):
            counted[0] += 1
    kazoo_observe_requests(zk, counting)
    return counted


def _first_call_on(monkeypatch, zk, method, path, action):
    """Run *action* once, when the reader first calls ``zk.<method>`` for *path* (before the real call); returns a
    list that holds True once it has run."""
    real, ran = getattr(zk, method), []

    def wrapped(p, *a, **k):
        if not ran and p == path:
            ran.append(True)
            action()
        return real(p, *a, **k)
    monkeypatch.setattr(zk, method, wrapped)
    return ran


def test_reads_only_what_changed_and_agrees_with_a_fresh_read(services, zk, unique):
    g = unique("reader")
    sent = _count_reads(zk)
    t1, t2 = services.create_topic(unique("rd"), 4), services.create_topic(unique("rd"), 2)
    for i in range(20):
        _register(zk, g, "m%02d" % i, [t1])
    changes = []
    reader = GroupReader(zk, g, on_change=lambda e: changes.append(e))
    before = sent[0]
    first = reader.read()
    assert len(first.members) == 20 and first.zk_reads >= 20
    assert first.zk_reads == sent[0] - before  # the count the rebalancer reports is the requests sent
    before = sent[0]
    again = reader.read()
    # lists only, nothing changed: members, topics, brokers, leave markers (one round trip); nothing was read after
    # the member list, so its version is not read again
    assert again.zk_reads == sent[0] - before == 4, (again.zk_reads, sent[0] - before)
    assert again.consumers_for_topic == first.consumers_for_topic and again.partitions == first.partitions
    _register(zk, g, "m20", [t1])  # one joins: one more registration read
    before = sent[0]
    joined = reader.read()
    assert joined.zk_reads == sent[0] - before == 6 and len(joined.members) == 21
    # a member re-registers under the same id with another subscription: its watch drops the cached copy
    zk.delete(paths.consumer_registration_path(g, "m05"))
    _register(zk, g, "m05", [t1, t2])
    wait_until(lambda: changes, 10, message="the cached registration's watch to fire")
    fresh = read_group(zk, g)
    cached = reader.read()
    assert cached.consumers_for_topic == fresh.consumers_for_topic
    assert cached.consumers_for_topic[t2] == ["m05-0"] and cached.partitions[t2] == [0, 1]
    # a set() of a registration (same node) is seen too
    changes.clear()
    reg = codecs.ConsumerRegistration.static({t2: 1})
    zk.set(paths.consumer_registration_path(g, "m07"), codecs.encode_consumer_registration(reg))
    wait_until(lambda: changes, 10, message="the watch on m07 to fire")
    assert reader.read().consumers_for_topic == read_group(zk, g).consumers_for_topic


def test_thread_ids_of_a_static_registration_are_worked_out_once_per_version(services, zk, unique, monkeypatch):
    """A rebalance attempt of a large group spent most of its own CPU working out every member's thread ids again
    (300 members: ~2.6 ms an attempt): a static registration's are kept while its version is the one read; a
    wildcard member's are worked out on every read (they follow the topic list), and the answer is a fresh read's."""
    from zkconsumer.consumer import group_view
    g = unique("reader-ids")
    t1, t2 = services.create_topic(unique("ri"), 4), services.create_topic(unique("ri"), 2)
    for i in range(10):
        _register(zk, g, "m%02d" % i, [t1])
    wild = codecs.ConsumerRegistration.wildcard(g + "-w.*", 1)
    zk.create(paths.consumer_registration_path(g, "w00"), codecs.encode_consumer_registration(wild), ephemeral=True,
              makepath=True)
    worked = []
    real = group_view.thread_ids_per_topic
    monkeypatch.setattr(group_view, "thread_ids_per_topic",
                        lambda cid, *a, **k: worked.append(cid) or real(cid, *a, **k))
    changes = []
    reader = GroupReader(zk, g, on_change=lambda e: changes.append(e))
    reader.read()
    assert sorted(worked) == ["m%02d" % i for i in range(10)] + ["w00"]
    del worked[:]
    again = reader.read()
    assert worked == ["w00"]
    assert again.consumers_for_topic == read_group(zk, g).consumers_for_topic
    # a member's registration is rewritten (a set) with another subscription: its new version is worked out
    del worked[:]
    changes.clear()
    zk.set(paths.consumer_registration_path(g, "m03"), codecs.encode_consumer_registration(
        codecs.ConsumerRegistration.static({t1: 1, t2: 1})))
    wait_until(lambda: changes, 10, message="the watch on m03 to fire")
    snap = reader.read()
    assert sorted(worked) == ["m03", "w00"] and snap.consumers_for_topic[t2] == ["m03-0"]
    assert snap.consumers_for_topic[t1] == sorted("m%02d-0" % i for i in range(10))
    # a topic the wildcard matches appears: the wildcard member subscribes to it at once
    t3 = services.create_topic(g + "-w1", 1)
    snap = reader.read()
    assert snap.consumers_for_topic[t3] == ["w00-0"]
    assert snap.consumers_for_topic == read_group(zk, g).consumers_for_topic
    # members that leave take their kept thread ids and change counts with them
    changes.clear()
    for i in range(5):
        zk.delete(paths.consumer_registration_path(g, "m%02d" % i))
    wait_until(lambda: len(changes) >= 5, 10, message="the watches of the 5 leaving members to fire")
    reader.read()
    assert sorted(cid for cid, _ in reader._threads) == ["m%02d" % i for i in range(5, 10)]
    assert not [k for k in reader._changes if k[1] in {"m%02d" % i for i in range(5)}]


def test_a_registration_set_while_a_read_is_under_way_leaves_no_member_out(services, zk, unique, monkeypatch):
    """A cached registration whose watch fires in the middle of a pass (its registration set: ``register`` does so
    when the node is already its session's with other content) is used by that pass as read, and read again by the
    next: it was once dropped from the cache after the pass had decided what to read, so that pass counted the group
    without that member."""
    g, t = unique("reader-race"), services.create_topic(unique("rr"), 6)
    for cid in ("a", "b"):
        _register(zk, g, cid, [t])
    changes = []
    reader = GroupReader(zk, g, on_change=lambda e: changes.append(e))
    reader.read()
    _register(zk, g, "c", [t])  # one joins: the next pass reads its registration

    def set_a():  # same content, a new version: a's watch fires and drops its cached copy, mid-pass
        zk.set(paths.consumer_registration_path(g, "a"), zk.get(paths.consumer_registration_path(g, "a"))[0])
        wait_until(lambda: "a" not in reader._regs, 10, message="a's watch to drop its cached registration")
    ran = _first_call_on(monkeypatch, zk, "get_async", paths.consumer_registration_path(g, "c"), set_a)
    snap = reader.read()
    assert ran
    assert sorted(snap.members) == ["a", "b", "c"]
    assert snap.consumers_for_topic == {t: ["a-0", "b-0", "c-0"]}
    assert reader.read().consumers_for_topic == read_group(zk, g).consumers_for_topic


def test_a_member_list_made_again_during_a_read_is_read_again(services, zk, unique, monkeypatch):
    """The pass's closing check compares the member list's creation as well as its cversion: a list deleted and made
    again while the pass read it starts its cversion afresh, so after as many joins it had the same cversion and the
    pass's member list, gone since, was taken as current."""
    g, t = unique("reader-aba"), services.create_topic(unique("ra"), 2)
    _register(zk, g, "a", [t])
    reader = GroupReader(zk, g, on_change=lambda e: None)
    assert sorted(reader.read().members) == ["a"]
    _register(zk, g, "c", [t])  # one joins: the next pass reads its registration, then the list's version
    ids = paths.group_ids_path(g)

    def remake():  # a and c leave, the empty list is removed (a tool's cleanup) and made again, b and d join:
        # cversion 2 again
        for cid in ("a", "c"):
            zk.delete(paths.consumer_registration_path(g, cid))
        zk.delete(ids)
        for cid in ("b", "d"):
            _register(zk, g, cid, [t])
    ran = _first_call_on(monkeypatch, zk, "exists_async", ids, remake)
    snap = reader.read()
    assert ran
    assert sorted(snap.members) == ["b", "d"] and snap.consumers_for_topic == {t: ["b-0", "d-0"]}


def test_concurrent_reads_and_changes_converge(services, zk, unique):
    g, t = unique("reader-c"), services.create_topic(unique("rdc"), 8)
    for i in range(10):
        _register(zk, g, "c%d" % i, [t])
    reader = GroupReader(zk, g, on_change=lambda e: None)
    stop = threading.Event()

    def churn():
        n = 100
        while not stop.is_set():
            _register(zk, g, "x%d" % n, [t])
            zk.delete(paths.consumer_registration_path(g, "x%d" % n))
            n += 1
    th = threading.Thread(target=churn, daemon=True)
    th.start()
    try:
        for _ in range(20):
            try:
                reader.read()
            except Exception:
                pass  # "kept changing" is allowed under churn
    finally:
        stop.set()
        th.join(10)
    assert reader.read().consumers_for_topic == read_group(zk, g).consumers_for_topic


def test_the_member_list_path_is_made_once_and_again_if_a_tool_removed_it(zk, unique, monkeypatch):
    """ensure_path of /consumers/G/ids costs a round trip: the reader makes it on its first read only, and when the
    (empty) path was deleted since, it makes it again instead of failing."""
    g = unique("reader")
    reader = GroupReader(zk, g)
    calls = []
    real = zk.ensure_path
    monkeypatch.setattr(zk, "ensure_path", lambda path, *a, **k: calls.append(path) or real(path, *a, **k))
    assert reader.read().members == {} and calls == [paths.group_ids_path(g)]
    assert reader.read().members == {} and len(calls) == 1  # not again
    zk.delete(paths.group_ids_path(g))  # e.g. an operator's cleanup of an empty group
    assert reader.read().members == {} and len(calls) == 2 and zk.exists(paths.group_ids_path(g))
    _register(zk, g, "m00", [])
    assert list(reader.read().members) == ["m00"] and len(calls) == 2


@pytest.mark.parametrize("what", ["partition map", "registration"])
def test_a_change_between_the_answer_and_the_cache_store_is_not_lost(services, zk, unique, monkeypatch, what):
    """ZooKeeper answered a read and armed its one-shot watch; the node changes and the watch fires before the reader
    stored the answer. The answer is stale and no watch is left on the node: it must not be cached. The window is
    held open here by decoding the answer only after the change was seen (the decoders are pure code)."""
    g, t = unique("race"), services.create_topic(unique("race"), 2)
    t2 = services.create_topic(unique("race2"), 1)
    _register(zk, g, "m0", [t])
    changes = []
    reader = GroupReader(zk, g, on_change=changes.append)
    if what == "partition map":
        name, watched = "decode_topic_assignment", paths.topic_path(t)

        def change():
            services.create_topic(t, 3)  # a partition is added
    else:
        name, watched = "decode_consumer_registration", paths.consumer_registration_path(g, "m0")

        def change():
            zk.set(watched, codecs.encode_consumer_registration(codecs.ConsumerRegistration.static({t: 1, t2: 1})))
    real = getattr(codecs, name)
    armed = [True]

    def decode_after_a_change(data, path):
        if armed[0] and path == watched:
            armed[0] = False
            change()
            wait_until(lambda: changes, 10, message="the watch on %s to fire" % watched)
        return real(data, path)
    monkeypatch.setattr(codecs, name, decode_after_a_change)
    reader.read()
    assert not armed[0], "the window was not reached"
    fresh = read_group(zk, g)
    again = reader.read()
    assert (again.partitions, again.consumers_for_topic) == (fresh.partitions, fresh.consumers_for_topic)


def test_a_topic_created_between_the_missing_map_and_its_watch_is_read(services, zk, unique, monkeypatch):
    """A subscribed topic's map is not there; the reader arms a watch to be told when it is created. If it is
    created between ZooKeeper's NoNode answer and that watch, the watch lands on an existing node and no creation
    event ever comes: the reader must read the map then. The window is held open by creating the topic just before
    the reader's exists() call."""
    g, t = unique("late"), unique("late")
    _register(zk, g, "m0", [t])
    reader = GroupReader(zk, g)
    real = zk.exists
    created = []

    def exists_after_the_creation(path, *a, **k):
        if path == paths.topic_path(t) and not created:
            created.append(services.create_topic(t, 2))
        return real(path, *a, **k)
    monkeypatch.setattr(zk, "exists", exists_after_the_creation)
    snap = reader.read()
    assert created, "the window was not reached"
    assert snap.partitions.get(t) == [0, 1], snap.partitions


def test_a_member_leaving_while_the_leave_markers_are_read_is_seen(services, zk, unique, monkeypatch):
    """Leave markers are read against the member list (a JVM member, one without an info node, turns every leave grace
    off; a marker of a member not listed is a ghost), so the list's closing check comes after them: a member that
    left while they were read (its registration, then its info node deleted) once left the pass with a list naming
    it, its info node gone, and so no ghosts at all: the leaving member's partitions handed to the others."""
    from zkconsumer.consumer.leave_grace import encode_marker
    g, t = unique("reader-ghost"), services.create_topic(unique("rg"), 4)
    info_dir = paths.group_member_info_dir(g)
    for cid in ("c", "y"):
        _register(zk, g, cid, [t])
        zk.create(info_dir + "/" + cid, b"{}", ephemeral=True, makepath=True)
    # a left with a grace of a minute: a ghost, assigned its partitions
    zk.create(paths.group_leaving_dir(g) + "/a", encode_marker(codecs.ConsumerRegistration.static({t: 1}), 60000),
              makepath=True)
    reader = GroupReader(zk, g, on_change=lambda e: None)
    first = reader.read()
    assert sorted(first.members) == ["c", "y"] and sorted(first.ghosts) == ["a"]

    def y_leaves():
        zk.delete(paths.consumer_registration_path(g, "y"))
        zk.delete(info_dir + "/y")
    ran = _first_call_on(monkeypatch, zk, "get_children", info_dir, y_leaves)
    snap = reader.read()
    assert ran
    assert sorted(snap.members) == ["c"] and sorted(snap.ghosts) == ["a"], (sorted(snap.members), sorted(snap.ghosts))
    assert snap.consumers_for_topic == {t: ["a-0", "c-0"]}


def test_a_change_whose_watch_callback_has_not_run_yet_is_not_read_from_the_cache(services, zk, unique):
    """kazoo runs watch callbacks on a thread of their own: a registration's change can reach the client before the
    member list's answer while the callback that drops the cached entry waits behind another callback. The read
    waits for those callbacks; it never hands out the registration ZooKeeper had said was stale."""
    from kazoo.protocol.states import Callback

    from zkconsumer.zookeeper import client as zkmod
    g = unique("reader")
    t1, t2 = services.create_topic(unique("rd"), 2), services.create_topic(unique("rd"), 2)
    _register(zk, g, "m0", [t1])
    reader = GroupReader(zk, g)
    assert reader.read().members["m0"].subscription == {t1: 1}
    other = zkmod.connect(services.zookeeper_connect)
    release = threading.Event()
    try:
        # kazoo's watch thread busy for up to 3 s: the change's callback waits behind this one
        zk.handler.dispatch_callback(Callback("watch", lambda: release.wait(3.0), ()))
        reg = codecs.ConsumerRegistration.static({t2: 1})
        other.set(paths.consumer_registration_path(g, "m0"), codecs.encode_consumer_registration(reg))
        threading.Timer(0.5, release.set).start()
        assert reader.read().members["m0"].subscription == {t2: 1}
    finally:
        release.set()
        zkmod.close(other)
