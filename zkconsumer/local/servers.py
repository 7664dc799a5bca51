"""How each server of the embedded local cluster is configured, started and known to be ready.

Every ``plan_*`` function writes the server's configuration files into the cluster directory and returns a
*process record*: a JSON-able dict with ``argv``, ``log``, ``ready`` (how to know it answers) and the addresses it
serves. :func:`spawn_ready` starts a record's ``argv`` and waits until it is ready, so the cluster can start a
server the first time and start it again later (chaos tests) from the same record, on the same ports.

Servers: a ZooKeeper server or an ensemble of several (jars from :mod:`.discovery`), Apache Kafka (jars from :mod:`.maven`) in ZooKeeper mode
(it registers itself under ``/brokers/ids``) or in KRaft mode (no ZooKeeper; the registry mirror writes
``/brokers``), the tansu broker (memory only; mirror as well), and the registry mirror (``zkconsumer registry
sync``).
"""
from __future__ import annotations

import base64
import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from ..errors import LocalClusterError
from . import discovery, processes
from .records import wait_until_ready

if TYPE_CHECKING:
    from .security import BrokerSecurity

HOST = "127.0.0.1"
Record = Dict[str, Any]
Log = Callable[[str], None]

LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
"""


# Apache Kafka 4 logs through log4j 2 (the same levels as LOG4J above; the 3.9 broker reads LOG4J)
LOG4J2 = """\
appender.out.type=Console
appender.out.name=OUT
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.out.ref=OUT
logger.zk.name=org.apache.zookeeper
logger.zk.level=WARN
logger.request.name=kafka.request.logger
logger.request.level=WARN
logger.change.name=state.change.logger
logger.change.level=WARN
logger.cleaner.name=kafka.log.LogCleaner
logger.cleaner.level=WARN
"""


def zk_four_letter(host: str, port: int, word: bytes = b"srvr", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command; return the answer text ('' if nothing came back)."""
    import socket
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word)
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def _write(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return path


def _properties(props: Dict[str, Any]) -> str:
    return "".join("%s=%s\n" % (k, v) for k, v in props.items())


# -- ZooKeeper --------------------------------------------------------------------------------------------------
def _jaas_string(value: str) -> str:
    if '"' in value or "\\" in value or "\n" in value:
        raise LocalClusterError("a ZooKeeper SASL user name or password cannot contain '\"', '\\' or a newline")
    return '"%s"' % value


def _write_server_jaas(directory: str, sasl_users: Dict[str, str]) -> str:
    """The ``Server`` section ZooKeeper's SASL DIGEST-MD5 provider reads (``user_<name>="<password>"``), mode 600."""
    lines = ["Server {", "    org.apache.zookeeper.server.auth.DigestLoginModule required"]
    lines += ["    user_%s=%s" % (u, _jaas_string(p)) for u, p in sorted(sasl_users.items())]
    path = os.path.join(directory, "zookeeper-jaas.conf")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + ";\n};\n")
    return path


#: the servers' tick (tickTime): short, so that the tests' sessions expire soon after their timeout
TICK_MS = 500


def _zookeeper_config(data_dir: str, port: int, sasl: bool, extra: List[str], tick_ms: int = TICK_MS) -> str:
    return "\n".join([
        "tickTime=%d" % tick_ms, "initLimit=10", "syncLimit=5",
        "dataDir=%s" % data_dir,
        "clientPort=%d" % port, "clientPortAddress=%s" % HOST,
        "admin.enableServer=false",
        "minSessionTimeout=1000", "maxSessionTimeout=60000",
        "maxClientCnxns=0",
        "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons",
        ] + (["authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"] if sasl else [])
        + extra + [""])


def _zookeeper_argv(directory: str, classpath: str, main_class: str, cfg: str, heap: str,
                    sasl_users: Optional[Dict[str, str]]) -> List[str]:
    jvm = ["-Djava.security.auth.login.config=%s" % _write_server_jaas(directory, sasl_users)] if sasl_users else []
    return [discovery.find_java(), "-Xmx%s" % heap, "-Dzookeeper.admin.enableServer=false"] + jvm + [
        "-cp", classpath, main_class, cfg]


