"""`zkmigrate refresh --every` (the keep-alive that stops a stopped group's Kafka offsets expiring) on a cluster of
its own whose broker and ZooKeeper are stopped and started again under it: it logs each outage, keeps going, and
refreshes again once the servers are back. Brokers are found in ZooKeeper, as operators run it."""
import os
import subprocess
import sys
import time

import pytest

from tests.support.chaos_support import own_cluster_fixture
from tests.support.consumer_helpers import produce_tracked
from tests.support.waiting import end_process, outcome_within, wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.expiry import read_commit_times
from zkconsumer.offsets.kafka import KafkaOffsetStore

pytestmark = pytest.mark.live

own = own_cluster_fixture("refresh-outage")


class Keepalive:
    """``zkmigrate refresh --every`` as a child process; stdout and stderr go to files."""

    def __init__(self, tmp_path, *args):
        self.out, self.err = tmp_path / "refresh.out", tmp_path / "refresh.err"
        env = dict(os.environ, ZKCONSUMER_LOCAL_DIR=str(tmp_path / "no-local-cluster"))
        env.pop("KAFKA_BOOTSTRAP", None)
        zkmigrate = os.path.join(os.path.dirname(sys.executable), "zkmigrate")
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen([zkmigrate, "refresh"] + list(args), stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, env=env)

    def stdout(self):
        return self.out.read_text()

    def stderr(self):
        return self.err.read_text()

    def refreshed(self):
        return self.stdout().count("refreshed 2 Kafka offset(s)")

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        return end_process(self.proc, 30)


def test_refresh_every_survives_broker_and_zookeeper_outages(own, unique, tmp_path):
    t = own.create_topic(unique("ka"), 2)
    produce_tracked(own.bootstrap_servers, t, 20, partitions=2)
    g = unique("ka-g")
    zk = zkmod.connect(own.zookeeper_connect)
    ks = KafkaOffsetStore(own.bootstrap_servers, g)
    try:  # a stopped group in the Kafka phase: frozen ZooKeeper offsets, Kafka offsets nobody commits
        assert ZooKeeperOffsetStore(zk, g).commit({(t, 0): 2, (t, 1): 3}).ok
        assert ks.commit({(t, 0): 5, (t, 1): 6}).ok
    finally:
        ks.close()
        zkmod.close(zk)
    ka = Keepalive(tmp_path, "--group", g, "--execute", "--every", "2", "--zookeeper", own.zookeeper_connect)
    try:
        wait_until(lambda: ka.refreshed() >= 1, 60, message="a first refresh round")

        own.stop("broker")
        wait_until(lambda: "next round in" in ka.stderr(), 90, message="the broker outage logged")
        assert "broker" in ka.stderr().lower() or "kafka" in ka.stderr().lower(), ka.stderr()[-3000:]
        before = ka.refreshed()
        time.sleep(5)  # a few failing rounds
        assert ka.alive(), ka.stderr()[-3000:]
        own.start_broker()
        wait_until(lambda: ka.refreshed() > before, 120, message="a refresh once the broker is back")
        assert ka.alive()

        err_before = len(ka.stderr())
        own.stop("zookeeper")
        wait_until(lambda: "ZooKeeper" in ka.stderr()[err_before:] and "next round in" in ka.stderr()[err_before:],
                   90, message="the ZooKeeper outage logged")
        before = ka.refreshed()
        time.sleep(5)
        assert ka.alive(), ka.stderr()[-3000:]
        own.start_zookeeper()
        back = time.time()
        wait_until(lambda: ka.refreshed() > before, 120, message="a refresh once ZooKeeper is back")
        assert ka.alive()
        assert "recovered" in ka.stderr()[err_before:], ka.stderr()[-3000:]
        # the offsets kept their values, and their retention restarted after the outages
        times = read_commit_times(own.bootstrap_servers, g, [(t, 0), (t, 1)])
        assert set(times) == {(t, 0), (t, 1)} and min(times.values()) >= (back - 5) * 1000, times
        ks = KafkaOffsetStore(own.bootstrap_servers, g)
        try:
            assert ks.fetch([(t, 0), (t, 1)]) == {(t, 0): 5, (t, 1): 6}
        finally:
            ks.close()
        assert "Traceback" not in ka.stderr(), ka.stderr()[-3000:]
    finally:
        code = ka.stop()
        print("refresh stdout:\n%s\nrefresh stderr:\n%s" % (ka.stdout()[-3000:], ka.stderr()[-5000:]))
        if own.cluster.read_state():
            own.start_zookeeper()
            own.start_broker()
    assert code == 0, (code, ka.stderr()[-3000:])


def test_refresh_every_stopped_during_an_outage_exits_with_the_failed_rounds_code(tmp_path):
    """A supervisor that stops the keep-alive while ZooKeeper is down learns that it was not refreshing: exit 3
    (could not check), the code of its last round, not 0."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: a ZooKeeper that is down
    ka = Keepalive(tmp_path, "--group", "keepalive-g", "--execute", "--every", "1", "--zookeeper",
                   "127.0.0.1:%d" % port)
    try:
        wait_until(lambda: "next round in" in ka.stderr(), 90, message="a failed round logged")
        assert ka.alive(), ka.stderr()[-3000:]
    finally:
        code = ka.stop()
    assert code == 3, (code, ka.stderr()[-3000:])
    assert "Traceback" not in ka.stderr(), ka.stderr()[-3000:]


def test_a_tool_session_gives_up_on_a_zookeeper_gone_mid_command_and_keeps_one_that_came_back(own):
    """kazoo queues a request made while the connection is lost and waits for the next connection without a bound:
    a command (a keep-alive round) whose ZooKeeper stopped mid-run waited for ever, and the keep-alive logged no
    outage. A tool's client closes its session once the connection stayed lost for its bound, so the request fails
    (the round reports ZooKeeper unavailable); a connection back within the bound keeps the session working."""
    from migrate.fleet import unavailable_error
    kept = zkmod.connect(own.zookeeper_connect, give_up_after_ms=30_000)
    doomed = None
    try:
        if not kept.exists("/give-up-probe"):
            kept.create("/give-up-probe", b"1")
        stopped = time.monotonic()
        own.stop("zookeeper")
        own.start_zookeeper()
        wait_until(lambda: kept.connected, 30, message="the kept session reconnected")
        time.sleep(max(0.0, 31 - (time.monotonic() - stopped)))  # past the bound, counted from the loss
        assert kept.connected and kept.get("/give-up-probe")[0] == b"1"

        doomed = zkmod.connect(own.zookeeper_connect, give_up_after_ms=2000)
        own.stop("zookeeper")
        wait_until(lambda: not doomed.connected, 30, message="the connection lost")
        outcome = outcome_within(lambda: doomed.get("/give-up-probe"), 30)
        assert outcome, "a request made while ZooKeeper was gone still waits after 30 s"
        assert unavailable_error(outcome[0]), outcome
    finally:
        if own.cluster.read_state():
            own.start_zookeeper()
        for c in (kept, doomed):
            if c is not None:
                zkmod.close(c)
