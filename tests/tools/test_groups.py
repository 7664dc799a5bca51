"""zkconsumer groups list / describe / owners / verify / delete with real consumer processes; split brain with a
broker-coordinated KafkaConsumer of the same group id (verify fails, a new ZooKeeper consumer refuses)."""
import json
import threading

import pytest

from kafka import KafkaConsumer

from zkconsumer.cli import cli as zkcli
from zkconsumer.core.layout import paths

from tests.support.migrate_support import ConsumerProc, run_cli, zkmigrate_json
from tests.support.waiting import wait_until


def zkgroups(services, *args, expect=None):
    return run_cli(zkcli, ["groups"] + list(args), expect)


def test_groups_commands(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("gr"), 3)
    services.produce(topic, 30)
    g = unique("g-gr")
    zkopt = ["--zookeeper", services.zookeeper_connect]
    c = ConsumerProc(tmp_path, "c1", services.zookeeper_connect, g, topic)
    try:
        wait_until(lambda: len(c.seen()) >= 30, 30, "30 messages")
        code, out, _ = zkgroups(services, "list", "--json", *zkopt, expect=0)
        assert g in json.loads(out)
        wait_until(lambda: zkgroups(services, "verify", "--group", g, *zkopt)[0] == 0, 20, "verify ok")
        code, out, _ = zkgroups(services, "describe", "--group", g, *zkopt, "--bootstrap-server", services.bootstrap_servers,
                                expect=0)
        lines = out.splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                    "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert len(lines) == 4 and all(line.split()[:2] == [g, topic] for line in lines[1:])
        import socket
        assert all(line.split()[7:] == [socket.gethostname(), g] for line in lines[1:]), lines  # client.id = group
        code, out, _ = zkgroups(services, "owners", "--group", g, "--json", *zkopt, expect=0)
        own = json.loads(out)
        assert len(own["members"]) == 1 and len(own["owners"]) == 3
        assert all(o["owner"] == own["members"][0] + "-0" for o in own["owners"])
        code, out, _ = zkgroups(services, "describe", "--group", g, "--json", "--no-log-end", *zkopt, expect=0)
        rows = json.loads(out)
        assert {r["consumer_id"] for r in rows} == {own["members"][0]}
        assert {(r["member_storage"], r["offsets_from"]) for r in rows} == {("zookeeper", "zookeeper")}
        code, out, err = zkgroups(services, "delete", "--group", g, "--execute", *zkopt)
        assert code == 1 and "still active" in err and zk.exists(paths.group_path(g))
    finally:
        c.stop()
        c.kill()
    wait_until(lambda: not zk.get_children(paths.group_ids_path(g)), 15, "member gone")

    def committed():
        rows = json.loads(zkgroups(services, "describe", "--group", g, "--json", "--no-log-end", *zkopt, expect=0)[1])
        return sum(r["current_offset"] or 0 for r in rows), rows
    total, rows = committed()
    assert total == 30, (rows, c.stderr()[-3000:])
    # a stale owner without live members: verify fails and names it
    zk.create(paths.partition_owner_path(g, topic, 1), b"someone-else-0", ephemeral=True, makepath=True)
    code, out, err = zkgroups(services, "verify", "--group", g, *zkopt)
    assert code == 1 and "Rebalance operation failed" in out and "someone-else-0" in err
    zk.delete(paths.partition_owner_path(g, topic, 1))
    code, out, _ = zkgroups(services, "delete", "--group", g, "--json", *zkopt, expect=0)
    assert json.loads(out)["deleted"] is False and zk.exists(paths.group_path(g))
    zkgroups(services, "delete", "--group", g, "--execute", *zkopt, expect=0)
    assert zk.exists(paths.group_path(g)) is None
    code, out, err = zkgroups(services, "describe", "--group", g, *zkopt)
    assert code == 1 and "does not exist" in err


def test_split_brain(services, zk, unique, tmp_path):
    topic = services.create_topic(unique("sb"), 2)
    services.produce(topic, 10)
    g = unique("g-sb")
    zc = ConsumerProc(tmp_path, "zk1", services.zookeeper_connect, g, topic)
    stop = threading.Event()
    kc = KafkaConsumer(topic, bootstrap_servers=services.bootstrap_servers, group_id=g, max_poll_interval_ms=3000,
                       session_timeout_ms=6000, heartbeat_interval_ms=1000, enable_auto_commit=False)
    poller = threading.Thread(target=lambda: [kc.poll(200) for _ in iter(stop.is_set, True)], daemon=True)
    zc2 = None
    try:
        wait_until(lambda: len(zc.seen()) >= 10, 30, "ZooKeeper member consuming")
        poller.start()
        wait_until(lambda: zkmigrate_json(services, "status", "--group", g)[1]["broker_group"]["state"] == "Stable",
                   30, "broker-side group Stable")
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", expect=1)
        assert any(p.startswith("split brain") for p in rep["problems"]), rep["problems"]
        zc2 = ConsumerProc(tmp_path, "zk2", services.zookeeper_connect, g, topic)
        assert zc2.proc.wait(30) == 1
        err = zc2.stderr()
        assert "broker-coordinated group" in err and g in err and "split brain" in err
        assert len(zk.get_children(paths.group_ids_path(g))) == 1  # the refused one never registered
        assert zc.alive()
    finally:
        stop.set()
        if poller.is_alive():
            poller.join(10)
        kc.close()
        zc.stop()
        zc.kill()
        if zc2 is not None:
            zc2.kill()


class _RegistersOnFirstWrite:
    """A kazoo client whose first write (delete or multi-op) is preceded by another session registering a member
    of the group: the worst moment for ``groups.delete``."""

    def __init__(self, zk, other, registration_path):
        self._zk, self._other, self._path, self.fired = zk, other, registration_path, False

    def _fire(self):
        if not self.fired:
            self.fired = True
            self._other.create(self._path, b'{"version":1,"subscription":{"t":1},"pattern":"static",'
                                           b'"timestamp":"1"}', ephemeral=True, makepath=True)

    def delete(self, *a, **kw):
        self._fire()
        return self._zk.delete(*a, **kw)

    def transaction(self):
        self._fire()
        return self._zk.transaction()

    def __getattr__(self, name):
        return getattr(self._zk, name)


def test_delete_never_removes_a_member_that_registers_meanwhile(services, zk, unique):
    from zkconsumer.tools import groups
    from zkconsumer.zookeeper import client as zkmod
    from zkconsumer.errors import GroupConflictError
    g = unique("delrace")
    for p in range(3):
        zk.create(paths.partition_offset_path(g, "t", p), b"42", makepath=True)
    zk.ensure_path(paths.group_ids_path(g))
    other = zkmod.connect(services.zookeeper_connect)
    try:
        reg = paths.consumer_registration_path(g, "late-member")
        proxy = _RegistersOnFirstWrite(zk, other, reg)
        with pytest.raises(GroupConflictError, match="registered"):
            groups.delete(proxy, g, execute=True)
        assert proxy.fired
        assert other.exists(reg) is not None, "the live registration was deleted"
        assert zk.exists(paths.group_path(g)) is not None
        other.delete(reg)
        assert groups.delete(zk, g, execute=True)["deleted"] is True  # without a member it goes through
        assert zk.exists(paths.group_path(g)) is None
    finally:
        zkmod.close(other)
