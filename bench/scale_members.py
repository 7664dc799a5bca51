"""One process of the scale bench's members: ``python -m bench.scale_members ZK_CONNECT BOOTSTRAP GROUP TOPIC``.

The scale suite (bench/scale.py) spreads a group's members over a few of these processes, as a group's members run
on many hosts: all 300 sessions in one interpreter measured one core taking turns over 300 members' work (and 1,500
threads contending for one interpreter lock), not the group protocol. Each process runs its members (as users run
them: fetchers, auto-commit and the start-up checks on) and answers one JSON command per line on stdin with one JSON line on stdout:

* ``{"cmd": "start", "names": [consumer.id, ...]}``: starts a member per name (its ``consumer.id``), all at once
  as a fleet's deploy starts them (the members of one process share one split-brain asking and one storage-check
  asking, as a process's members do), each returning once its first rebalance is done or, with a warning, after
  the connector's own wait for it (38 s at these settings: in a 300-member start most return that way) ->
  ``{"ids": [consumer ids], "failed": ["name: why"]}`` (a member that could not start, e.g. refused by a start-up
  check, is shut down and named). The answer does not mean the members are ready: ``converged`` does;
* ``{"cmd": "converged", "threads": [every thread id of the group], "partitions": P, "since": {id: attempts},
  "timeout": S}``: polls every 5 ms until each of its members has finished an attempt since *since* (the attempt
  counts the ``stats`` command gave), is IDLE and fetching, and owns exactly its share of the range assignment of *threads*
  -> ``{"ok": true, "at": time.perf_counter() when that first held}`` (CLOCK_MONOTONIC: one clock for every
  process of the machine), or ``{"ok": false, "why": ...}`` after *timeout* seconds;
* ``{"cmd": "settle", "quiet": S}``: waits until none of its members has started an attempt for S seconds (at most
  60), then collects the start's garbage -> ``{"waited": s}``;
* ``{"cmd": "stats"}`` -> ``{"cpu": process CPU seconds, "members": {id: rebalancer stats}, "degraded": n,
  "requests": {"reads": n, "writes": n}, "watch_troubles": n}``: the ZooKeeper requests its members' clients have
  sent (see :func:`count_requests`) and the idle watches of its members' fetchers that ended in trouble (each backs
  its fetcher off to polling kafka-python for 10 s or more);
* ``{"cmd": "stop"}``: shuts every member down -> ``{"stopped": n}``, then the process exits.
"""
import gc
import json
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

STOPPERS = 5  # members shutting down at once in one process


def make_member(zookeeper_connect, bootstrap_servers, group, name):
    """A member with ``consumer.id`` *name*, as users run it: fetchers, auto-commit and the start-up checks on, the
    defaults but a 30 s ZooKeeper session (the mass start of hundreds of members on 2 cores, before the measured
    join, would expire 6 s sessions)."""
    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.consumer import ZookeeperConsumerConnector
    cfg = ConsumerConfig.from_properties({"group.id": group, "zookeeper.connect": zookeeper_connect, "consumer.id": name,
                                          "zookeeper.session.timeout.ms": "30000"})
    return ZookeeperConsumerConnector(cfg, bootstrap_servers=bootstrap_servers)


# ZooKeeper opcodes (ZooDefs.OpCode) of the requests that change znodes (create, delete, setData, setACL, multi,
# create2, createContainer, deleteContainer, createTTL) and of the reads (exists, getData, getACL, getChildren(2))
_WRITES = {1, 2, 5, 7, 14, 15, 19, 20, 21}
_READS = {3, 4, 6, 8, 12}
_COUNT_LOCK = threading.Lock()


def count_requests(member, into):
    """Count every request *member*'s ZooKeeper client sends from now on into *into* (``{"reads": n, "writes":
    n}``; a multi-op is one write): kazoo hands every request, synchronous or not, to its client's ``_call``."""
    from zkconsumer.kafka.internals import kazoo_observe_requests

    def counting(request):
        kind = getattr(request, "type", None)
        key = "writes" if kind in _WRITES else "reads" if kind in _READS else None
        if key is not None:
            with _COUNT_LOCK:
                into[key] += 1
    kazoo_observe_requests(member.zk, counting)
    return member


