"""Support for the chaos tests (tests/chaos/test_chaos_*.py) and the bad-input corpus (tests/chaos/test_bad_input.py).

* :class:`TimedConsumer` — a :class:`consumer_helpers.CliConsumer` that stamps every stdout record and every
  ``--events`` line with ``time.monotonic()`` at the moment the test reads it, and knows when it was killed;
* :func:`ownership_intervals` / :func:`check_deliveries` — the split-brain invariant, defined on those stamps;
* :func:`recovery_times` — kill -> every partition the dead member owned re-assigned to a live member;
* :func:`counted_from_first_delivery` / :func:`delivered_after_waiting` — what must be delivered under ``largest``
  (from the group's first delivered offset of each partition on), and what was;
* :class:`OwnCluster` — a private :class:`LocalCluster` whose ZooKeeper / broker processes may be stopped,
  frozen (SIGSTOP) and restarted *on the same port* (the session-wide services are never touched);
* :func:`zk_tree` — a snapshot of a whole ZooKeeper tree (path -> (data, mzxid)).
"""
import os
import signal
import time

from tests.support.consumer_helpers import CliConsumer
from tests.support.waiting import wait_until
from zkconsumer.local import LocalCluster

TOL = 1.0   # seconds: skew allowed between a consumer's stdout and stderr pipes as the test reads them


class TimedConsumer(CliConsumer):
    """Records get ``_t`` (read time), events get ``_t``; ``.killed_at`` / ``.termed_at`` / ``.frozen`` are set
    by the signal helpers below."""

    def __init__(self, *a, **kw):
        self.killed_at = None
        self.termed_at = None
        self.started_at = time.monotonic()
        super().__init__(*a, **kw)

    def _stamp(self, rec, now):
        rec["_t"] = now

    def sigkill(self):
        if self.proc.poll() is None:
            self.killed_at = time.monotonic()
            self.proc.kill()

    def sigterm(self):
        if self.proc.poll() is None:
            self.termed_at = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)

    def timed_records(self, topic):
        with self.lock:
            return [(r["partition"], r["offset"], r["_t"]) for r in self.records if r["topic"] == topic]

    def timed_events(self):
        with self.lock:
            return list(self.events)

    def owned_now(self, topic):
        """Partitions owned according to this member's own events (assign = full set, revoke -, lost = none)."""
        return owned_after(self.timed_events(), topic)

    def stderr_problems(self):
        """Lines that must never appear: a rebalance giving up / degrading, or a traceback."""
        with self.lock:
            return [ln for ln in self.log if "can't rebalance" in ln or "DEGRADED" in ln or "Traceback" in ln]


def ownership_intervals(consumer, topic, end):
    """{partition: [(start, stop)]} from the member's events. An interval ends at revoke/lost, at the kill
    (a SIGKILLed process delivers nothing more), at the process exit as observed, else at `end`."""
    stop_at = consumer.killed_at
    if stop_at is None and consumer.proc.poll() is not None:
        stop_at = end
    open_ = {}
    out = {}
    for ev in consumer.timed_events():
        t = ev["_t"]
        parts = {p for tt, p in ev["partitions"] if tt == topic}
        if ev["event"] == "assign":
            for p in list(open_):
                if p not in parts:  # not expected (assign lists the full set), close defensively
                    out.setdefault(p, []).append((open_.pop(p), t))
            for p in parts:
                open_.setdefault(p, t)
        elif ev["event"] in ("revoke", "lost"):
            for p in (parts if ev["event"] == "revoke" else set(open_)):
                if p in open_:
                    out.setdefault(p, []).append((open_.pop(p), t))
    final = stop_at if stop_at is not None else end
    for p, s in open_.items():
        out.setdefault(p, []).append((s, max(s, final)))
    return out


def check_deliveries(consumers, topic, end, tol=TOL, exempt=None):
    """The split-brain invariant. Returns a list of violations (empty = fine):

    1. every record a member printed was printed while it owned the partition (within ``tol`` of one of its
       ownership intervals);
    2. no two members' ownership intervals of the same partition overlap by more than ``tol``.

    ``exempt(consumer, p, start, stop)`` may return an allowed extra overlap in seconds for an interval (the
    session-timeout window of a frozen member, which cannot know it lost its session until it runs again).
    """
    bad = []
    ivs = {c.name: ownership_intervals(c, topic, end) for c in consumers}
    for c in consumers:
        mine = ivs[c.name]
        for p, o, t in c.timed_records(topic):
            if not any(s - tol <= t <= e + tol for s, e in mine.get(p, [])):
                bad.append("%s printed p%d@%d at %.2f outside its ownership %s" % (c.name, p, o, t, mine.get(p)))
    by_name = {c.name: c for c in consumers}
    for p, a, (sa, ea), b, (sb, eb), overlap in _overlaps(ivs, [c.name for c in consumers]):
        allowed = tol
        if exempt is not None:
            allowed += max(exempt(by_name[a], p, sa, ea), exempt(by_name[b], p, sb, eb))
        if overlap > allowed:
            bad.append("p%d owned by %s [%.2f, %.2f] and %s [%.2f, %.2f]: overlap %.2f s"
                       % (p, a, sa, ea, b, sb, eb, overlap))
    return bad


