"""scale: 100 consumers x 1,000 partitions and 300 x 3,000, one joins.

Members run as users run them: fetchers, auto-commit and the start-up checks (split-brain guard, storage check)
on, their defaults but a 30 s ZooKeeper session (for the mass start before the measurement). Both rows run on a
three-server ZooKeeper ensemble: the bench's cluster when it has one, else an embedded cluster the suite starts
for itself (``LocalCluster.up(zookeepers=3)``, tickTime 2000 ms as in ZooKeeper's sample configuration), or the cluster at $BENCH_SCALE_ZOOKEEPER and
$BENCH_SCALE_BOOTSTRAP; on one ZooKeeper server the 300-member goal is not met and its note says why. They are spread over PROCESSES processes (``bench/scale_members.py``), as a
group's members run on many hosts; the joiner runs in this process. Converged = every member has finished an
attempt since the join, is IDLE, fetching, and owns exactly its part of the range assignment of all members; then
the owner nodes in ZooKeeper are read and checked against that assignment. Reported: time to
converge, failed rebalance attempts (claim waits — a member waiting for its predecessor's release — are counted
apart), ZooKeeper reads per member per attempt in the group read, every ZooKeeper read and write the members'
clients sent for the rebalance (``count_requests``), and the CPU the members' processes and the ZooKeeper server
spent while the group converged (bench/model.py reads it). The members' ``consumer.id`` values put the joiner mid-group
(``member_names``).

With all members in one process, 300 sessions and 1,500 threads on one interpreter lock measured one
core taking turns over 300 members' work (5-22 ms of CPU per attempt as the machine's speed varied: joins of
1.7-5.0 s), and its mass start took 3-5 minutes with dozens of sessions expiring.
"""
import inspect
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from . import goals
from .common import process_cpu_s, unique
from .scale_members import count_requests, expected_share, make_member, share_converged

PROCESSES = 4  # member processes: two per core here; each runs N / PROCESSES members
# the ensemble's tickTime: ZooKeeper's sample configuration (zoo_sample.cfg: tickTime=2000, syncLimit=5), as
# ensembles are run. At the embedded cluster's 500 ms (for tests), a follower left without a word from its leader for
# 2.5 s of the mass start's load (both cores busy for minutes) left the quorum and closed every one of its clients'
# connections: a third of the members lost their connection together, some in their start-up checks
ENSEMBLE_TICK_MS = 2000
ASK_TIMEOUT_S = 600  # the longest a command may take (300 members with fetchers: start and first convergence 100-190 s here)
QUIET_S = 2.0
GROUPS = ((100, 1000, "scale.100"), (300, 3000, "scale.300"))  # (members, partitions, goal) of each row


def run(cluster, quick=False, log=print):
    target, why = _ensemble(cluster, log)
    try:
        return [_judged(target, n, partitions, log, key, why if n >= 300 else "") for n, partitions, key in GROUPS]
    finally:
        if target is not cluster:
            target.close()
            if target.local is not None:
                shutil.rmtree(target.directory, ignore_errors=True)


def _judged(cluster, n, partitions, log, key, why=""):
    """The row of one group size; a run that fails (a member that cannot start, a group that does not converge)
    is its goal's row, not met, saying why."""
    try:
        return _run(cluster, n, partitions, log, key, why)
    except Exception as e:  # noqa: BLE001 — reported in the row
        log("scale %d x %d failed: %r" % (n, partitions, e))
        return goals.row(key, "scale: %d consumers x %s partitions, one joins: time until every member fetches its "
                         "share (failed)" % (n, format(partitions, ",")), float("nan"), "s", None, None,
                         "%s%r" % ("%s; " % why if why else "", e))


def _servers(zookeeper_connect):
    return len(zookeeper_connect.split("/", 1)[0].split(","))


