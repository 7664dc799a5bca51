"""shutdown() while the member's own rebalance attempt is still under way.

leave_group() waits for the rebalancer thread a quarter of the shutdown bound (3 s with the defaults), then goes on
beside an attempt still running (in a listener hook, say): it takes the ownership lock, stops delivery, commits the
consumed positions, calls on_revoke and releases the owner nodes. Once that attempt has the lock back it must go no
further (no release, claim or start of delivery after shutdown's final commit): otherwise the streams hand records
out again after that commit, and the successor delivers them a second time.

Only public API and the defaults: a listener whose ``on_revoke`` takes a few seconds (finishing the work in flight
before the partitions go), a second member joining, and the first member's shutdown() while its rebalance is in that
``on_revoke``. A hand-over without a crash delivers nothing twice (README "Guarantees under the defaults").

The listener hears of each partition once per assignment: ``on_revoke`` only for partitions it was given with
``on_assign`` and not revoked since, whether the attempt or shutdown revokes them.
"""
import threading
import time

from tests.support.consumer_helpers import SteadyProducer, StreamCollector, connector, owners
from tests.support.spark_support import zk_offsets
from tests.support.waiting import wait_until
from zkconsumer.consumer import RebalanceListener

HOOK_S = 5.0


class HookLog(RebalanceListener):
    """Records each hook as it begins (``hooks``: (hook, partitions), in order); the first ``on_revoke`` after
    ``armed`` is set gets ``revoked(partitions, armed=True)`` (what the application does then), the others
    ``armed=False``."""

    def __init__(self):
        self.conn = None
        self.armed = False
        self.entered = threading.Event()
        self.hooks = []

    def on_assign(self, partitions):
        self.hooks.append(("on_assign", set(partitions)))

    def on_revoke(self, partitions):
        self.hooks.append(("on_revoke", set(partitions)))
        armed, self.armed = self.armed, False
        if armed:
            self.entered.set()
        self.revoked(set(partitions), armed)

    def revoked(self, partitions, armed):
        pass


class SlowRevoke(HookLog):
    """on_revoke takes HOOK_S seconds once armed (the application finishing its work in flight)."""

    def __init__(self):
        super().__init__()
        self.calls = []            # (thread name, partitions, start, end)

    def revoked(self, partitions, armed):
        start = time.monotonic()
        if armed:
            time.sleep(HOOK_S)
        self.calls.append((threading.current_thread().name, partitions, start, time.monotonic()))


def _a_delivering_both(services, zk, unique, conns, name, listener, **props):
    """(group, topic, producer, a, a's collector): a 2-partition topic produced to all along, and member a (the
    defaults + *props*, *listener*) delivering both partitions. The caller stops the producer."""
    g, t = unique(name), services.create_topic(unique(name), 2)
    producer = SteadyProducer(services.bootstrap_servers, t, 2, pause=0.02, tag=name)
    producer.start()
    try:
        wait_until(lambda: len(producer.produced) >= 20, 30, message="data in both partitions")
        a = connector(services, g, listener=listener, defaults=True, **props)
        listener.conn = a
        conns.append(a)
        [sa] = a.create_message_streams({t: 1})[t]
        ca = StreamCollector(sa, name="a")
        ca.start()
        wait_until(lambda: len(owners(zk, g, [t])) == 2, 30, message="a owns both partitions")
        wait_until(lambda: {p for _, p, _ in ca.seen(t)} == {0, 1}, 30, message="a delivering both partitions")
    except BaseException:
        producer.stop()
        raise
    return g, t, producer, a, ca


def _b_joins(services, conns, g, t, **props):
    """(b, its streams once created, the thread creating them): member b joins *g* (the defaults + *props*)."""
    b = connector(services, g, defaults=True, **props)
    conns.append(b)
    streams = []
    joiner = threading.Thread(target=lambda: streams.extend(b.create_message_streams({t: 1})[t]), daemon=True)
    joiner.start()
    return b, streams, joiner


