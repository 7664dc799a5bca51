"""Burrow (Debian's ``burrow`` package, LinkedIn Burrow 1.2) with its ``kafka_zk`` consumer module reads these groups'
ZooKeeper offsets: run against the session's ZooKeeper and Apache Kafka 3.9 on loopback, its HTTP API
(``/v3/kafka/<cluster>/consumer/<group>/lag``) reports each partition's committed offset and lag as
``zkconsumer groups describe`` does, for a member at the default settings stopped with SIGTERM and one killed with
kill -9. In the Kafka phase it keeps reporting ZooKeeper's frozen offsets while ``zkconsumer exporter`` follows the
phase (what docs/operators.md and docs/migration.md say about it)."""
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.consumer_helpers import CliConsumer, deliver_from_the_log_end, kafka_commit, produce_tracked
from tests.support.waiting import end_process, wait_until
from zkconsumer_migrate import state

CONFIG = """\
[general]
pidfile="{dir}/burrow.pid"
[logging]
level="info"
[zookeeper]
servers=["{zookeeper}"]
timeout=6
root-path="/burrow-{name}"
[client-profile.test]
client-id="burrow-test"
kafka-version="0.10.2"
[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="test"
topic-refresh=1
offset-refresh=1
[consumer.zk]
class-name="kafka_zk"
cluster="local"
servers=["{zookeeper}"]
[httpserver.default]
address="127.0.0.1:{port}"
[storage.default]
class-name="inmemory"
workers=2
intervals=10
min-distance=1
"""


def _burrow():
    path = shutil.which("Burrow") or shutil.which("burrow")
    if path is None:
        pytest.fail("Burrow is needed (Debian's burrow package: apt-get install burrow; .ci/bootstrap installs it "
                    "when run as root)", pytrace=False)
    return path


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    try:
        return json.loads(urllib.request.urlopen(url, timeout=10).read().decode())
    except OSError:
        return None


def _burrow_lag(base, group):
    """{partition: (committed offset, current lag)} from Burrow's lag endpoint (partitions it has an offset for)."""
    doc = _get("%s/v3/kafka/local/consumer/%s/lag" % (base, group))
    if not doc or doc.get("error") or doc["status"]["status"] == "NOTFOUND":
        return None
    return {p["partition"]: (p["end"]["offset"], p["current_lag"]) for p in doc["status"]["partitions"]
            if p.get("end")}


def _zkconsumer_json(*args):
    r = subprocess.run([sys.executable, "-m", "zkconsumer"] + list(args) + ["--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def burrow(services, tmp_path, unique, zk):
    port = _free_port()
    name = unique("b")
    (tmp_path / "burrow.toml").write_text(CONFIG.format(dir=tmp_path, zookeeper=services.zookeeper_connect,
                                                        bootstrap=services.bootstrap_servers, port=port, name=name))
    log = open(tmp_path / "burrow.log", "wb")
    proc = subprocess.Popen([_burrow(), "-config-dir", str(tmp_path)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    try:
        wait_until(lambda: proc.poll() is not None or _get(base + "/v3/kafka"), 60, message="Burrow's HTTP API")
        assert proc.poll() is None, (tmp_path / "burrow.log").read_text()[-3000:]
        yield base
    finally:
        end_process(proc, 30)
        log.close()
        zk.delete("/burrow-" + name, recursive=True)


def test_burrow_kafka_zk_reads_the_groups_zookeeper_offsets(services, unique, burrow, zk):
    g, t = unique("burrow"), services.create_topic(unique("burrow"), 2)
    # Burrow drops a consumer offset of a topic its cluster module does not know yet (and reads the node again only
    # when it changes): let it learn the topic first
    wait_until(lambda: t in ((_get(burrow + "/v3/kafka/local/topic") or {}).get("topics") or []), 60,
               message="Burrow to list the topic")
    member = CliConsumer(services, g, [t], defaults=True)  # the default settings
    second = None
    try:
        deliver_from_the_log_end(member, services.bootstrap_servers, t, 2, 10)
        assert member.terminate(60) == 0  # committed them at its graceful stop
        ends = {p: o + 1 for p, o in member.last_offsets(t).items()}
        wait_until(lambda: _burrow_lag(burrow, g) == {p: (ends[p], 0) for p in (0, 1)}, 60,
                   message="Burrow to read the offsets the member committed to ZooKeeper")
        # a second member at the defaults delivers 4 + 4 and is killed with kill -9 before its first commit (60 s)
        second = CliConsumer(services, g, [t], defaults=True)
        wait_until(lambda: any(e["event"] == "assign" for e in second.events), 60, message="the second's join")
        produce_tracked(services.bootstrap_servers, t, 8, partitions=2)
        wait_until(lambda: len(second.seen(t)) == 8, 60, message="the 8 delivered")  # from the committed offsets
        second.kill()
        produce_tracked(services.bootstrap_servers, t, 2, partitions=2)
        want = {p: (ends[p], 5) for p in (0, 1)}  # 4 delivered but uncommitted + 1 new per partition
        wait_until(lambda: _burrow_lag(burrow, g) == want, 60, message="Burrow's lag after the kill -9")
        described = _zkconsumer_json("groups", "describe", "--zookeeper", services.zookeeper_connect, "--group", g)
        assert {p["partition"]: (p["current_offset"], p["lag"]) for p in described} == want
        # the Kafka phase: the members commit to Kafka only; Burrow's kafka_zk module keeps ZooKeeper's offsets
        kafka_commit(services.bootstrap_servers, g, {(t, 0): 10, (t, 1): 10})
        state.record_phase(zk, g, "kafka", "test")
        exported = _zkconsumer_json("exporter", "--zookeeper", services.zookeeper_connect, "--group", g,
                                    "--once")["groups"][g]
        assert exported["store"] == "kafka" and exported["kafka_offsets"] == {"%s:0" % t: 10, "%s:1" % t: 10}
        time.sleep(3)  # several of Burrow's offset refreshes (1 s): it still sees ZooKeeper's offsets only
        assert _burrow_lag(burrow, g) == want
    finally:
        for m in (member, second):
            if m is not None:
                m.kill()
