"""A model of one rebalance (one member joins a group of N) that predicts convergence time and ZooKeeper load
beyond what this machine can run: ``python -m bench.model [--members 1000,10000] [--json]``.

Pure Python, no services. It is driven by the real parts where they decide the cost:

* the **real range assignor** (``zkconsumer.assignors.range_assign``) is run for N and N+1 members, which gives
  its CPU time per member attempt (timed here, in this run) and exactly which members' partitions change (those
  release and claim: two multi-ops each, and their successors may wait once for a release);
* the **real read pattern** of a rebalance attempt with the group read cache (``zkconsumer/consumer/group_view.py``):
  6 ZooKeeper reads per member per attempt (the member list before and after, the topic, broker and leave-marker
  lists, the joiner's registration: the rebalancer's ``zk_reads``), plus the joining member's cold read of every
  registration, plus two per partition that moves (the releasing member checks that the owner node is its own, the
  claiming one reads the committed offset) and two per member whose partitions change (its offsets' listing; on
  average one owner-node watch while it waits for a release); the scale bench counts every request its members'
  clients send (its group has no committed offsets: one read per moved partition fewer);
* the ZooKeeper ensemble as two service rates, reads/s (served by every server) and multi-ops/s (ordered by the
  leader), and a round-trip time. Defaults for a 3-server ensemble on its own disks are taken from the ZooKeeper
  Overview's "ZooKeeper Throughput as the Read-Write Ratio Varies" figure (about 80,000 reads/s at 0% writes and
  20,000 writes/s at 100% writes for 3 servers); pass your own measurements with ``--zk-reads``/``--zk-writes``.

Timeline of a join (all members learn of it from one child watch on ``/consumers/G/ids``)::

    T = rtt (registration) + settle (rebalance.settle.ms)
        + member CPU (assignor + fixed attempt cost)         -- in parallel on a fleet; N attempts sharing C cores
                                                                when the members share a machine (the bench)
        + reads / read_rate + rtt                           -- the attempt's reads, queued at the ensemble
        + writes / write_rate + 2 rtt                       -- releases then claims (multi-ops), queued
        + rtt if any claim must wait for a release          -- the owner-node watch fires, the claim is retried

``fixed attempt cost`` (kazoo and state-machine work per attempt, excluding the assignor) is calibrated on the
smallest measured point of the scale bench (100 members x 1,000 partitions spread over a few processes on the bench
machine's cores: "shared" mode, C = min(processes, cores), read from the row) and then checked against the next
(300 x 3,000): the check is printed with the predictions, beside a second prediction that takes the CPU per attempt
the scale bench measured at that point instead of the fitted constant (the per-attempt cost grows with the sessions
sharing an interpreter; a fleet does not pay that). The measured points are the scale suite's rows in
``bench/results.json`` when present, else the figures recorded below.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

SETTLE_S = 0.020            # rebalance.settle.ms default
READS_PER_ATTEMPT = 6       # per member per attempt with the group read cache (scale bench: zk_reads / attempts)
PARTITIONS_PER_MEMBER = 10  # the scale bench's shape: N members x 10 N partitions
# join convergence (s) the scale bench measured on a 2-core machine, the members in 4 processes (docs/contributors.md,
# the scale notes)
RECORDED_POINTS = {100: 0.23, 300: 0.85}
RECORDED_CORES = 2          # min(member processes, cores) of those points


@dataclass(frozen=True)
class Ensemble:
    read_rate: float = 80_000.0   # reads/s the ensemble serves
    write_rate: float = 20_000.0  # multi-ops/s the leader commits
    rtt_s: float = 0.0005         # client <-> server round trip


# the bench's single ZooKeeper server shares the 2 cores with every member: much slower than a real ensemble
BENCH_ENSEMBLE = Ensemble(read_rate=20_000.0, write_rate=5_000.0, rtt_s=0.0002)


@dataclass
class Prediction:
    members: int
    partitions: int
    mode: str
    converge_s: float
    zk_reads: int
    zk_writes: int
    watch_notifications: int
    members_changed: int
    assignor_ms: float
    cpu_s: float
    zk_s: float


def _threads(n: int) -> List[str]:
    return sorted("g_member-%07d-0" % i for i in range(n))


def assignor_cost(members: int, partitions: int, min_time: float = 0.2) -> Tuple[float, int]:
    """(seconds per range_assign call for N+1 members, members whose partitions change when one joins): both from
    the real assignor."""
    from zkconsumer.assignors import range_assign
    before_threads = _threads(members)
    joiner = "g_member-%07d-0x" % (members // 2)  # sorts mid-group, where a random id lands on average
    after_threads = sorted(before_threads + [joiner])
    parts = {"t": list(range(partitions))}
    before = range_assign({"t": before_threads}, parts)
    t0 = time.perf_counter()
    k = 0
    while True:
        after = range_assign({"t": after_threads}, parts)
        k += 1
        if time.perf_counter() - t0 >= min_time:
            break
    per_call = (time.perf_counter() - t0) / k

    def owned(assignment) -> Dict[str, set]:
        out: Dict[str, set] = {}
        for tp, th in assignment.items():
            out.setdefault(th, set()).add(tp)
        return out
    b, a = owned(before), owned(after)
    changed = sum(1 for th in after_threads if a.get(th, set()) != b.get(th, set()))
    return per_call, changed


def moved_partitions(members: int, partitions: int) -> int:
    """Partitions whose owner changes when a member joins mid-group (the real range assignor)."""
    from zkconsumer.assignors import range_assign
    before_threads = _threads(members)
    after_threads = sorted(before_threads + ["g_member-%07d-0x" % (members // 2)])
    parts = {"t": list(range(partitions))}
    before, after = range_assign({"t": before_threads}, parts), range_assign({"t": after_threads}, parts)
    return sum(1 for tp, th in after.items() if before.get(tp) != th)


def predict(members: int, partitions: int, ensemble: Ensemble, fixed_cpu_s: float, mode: str = "fleet",
            assignor: Optional[Tuple[float, int]] = None, cores: int = 1, moved: Optional[int] = None
            ) -> Prediction:
    """Convergence time and ZooKeeper load of one join (see the module docstring): ``fleet``, one member per
    host, or ``shared``, every member's attempt on *cores* cores of one machine."""
    if mode not in ("fleet", "shared"):
        raise ValueError("mode must be 'fleet' or 'shared', not %r" % mode)
    if cores < 1:
        raise ValueError("cores must be at least 1, not %r" % cores)
    a_s, changed = assignor if assignor is not None else assignor_cost(members, partitions)
    n = members + 1
    moved = moved_partitions(members, partitions) if moved is None else moved
    reads = READS_PER_ATTEMPT * n + members + 2 * moved + 2 * changed  # see the module docstring
    writes = 1 + 2 * changed                         # registration; a release and a claim per changed member
    notifications = members + changed                # the /ids child watch; claim waits' owner-node watches
    per_member = a_s + fixed_cpu_s
    cpu = per_member * n / cores if mode == "shared" else per_member
    zk = reads / ensemble.read_rate + writes / ensemble.write_rate + 4 * ensemble.rtt_s
    wait = ensemble.rtt_s if changed else 0.0
    return Prediction(members, partitions, mode, round(ensemble.rtt_s + SETTLE_S + cpu + zk + wait, 3), reads,
                      writes, notifications, changed, round(a_s * 1000, 3), round(cpu, 3), round(zk, 3))