def expected_share(threads, partitions, mine, topic):
    """``{consumer id: {(topic, p): thread id}}`` for the members in *mine*: their part of the range assignment
    (the global one, computed whole) of *threads* over *partitions* partitions (one stream per member)."""
    from zkconsumer.core.assignors import range_assign
    out = {cid: {} for cid in mine}
    for tp, th in range_assign({topic: list(threads)}, {topic: list(range(partitions))}).items():
        cid = th[:-2]  # "<consumer id>-0"
        if cid in out:
            out[cid][tp] = th
    return out


def share_converged(members, expected, since=None):
    """True when every member of *members* ({id: connector}) is IDLE and fetching, has finished an attempt since
    *since* ({id: attempts}, optional) and owns exactly ``expected[id]``."""
    for cid, m in members.items():
        rb = m.rebalancer
        if rb is None or rb.state != "IDLE" or not rb.fetching:
            return False
        if since is not None and rb.stats["attempts"] <= since.get(cid, -1):
            return False
    for cid, m in members.items():
        if dict(m.rebalancer.owned) != expected[cid]:
            return False
    return True


def settle(members, quiet_s, limit_s=60.0):
    """Wait until no member has started an attempt for *quiet_s* (the start's tail: late watch events, sessions
    the mass start let expire coming back); returns the seconds waited."""
    t0 = time.perf_counter()
    last = [m.rebalancer.stats["attempts"] for m in members]
    quiet_since = time.perf_counter()
    while time.perf_counter() - quiet_since < quiet_s and time.perf_counter() - t0 < limit_s:
        time.sleep(0.1)
        now = [m.rebalancer.stats["attempts"] for m in members]
        if now != last:
            last, quiet_since = now, time.perf_counter()
    return time.perf_counter() - t0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    zookeeper_connect, bootstrap_servers, group, topic = argv
    logging.basicConfig(level=logging.WARNING, format="[scale member process] %(levelname)s %(name)s: %(message)s")
    members = {}
    requests = {"reads": 0, "writes": 0}
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req["cmd"]
        if cmd == "start":
            def start(name):
                m = None
                try:
                    m = count_requests(make_member(zookeeper_connect, bootstrap_servers, group, name), requests)
                    m.create_message_streams({topic: 1})
                    return m, None
                except Exception as e:  # e.g. a start-up check that refuses to join: reported, not fatal
                    if m is not None:
                        m.shutdown()
                    return None, "%s: %s: %s" % (name, type(e).__name__, e)
            with ThreadPoolExecutor(max(1, len(req["names"]))) as pool:
                results = list(pool.map(start, req["names"]))
            started = [m for m, _ in results if m is not None]
            for m in started:
                members[m.consumer_id] = m
            reply = {"ids": [m.consumer_id for m in started], "failed": [why for _, why in results if why]}
        elif cmd == "converged":
            expected = expected_share(req["threads"], req["partitions"], members, topic)
            deadline = time.perf_counter() + req["timeout"]
            reply = {"ok": False, "why": "not converged within %.0f s" % req["timeout"]}
            while time.perf_counter() < deadline:
                if share_converged(members, expected, req.get("since")):
                    reply = {"ok": True, "at": time.perf_counter()}
                    break
                time.sleep(0.005)
        elif cmd == "settle":
            waited = settle(list(members.values()), req["quiet"])
            gc.collect()
            reply = {"waited": waited}
        elif cmd == "stats":
            reply = {"cpu": time.process_time(),
                     "members": {cid: dict(m.rebalancer.stats) for cid, m in members.items()},
                     "degraded": sum(1 for m in members.values() if m.rebalancer.state == "DEGRADED"),
                     "requests": dict(requests),
                     "watch_troubles": sum(f.watch_troubles for m in members.values()
                                           for f in getattr(m.fetchers, "fetchers", ()))}
        elif cmd == "stop":
            def stop(m):
                try:
                    m.shutdown()
                except Exception:
                    pass
            with ThreadPoolExecutor(STOPPERS) as pool:
                list(pool.map(stop, members.values()))
            out.write(json.dumps({"stopped": len(members)}) + "\n")
            out.flush()
            return 0
        else:
            reply = {"error": "unknown command %r" % cmd}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
