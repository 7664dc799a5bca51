"""The Spark group member's reaper process (zkconsumer/spark/_reaper.py), started as GroupMember starts it, against a
real ZooKeeper (through a relay on loopback where ZooKeeper must stop answering). The member is a ZooKeeper session
of the test holding a registration and an owner node as a member does (its process "ends" when the test closes the
reaper's stdin); the driver is a child process of the test. Covered: the driver dies, the member's nodes are
released at once (only its own); ZooKeeper stops answering while the reaper waits, it exits on its own within its
bound and says what it left; the driver lives and the member's nodes outlive its process past the bound, it exits
and leaves them."""
import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient

from tests.support.waiting import wait_until
from tests.support.zk_relay import Relay, zk_target
from zkconsumer.core.layout import paths


@pytest.fixture
def member(services, unique):
    """A member's nodes under a session of their own: ``(group, consumer id, topic, its session)``; its owner node
    of partition 0, and another member's of partition 1."""
    group = unique("reaped")
    cid, topic = group + "_m", unique("t")
    zk = KazooClient(hosts=services.zookeeper_connect, timeout=10.0)
    zk.start(timeout=15)
    zk.create(paths.consumer_registration_path(group, cid), b"{}", ephemeral=True, makepath=True)
    zk.create(paths.partition_owner_path(group, topic, 0), (cid + "-0").encode(), ephemeral=True, makepath=True)
    zk.create(paths.partition_owner_path(group, topic, 1), (group + "_other-0").encode(), ephemeral=True,
              makepath=True)
    yield group, cid, topic, zk.client_id[0]
    zk.stop()
    zk.close()