_CPU_NOTE = re.compile(r"\(([0-9.]+) ms per attempt\)")
_PROCESSES_NOTE = re.compile(r"members in ([0-9]+) processes")


def measured_points(path: Optional[str] = None) -> Dict[int, float]:
    """{members: seconds} of the scale bench: bench/results.json's scale rows when present, else the recorded."""
    return {n: s for n, (s, _, _) in _scale_rows(path).items()} or dict(RECORDED_POINTS)


def measured_cpu(path: Optional[str] = None) -> Dict[int, float]:
    """{members: CPU seconds per member attempt while the group converged} from the scale rows' notes (the
    members' processes); {} when results.json has none."""
    return {n: c for n, (_, c, _) in _scale_rows(path).items() if c is not None}


def measured_cores(path: Optional[str] = None) -> Dict[int, int]:
    """{members: cores the members' attempts shared} of each scale row: min(member processes in its note, the
    machine's cores), 1 for a row without processes (all members in one interpreter); the recorded points' when
    results.json has no scale row."""
    rows = _scale_rows(path)
    return {n: c for n, (_, _, c) in rows.items()} if rows else {n: RECORDED_CORES for n in RECORDED_POINTS}


def _scale_rows(path: Optional[str]) -> Dict[int, Tuple[float, Optional[float], int]]:
    path = path or os.path.join(os.path.dirname(__file__), "results.json")
    rows: Dict[int, Tuple[float, Optional[float], int]] = {}
    try:
        with open(path) as f:
            for row in json.load(f):
                m = row.get("metric", "")
                if m.startswith("scale: ") and row.get("value") == row.get("value"):  # not NaN
                    note = row.get("note") or ""
                    cpu = _CPU_NOTE.search(note)
                    procs = _PROCESSES_NOTE.search(note)
                    cores = int((row.get("machine") or {}).get("cpus") or 1)
                    rows[int(m.split()[1])] = (float(row["value"]), float(cpu.group(1)) / 1000 if cpu else None,
                                               min(int(procs.group(1)), cores) if procs else 1)
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return rows


