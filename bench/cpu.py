"""CPU per record, per thread: where a consumer's time goes, measured so that a loaded machine does not skew it.

``python -m bench.cpu [--records N] [--rounds R] [--variants ...] [--clients ...] [--json FILE]``

Rates on a shared machine measure the other tenants as much as the client; the CPU a client spends per record
does not (to first order: cache and frequency effects remain). Each read runs in a fresh process and is
``bench.consume``'s read of that client (its settings, its loop touching each record's partition, offset and value,
its read check) of a topic of 8 partitions from offset 0. From its first record to its Nth the process records:

* each Python thread's CPU time (``time.pthread_getcpuclockid``: nanoseconds, the consuming thread, zkconsumer's
  fetcher threads, kafka-python's IO thread, ...), named by its Python thread name;
* the whole process's CPU time (``time.process_time``); what the Python threads do not account for is the C
  threads' (librdkafka's broker and main threads), reported as ``(C threads)``.

The Python threads share one interpreter lock, so their sum bounds a Python client's throughput on any number of
cores; librdkafka's C threads run beside them. Both sums are printed, in microseconds per record, as the median of
the rounds (the clients' order rotated each round).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

from . import consume
from .common import Cluster, median, unique
from .consume import PARTITIONS, VARIANTS

CLIENTS = ("zk", "zk-rd", "ck", "pk")


def _threads_cpu():
    """{name: CPU seconds} of every live Python thread of this process."""
    import threading
    out = {}
    for t in threading.enumerate():
        try:
            clk = time.pthread_getcpuclockid(t.ident)
            cpu = time.clock_gettime(clk)
        except (OSError, TypeError, ValueError):
            continue
        name = t.name
        if name.startswith("zkconsumer-fetcher-"):
            name = "zkconsumer-fetcher"
        elif name.startswith("kafka-io-"):
            name = "kafka-io"
        elif t is threading.main_thread():
            name = "consuming (main)"
        out[name] = out.get(name, 0.0) + cpu
    return out


class _Window:
    """CPU of each thread and of the process from :meth:`start` (the first record) to :meth:`stop` (the Nth)."""

    result = None

    def start(self):
        self.t0, self.p0, self.th0 = time.perf_counter(), time.process_time(), _threads_cpu()

    def stop(self, n):
        t1, p1, th1 = time.perf_counter(), time.process_time(), _threads_cpu()
        threads = {k: v - self.th0.get(k, 0.0) for k, v in th1.items()}
        threads = {k: v for k, v in threads.items() if v > 0.00005}
        process = p1 - self.p0
        py = sum(threads.values())
        threads["(C threads)"] = max(0.0, process - py)
        us = 1e6 / max(1, n - 1)
        self.result = {"records": n, "rate": (n - 1) / (t1 - self.t0), "process_us": process * us,
                       "python_us": py * us, "threads_us": {k: v * us for k, v in sorted(threads.items())}}


def _one(client, zk, bootstrap, topic, total, ends):
    """One read by *client* with bench.consume's reader of it (the same settings, loop and read check)."""
    cluster = SimpleNamespace(zookeeper_connect=zk, bootstrap_servers=bootstrap)
    readers = {"zk": lambda **w: consume._zkconsumer(cluster, topic, total, ends, **w),
               "zk-rd": lambda **w: consume._zkconsumer(cluster, topic, total, ends, engine="librdkafka", **w),
               "ck": lambda **w: consume._confluent(cluster, topic, total, ends, **w),
               "pk": lambda **w: consume._pykafka(cluster, topic, total, ends, **w)}
    if client not in readers:
        raise ValueError("unknown client %r (one of %s)" % (client, ", ".join(CLIENTS)))
    window = _Window()
    readers[client](window=window)
    return window.result


def _in_process(client, zk, bootstrap, topic, total, ends):
    """One read in a fresh interpreter (its own threads only)."""
    args = json.dumps([client, zk, bootstrap, topic, total, ends])
    proc = subprocess.run([sys.executable, "-m", "bench.cpu", "--one", args], capture_output=True, text=True,
                          timeout=600, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if proc.returncode != 0:
        raise RuntimeError("%s read failed: %s" % (client, proc.stderr[-2000:]))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _summary(samples):
    keys = sorted({k for s in samples for k in s["threads_us"]})
    return {"process_us": median([s["process_us"] for s in samples]),
            "python_us": median([s["python_us"] for s in samples]),
            "rate": median([s["rate"] for s in samples]),
            "threads_us": {k: median([s["threads_us"].get(k, 0.0) for s in samples]) for k in keys}}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated, of %s" % ", ".join(CLIENTS))
    ap.add_argument("--variants", default="0", help="indexes into bench.consume.VARIANTS: %s"
                    % ", ".join("%d=%s" % (i, v.name) for i, v in enumerate(VARIANTS)))
    ap.add_argument("--json", help="write the samples and medians here")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(_one(*json.loads(a.one))))
        return
    clients = a.clients.split(",")
    cluster = Cluster(tempfile.mkdtemp(prefix="zkconsumer-bench-cpu-"))
    results = {}
    try:
        for vi in map(int, a.variants.split(",")):
            v = VARIANTS[vi]
            topic = cluster.create_topic(unique("bench-cpu"), PARTITIONS)
            cluster.produce_fast(topic, PARTITIONS, a.records, compression=v.compression, key_size=v.key_size,
                                 headers=v.headers)
            ends = [a.records // PARTITIONS + (1 if p < a.records % PARTITIONS else 0) for p in range(PARTITIONS)]
            samples = {c: [] for c in clients}
            _in_process(clients[0], cluster.zookeeper_connect, cluster.bootstrap_servers, topic, a.records, ends)
            for r in range(a.rounds):
                for c in clients[r % len(clients):] + clients[:r % len(clients)]:
                    s = _in_process(c, cluster.zookeeper_connect, cluster.bootstrap_servers, topic, a.records, ends)
                    samples[c].append(s)
                    print("%s / %s: %.2f us/record (Python threads %.2f), %.0f msg/s" % (
                        v.name, c, s["process_us"], s["python_us"], s["rate"]), flush=True)
            results[v.name] = {c: {"samples": samples[c], "median": _summary(samples[c])} for c in clients}
            print("\n%s, %d records, median of %d rounds (us of CPU per record):" % (v.name, a.records, a.rounds))
            for c in clients:
                m = results[v.name][c]["median"]
                print("  %-6s process %.2f  python %.2f  rate %.0f/s  %s" % (
                    c, m["process_us"], m["python_us"], m["rate"],
                    "  ".join("%s %.2f" % kv for kv in m["threads_us"].items())))
            print(flush=True)
    finally:
        cluster.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
