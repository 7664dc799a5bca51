"""scale: 100 consumers x 1,000 partitions and 300 x 3,000 (ZooKeeper sessions sharing one process), one joins.

Members run the real registration, watches, rebalancer and owner claims; they do not fetch (a fetcher per member
would measure 100 Kafka clients on 2 cores, not coordination). Converged = every member IDLE and the owner claims
equal the range assignment of all members. Reported: time to converge, failed rebalance attempts (claim waits — a
member waiting for its predecessor's release — are counted apart), ZooKeeper reads per member per rebalance, and the
CPU the members' process and the ZooKeeper server spent while the group converged (bench/model.py reads it).
"""
import time

from .common import Result, converged, process_cpu_s, unique

def _member(cluster, group):
    from zkconsumer.config import ConsumerConfig
    from zkconsumer.consumer import ZookeeperConsumerConnector

    class CoordinationOnly(ZookeeperConsumerConnector):
        """The full group protocol without fetchers."""

        def _make_fetchers(self):
            return _NoFetch()

    cfg = ConsumerConfig.from_properties({"group.id": group, "zookeeper.connect": cluster.zookeeper_connect,
                                          "rebalance.backoff.ms": "500", "auto.commit.enable": "false",
                                          "zookeeper.session.timeout.ms": "30000",
                                          # coordination only: the start-up checks that ask Kafka are not measured
                                          "split.brain.check": "off", "offsets.storage.switch.check": "off"})
    return CoordinationOnly(cfg, bootstrap_servers=cluster.bootstrap_servers)


class _NoFetch:
    def assign(self, generation, work):
        pass

    def stop_all(self, generation):
        pass

    def shutdown(self, timeout=None):
        pass


def run(cluster, quick=False, log=print):
    return [_run(cluster, 100, 1000, log), _run(cluster, 300, 3000, log)]


def _run(cluster, n, partitions, log):
    def _converged(members, topic):
        return converged(members, topic, partitions, need_fetching=False)
    topic = cluster.create_topic(unique("bench-scale"), partitions)
    group = unique("bench-scale")
    members = []
    try:
        t0 = time.perf_counter()
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(20) as pool:  # a mass start: bursts coalesce into few rebalances
            def start(_):
                m = _member(cluster, group)
                members.append(m)
                m.create_message_streams({topic: 1})
            list(pool.map(start, range(n)))
        deadline = time.perf_counter() + 300
        while not _converged(members, topic):
            if time.perf_counter() > deadline:
                raise TimeoutError("%d members did not converge" % n)
            time.sleep(0.01)
        log("scale: %d members converged after start-up in %.1f s" % (n, time.perf_counter() - t0))
        settled, quiet_cpu = _settle(members)
        log("scale: quiet (no rebalance attempt for %.0f s) after %.1f s more; the process then used %.0f%% of a "
            "core" % (QUIET_S, settled, quiet_cpu * 100))
        before = {id(m): dict(m.rebalancer.stats) for m in members}
        m = _member(cluster, group)
        zk_pid = cluster.server_pids().get("zookeeper")
        cpu0, zk_cpu0 = time.process_time(), _zk_cpu(zk_pid)
        t0 = time.perf_counter()
        import threading
        threading.Thread(target=m.create_message_streams, args=({topic: 1},), daemon=True).start()
        members.append(m)
        deadline = time.perf_counter() + 120
        while not _converged(members, topic):
            if time.perf_counter() > deadline:
                raise TimeoutError("did not converge after the join")
            time.sleep(0.005)
        took = time.perf_counter() - t0
        cpu, zk_cpu1 = time.process_time() - cpu0, _zk_cpu(zk_pid)
        zk_cpu = "%.2f" % (zk_cpu1 - zk_cpu0) if zk_cpu0 is not None and zk_cpu1 is not None else "?"
        time.sleep(0.5)  # let trailing watch events finish (they must be no-ops)
        failed = waits = reads = attempts = 0
        for x in members:
            b = before.get(id(x), {"failed_attempts": 0, "claim_waits": 0, "zk_reads": 0, "attempts": 0})
            s = x.rebalancer.stats
            failed += s["failed_attempts"] - b["failed_attempts"]
            waits += s["claim_waits"] - b["claim_waits"]
            reads += s["zk_reads"] - b["zk_reads"]
            attempts += s["attempts"] - b["attempts"]
        degraded = sum(1 for x in members if x.rebalancer.state == "DEGRADED")
        log("scale: join converged in %.2f s; %d attempts, %d failed, %d claim waits, %d ZK reads; CPU: members' "
            "process %.2f s, ZooKeeper %s s" % (took, attempts, failed, waits, reads, cpu, zk_cpu))
        return Result("scale: %d consumers x %s partitions, one joins: time to converge" % (n, format(partitions, ",")),
                      round(took, 2), "s", None, None, "<= 5 s, 0 failed rebalances",
                      took <= 5 and failed == 0 and degraded == 0,
                      "%d members' attempts, %d failed, %d claim waits, %d degraded; ZooKeeper reads per member per "
                      "attempt %.0f (%d in all); CPU while converging: the members' process %.2f s (%.1f ms per "
                      "attempt), ZooKeeper %s s" % (attempts, failed, waits, degraded, reads / max(attempts, 1), reads,
                                                    cpu, cpu / max(attempts, 1) * 1000, zk_cpu))
    finally:
        import concurrent.futures

        def stop(x):
            try:
                x.shutdown()
            except Exception:
                pass
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            list(pool.map(stop, members))
        import threading
        log("scale: %d members stopped; %d threads left in this process" % (len(members), threading.active_count()))


QUIET_S = 2.0


def _settle(members, limit_s=60.0):
    """Wait until no member has started a rebalance attempt for QUIET_S (the start's tail: late watch events,
    sessions the mass start let expire coming back), then collect the start-up's garbage, so the measured join does
    not pay for the start. Returns (seconds waited, CPU share of this process over the last quiet second)."""
    import gc
    t0 = time.perf_counter()
    last = [m.rebalancer.stats["attempts"] for m in members]
    quiet_since = time.perf_counter()
    while time.perf_counter() - quiet_since < QUIET_S and time.perf_counter() - t0 < limit_s:
        time.sleep(0.1)
        now = [m.rebalancer.stats["attempts"] for m in members]
        if now != last:
            last, quiet_since = now, time.perf_counter()
    waited = time.perf_counter() - t0
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    time.sleep(1.0)
    return waited, (time.process_time() - c0) / (time.perf_counter() - w0)


def _zk_cpu(pid):
    """CPU seconds of the ZooKeeper server so far, or None (an external cluster, or /proc unreadable)."""
    return process_cpu_s(pid) if pid else None


TIME_GOES = ("every member reads the group from a cache kept true by watches (registrations and partition maps "
             "re-read only when they change: O(N) reads per rebalance for the group), computes its own ranges only "
             "(not the whole 3,000-partition assignment: ~0.3 ms) and writes its owner nodes; on 2 cores the 300 "
             "members' attempts share one interpreter, so the convergence time is mostly their Python time (each "
             "ZooKeeper session's waits cost one poll(2), not a new epoll selector as in kazoo's own handler), not "
             "ZooKeeper's (see bench/model.py for larger groups).")
