"""The split-brain guard (a ZooKeeper member must not join while a broker-coordinated group of the same id is
active): it fails closed when the broker cannot be asked (split.brain.check=refuse, the default; warn joins), and it
runs again before every re-registration after a session expiry, not only at start."""
import socket
import time

import pytest

from tests.support.consumer_helpers import BrokerMember, connector, expire_session
from tests.support.waiting import wait_until
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.consumer import ZookeeperConsumerConnector
from zkconsumer.errors import SplitBrainUnknownError
from zkconsumer.core.layout import paths


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "127.0.0.1:%d" % port


def _conn(services, group, bootstrap, **props):
    merged = {"group.id": group, "zookeeper.connect": services.zookeeper_connect, "rebalance.backoff.ms": "200",
              "split.brain.check.timeout.ms": "1500"}
    merged.update(props)
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties(merged), bootstrap_servers=bootstrap)


def test_unreachable_broker_is_unknown_and_refused(services, zk, unique):
    t = services.create_topic(unique("sbu"), 1)
    g = unique("sbu-g")
    conn = _conn(services, g, _closed_port())
    try:
        t0 = time.monotonic()
        with pytest.raises(SplitBrainUnknownError) as info:
            conn.create_message_streams({t: 1})
        msg = str(info.value)
        assert g in msg and "split.brain.check=warn" in msg and "cannot tell" in msg
        assert time.monotonic() - t0 < 30
        assert not zk.exists(paths.group_ids_path(g)) or not zk.get_children(paths.group_ids_path(g))
    finally:
        conn.shutdown()
    # short Kafka timeouts: the storage check and the fetcher give up on the closed port in seconds, not 10-30 s
    conn = _conn(services, g, _closed_port(), **{"split.brain.check": "warn", "socket.timeout.ms": "2000",
                                                 "offsets.channel.socket.timeout.ms": "1000"})
    try:
        conn.create_message_streams({t: 1})  # joins (and would fetch once the broker answers)
        assert zk.get_children(paths.group_ids_path(g)) == [conn.consumer_id]
    finally:
        conn.shutdown()


def test_guard_runs_again_before_re_registration(services, zk, unique, conns):
    t = services.create_topic(unique("sbr"), 2)
    g = unique("sbr-g")
    a = connector(services, g, **{"split.brain.check.timeout.ms": "3000"})
    conns.append(a)
    a.create_message_streams({t: 1})
    wait_until(lambda: len(a.owned_partitions()) == 2, 20, message="a owns everything")
    kc = BrokerMember(services.bootstrap_servers, g, t)
    try:
        from zkconsumer.kafka.broker_group import describe_broker_group
        wait_until(lambda: describe_broker_group(services.bootstrap_servers, g).active, 30,
                   message="the broker-side group to be active")
        expire_session(services, a.zk)
        time.sleep(4.0)  # several re-registration attempts
        assert not zk.exists(paths.consumer_registration_path(g, a.consumer_id)), \
            "re-registered while the broker-coordinated group is active"
        assert a.owned_partitions() == set() or not a.owned_partitions()
    finally:
        kc.close()  # leaves the broker-side group: it becomes Empty
    wait_until(lambda: zk.exists(paths.consumer_registration_path(g, a.consumer_id)), 40,
               message="a to re-register once the broker-side group is gone")
    wait_until(lambda: len(a.owned_partitions()) == 2, 30, message="a to own everything again")


def test_cutover_fences_zookeeper_members_until_a_rollback(services, zk, unique, conns, tmp_path):
    from tests.support.migrate_support import zkmigrate_json
    from zkconsumer.errors import GroupConflictError
    t = services.create_topic(unique("cf"), 2)
    services.produce(t, 6)
    g = unique("cf-g")
    a = connector(services, g)
    a.create_message_streams({t: 1})
    wait_until(lambda: len(a.owned_partitions()) == 2, 20, message="a owns everything")
    a.commit_offsets()
    a.shutdown()
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                  expect=0)
    assert out["ready"] and out["recorded_phase"]["phase"] == "cutover"
    b = connector(services, g)
    conns.append(b)
    with pytest.raises(GroupConflictError) as info:
        b.create_message_streams({t: 1})
    assert "cut over" in str(info.value) and "cutover.fence=ignore" in str(info.value)
    assert not zk.exists(paths.group_ids_path(g)) or not zk.get_children(paths.group_ids_path(g))
    # cutover.fence=ignore skips the member's own check, but /consumers/G/ids has no create right any more (the
    # fence ZooKeeper enforces, for JVM members too): the member's start fails, naming the way out
    from zkconsumer.errors import RegistrationConflictError
    c = connector(services, g, **{"cutover.fence": "ignore"})
    conns.append(c)
    with pytest.raises(RegistrationConflictError) as info:
        c.create_message_streams({t: 1})
    assert "no CREATE right" in str(info.value) and "zkmigrate rollback --execute" in str(info.value)
    code, out, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                  expect=0)
    assert out["recorded_phase"]["phase"] == "rollback"
    d = connector(services, g)
    conns.append(d)
    d.create_message_streams({t: 1})
    wait_until(lambda: len(d.owned_partitions()) == 2, 20, message="a ZooKeeper member joins after the rollback")


def test_cutover_stops_on_split_brain_while_members_leave(services, unique, conns, tmp_path):
    from tests.support.migrate_support import zkmigrate_json
    t = services.create_topic(unique("cs"), 2)
    g = unique("cs-g")
    a = connector(services, g)
    conns.append(a)
    a.create_message_streams({t: 1})
    wait_until(lambda: len(a.owned_partitions()) == 2, 20, message="a owns everything")
    kc = BrokerMember(services.bootstrap_servers, g, t)
    try:
        t0 = time.monotonic()
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--timeout", "120",
                                      "--backup-dir", str(tmp_path), expect=1)
        assert not out["ready"] and out["reason"].startswith("split brain"), out
        assert time.monotonic() - t0 < 60, "cutover waited out its timeout instead of stopping at the split brain"
    finally:
        kc.close()
