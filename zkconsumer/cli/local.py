"""``zkconsumer local ...``: the embedded local cluster (a real ZooKeeper and Apache Kafka, or the tansu fallback)."""
import sys
import time

import click

from ..errors import LocalClusterError
from ..core.layout.names import validate_topic
from ..local import LocalCluster
from ..local.cluster import BROKER_KINDS, ZOOKEEPER_COUNTS
from ..local import maven, processes, tools
from .common import emit_json, json_option, local_dir_option


@click.group()
def local():
    """Run a real ZooKeeper (one server or an ensemble) and a broker on loopback (demos, tests, development).

    The broker is Apache Kafka 3.9 in ZooKeeper mode (fetched once with Maven into ~/.cache/zkconsumer, or taken
    from $KAFKA_HOME), Apache Kafka in KRaft mode plus the registry mirror, or the tansu fallback plus the mirror.
    """


@local.command()
@local_dir_option
@json_option
@click.option("--timeout", default=90.0, show_default=True, help="Seconds to wait for each server to start.")
@click.option("--broker", type=click.Choice(BROKER_KINDS), default="auto", show_default=True,
              help="kafka: Apache Kafka 3.9 in ZooKeeper mode (registers itself under /brokers); kraft: Apache "
                   "Kafka in KRaft mode + the registry mirror; tansu: the no-download fallback + the registry "
                   "mirror; auto: kafka when it can be had ($KAFKA_HOME, the cache or Maven), else tansu.")
@click.option("--brokers", type=click.IntRange(1, 9), default=1, show_default=True,
              help="Number of Apache Kafka brokers (--broker kafka only).")
@click.option("--kafka4", is_flag=True,
              help="Run the KRaft node on Apache Kafka 4.1 instead of 3.9 (--broker kraft only): groups of the "
                   "consumer group protocol (KIP-848, group.protocol=consumer) are on.")
@click.option("--zookeepers", type=click.Choice([str(n) for n in ZOOKEEPER_COUNTS]), default="1", show_default=True,
              help="ZooKeeper servers: 1 (standalone) or an ensemble of 3, 5 or 7 (servers zookeeper-1 ...; it "
                   "serves while a majority is up). The connect string lists every server; 'local status' shows "
                   "which one leads, 'local stop zookeeper-leader' forces an election.")
def up(directory, as_json, timeout, broker, brokers, kafka4, zookeepers):
    """Start ZooKeeper and the broker(s) on free loopback ports (plus the registry mirror for kraft/tansu)."""
    if kafka4 and broker != "kraft":
        raise click.UsageError("--kafka4 needs --broker kraft (Apache Kafka 4 has no ZooKeeper mode)")
    cluster = LocalCluster(directory)
    info = cluster.up(start_timeout=timeout, broker=broker, brokers=brokers, kafka_jars="kafka4" if kafka4 else "kafka",
                      zookeepers=int(zookeepers),
                      log=(lambda m: None) if as_json else (lambda m: click.echo(m, err=True)))
    if as_json:
        emit_json(info)
        return
    click.echo("Broker:            %s%s" % (info["broker"], " + registry mirror" if info["registry_mirror"] else ""))
    click.echo("ZooKeeper:         %s%s" % (info["zookeeper_connect"], _ensemble_note(info)))
    click.echo("Bootstrap servers: %s" % info["bootstrap_servers"])
    click.echo("State directory:   %s" % info["dir"])
    click.echo("export ZK_CONNECT=%s KAFKA_BOOTSTRAP=%s" % (info["zookeeper_connect"], info["bootstrap_servers"]))


def _ensemble_note(info):
    return " (ensemble of %d servers)" % info["zookeepers"] if info.get("zookeepers", 1) > 1 else ""