def plan_zookeeper(directory: str, sasl_users: Optional[Dict[str, str]] = None) -> Record:
    """A standalone ZooKeeper server. ``sasl_users`` (name -> password) turns on SASL DIGEST-MD5 authentication
    (``SASLAuthenticationProvider`` and a ``Server`` JAAS section); the digest scheme needs nothing on the server.
    Clients that do not authenticate are still served (ACLs decide what they may do), as in a shared ZooKeeper."""
    discovery.find_java()
    # before writing anything
    classpath = discovery.find_zookeeper_classpath()
    port = processes.free_port()
    data_dir = os.path.join(directory, "zookeeper-data")
    os.makedirs(data_dir, exist_ok=True)
    cfg = _write(os.path.join(directory, "zoo.cfg"), _zookeeper_config(data_dir, port, bool(sasl_users), []))
    argv = _zookeeper_argv(directory, classpath, discovery.ZK_MAIN_CLASS, cfg, "512m", sasl_users)
    return {"kind": "zookeeper", "argv": argv, "port": port, "connect": "%s:%d" % (HOST, port),
            "log": os.path.join(directory, "zookeeper.log"), "data_dir": data_dir, "ready": "zookeeper"}


def plan_zookeeper_ensemble(directory: str, servers: int, sasl_users: Optional[Dict[str, str]] = None,
                            tick_ms: int = TICK_MS) -> List[Record]:
    """``servers`` ZooKeeper servers forming one ensemble (``QuorumPeerMain``, static configuration): server *i*
    (from 1) has ``DIR/zookeeper-i/zoo.cfg``, its data (and ``myid``) in ``DIR/zookeeper-i/data`` and its log in
    ``DIR/zookeeper-i.log``; each listens for clients, for followers (quorum port) and for leader election on
    ports of its own. No server answers clients before a majority has elected a leader, so the records are
    started together and then waited for (:func:`spawn` / :func:`wait_ready`). *tick_ms* is their ``tickTime``: a
    follower that has not heard from its leader for ``syncLimit`` (5) ticks leaves the quorum and closes the
    connections of its clients."""
    discovery.find_java()
    classpath = discovery.find_zookeeper_classpath()
    ids = list(range(1, servers + 1))
    ports = {i: (processes.free_port(), processes.free_port(), processes.free_port()) for i in ids}
    peers = ["server.%d=%s:%d:%d" % (i, HOST, quorum, election) for i, (_, quorum, election) in ports.items()]
    records = []
    for i in ids:
        d = os.path.join(directory, "zookeeper-%d" % i)
        data_dir = os.path.join(d, "data")
        os.makedirs(data_dir, exist_ok=True)
        _write(os.path.join(data_dir, "myid"), "%d\n" % i)
        port = ports[i][0]
        cfg = _write(os.path.join(d, "zoo.cfg"), _zookeeper_config(data_dir, port, bool(sasl_users), peers, tick_ms))
        argv = _zookeeper_argv(directory, classpath, discovery.ZK_QUORUM_MAIN_CLASS, cfg, "256m", sasl_users)
        records.append({"kind": "zookeeper", "argv": argv, "port": port, "connect": "%s:%d" % (HOST, port),
                        "server_id": i, "quorum_port": ports[i][1], "election_port": ports[i][2],
                        "log": os.path.join(directory, "zookeeper-%d.log" % i), "data_dir": data_dir,
                        "ready": "zookeeper"})
    return records


def zookeeper_mode(rec: Record) -> Optional[str]:
    """What ZooKeeper's ``srvr`` says of the server: ``leader``, ``follower``, ``standalone`` (``observer``),
    ``not serving`` (up, but not in a quorum: an election is going on or no majority is up), or None when
    nothing answers on its client port."""
    try:
        answer = zk_four_letter(HOST, rec["port"], b"srvr")
    except OSError:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return "not serving"


# -- Apache Kafka -----------------------------------------------------------------------------------------------
def kafka_java_argv(classpath: str, directory: str, heap: str) -> List[str]:
    log4j = _write(os.path.join(directory, "log4j.properties"), LOG4J)
    log4j2 = _write(os.path.join(directory, "log4j2.properties"), LOG4J2)
    return [discovery.find_java(), "-Xmx%s" % heap, "-Xms64m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            "-Dlog4j.configuration=file:%s" % log4j, "-Dlog4j2.configurationFile=%s" % log4j2,
            "-Dkafka.logs.dir=%s" % directory, "-cp", classpath]