def _overlaps(spans, names):
    """For every two members (in *names* order) and every partition both have spans of (*spans*: {name:
    {partition: [(start, stop)]}}), each pair of their spans: (partition, a, a's span, b, b's span, overlap in s,
    negative when apart)."""
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for p in set(spans[a]) & set(spans[b]):
                for sa, ea in spans[a][p]:
                    for sb, eb in spans[b][p]:
                        yield p, a, (sa, ea), b, (sb, eb), min(ea, eb) - max(sa, sb)


RUN_GAP = 0.3      # seconds: a member's deliveries of a partition further apart than this start a new run
RUN_OVERLAP = 0.2  # seconds two members' runs of one partition may overlap (stdout read skew between processes)


def delivery_runs(consumer, topic, gap=RUN_GAP):
    """{partition: [(first, last)]}: the member's deliveries of each partition, split into runs at gaps > gap s."""
    by_p = {}
    for p, _, t in sorted(consumer.timed_records(topic), key=lambda r: r[2]):
        runs = by_p.setdefault(p, [])
        if runs and t - runs[-1][1] <= gap:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return {p: [tuple(r) for r in runs] for p, runs in by_p.items()}


def check_delivery_overlaps(consumers, topic, gap=RUN_GAP, tol=RUN_OVERLAP):
    """The tight split-brain check, on what members actually delivered: per partition, no two members' delivery
    runs overlap in time by more than tol s. Returns the violations (empty = fine)."""
    runs = {c.name: delivery_runs(c, topic, gap) for c in consumers}
    return ["p%d delivered by %s [%.2f, %.2f] and %s [%.2f, %.2f]: overlap %.2f s" % (p, a, sa, ea, b, sb, eb, overlap)
            for p, a, (sa, ea), b, (sb, eb), overlap in _overlaps(runs, sorted(runs)) if overlap > tol]


def owned_after(events, topic, until=None):
    """Partitions of topic owned after replaying a member's events (assign = the full set, revoke -, lost =
    none), stopping at the first event read after ``until``."""
    owned = set()
    for ev in events:
        if until is not None and ev["_t"] > until:
            break
        parts = {p for t, p in ev["partitions"] if t == topic}
        if ev["event"] == "assign":
            owned = parts
        elif ev["event"] == "revoke":
            owned -= parts
        elif ev["event"] == "lost":
            owned = set()
    return owned


def recovery_times(consumers, topic):
    """For every SIGKILL of a member that owned partitions: seconds until every one of them was assigned to another
    member (from the others' assign events). Kills whose partitions were never re-assigned are skipped."""
    out = []
    for c in consumers:
        if c.killed_at is None:
            continue
        owned = owned_after(c.timed_events(), topic, until=c.killed_at)
        if not owned:
            continue
        when = {}
        for other in consumers:
            if other is c:
                continue
            for ev in other.timed_events():
                if ev["event"] == "assign" and ev["_t"] > c.killed_at:
                    for t, p in ev["partitions"]:
                        if t == topic and p in owned and (p not in when or ev["_t"] < when[p]):
                            when[p] = ev["_t"]
        if set(when) == owned:
            out.append(round(max(when.values()) - c.killed_at, 2))
    return out


def counted_from_first_delivery(consumers, topic, produced):
    """{(partition, offset)} of the ``produced`` (partition, offset, value) records at or above the first offset any
    of ``consumers`` delivered of their partition: under ``largest``, the group's reset point when a producer
    runs throughout (what lies below was written before the group had a position there)."""
    first = {}
    for c in consumers:
        for p, o in c.seen(topic):
            first[p] = min(first.get(p, o), o)
    return {(p, o) for p, o, _ in produced if p in first and o >= first[p]}