def _ensemble(cluster, log):
    """(the cluster to run on, why it is not on a three-server ensemble or "")."""
    from .common import Cluster
    zk, kafka = os.environ.get("BENCH_SCALE_ZOOKEEPER"), os.environ.get("BENCH_SCALE_BOOTSTRAP")
    if zk and kafka:
        target = Cluster(None, zk_connect=zk, bootstrap=kafka)
    elif cluster.zookeeper_servers >= 3:
        return cluster, ""
    elif cluster.local is not None and "zookeepers" in inspect.signature(type(cluster.local).up).parameters:
        log("scale: starting a cluster on a three-server ZooKeeper ensemble")
        target = Cluster(tempfile.mkdtemp(prefix="zkconsumer-bench-scale-"), zookeepers=3,
                         zookeeper_tick_ms=ENSEMBLE_TICK_MS)
    else:
        return cluster, ("on one ZooKeeper server: this embedded cluster cannot start a three-server ensemble (set "
                         "BENCH_SCALE_ZOOKEEPER and BENCH_SCALE_BOOTSTRAP to a cluster on one)")
    if target.zookeeper_servers < 3:
        return target, "on %d ZooKeeper server(s), not three" % target.zookeeper_servers
    return target, ""


class MemberProcesses:
    """The member processes of one group (``bench/scale_members.py``), asked in turn and answered in turn."""

    def __init__(self, cluster, group, topic, count):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        self.procs = [subprocess.Popen([sys.executable, "-m", "bench.scale_members", cluster.zookeeper_connect,
                                        cluster.bootstrap_servers, group, topic],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=root)
                      for _ in range(count)]
        self._lines = [queue.Queue() for _ in self.procs]
        for proc, lines in zip(self.procs, self._lines):
            threading.Thread(target=self._read, args=(proc, lines), daemon=True).start()

    @staticmethod
    def _read(proc, lines):
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def ask(self, requests, timeout=ASK_TIMEOUT_S):
        """Send each process its request (one dict for all, or a list: one per process); their answers in order.
        Raises RuntimeError when a process exits or does not answer within *timeout* seconds."""
        if isinstance(requests, dict):
            requests = [requests] * len(self.procs)
        for proc, req in zip(self.procs, requests):
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
        answers, deadline = [], time.monotonic() + timeout
        for proc, lines in zip(self.procs, self._lines):
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError("a member process did not answer %s within %.0f s" % (
                    requests[0].get("cmd"), timeout))
            if not line:
                raise RuntimeError("a member process exited (code %s): see its log above" % proc.poll())
            answers.append(json.loads(line))
        return answers

    def close(self, timeout=180):
        """Stop every member (graceful), then kill the processes still running *timeout* seconds after the ask."""
        deadline = time.monotonic() + timeout
        try:
            self.ask({"cmd": "stop"}, timeout)
        except (OSError, RuntimeError, ValueError):
            pass
        for proc in self.procs:
            try:
                proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def member_names(n):
    """(``consumer.id`` of each of *n* members, the joiner's): one member per host in a fleet, so the joiner's id
    sorts mid-group, as a host's name does on average (generated ids, ``<group>_<host>-<millis>-<uuid>``, of
    members sharing one host sort by start time: the joiner would sort last, where a range join moves ~10
    members' partitions instead of ~150 here)."""
    return ["host%05d" % (2 * i) for i in range(n)], "host%05d" % (n - 1 if n % 2 == 0 else n)