def calibrate(points: Dict[int, float], cpu: Optional[Dict[int, float]] = None,
              cores: Optional[Dict[int, int]] = None
              ) -> Tuple[float, Dict[int, Tuple[float, float, Optional[float]]]]:
    """(fixed CPU seconds per member attempt fitted on the smallest point, {members: (measured, predicted,
    predicted with that point's measured CPU per attempt or None)} for every point) in shared mode on the bench's
    ensemble, each point on its own *cores* (default 1).

    The second prediction replaces the fitted fixed cost by the one the scale bench measured at that point (its
    CPU per attempt less the assignor's): the per-attempt cost grows with the number of sessions sharing an
    interpreter, which the first prediction holds constant; a fleet, one member per interpreter, does not pay
    that growth."""
    cpu, cores = cpu or {}, cores or {}
    ns = sorted(points)
    n0 = ns[0]
    cost0 = assignor_cost(n0, PARTITIONS_PER_MEMBER * n0)
    c0 = cores.get(n0, 1)
    base = predict(n0, PARTITIONS_PER_MEMBER * n0, BENCH_ENSEMBLE, 0.0, "shared", cost0, c0)
    fixed = max(0.0, (points[n0] - base.converge_s) * c0 / (n0 + 1))
    check: Dict[int, Tuple[float, float, Optional[float]]] = {}
    for n in ns:
        cost = cost0 if n == n0 else assignor_cost(n, PARTITIONS_PER_MEMBER * n)
        p = predict(n, PARTITIONS_PER_MEMBER * n, BENCH_ENSEMBLE, fixed, "shared", cost, cores.get(n, 1))
        with_cpu = None
        if n in cpu:
            own = max(0.0, cpu[n] - cost[0])
            with_cpu = predict(n, PARTITIONS_PER_MEMBER * n, BENCH_ENSEMBLE, own, "shared", cost,
                               cores.get(n, 1)).converge_s
        check[n] = (points[n], p.converge_s, with_cpu)
    return fixed, check


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.model", description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", default="1000,10000", help="group sizes to predict (comma-separated)")
    ap.add_argument("--zk-reads", type=float, default=Ensemble.read_rate, help="ensemble reads/s")
    ap.add_argument("--zk-writes", type=float, default=Ensemble.write_rate, help="ensemble multi-ops/s")
    ap.add_argument("--rtt-ms", type=float, default=Ensemble.rtt_s * 1000, help="client-server round trip")
    ap.add_argument("--results", default=None, help="bench results.json with the measured scale rows")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    ensemble = Ensemble(args.zk_reads, args.zk_writes, args.rtt_ms / 1000.0)
    fixed, check = calibrate(measured_points(args.results), measured_cpu(args.results),
                         measured_cores(args.results))
    preds = []
    for n in (int(x) for x in args.members.split(",") if x.strip()):
        cost = assignor_cost(n, PARTITIONS_PER_MEMBER * n)
        preds.append(predict(n, PARTITIONS_PER_MEMBER * n, ensemble, fixed, "fleet", cost))
    if args.json:
        print(json.dumps({"fixed_cpu_s_per_attempt": fixed, "ensemble": asdict(ensemble),
                          "check": {str(n): {"measured_s": m, "predicted_s": p, "predicted_with_measured_cpu_s": c}
                                    for n, (m, p, c) in check.items()},
                          "predictions": [asdict(p) for p in preds]}, indent=2))
        return 0
    print("calibration (members sharing the bench machine, bench ZooKeeper): fixed CPU per member attempt "
          "%.2f ms" % (fixed * 1000))
    for n, (m, p, c) in check.items():
        print("  %5d members x %6d partitions: measured %.2f s, model %.2f s (%+.0f%%)%s"
              % (n, PARTITIONS_PER_MEMBER * n, m, p, (p - m) / m * 100 if m else 0.0,
                 "; with the CPU per attempt measured there: %.2f s (%+.0f%%)" % (c, (c - m) / m * 100 if m else 0.0)
                 if c is not None else ""))
    print("predictions (fleet: one member per host; ensemble %.0f reads/s, %.0f multi-ops/s, rtt %.1f ms):"
          % (ensemble.read_rate, ensemble.write_rate, ensemble.rtt_s * 1000))
    print("  %7s %9s %10s %9s %9s %10s %9s %11s" % ("members", "partitions", "converge_s", "zk_reads", "zk_writes",
                                                   "notified", "changed", "assignor_ms"))
    for p in preds:
        print("  %7d %9d %10.2f %9d %9d %10d %9d %11.1f" % (p.members, p.partitions, p.converge_s, p.zk_reads,
                                                         p.zk_writes, p.watch_notifications, p.members_changed,
                                                         p.assignor_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