def test_shutdown_during_a_rebalance_delivers_nothing_after_its_final_commit(services, zk, unique, conns):
    listener = SlowRevoke()
    g, t, producer, a, ca = _a_delivering_both(services, zk, unique, conns, "sdr", listener)
    try:
        listener.armed = True
        b, b_streams, joiner = _b_joins(services, conns, g, t)
        assert listener.entered.wait(30), "a's rebalance never reached on_revoke"
        time.sleep(0.3)
        shutdown_called = time.monotonic()
        stopper = threading.Thread(target=a.shutdown, daemon=True)
        stopper.start()
        stopper.join(30)
        assert not stopper.is_alive(), "a's shutdown did not return"
        shutdown_done = time.monotonic()
        joiner.join(30)
        [sb] = b_streams
        cb = StreamCollector(sb, name="b")
        cb.start()
        wait_until(lambda: len(b.owned_partitions()) == 2, 30, message="b owns both partitions")
        settled = time.monotonic()
        wait_until(lambda: {p for (_, p, _), ts in zip(cb.seen(t), cb.times) if ts > settled} == {0, 1}, 30,
                   message="b delivering both partitions")
        time.sleep(1.0)
    finally:
        producer.stop()

    a_seen = set(ca.seen(t))
    b_seen = set(cb.seen(t))
    twice = sorted(a_seen & b_seen)
    # what a handed out after its shutdown() was called (it had stopped delivery for its rebalance before that)
    late = sorted(x for x, ts in zip(ca.seen(t), ca.times) if ts > shutdown_called)
    late_by_p = {}
    for _, p, o in late:
        late_by_p.setdefault(p, []).append(o)
    # per partition: how long a and b delivered it at the same time (a's last hand-out after b's first)
    overlap = {}
    for p in (0, 1):
        a_ts = [ts for (_, q, _), ts in zip(ca.seen(t), ca.times) if q == p]
        b_ts = [ts for (_, q, _), ts in zip(cb.seen(t), cb.times) if q == p]
        if a_ts and b_ts and max(a_ts) > min(b_ts):
            overlap[p] = round(max(a_ts) - min(b_ts), 3)
    detail = ("a handed out %d record(s) after shutdown() was called (per partition: %s; shutdown took %.1f s); "
              "a and b delivered the same partition at the same time for (s): %s; on_revoke calls: %s" % (
                  len(late), {p: "%d..%d" % (min(os), max(os)) for p, os in late_by_p.items()},
                  shutdown_done - shutdown_called, overlap,
                  [(name, sorted(ps), round(s - shutdown_called, 1), round(e - shutdown_called, 1))
                   for name, ps, s, e in listener.calls]))
    assert not twice, "%d record(s) delivered by both a and b after a's clean shutdown, e.g. %s; %s" % (
        len(twice), twice[:5], detail)
    assert not late, detail
    assert_hooks_in_order(listener.hooks)


def test_shutdown_between_a_claim_and_on_assign_revokes_only_what_was_assigned(services, zk, unique, conns):
    """a's rebalance has claimed a partition (b left) and is reading its offset when a's shutdown() begins: the
    attempt ends before on_assign, so shutdown's on_revoke names only the partition a was given, and still releases
    both owner nodes."""
    g, t = unique("sda"), services.create_topic(unique("sda"), 2)
    listener = HookLog()
    a = connector(services, g, listener=listener, defaults=True)
    conns.append(a)
    a.create_message_streams({t: 1})
    wait_until(lambda: len(owners(zk, g, [t])) == 2, 30, message="a owns both partitions")
    b = connector(services, g, defaults=True)
    conns.append(b)
    b.create_message_streams({t: 1})
    wait_until(lambda: len(a.owned_partitions()) == 1 and len(b.owned_partitions()) == 1, 30,
               message="a and b own a partition each")

    # a's next read of committed offsets (the partition it claims from b) takes FETCH_S seconds
    reading = threading.Event()
    fetch = a.offset_store.fetch

    def slow_fetch(partitions, *args, **kwargs):
        if not reading.is_set():
            reading.set()
            time.sleep(FETCH_S)
        return fetch(partitions, *args, **kwargs)
    a.offset_store.fetch = slow_fetch
    b.shutdown()
    assert reading.wait(30), "a's rebalance never read the offset of the partition it claimed"
    time.sleep(0.3)
    a.shutdown()
    assert owners(zk, g, [t]) == {}, "owner nodes left after a's shutdown: %s" % owners(zk, g, [t])
    assert_hooks_in_order(listener.hooks)


FETCH_S = 4.0