def plan_kafka(directory: str, classpath: str, broker_id: int, zookeeper_connect: str, brokers: int = 1,
               heap: str = "512m", extra: Optional[Dict[str, Any]] = None,
               security: Optional["BrokerSecurity"] = None) -> Record:
    """An Apache Kafka broker in ZooKeeper mode (3.9: the last line that has it); with ``security``, also the
    SSL/SASL listeners it names (record key ``listeners``: {name: host:port}; PLAINTEXT stays for the brokers)."""
    port = processes.free_port()
    secure = {name: processes.free_port() for name in (security.listeners if security else ())}
    listeners = ",".join(["PLAINTEXT://%s:%d" % (HOST, port)] + ["%s://%s:%d" % (n, HOST, p)
                                                                    for n, p in secure.items()])
    log_dir = os.path.join(directory, "kafka-logs-%d" % broker_id)
    os.makedirs(log_dir, exist_ok=True)
    rf = min(brokers, 3)
    props: Dict[str, Any] = {
        "broker.id": broker_id,
        "listeners": listeners,
        "advertised.listeners": listeners,
        "log.dirs": log_dir,
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": 18000,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        "default.replication.factor": rf,
        "num.network.threads": 2,
        "num.io.threads": 4,
        "num.recovery.threads.per.data.dir": 1,
        "log.retention.check.interval.ms": 60000,
        "delete.topic.enable": "true",
    }
    if security is not None:
        props.update(security.broker_properties(secure, HOST))
    props.update(extra or {})
    d = os.path.join(directory, "broker-%d" % broker_id)
    os.makedirs(d, exist_ok=True)
    cfg = _write(os.path.join(d, "server.properties"), _properties(props))
    argv = kafka_java_argv(classpath, d, heap) + ["kafka.Kafka", cfg]
    return {"kind": "kafka", "argv": argv, "port": port, "bootstrap": "%s:%d" % (HOST, port), "broker_id": broker_id,
            "log": os.path.join(directory, "broker-%d.log" % broker_id), "config": cfg, "log_dir": log_dir,
            "ready": "kafka-zk", "zookeeper_connect": zookeeper_connect,
            "listeners": {n: "%s:%d" % (HOST, p) for n, p in secure.items()}}


