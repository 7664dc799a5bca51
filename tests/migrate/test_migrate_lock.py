"""Two operators at once on one group: every writing zkmigrate command holds the group's lock
(/consumers/G/zkconsumer/lock) while it reads, decides and writes, so a `refresh` cannot undo a concurrent
`reset-offsets`; a refusal names the holder (command, host, pid, since) and changes nothing; `--lock-wait` waits for
the holder; a holder killed with kill -9 releases the lock when its ZooKeeper session expires."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading

from tests.support.consumer_helpers import produce_tracked
from tests.support.migrate_support import run_cli
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore

ZKMIGRATE = os.path.join(os.path.dirname(sys.executable), "zkmigrate")


def operator(services, *args, **kw):
    """Another operator: zkmigrate in a process of its own (stdout, stderr to pipes)."""
    return subprocess.Popen([ZKMIGRATE] + list(args) + ["--zookeeper", services.zookeeper_connect,
                                                        "--bootstrap-server", services.bootstrap_servers],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, **kw)


def contenders(zk, group):
    try:
        return zk.get_children(paths.group_lock_path(group))
    except Exception:
        return []


def test_refresh_cannot_undo_a_concurrent_reset(services, zk, unique, tmp_path, monkeypatch):
    t = services.create_topic(unique("lk"), 1)
    produce_tracked(services.bootstrap_servers, t, 100, partitions=1)
    g = unique("lk-g")
    tp = (t, 0)
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:  # a stopped group in the Kafka phase
        assert ZooKeeperOffsetStore(zk, g).commit({tp: 40}).ok and ks.commit({tp: 50}).ok

        # operator A: refresh, paused after it read the Kafka offsets and before it commits them again
        paused, go = threading.Event(), threading.Event()
        real_commit = KafkaOffsetStore.commit

        def slow_commit(self, offsets, fence=None):
            if threading.current_thread().name == "operator-a":
                paused.set()
                assert go.wait(120)
            return real_commit(self, offsets, fence)
        monkeypatch.setattr(KafkaOffsetStore, "commit", slow_commit)
        from zkconsumer_migrate.cli import cli
        result = {}
        a = threading.Thread(name="operator-a", target=lambda: result.setdefault("a", run_cli(cli, [
            "refresh", "--group", g, "--execute", "--json", "--zookeeper", services.zookeeper_connect,
            "--bootstrap-server", services.bootstrap_servers])))
        a.start()
        try:
            assert paused.wait(60), "refresh never reached its commit"
            # operator B resets the group meanwhile: refused, naming A, and nothing is written
            b = operator(services, "reset-offsets", "--group", g, "--topic", t, "--to-offset", "10", "--execute",
                         "--backup-dir", str(tmp_path / "b"))
            out, err = b.communicate(timeout=120)
            assert b.returncode == 1, (b.returncode, out, err)
            assert "is locked by 'zkmigrate refresh' on %s (pid %d" % (socket.gethostname(), os.getpid()) in err, err
            assert "--lock-wait" in err
            assert not (tmp_path / "b").exists()  # not even a backup
            assert ks.fetch([tp]) == {tp: 50} and ZooKeeperOffsetStore(zk, g).fetch([tp]) == {tp: 40}

            # B again, waiting for the lock: it runs once A is done, on what A left
            b = operator(services, "reset-offsets", "--group", g, "--topic", t, "--to-offset", "10", "--execute",
                         "--backup-dir", str(tmp_path / "b"), "--lock-wait", "120", "--json")
            wait_until(lambda: len(contenders(zk, g)) == 2, 60, message="B waiting behind A")
        finally:
            go.set()
            a.join(120)
        code, out, err = result["a"]
        assert code == 0 and json.loads(out)["refreshed"] == 1, (code, out, err)
        out, err = b.communicate(timeout=120)
        assert b.returncode == 0, (out, err)
        assert json.loads(out)["written"] == 2
        # the reset stands: A's commit of the value it read (50) came before it, not after
        assert ks.fetch([tp]) == {tp: 10} and ZooKeeperOffsetStore(zk, g).fetch([tp]) == {tp: 10}
        assert contenders(zk, g) == []
    finally:
        ks.close()


def test_a_holder_killed_with_kill_9_releases_the_lock_with_its_session(services, zk, unique, tmp_path):
    t = services.create_topic(unique("lk9"), 1)
    produce_tracked(services.bootstrap_servers, t, 30, partitions=1)
    g = unique("lk9-g")
    tp = (t, 0)
    assert ZooKeeperOffsetStore(zk, g).commit({tp: 20}).ok
    # a ZooKeeper member still registered: cutover --execute waits for it to leave, holding the group's lock
    reg = paths.consumer_registration_path(g, g + "_host-1-abcdef12")
    zk.create(reg, b'{"version":1,"subscription":{"%s":1},"pattern":"static","timestamp":"1"}' % t.encode(),
              ephemeral=True, makepath=True)
    holder = operator(services, "cutover", "--group", g, "--execute", "--timeout", "600", "--backup-dir",
                      str(tmp_path / "c"))
    try:
        wait_until(lambda: len(contenders(zk, g)) == 1, 60, message="cutover holding the lock")
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        zk.delete(reg)
        # right after the kill the lock is still held by the dead process's session: refused, and said so
        from zkconsumer_migrate.cli import cli
        code, out, err = run_cli(cli, ["copy", "--group", g, "--execute", "--backup-dir", str(tmp_path / "d"),
                                       "--zookeeper", services.zookeeper_connect, "--bootstrap-server",
                                       services.bootstrap_servers])
        if contenders(zk, g):  # (its session may already have expired on a slow machine)
            assert code == 1 and "'zkmigrate cutover'" in err and "pid %d" % holder.pid in err, (code, err)
            assert "no longer running on this host" in err, err
        # --lock-wait outlasts the session timeout: the copy runs
        code, out, err = run_cli(cli, ["copy", "--group", g, "--execute", "--backup-dir", str(tmp_path / "d"),
                                       "--lock-wait", "60", "--json", "--zookeeper", services.zookeeper_connect,
                                       "--bootstrap-server", services.bootstrap_servers])
        assert code == 0 and json.loads(out)["written"] == 1, (code, out, err)
        ks = KafkaOffsetStore(services.bootstrap_servers, g)
        try:
            assert ks.fetch([tp]) == {tp: 20}
        finally:
            ks.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def test_a_command_on_a_group_that_does_not_exist_leaves_no_group_behind(services, zk, unique):
    from zkconsumer_migrate.cli import cli
    g = unique("lk-none")
    code, out, err = run_cli(cli, ["copy", "--group", g, "--execute", "--zookeeper", services.zookeeper_connect,
                                   "--bootstrap-server", services.bootstrap_servers])
    assert code == 0, (out, err)
    assert zk.exists(paths.group_path(g)) is None


def test_a_command_that_lost_the_lock_writes_nothing_more(services, zk, unique, tmp_path, monkeypatch):
    """The lock goes with its holder's ZooKeeper session: once its node is gone (a session expiry; here deleted),
    another operator may hold it, so neither a copy's offsets nor cutover's fence nor verify's phase record is
    written."""
    import pytest

    from zkconsumer_migrate import state
    from zkconsumer_migrate.cutover import cutover
    from zkconsumer_migrate.group_offsets import GroupOffsets
    from zkconsumer_migrate.lock import GroupLock, GroupLockedError
    from zkconsumer_migrate.transfer import copy_group, rollback_group
    from zkconsumer_migrate.verify import verify_group
    t = services.create_topic(unique("lkl"), 1)
    produce_tracked(services.bootstrap_servers, t, 30, partitions=1)
    g = unique("lkl-g")
    tp = (t, 0)
    assert ZooKeeperOffsetStore(zk, g).commit({tp: 20}).ok
    gofs = GroupOffsets(zk, services.bootstrap_servers, g)

    def lose(lock):
        zk.delete(paths.group_lock_path(g) + "/" + lock._lock.node)

    try:
        with GroupLock(zk, g, "copy") as gofs.lock:
            lose(gofs.lock)
            with pytest.raises(GroupLockedError, match="lock was lost"):
                copy_group(gofs, "zookeeper", "kafka", execute=True, backup_dir=str(tmp_path))
        assert gofs.kafka_store.fetch([tp]) == {} and not list(tmp_path.iterdir())
        assert gofs.kafka_store.commit({tp: 20}).ok  # Kafka = ZooKeeper: nothing to copy, straight to the fence
        with GroupLock(zk, g, "cutover") as gofs.lock:
            lose(gofs.lock)
            with pytest.raises(GroupLockedError, match="lock was lost"):
                cutover(gofs, execute=True, timeout=5, backup_dir=str(tmp_path))
        assert state.read_phase(zk, g) is None
        assert zk.exists(paths.group_ids_path(g)) is None or not zk.get_children(paths.group_ids_path(g))
        from zkconsumer_migrate.fence import is_fenced
        assert zk.exists(paths.group_ids_path(g)) is None or not is_fenced(zk.get_acls(paths.group_ids_path(g))[0])
        with GroupLock(zk, g, "rollback") as gofs.lock:
            lose(gofs.lock)
            with pytest.raises(GroupLockedError, match="lock was lost"):
                rollback_group(gofs, execute=True, backup_dir=str(tmp_path))
        assert state.read_phase(zk, g) is None
    finally:
        gofs.close()

    # verify: the lock lost between its checks and its phase record
    from zkconsumer_migrate import cli as cli_mod

    def verify_then_lose(gofs, *a, **kw):
        rep = verify_group(gofs, *a, **kw)
        for node in contenders(zk, g):
            zk.delete(paths.group_lock_path(g) + "/" + node)
        return rep
    monkeypatch.setattr(cli_mod, "verify_group", verify_then_lose)
    code, out, err = run_cli(cli_mod.cli, ["verify", "--group", g, "--phase", "dual", "--to", "kafka", "--json",
                                           "--zookeeper", services.zookeeper_connect, "--bootstrap-server",
                                           services.bootstrap_servers])
    assert code == 1 and "lock was lost" in json.loads(out)["error"], (code, out, err)
    assert state.read_phase(zk, g) is None


def test_a_command_that_failed_with_its_connection_gone_reports_its_own_error(services, zk, unique):
    """The command's ZooKeeper client is closed under it (a tool's client gives up on a lost connection): its
    error is the one raised, not the lock release's, which fails on the same closed client."""
    import pytest

    from zkconsumer.zookeeper import client as zkmod
    from zkconsumer_migrate.lock import GroupLock
    g = unique("lk-gone")
    own = zkmod.connect(services.zookeeper_connect)
    try:
        with pytest.raises(RuntimeError, match="the command's own error"):
            with GroupLock(own, g, "copy"):
                own.stop()
                raise RuntimeError("the command's own error")
    finally:
        zkmod.close(own)
    wait_until(lambda: not contenders(zk, g), 30, message="the lock to go with the closed session")