class CommitInRevoke(HookLog):
    """Auto-commit off: on_revoke commits the partitions it is given (the documented pattern), taking HOOK_S seconds
    first once armed."""

    def __init__(self):
        super().__init__()
        self.committed = []        # (partitions, what the store said it committed)

    def revoked(self, partitions, armed):
        if armed:
            time.sleep(HOOK_S)
        result = self.conn.commit_partitions(list(partitions))
        self.committed.append((sorted(partitions), sorted(result.committed) if result is not None else None))


def test_shutdown_waits_for_the_rebalances_on_revoke_before_it_releases(services, zk, unique, conns):
    """Auto-commit off, the application commits in on_revoke. a's rebalance (b joins) is in its slow on_revoke for
    the partition moving to b when a's shutdown() begins: shutdown revokes the other partition itself, waits for the
    running hook, and only then releases, so the hook's commit lands and b starts where a stopped."""
    manual = {"auto.commit.enable": "false"}
    listener = CommitInRevoke()
    g, t, producer, a, ca = _a_delivering_both(services, zk, unique, conns, "sdw", listener, **manual)
    try:
        listener.armed = True
        _b_joins(services, conns, g, t, **manual)
        assert listener.entered.wait(30), "a's rebalance never reached on_revoke"
        time.sleep(0.3)
        a.shutdown()
    finally:
        producer.stop()
    want = _next_offsets(ca, t)
    assert zk_offsets(zk, g, t) == want, (
        "committed %s, a delivered up to (next offset) %s: b delivers the difference again; on_revoke's commits: "
        "%s; hooks: %s" % (zk_offsets(zk, g, t), want, listener.committed, listener.hooks))
    assert_hooks_in_order(listener.hooks)


class ShutdownInRevoke(HookLog):
    """on_revoke calls the connector's shutdown() once armed (an application that stops when it loses partitions)."""

    def __init__(self):
        super().__init__()
        self.errors = []
        self.took = None

    def revoked(self, partitions, armed):
        if armed:
            start = time.monotonic()
            try:
                self.conn.shutdown()
            except Exception as e:
                self.errors.append(e)
            self.took = time.monotonic() - start


def test_shutdown_called_from_on_revoke_commits_and_releases(services, zk, unique, conns):
    """The listener's on_revoke (on the rebalancer's own thread, b joining) calls shutdown(): it neither waits for
    its own thread nor fails joining it; it commits what a delivered, revokes the partition a keeps, and releases
    both, within its bound."""
    listener = ShutdownInRevoke()
    g, t, producer, a, ca = _a_delivering_both(services, zk, unique, conns, "sdh", listener)
    try:
        listener.armed = True
        _b_joins(services, conns, g, t)
        wait_until(lambda: listener.took is not None, 60, message="a's shutdown() from on_revoke returned")
    finally:
        producer.stop()
    assert not listener.errors, "shutdown() from on_revoke raised %r" % listener.errors
    bound = a.shutdown_bound_s()
    assert listener.took < bound + 5.0, "shutdown() from on_revoke took %.1f s (bound %.0f s)" % (listener.took, bound)
    delivered = _next_offsets(ca, t)
    assert zk_offsets(zk, g, t) == delivered, "committed %s, a delivered up to (next offset) %s; hooks: %s" % (
        zk_offsets(zk, g, t), delivered, listener.hooks)
    assert_hooks_in_order(listener.hooks)


def _next_offsets(collector, topic):
    """{partition: the offset after the last record *collector* handed out}: what a clean stop commits."""
    after = {}
    for _, p, o in collector.seen(topic):
        after[p] = max(after.get(p, 0), o + 1)
    return after


def assert_hooks_in_order(hooks):
    """Every on_revoke names only partitions assigned (the last on_assign) and not revoked since; by the end (the
    member has shut down) every partition assigned was revoked."""
    held = set()
    for name, parts in hooks:
        if name == "on_assign":
            held = set(parts)
            continue
        assert parts <= held, "%s(%s) for partition(s) %s not assigned or already revoked; hooks in order: %s" % (
            name, sorted(parts), sorted(parts - held), hooks)
        held -= parts
    assert not held, "partition(s) %s assigned and never revoked; hooks in order: %s" % (sorted(held), hooks)