@local.command()
@local_dir_option
@json_option
def status(directory, as_json):
    """Show whether the local cluster runs, and each ZooKeeper server's mode (leader, follower, standalone);
    exit code 1 if it does not run or a process of it is down."""
    info = LocalCluster(directory).info()
    if as_json:
        emit_json(info)
    elif not info.get("processes"):
        click.echo("local cluster not running (state directory %s)" % info["dir"])
    else:
        dead = sorted(n for n, p in info["processes"].items() if not p["alive"])
        click.echo("local cluster %s" % ("running" if info["running"] else "DEGRADED (not running: %s)"
                                         % ", ".join(dead)))
        click.echo("Broker:            %s%s" % (info.get("broker"),
                                                " + registry mirror" if info.get("registry_mirror") else ""))
        click.echo("ZooKeeper:         %s%s" % (info["zookeeper_connect"], _ensemble_note(info)))
        click.echo("Bootstrap servers: %s" % info["bootstrap_servers"])
        for name, p in sorted(info["processes"].items()):
            mode = ("  %-11s" % (p["mode"] or "no answer")) if "mode" in p else ""
            click.echo("  %-12s pid %-8s %-5s%s  log %s" % (name, p["pid"], "alive" if p["alive"] else "DEAD", mode,
                                                            p["log"]))
    sys.exit(0 if info.get("running") else 1)


@local.command("stop")
@click.argument("server")
@click.option("--kill", "kill", is_flag=True, help="SIGKILL (kill -9) instead of SIGTERM.")
@local_dir_option
@json_option
def stop_server(server, kill, directory, as_json):
    """Stop one SERVER of the local cluster (the others keep running); 'local start' brings it back on the same
    ports with the same data.

    SERVER is a process name from 'local status' (zookeeper-2, broker-0, ...), or zookeeper-leader /
    zookeeper-follower: the ensemble server that leads now / the first one that follows now. Stopping the leader
    makes the others elect a new one; clients keep their sessions while a majority of the servers is up.
    """
    cluster = LocalCluster(directory)
    _running_or_degraded(cluster)
    name = cluster.resolve_server(server)
    pid = cluster.record(name).get("pid")
    cluster.stop(name, kill=kill)
    if as_json:
        emit_json({"stopped": name, "pid": pid, "signal": "SIGKILL" if kill else "SIGTERM"})
    else:
        click.echo("stopped %s (pid %s, %s)" % (name, pid, "SIGKILL" if kill else "SIGTERM"))


@local.command("start")
@click.argument("server")
@click.option("--timeout", default=90.0, show_default=True, help="Seconds to wait for the server to answer.")
@local_dir_option
@json_option
def start_server(server, timeout, directory, as_json):
    """Start one stopped SERVER of the local cluster again (same ports, same data; a ZooKeeper server rejoins its
    ensemble); nothing happens when it runs. SERVER is a process name from 'local status'."""
    cluster = LocalCluster(directory)
    _running_or_degraded(cluster)
    was_running = processes.is_alive(cluster.record(server).get("pid"))
    pid = cluster.start(server, timeout=timeout)
    mode = cluster.zookeeper_modes().get(server)
    if as_json:
        emit_json({"started": server, "pid": pid, "mode": mode, "was_running": was_running})
    else:
        click.echo("%s %s (pid %d%s)" % ("already running:" if was_running else "started", server, pid,
                                         ", %s" % mode if mode else ""))


@local.command()
@local_dir_option
@json_option
def down(directory, as_json):
    """Stop every process of the local cluster (leaves none behind)."""
    stopped = LocalCluster(directory).down()
    if as_json:
        emit_json({"stopped": stopped})
    else:
        click.echo("stopped: %s" % (", ".join(stopped) if stopped else "nothing was running"))


def _running_or_degraded(cluster):
    if not cluster.read_state():
        raise LocalClusterError("the local cluster is not running (state directory %s); start it with "
                                "'zkconsumer local up'" % cluster.dir)


def _running(directory):
    info = LocalCluster(directory).info()
    if not info.get("running"):
        raise LocalClusterError("the local cluster is not running (state directory %s); start it with "
                                "'zkconsumer local up'" % info["dir"])
    return info


@local.command("create-topic")
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(1, 100000), default=None,
              help="Number of partitions (create), or the new total (with an existing topic).")
@click.option("--add-partitions", type=click.IntRange(1, 100000), default=None,
              help="Add this many partitions to an existing topic (CreatePartitions; tansu cannot).")