def plan_kraft(directory: str, classpath: str, heap: str = "512m", extra: Optional[Dict[str, Any]] = None) -> Record:
    """A single Apache Kafka node in KRaft mode (broker and controller); its log dir is formatted here."""
    port, cport = processes.free_port(), processes.free_port()
    log_dir = os.path.join(directory, "kraft-logs")
    d = os.path.join(directory, "kraft")
    os.makedirs(d, exist_ok=True)
    props: Dict[str, Any] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": "1@%s:%d" % (HOST, cport),
        "listeners": "PLAINTEXT://%s:%d,CONTROLLER://%s:%d" % (HOST, port, HOST, cport),
        "advertised.listeners": "PLAINTEXT://%s:%d" % (HOST, port),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": log_dir,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
    }
    props.update(extra or {})
    cfg = _write(os.path.join(d, "server.properties"), _properties(props))
    base = kafka_java_argv(classpath, d, heap)
    if not os.path.exists(os.path.join(log_dir, "meta.properties")):
        cluster_id = "-"
        # as Kafka's Uuid.randomUuid: a leading '-' reads as an option
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        fmt = subprocess.run(base + ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", cfg],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if fmt.returncode != 0:
            raise LocalClusterError("formatting the KRaft log dir failed: %s"
                                    % fmt.stdout.decode("utf-8", "replace")[-2000:])
    return {"kind": "kraft", "argv": base + ["kafka.Kafka", cfg], "port": port, "controller_port": cport,
            "bootstrap": "%s:%d" % (HOST, port), "log": os.path.join(directory, "kraft.log"), "config": cfg,
            "log_dir": log_dir, "ready": "kafka-metadata"}


# -- tansu and the registry mirror ------------------------------------------------------------------------------
def plan_tansu(directory: str) -> Record:
    port = processes.free_port()
    url = "tcp://%s:%d" % (HOST, port)
    argv = [discovery.find_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]
    return {"kind": "tansu", "argv": argv, "port": port, "bootstrap": "%s:%d" % (HOST, port),
            "log": os.path.join(directory, "broker.log"), "ready": "port"}


def plan_mirror(directory: str, zookeeper_connect: str, bootstrap: str) -> Record:
    argv = [sys.executable, "-m", "zkconsumer", "registry", "sync", "--zookeeper", zookeeper_connect,
            "--bootstrap-server", bootstrap, "--interval", "0.5"]
    return {"kind": "mirror", "argv": argv, "log": os.path.join(directory, "mirror.log"), "ready": "mirror",
            "zookeeper_connect": zookeeper_connect}


# -- starting a record ------------------------------------------------------------------------------------------
def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spawn(rec: Record, cwd: str) -> "subprocess.Popen[bytes]":
    """Start rec's argv, detached, its output appended to its log."""
    env = dict(os.environ)
    if rec["kind"] == "mirror":
        env["PYTHONPATH"] = os.pathsep.join([p for p in [_package_root(), env.get("PYTHONPATH")] if p])
    return processes.spawn(rec["argv"], rec["log"], cwd=cwd, env=env)


def wait_ready(rec: Record, proc: "subprocess.Popen[bytes]", timeout: float) -> None:
    """Wait until the started record answers (stopping it when it does not)."""
    try:
        WAITS[rec["ready"]](rec, proc, timeout)
    except BaseException:
        processes.stop(proc.pid)
        raise


def spawn_ready(rec: Record, cwd: str, timeout: float) -> int:
    """Start rec's argv (detached, log appended) and wait until it is ready; return its pid."""
    proc = spawn(rec, cwd)
    wait_ready(rec, proc, timeout)
    return proc.pid


def _wait_zookeeper(rec: Record, proc: Any, timeout: float) -> None:
    wait_until_ready(rec, proc, timeout, "ZooKeeper on port %d" % rec["port"],
                   lambda: "Zookeeper version" in zk_four_letter(HOST, rec["port"]))


def _wait_port(rec: Record, proc: Any, timeout: float) -> None:
    processes.wait_for_port(HOST, rec["port"], proc, timeout, "%s broker" % rec["kind"], rec["log"])


def _metadata_answers(bootstrap: str) -> bool:
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        return admin.describe_cluster() is not None
    finally:
        from ..kafka.internals import close_quietly
        close_quietly(admin)


def _wait_kafka_zk(rec: Record, proc: Any, timeout: float) -> None:
    """Registered under /brokers/ids/<id> (Kafka writes it itself) and answering Metadata."""
    from ..zookeeper import client as zkmod
    path = "/brokers/ids/%d" % rec["broker_id"]
    zk = zkmod.connect(rec["zookeeper_connect"])
    try:
        def registered() -> bool:
            if not zk.exists(path):
                return False
            data, _ = zk.get(path)
            return (":%d" % rec["port"]).encode() in data
        wait_until_ready(rec, proc, timeout, "Apache Kafka broker %d (port %d)" % (rec["broker_id"], rec["port"]),
                       registered)
    finally:
        zkmod.close(zk)
    # the broker registers before its listener accepts: a client asked before that logs every refused connection
    # as an ERROR (kafka-python), which `zkconsumer local up` would print
    _wait_port(rec, proc, timeout)
    wait_until_ready(rec, proc, timeout, "Apache Kafka broker %d (port %d)" % (rec["broker_id"], rec["port"]),
                   lambda: _metadata_answers(rec["bootstrap"]), interval=0.2)


def _wait_kafka_metadata(rec: Record, proc: Any, timeout: float) -> None:
    _wait_port(rec, proc, timeout)
    wait_until_ready(rec, proc, timeout, "Apache Kafka (KRaft) on port %d" % rec["port"],
                   lambda: _metadata_answers(rec["bootstrap"]), interval=0.2)


def _wait_mirror(rec: Record, proc: Any, timeout: float) -> None:
    """The first sync: the broker registration appears under /brokers/ids."""
    from ..zookeeper import client as zkmod
    zk = zkmod.connect(rec["zookeeper_connect"])
    try:
        wait_until_ready(rec, proc, timeout, "the registry mirror",
                       lambda: bool(zk.exists("/brokers/ids") and zk.get_children("/brokers/ids")))
    finally:
        zkmod.close(zk)


WAITS: Dict[str, Callable[[Record, Any, float], None]] = {
    "zookeeper": _wait_zookeeper, "port": _wait_port, "kafka-zk": _wait_kafka_zk,
    "kafka-metadata": _wait_kafka_metadata, "mirror": _wait_mirror,
}