def delivered_after_waiting(consumers, topic, want, timeout=30):
    """Wait (bounded) until ``want`` was delivered; return every (partition, offset) delivered, in print order per
    consumer. Not delivering everything is left to the caller to report, with its figures."""
    def union():
        return [x for c in consumers for x in c.seen(topic)]
    deadline = time.monotonic() + timeout
    while not want <= set(union()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return union()


# -- ZooKeeper tree snapshot ------------------------------------------------------------------------------------
def zk_tree(zk, root="/"):
    """{path: (data, mzxid)} of every node under root (ZooKeeper's own /zookeeper subtree excluded)."""
    out = {}
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            data, stat = zk.get(path)
            children = zk.get_children(path)
        except Exception:  # vanished while walking
            continue
        out[path] = (data, stat.mzxid)
        for ch in children:
            child = (path.rstrip("/") + "/" + ch)
            if child != "/zookeeper":
                stack.append(child)
    return out


def stable_tree(zk, quiet=5.0, timeout=40.0):
    """A snapshot taken once the tree did not change for `quiet` seconds (ephemeral nodes of processes killed by
    earlier tests expire on their own)."""
    deadline = time.monotonic() + timeout
    snap, since = zk_tree(zk), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError("the ZooKeeper tree kept changing for %.0f s" % timeout)
        time.sleep(0.5)
        now = zk_tree(zk)
        if now != snap:
            snap, since = now, time.monotonic()
    return snap


def tree_diff(before, after):
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    return ["%s: %r -> %r" % (p, before.get(p), after.get(p)) for p in changed]


# -- a private cluster whose servers may be stopped and restarted on the same port ------------------------------
class OwnCluster:
    """A LocalCluster of its own (never the session-wide one), Apache Kafka unless broker= says otherwise.
    ZooKeeper keeps its data directory (and its sessions) and Kafka its log dirs across a restart; tansu is
    memory-only, so after a tansu restart topics must be created again."""

    ALIASES = {"broker": "broker-0"}

    def __init__(self, directory, broker="kafka", **up_kw):
        self.cluster = LocalCluster(directory)
        self.info = self.cluster.up(start_timeout=90, broker=broker, **up_kw)
        self.zookeeper_connect = self.info["zookeeper_connect"]
        self.bootstrap_servers = self.info["bootstrap_servers"]

    # duck-types conftest.Services for CliConsumer / create_topic
    def create_topic(self, name, partitions):
        from zkconsumer.errors import ClusterUnavailableError
        from zkconsumer.local import tools
        try:
            tools.create_or_grow_topic(self.bootstrap_servers, name, partitions,
                                       replication_factor=min(3, len(self.cluster.broker_names())))
        except ClusterUnavailableError as e:
            raise AssertionError("%s\n%s" % (e, self.server_logs())) from e
        tools.wait_for_zk_topic(self.zookeeper_connect, name, partitions, timeout=30)
        return name

    def server_logs(self, lines=40):
        """The last lines of every server's log in this cluster's directory (for a failure's message)."""
        from zkconsumer.local.processes import log_tail
        return "\n".join("--- %s (last %d lines)\n%s" % (entry, lines, log_tail(os.path.join(self.cluster.dir, entry), lines))
                         for entry in sorted(os.listdir(self.cluster.dir)) if entry.endswith(".log"))

    def state(self):
        return self.cluster.read_state()

    def pid(self, name):
        return self.cluster.record(self.ALIASES.get(name, name))["pid"]

    def freeze(self, name):
        os.killpg(self.pid(name), signal.SIGSTOP)

    def thaw(self, name):
        os.killpg(self.pid(name), signal.SIGCONT)

    def stop(self, name, kill=False):
        self.cluster.stop(self.ALIASES.get(name, name), kill=kill)

    def start(self, name, timeout=90):
        """Start a stopped server again with the same configuration (same ports, same data)."""
        self.cluster.start(self.ALIASES.get(name, name), timeout=timeout)

    def start_zookeeper(self, timeout=60):
        self.start("zookeeper", timeout)

    # -- a ZooKeeper ensemble (up_kw zookeepers=3) -----------------------------------------------------------
    def zookeeper_modes(self):
        """{server name: leader / follower / not serving, or None when down}."""
        return self.cluster.zookeeper_modes()

    def wait_for_quorum(self, serving, timeout=60):
        """Wait until exactly one server leads and ``serving`` servers in all serve; return the leader's name."""
        def check():
            modes = self.zookeeper_modes()
            leaders = [n for n, m in modes.items() if m == "leader"]
            ok = len(leaders) == 1 and sum(m in ("leader", "follower") for m in modes.values()) == serving
            return leaders[0] if ok else None
        return wait_until(check, timeout, interval=0.05, message="%d ZooKeeper servers serving" % serving)

    def start_broker(self, timeout=90):
        self.start("broker", timeout)

    def down(self):
        self.cluster.down()


def own_cluster_fixture(name, **up_kw):
    """A module-scoped pytest fixture yielding an OwnCluster started in a fresh directory and stopped afterwards."""
    import pytest

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory):
        cluster = OwnCluster(str(tmp_path_factory.mktemp(name)), **up_kw)
        try:
            yield cluster
        finally:
            cluster.down()
    return fixture