def _split(n, k):
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def _run(cluster, n, partitions, log, key, ensemble_why="", processes=PROCESSES):
    topic = cluster.create_topic(unique("bench-scale"), partitions)
    group = unique("bench-scale")
    procs = MemberProcesses(cluster, group, topic, processes)
    joiner = None
    try:
        t0 = time.perf_counter()
        names, joiner_name = member_names(n)
        shares = _split(n, processes)
        starts = [{"cmd": "start", "names": names[sum(shares[:i]):sum(shares[:i + 1])]} for i in range(processes)]
        started = procs.ask(starts)
        refused = [why for a in started for why in a.get("failed", [])]
        if refused:
            raise RuntimeError("%d of %d members could not start, e.g. %s" % (len(refused), n, refused[0]))
        ids = [cid for a in started for cid in a["ids"]]
        threads = [cid + "-0" for cid in ids]
        _all_ok(procs.ask({"cmd": "converged", "threads": threads, "partitions": partitions, "timeout": 300}),
                "%d members did not converge after their start" % n)
        log("scale: %d members in %d processes converged after start-up in %.1f s"
            % (n, processes, time.perf_counter() - t0))
        settled = max(a["waited"] for a in procs.ask({"cmd": "settle", "quiet": QUIET_S}))
        before = procs.ask({"cmd": "stats"})
        time.sleep(1.0)
        quiet = procs.ask({"cmd": "stats"})
        quiet_share = sum(q["cpu"] - b["cpu"] for q, b in zip(quiet, before)) * 100
        log("scale: quiet (no rebalance attempt for %.0f s) after %.1f s more; the member processes then used %.0f%% "
            "of a core" % (QUIET_S, settled, quiet_share))
        since = {cid: s["attempts"] for a in quiet for cid, s in a["members"].items()}
        joiner_requests = {"reads": 0, "writes": 0}
        joiner = count_requests(make_member(cluster.zookeeper_connect, cluster.bootstrap_servers, group,
                                            joiner_name), joiner_requests)
        threads.append(joiner.consumer_id + "-0")
        joined = {}
        expected = expected_share(threads, partitions, [joiner.consumer_id], topic)

        def watch_joiner():  # the joiner's own convergence, polled beside the processes' answers
            deadline = time.perf_counter() + 120
            while time.perf_counter() < deadline:
                if share_converged({joiner.consumer_id: joiner}, expected):
                    joined["at"] = time.perf_counter()
                    return
                time.sleep(0.005)
        zk_pid = getattr(cluster, "server_pids", dict)().get("zookeeper")
        cpu0, zk_cpu0 = time.process_time(), _zk_cpu(zk_pid)
        t0 = time.perf_counter()
        threading.Thread(target=joiner.create_message_streams, args=({topic: 1},), daemon=True).start()
        poller = threading.Thread(target=watch_joiner, daemon=True)
        poller.start()
        answers = procs.ask({"cmd": "converged", "threads": threads, "partitions": partitions, "since": since,
                             "timeout": 120})
        poller.join()
        _all_ok(answers, "the group did not converge after the join")
        if "at" not in joined:
            raise TimeoutError("the joiner did not converge")
        took = max([a["at"] for a in answers] + [joined["at"]]) - t0
        cpu, zk_cpu1 = time.process_time() - cpu0, _zk_cpu(zk_pid)
        after = procs.ask({"cmd": "stats"})
        cpu += sum(a["cpu"] - q["cpu"] for a, q in zip(after, quiet))
        zk_cpu = "%.2f" % (zk_cpu1 - zk_cpu0) if zk_cpu0 is not None and zk_cpu1 is not None else "?"
        _check_owner_nodes(cluster, group, topic, threads, partitions)
        time.sleep(0.5)  # let trailing watch events finish (they must be no-ops)
        final = procs.ask({"cmd": "stats"})
        failed = waits = reads = attempts = 0
        stats = {cid: (since.get(cid, 0), s) for a in final for cid, s in a["members"].items()}
        base = {cid: s for a in quiet for cid, s in a["members"].items()}
        stats[joiner.consumer_id] = (0, joiner.rebalancer.stats)
        for cid, (_, s) in stats.items():
            b = base.get(cid, {"failed_attempts": 0, "claim_waits": 0, "zk_reads": 0, "attempts": 0})
            failed += s["failed_attempts"] - b["failed_attempts"]
            waits += s["claim_waits"] - b["claim_waits"]
            reads += s["zk_reads"] - b["zk_reads"]
            attempts += s["attempts"] - b["attempts"]
        degraded = sum(a["degraded"] for a in final) + (joiner.rebalancer.state == "DEGRADED")
        troubles_before = sum(q["watch_troubles"] for q in quiet)
        troubles_during = sum(a["watch_troubles"] for a in final) - troubles_before
        zk_requests = {k: sum(a["requests"][k] - q["requests"][k] for a, q in zip(final, quiet)) + joiner_requests[k]
                       for k in ("reads", "writes")}
        log("scale: join converged in %.2f s; %d attempts, %d failed, %d claim waits, %d ZK reads in the group "
            "reads; ZooKeeper requests in all: %d reads, %d writes; CPU: members' processes %.2f s, ZooKeeper %s s"
            % (took, attempts, failed, waits, reads, zk_requests["reads"], zk_requests["writes"], cpu, zk_cpu))
        return goals.row(key, "scale: %d consumers x %s partitions, one joins: time until every member fetches its "
                         "share" % (n, format(partitions, ",")), round(took, 2), "s", None, None,
                         "%smembers in %d processes, the joiner in another, fetching, auto-commit and start-up checks "
                         "on; ZooKeeper: %d server(s); %d members' attempts, %d failed, %d claim waits, %d degraded; "
                         "ZooKeeper reads per member per attempt %.0f in the group read (%d in all); ZooKeeper "
                         "requests the group sent for the rebalance (the joiner's included): %d reads, %d writes (a "
                         "multi-op counts one); CPU while converging: the members' processes %.2f s (%.1f ms per "
                         "attempt), ZooKeeper %s s; before the join, the idle group's processes used %.0f%% of a "
                         "core (%d cores here); idle watches that ended in trouble: %d before the join, %d during it"
                         % ("goal not met: %s; " % ensemble_why if ensemble_why else "", processes,
                            _servers(cluster.zookeeper_connect), attempts, failed, waits, degraded, reads / max(attempts, 1),
                            reads, zk_requests["reads"], zk_requests["writes"], cpu, cpu / max(attempts, 1) * 1000,
                            zk_cpu, quiet_share, os.cpu_count() or 0, troubles_before, troubles_during),
                         met=failed == 0 and degraded == 0 and not ensemble_why)
    finally:
        t1 = time.perf_counter()
        if joiner is not None:
            try:
                joiner.shutdown()
            except Exception:
                pass
        procs.close()
        log("scale: %d members stopped in %.1f s" % (n + (joiner is not None), time.perf_counter() - t1))


