"""Shared bench plumbing: the cluster to run against, results, and the Markdown/JSON report."""
import os
import platform
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Optional


@dataclass
class Result:
    metric: str
    value: float
    unit: str
    baseline: Optional[float]
    ratio: Optional[float]
    goal: str
    met: Optional[bool] = None
    note: str = ""
    key: str = ""  # its goal's key in bench.goals.GOALS ("" for a row judged by no goal of the table)


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs, fmt="%.0f"):
    """'min / median / max of n' of a client's samples, for a row's note."""
    if not xs:
        return "no samples"
    return "min %s / median %s / max %s of %d" % (fmt % min(xs), fmt % statistics.median(xs), fmt % max(xs), len(xs))


def percentile(xs, q):
    """The q-th percentile (0-100) of xs by linear interpolation between closest ranks (NaN when empty)."""
    if not xs:
        return float("nan")
    ys = sorted(xs)
    k = (len(ys) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (k - lo)


class Cluster:
    """The bench runs on the embedded local cluster (or ZK_CONNECT/KAFKA_BOOTSTRAP when both are set)."""

    def __init__(self, directory, zookeepers=1, zk_connect=None, bootstrap=None, zookeeper_tick_ms=None):
        """``zookeepers``: servers in the embedded cluster's ZooKeeper ensemble (``zookeeper_tick_ms``: their
        tickTime, else the embedded cluster's); ``zk_connect``/``bootstrap``: an external cluster (default:
        $ZK_CONNECT and $KAFKA_BOOTSTRAP when both are set)."""
        self.local, self.directory = None, directory
        zk = zk_connect or os.environ.get("ZK_CONNECT")
        kafka = bootstrap or os.environ.get("KAFKA_BOOTSTRAP")
        if zk and kafka:
            self.zookeeper_connect, self.bootstrap_servers = zk, kafka
            self.broker = "the cluster at %s (%s)" % (zk, kafka)
        else:
            from zkconsumer.local import LocalCluster
            self.local = LocalCluster(directory)
            kw = {"zookeepers": zookeepers} if zookeepers != 1 else {}
            if zookeeper_tick_ms is not None:
                kw["zookeeper_tick_ms"] = zookeeper_tick_ms
            info = self.local.up(**kw)
            self.zookeeper_connect, self.bootstrap_servers = info["zookeeper_connect"], info["bootstrap_servers"]
            self.broker = {"kafka": "Apache Kafka %s (ZooKeeper mode), 1 broker" % info.get("kafka_version"),
                           "kraft": "Apache Kafka %s (KRaft), 1 node" % info.get("kafka_version"),
                           "tansu": "tansu (stand-in broker)"}.get(info.get("broker"), str(info.get("broker")))
            self.broker += ", ZooKeeper on loopback"

    @property
    def zookeeper_servers(self):
        """The number of servers in the ZooKeeper connect string (the ensemble the clients know of)."""
        return len(self.zookeeper_connect.split("/", 1)[0].split(","))

    def create_topic(self, name, partitions):
        from zkconsumer.local import tools
        tools.create_or_grow_topic(self.bootstrap_servers, name, partitions)
        tools.wait_for_zk_topic(self.zookeeper_connect, name, partitions, timeout=60)
        return name

    def produce_fast(self, topic, partitions, count, size=100, compression=None, key_size=0, headers=0):
        """count messages of `size` bytes spread evenly over the partitions (message i to partition i % partitions),
        as fast as kafka-python goes; ``compression``: a kafka-python compression_type; ``key_size``: a key of that
        many bytes on every message; ``headers``: that many headers on every message."""
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=self.bootstrap_servers, linger_ms=20, batch_size=512 * 1024,
                          acks=1, enable_idempotence=False, compression_type=compression)
        value = b"x" * size
        key = b"k" * key_size if key_size else None
        hdrs = [("h%d" % i, b"header-value-%d" % i) for i in range(headers)] or None
        for i in range(count):
            p.send(topic, value=value, key=key, headers=hdrs, partition=i % partitions)
        p.flush(timeout=300)
        p.close()

    def server_pids(self):
        """``{"zookeeper": pid, "kafka": pid}`` of the embedded cluster's servers (the first ZooKeeper server of an
        ensemble, the first broker); {} when the cluster is external."""
        if self.local is None:
            return {}
        out = {}
        for name, proc in self.local.info().get("processes", {}).items():
            kind = "zookeeper" if name.startswith("zookeeper") else "kafka" \
                if proc.get("kind") in ("kafka", "kraft", "tansu") else None
            if kind and kind not in out and proc.get("pid"):
                out[kind] = int(proc["pid"])
        return out

    def close(self):
        if self.local is not None:
            self.local.down()


def process_cpu_s(pid):
    """User + system CPU seconds a process has used (Linux /proc), or None when it cannot be read."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def machine():
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        here = os.path.dirname(__file__)
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        cwd=here).stdout.strip()
        if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                          cwd=here).stdout.strip():
            info["commit"] += "+dirty"  # tracked files differ from the commit: the figures are not that commit's
    except OSError:
        pass
    info["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return info


def converged(members, topic, partitions, need_fetching=True):
    """Every member IDLE (and fetching), and their owner claims equal the range assignment of the members."""
    from zkconsumer.core.assignors import range_assign
    rebalancers = [m.rebalancer for m in members]
    for rb in rebalancers:  # first the cheap test, polled every few ms by a thread of the members' own process
        if rb is None or rb.state != "IDLE" or (need_fetching and not rb.fetching):
            return False
    owned = {}
    for rb in rebalancers:
        for tp, th in list(rb.owned.items()):
            if tp in owned:
                return False
            owned[tp] = th
    threads = sorted(m.consumer_id + "-0" for m in members)
    return owned == range_assign({topic: threads}, {topic: list(range(partitions))})