@click.option("--replication-factor", "-r", type=click.IntRange(1, 9), default=None,
              help="Replicas per partition [default: min(3, number of brokers)].")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until the topic shows in ZooKeeper's /brokers/topics.")
@local_dir_option
@json_option
def create_topic(name, partitions, add_partitions, replication_factor, wait, directory, as_json):
    """Create topic NAME on the local broker (or grow it to --partitions, or by --add-partitions)."""
    validate_topic(name)
    if (partitions is None) == (add_partitions is None):
        raise click.UsageError("give exactly one of --partitions N or --add-partitions N")
    info = _running(directory)
    nbrokers = len(info["bootstrap_servers"].split(","))
    if add_partitions is not None:
        partitions = tools.partition_count(info["bootstrap_servers"], name) + add_partitions
    result = tools.create_or_grow_topic(info["bootstrap_servers"], name, partitions,
                                        replication_factor=replication_factor or min(3, nbrokers))
    if wait:
        tools.wait_for_zk_topic(info["zookeeper_connect"], name, partitions)
    if as_json:
        emit_json(result)
    else:
        click.echo("topic %s: %s, %d partitions" % (name, result["action"], result["partitions"]))


@local.command()
@click.argument("topic")
@click.option("--count", "-n", type=click.IntRange(0, None), required=True, help="Number of messages.")
@click.option("--size", "-s", type=click.IntRange(1, 10 * 1024 * 1024), default=100, show_default=True,
              help="Value size in bytes (JSON padded to this size).")
@click.option("--keys", type=click.IntRange(1, None), default=10, show_default=True,
              help="Number of distinct keys (k0..kN-1) to cycle through.")
@click.option("--partition", type=click.IntRange(0, None), default=None,
              help="Send every message to this partition [default: round robin over all partitions].")
@click.option("--bootstrap-server", "bootstrap", default=None,
              help="Produce to this broker instead of the local cluster's.")
@click.option("--one-per-batch", is_flag=True,
              help="Send each message in its own request (slow). tansu 0.6 reports a wrong log-end offset "
                   "(ListOffsets latest) after multi-record batches; use this when lag figures must be exact.")
@local_dir_option
@json_option
def produce(topic, count, size, keys, partition, bootstrap, one_per_batch, directory, as_json):
    """Produce COUNT JSON messages {"key","seq","ts","pad"} of SIZE bytes to TOPIC."""
    validate_topic(topic)
    bootstrap = bootstrap or _running(directory)["bootstrap_servers"]
    t0 = time.monotonic()
    sent = tools.produce(bootstrap, topic, count, size=size, keys=keys, partition=partition,
                         one_per_batch=one_per_batch)
    secs = time.monotonic() - t0
    if as_json:
        emit_json({"topic": topic, "sent": sent, "seconds": round(secs, 3)})
    else:
        click.echo("produced %d messages to %s in %.2f s" % (sent, topic, secs))


@local.command()
@click.option("--legacy/--no-legacy", default=False, show_default=True,
              help="Also fetch Kafka 1.1.1: the Scala ZooKeeper consumer and Kafka's legacy tools (interop tests).")
@click.option("--kafka4/--no-kafka4", default=False, show_default=True,
              help="Also fetch Apache Kafka 4.1 (KRaft; consumer-protocol groups of KIP-848, test_kip848.py).")
@json_option
def fetch(legacy, kafka4, as_json):
    """Fetch Apache Kafka 3.9 with Maven into the cache (once; $KAFKA_HOME wins when set).

    The cache is $ZKCONSUMER_CACHE_DIR or ~/.cache/zkconsumer; the poms are shipped in zkconsumer/local/poms.
    """
    log = (lambda m: None) if as_json else (lambda m: click.echo(m, err=True))
    out = {}
    for name in ["kafka"] + (["kafka-legacy"] if legacy else []) + (["kafka4"] if kafka4 else []):
        libs = maven.libs_dir(name, log)
        out[name] = {"libs": libs, "version": maven.jar_version(libs, name)}
    if as_json:
        emit_json(out)
    else:
        for name, d in out.items():
            click.echo("%-13s %-7s %s" % (name, d["version"], d["libs"]))