def _all_ok(answers, what):
    bad = [a.get("why", a) for a in answers if not a.get("ok")]
    if bad:
        raise TimeoutError("%s: %s" % (what, "; ".join(map(str, bad))))


def _check_owner_nodes(cluster, group, topic, threads, partitions):
    """The owner nodes in ZooKeeper hold the range assignment of *threads*: one per partition, each naming the
    thread the assignment gives it (what Kafka's ConsumerGroupCommand would show)."""
    from zkconsumer.zookeeper import client as zkmod
    from zkconsumer.core.assignors import range_assign
    from zkconsumer.core.layout import paths
    want = range_assign({topic: list(threads)}, {topic: list(range(partitions))})
    zk = zkmod.connect(cluster.zookeeper_connect)
    try:
        reads = {p: zk.get_async(paths.partition_owner_path(group, topic, p)) for p in range(partitions)}
        got = {(topic, p): r.get()[0].decode() for p, r in reads.items()}
    finally:
        zkmod.close(zk)
    wrong = {tp: (got.get(tp), th) for tp, th in want.items() if got.get(tp) != th}
    if wrong:
        raise AssertionError("%d owner nodes do not hold the range assignment, e.g. %s (got, want)"
                             % (len(wrong), sorted(wrong.items())[:3]))


def _zk_cpu(pid):
    """CPU seconds of the ZooKeeper server so far, or None (an external cluster, or /proc unreadable)."""
    return process_cpu_s(pid) if pid else None


TIME_GOES = ("every member reads the group from a cache kept true by watches (registrations and partition maps "
             "re-read only when they change: O(N) reads per rebalance for the group), computes its own ranges only "
             "and writes its owner nodes; the joiner sorts mid-group, so the ~150 members after it release and claim "
             "(one multi-op each) and some wait for a predecessor's release. Then each moved member restarts its "
             "fetcher on its new partitions (a kafka-python client per member, positions read from the offset "
             "store). The members run in 4 processes on the 2 cores (a group's members run on many hosts), with "
             "ZooKeeper's three servers and the broker; a fetcher whose partitions are all caught up asks their "
             "leaders over sockets of its own instead of polling kafka-python (the idle watch; 100 members polling "
             "had used 1.4 cores). The row's note gives what the idle group used before the join; the CPU while "
             "converging includes that idle cost (see bench/model.py for larger groups).")