def test_an_import_refused_for_a_locked_group_of_its_file_writes_no_other_group(services, zk, unique, tmp_path):
    """import checks every group of the file before anything is written: one of them locked by another operator
    refuses the import as a whole (nothing written), as a group with live members does; or at least its report says
    what it wrote for the others."""
    from zkconsumer_migrate.lock import GroupLock
    t = services.create_topic(unique("li"), 1)
    produce_tracked(services.bootstrap_servers, t, 20, partitions=1)
    g1, g2 = unique("li-a"), unique("li-b")
    for g in (g1, g2):
        assert ZooKeeperOffsetStore(zk, g).commit({(t, 0): 5}).ok
    path = tmp_path / "offsets.txt"
    path.write_text("/consumers/%s/offsets/%s/0:10\n/consumers/%s/offsets/%s/0:10\n" % (g1, t, g2, t))
    from zkconsumer_migrate.cli import cli
    with GroupLock(zk, g2, "reset-offsets"):
        code, out, err = run_cli(cli, ["import", "--file", str(path), "--store", "zookeeper", "--execute",
                                       "--backup-dir", str(tmp_path), "--zookeeper", services.zookeeper_connect,
                                       "--bootstrap-server", services.bootstrap_servers])
    assert code != 0
    written = ZooKeeperOffsetStore(zk, g1).fetch([(t, 0)])[(t, 0)]
    assert written == 5 or g1 in out + err, (written, out, err)