@pytest.fixture
def driver():
    """A live process standing for the driver's JVM."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def _reaper(connect, group, cid, driver_pid, session_ms):
    return subprocess.Popen([sys.executable, "-m", "zkconsumer.spark._reaper", connect, group, cid, str(driver_pid),
                             str(session_ms)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _ended(reaper, timeout):
    """(exit code, stderr) of the reaper, or fail when it still runs after *timeout* seconds (then killed)."""
    try:
        reaper.wait(timeout)
    except subprocess.TimeoutExpired:
        reaper.kill()
        reaper.wait()
        pytest.fail("the reaper still ran after %.0f s: %s" % (timeout, reaper.stderr.read()))
    return reaper.returncode, reaper.stderr.read()


def _nodes(zk, group, cid, topic):
    return {"registration": zk.exists(paths.consumer_registration_path(group, cid)) is not None,
            0: zk.exists(paths.partition_owner_path(group, topic, 0)) is not None,
            1: zk.exists(paths.partition_owner_path(group, topic, 1)) is not None}


def test_the_driver_dies_and_the_member_is_released_at_once(services, zk, member, driver):
    group, cid, topic, _ = member
    reaper = _reaper(services.zookeeper_connect, group, cid, driver.pid, 60000)
    try:
        reaper.stdin.close()                              # the member's process ended; its session lives on
        time.sleep(1.0)
        assert reaper.poll() is None and _nodes(zk, group, cid, topic) == {"registration": True, 0: True, 1: True}
        driver.kill()
        driver.wait()
        rc, err = _ended(reaper, 30)
    finally:
        if reaper.poll() is None:
            reaper.kill()
    assert rc == 0, err
    assert _nodes(zk, group, cid, topic) == {"registration": False, 0: False, 1: True}
    assert "released" in err and paths.consumer_registration_path(group, cid) in err, err
    # started as the member starts it (python -m): the module runs once, without runpy's double-import warning
    assert "RuntimeWarning" not in err, err


def test_a_zookeeper_that_stops_answering_ends_the_reaper_and_it_says_what_it_left(services, zk, member, driver):
    """The reaper waits for the member's nodes to go while the driver lives; then ZooKeeper accepts connections and
    never answers (a relay that holds every answer). Its requests once waited for ever (kazoo queues a request until
    it is connected again): reapers were left hanging after their ZooKeeper vanished. It must exit by itself."""
    group, cid, topic, session = member
    relay = Relay(zk_target(services))
    relay.start()
    reaper = _reaper(relay.connect, group, cid, driver.pid, 6000)
    try:
        reaper.stdin.close()
        wait_until(lambda: relay.pairs, 15, message="the reaper to connect")
        time.sleep(2.0)                                  # connected, and polling the member's registration
        assert reaper.poll() is None, reaper.stderr.read()
        relay.blackhole()
        rc, err = _ended(reaper, 60)
    finally:
        if reaper.poll() is None:
            reaper.kill()
        relay.close()
    assert rc == 1, err
    assert "gave up" in err and "deleted nothing" in err and "0x%x" % session in err, err
    assert _nodes(zk, group, cid, topic) == {"registration": True, 0: True, 1: True}


def test_nodes_that_outlive_the_member_past_the_bound_are_left_to_the_living_driver(services, zk, member, driver):
    """The member's nodes are still there (its session lives) twice its session timeout after its process ended,
    and the driver lives: the reaper leaves them (the application may release them after its own commit) and exits
    rather than wait for ever."""
    group, cid, topic, session = member
    reaper = _reaper(services.zookeeper_connect, group, cid, driver.pid, 2000)
    try:
        reaper.stdin.close()
        rc, err = _ended(reaper, 40)
    finally:
        if reaper.poll() is None:
            reaper.kill()
    assert rc == 0, err
    assert "left to the application" in err and "0x%x" % session in err, err
    assert _nodes(zk, group, cid, topic) == {"registration": True, 0: True, 1: True}


def test_a_delete_whose_answer_was_lost_is_not_repeated_on_another_members_node(services, zk, member):
    """The driver is gone (DRIVER_PID 0: release at once). The reaper's delete of the member's owner node of
    partition 0 reaches ZooKeeper, which applies it, and its answer is lost with the connection (ConnectionLoss);
    meanwhile another member claims the partition: a new owner node at that path, of version 0 like the one deleted.
    The reaper once sent the same delete (path, version) again after reconnecting, and deleted the other member's
    node: the partition looked unowned while that member fetched it, and a third member could claim it too."""
    group, cid, topic, _ = member
    owner0 = paths.partition_owner_path(group, topic, 0)
    claimer = (group + "_next-0").encode()
    relay = Relay(zk_target(services))
    relay.start()
    relay.sever_after(owner0.encode(), op=2)             # ZooKeeper's OpCode.delete
    reaper = _reaper(relay.connect, group, cid, 0, 6000)
    try:
        reaper.stdin.close()
        assert relay.fired.wait(30), "the reaper's delete of %s never reached ZooKeeper" % owner0
        wait_until(lambda: zk.exists(owner0) is None, 5, message="ZooKeeper to apply the delete")
        zk.create(owner0, claimer, ephemeral=True)        # the partition's next owner
        relay.sever(settle=0.0)
        rc, err = _ended(reaper, 60)
        assert zk.exists(owner0) is not None and zk.get(owner0)[0] == claimer, \
            "the reaper deleted the owner node another member created after its own delete: %s" % err
        assert rc == 0, err
        assert not _nodes(zk, group, cid, topic)["registration"]
    finally:
        if reaper.poll() is None:
            reaper.kill()
        relay.close()
        if zk.exists(owner0) is not None:
            zk.delete(owner0)


def test_a_connection_lost_while_the_owner_nodes_are_read_is_read_again(services, zk, member):
    """The reaper reads the group's owner nodes all at once; the connection drops with a read unanswered
    (ConnectionLoss on its result): that node is read again once kazoo reconnected, and the member is released, not
    left to its session's expiry."""
    group, cid, topic, _ = member
    relay = Relay(zk_target(services))
    relay.start()
    relay.sever_after(paths.partition_owner_path(group, topic, 1).encode(), op=4)   # ZooKeeper's OpCode.getData
    reaper = _reaper(relay.connect, group, cid, 0, 6000)
    try:
        reaper.stdin.close()
        assert relay.fired.wait(30), "the reaper never read the owner node of partition 1"
        relay.sever(settle=0.0)
        rc, err = _ended(reaper, 60)
    finally:
        if reaper.poll() is None:
            reaper.kill()
        relay.close()
    assert rc == 0, err
    assert _nodes(zk, group, cid, topic) == {"registration": False, 0: False, 1: True}, err
