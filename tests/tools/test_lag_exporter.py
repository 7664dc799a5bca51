"""``zkconsumer exporter``: committed-offset lag per group/topic/partition under kafka-lag-exporter's names, read
from the store the group's phase says it uses, so the lag stays right through a migration (ZooKeeper offsets freeze
in the Kafka phase); kept by watches (a scrape reads nothing from ZooKeeper); lag of a group whose member died by
kill -9 at the default settings keeps being exported. Real ZooKeeper + Apache Kafka."""
import re
import subprocess
import sys
import urllib.request

from tests.support.consumer_helpers import (BrokerMember, CliConsumer, connector, deliver_from_the_log_end,
                                            kafka_commit, produce_tracked)
from tests.support.waiting import wait_until
from zkconsumer.tools.lag_exporter import LagCache, LagCollector
from zkconsumer.metrics.member import new_registry
from zkconsumer.metrics.server import MetricsServer
from zkconsumer_migrate import state


def _series(url):
    out = {}
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        m = re.match(r"^([a-z_]+)\{(.*)\} ([0-9.eE+-]+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def _lag(url, group, topic=None):
    return {int(lab["partition"]): v for lab, v in _series(url).get("kafka_consumergroup_group_lag", [])
            if lab["group"] == group and (topic is None or lab["topic"] == topic)}


def _kafka_commit(services, group, offsets):
    kafka_commit(services.bootstrap_servers, group, offsets)


def test_lag_follows_the_phase_through_a_migration_and_scrapes_read_no_zookeeper(services, unique, zk):
    g, t = unique("exp"), services.create_topic(unique("exp"), 2)
    produce_tracked(services.bootstrap_servers, t, 20, partitions=2)
    for p in (0, 1):
        zk.create("/consumers/%s/offsets/%s/%d" % (g, t, p), b"4", makepath=True)
    cache = LagCache(zk, lambda name: name == g, services.bootstrap_servers, interval_s=0.5).start()
    server = MetricsServer(_registry(cache), 0)
    try:
        wait_until(lambda: _lag(server.url, g) == {0: 6, 1: 6}, 30, message="lag from ZooKeeper (no phase, "
                   "no member: the greater of both stores, Kafka has none)")
        store = [lab["store"] for lab, _ in _series(server.url)["zkconsumer_group_offsets_store"] if lab["group"] == g]
        assert store == ["dual"]
        # a commit in ZooKeeper is seen through its watch
        reads = cache.zk_reads
        zk.set("/consumers/%s/offsets/%s/0" % (g, t), b"9")
        wait_until(lambda: _lag(server.url, g)[0] == 1, 30, message="the new ZooKeeper offset")
        assert cache.zk_reads - reads <= 2  # that node only (and its watch), not the group
        reads = cache.zk_reads
        for _ in range(10):
            _series(server.url)
        assert cache.zk_reads == reads, "a scrape reads nothing from ZooKeeper"
        # the Kafka phase: members commit to Kafka only, ZooKeeper's offsets freeze
        state.record_phase(zk, g, "kafka", "test")
        _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
        wait_until(lambda: _lag(server.url, g) == {0: 0, 1: 0}, 30, message="lag from Kafka in the Kafka phase")
        assert [lab["phase"] for lab, _ in _series(server.url)["zkconsumer_group_phase"] if lab["group"] == g] == \
            ["kafka"]
        # dual: the greater of the two, per partition
        state.record_phase(zk, g, "dual", "test", "zookeeper")
        zk.set("/consumers/%s/offsets/%s/1" % (g, t), b"10")
        _kafka_commit(services, g, {(t, 0): 7, (t, 1): 8})
        wait_until(lambda: _lag(server.url, g) == {0: 1, 1: 0}, 30, message="max(ZooKeeper, Kafka) while dual")
        s = _series(server.url)
        assert [v for lab, v in s["kafka_partition_latest_offset"] if lab["topic"] == t] == [10.0, 10.0]
        assert "zkconsumer_exporter_last_refresh_timestamp_seconds" in \
            urllib.request.urlopen(server.url, timeout=10).read().decode()
        assert [v for lab, v in s["kafka_consumergroup_group_sum_lag"] if lab["group"] == g] == [1.0]
    finally:
        server.close()
        cache.close()


def test_offsets_of_a_deleted_topic_do_not_stop_the_other_groups_lag(services, unique, zk):
    """Legacy groups keep /consumers/G/offsets/T of topics deleted long ago: such a partition has no log to ask
    the brokers about, and the refresh (one ListOffsets for every group) goes on without it."""
    g, t = unique("expg"), services.create_topic(unique("expg"), 1)
    old = unique("expg")
    produce_tracked(services.bootstrap_servers, t, 5, partitions=1)
    zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"2", makepath=True)
    zk.create("/consumers/%s/offsets/%s/0" % (old, "deleted-" + t), b"7", makepath=True)
    cache = LagCache(zk, lambda name: name in (g, old), services.bootstrap_servers, interval_s=0.5).start()
    server = MetricsServer(_registry(cache), 0)
    try:
        wait_until(lambda: _lag(server.url, g) == {0: 3}, 30, message="the lag of the group whose topic exists")
        assert cache.last_refresh_error is None, cache.last_refresh_error
        assert _lag(server.url, old) == {}  # no log: no lag to tell
    finally:
        server.close()
        cache.close()


def test_unowned_partitions_are_of_the_subscribed_topics_only(services, unique, zk, conns):
    """Legacy groups keep offsets of topics they no longer read (unsubscribed, or deleted): those partitions are
    nobody's to own, and counting them made the critical ZkConsumerGroupWithoutOwners alert fire for ever on a
    healthy group. A live member (static, then a whitelist one) owning its topics: 0; a registered member whose
    topic nobody owns: that topic's partitions."""
    import json as _json
    from zkconsumer.consumer import Whitelist
    g, gw, gf = unique("expown"), unique("expownw"), unique("expownf")
    t = services.create_topic(unique("expown"), 2)
    old = services.create_topic(unique("expown-old"), 3)
    base = unique("expownw")
    w1, w2 = services.create_topic(base + "-a", 2), services.create_topic(base + "-b", 1)
    for topic, p in ((old, 0), (old, 1), ("deleted-" + t, 0)):
        zk.create("/consumers/%s/offsets/%s/%d" % (g, topic, p), b"0", makepath=True)
        zk.create("/consumers/%s/offsets/%s/%d" % (gw, topic, p), b"0", makepath=True)
    member = connector(services, g)
    conns.append(member)
    member.create_message_streams({t: 1})
    wild = connector(services, gw)
    conns.append(wild)
    wild.create_message_streams_by_filter(Whitelist(re.escape(base) + "-[ab]"), 1)
    wait_until(lambda: len(zk.get_children("/consumers/%s/owners/%s" % (g, t))) == 2, 30, message="owners")
    wait_until(lambda: zk.exists("/consumers/%s/owners/%s" % (gw, w2)) and
               len(zk.get_children("/consumers/%s/owners/%s" % (gw, w1))) == 2 and
               len(zk.get_children("/consumers/%s/owners/%s" % (gw, w2))) == 1, 30, message="wildcard owners")
    # a member registered for a topic nobody claims (as a member that never gets to its claim)
    zk.create("/consumers/%s/ids/%s_fake" % (gf, gf), _json.dumps(
        {"version": 1, "subscription": {old: 1}, "pattern": "static", "timestamp": "1"}).encode(),
        ephemeral=True, makepath=True)
    cache = LagCache(zk, lambda name: name in (g, gw, gf), services.bootstrap_servers, interval_s=0.5).start()
    server = MetricsServer(_registry(cache), 0)
    try:
        def gauge(name):
            return {lab["group"]: v for lab, v in _series(server.url).get(name, []) if lab["group"] in (g, gw, gf)}
        wait_until(lambda: gauge("zkconsumer_group_members") == {g: 1.0, gw: 1.0, gf: 1.0}, 30, message="members")
        wait_until(lambda: gauge("zkconsumer_group_unowned_partitions") == {g: 0.0, gw: 0.0, gf: 3.0}, 30,
                   message="unowned partitions of the subscribed topics")
        # what the group has offsets or owners for
        wait_until(lambda: gauge("zkconsumer_group_partitions")[g] == 6, 30, message="the group's partitions")
        assert gauge("zkconsumer_group_unowned_partitions") == {g: 0.0, gw: 0.0, gf: 3.0}
    finally:
        server.close()
        cache.close()


def test_expiries_of_many_stopped_kafka_groups_read_each_offsets_partition_once(services, unique, zk, monkeypatch):
    """Stopped groups in the Kafka phase: when their offsets expire comes from their partitions of
    __consumer_offsets. Reading one pass per group made a refresh of 1,000 such groups take minutes (the lag not
    refreshed meanwhile); the groups that share a partition share its read, with one client for all: the same
    figures as each group's own read."""
    import kafka
    from zkconsumer.offsets.expiry import offsets_retention_ms, read_commit_times
    t = services.create_topic(unique("expx"), 1)
    groups = [unique("expx") for _ in range(12)]
    for i, g in enumerate(groups):
        zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"0", makepath=True)
        state.record_phase(zk, g, "kafka", "test")
        _kafka_commit(services, g, {(t, 0): i})
    cache = LagCache(zk, lambda name: name in groups, services.bootstrap_servers, interval_s=3600).start(
        refresh_loop=False)
    clients = []
    real_init = kafka.KafkaConsumer.__init__

    def counting_init(self, *topics, **kw):
        if kw.get("client_id") == "zkconsumer-expiry":
            clients.append(kw)
        real_init(self, *topics, **kw)
    try:
        assert cache.wait_idle(60)
        monkeypatch.setattr(kafka.KafkaConsumer, "__init__", counting_init)
        cache.refresh()
        monkeypatch.undo()
        assert cache.last_refresh_error is None, cache.last_refresh_error
        assert len(clients) == 1, "one client reads the partitions of every group (%d)" % len(clients)
        retention = offsets_retention_ms(services.bootstrap_servers)
        with cache.lock:
            got = {g: cache.groups[g].expires_ms for g in groups}
        assert got == {g: min(read_commit_times(services.bootstrap_servers, g).values()) + retention
                       for g in groups}
    finally:
        cache.close()


def test_a_failed_kafka_refresh_leaves_the_last_success_time(services, unique, zk):
    """While Kafka cannot be read the lag is computed from old log ends (and shrinks as members commit): the time
    of the last successful refresh is on the page, for ZkConsumerExporterStale, and a failed refresh does not move
    it."""
    from prometheus_client import generate_latest
    g, t = unique("expst"), services.create_topic(unique("expst"), 1)
    zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"0", makepath=True)
    now = [1700000000.0]
    cache = LagCache(zk, lambda name: name == g, services.bootstrap_servers, interval_s=3600,
                     wall_clock=lambda: now[0]).start(refresh_loop=False)
    assert cache.wait_idle(30)
    registry = _registry(cache)
    assert b"zkconsumer_exporter_last_refresh_timestamp_seconds" not in generate_latest(registry)  # none yet
    cache.refresh()
    assert cache.last_refresh_error is None, cache.last_refresh_error
    assert b"zkconsumer_exporter_last_refresh_timestamp_seconds 1.7e+09" in generate_latest(registry)
    now[0] += 600
    cache._kafka[0].close()  # its next ListOffsets fails
    cache.refresh()
    assert cache.last_refresh_error and cache.last_refresh_ok == 1700000000.0
    cache.close()


def _registry(cache, name="test"):
    registry = new_registry("--port", "0")
    registry.register(LagCollector(cache, name))
    return registry


def test_exporter_cli_keeps_exporting_lag_after_kill_9_at_default_settings(services, unique, tmp_path):
    """A member at the default settings (auto.offset.reset=largest, auto.commit.interval.ms=60000) stops with
    SIGTERM (committing), a second one is killed with kill -9 (no commit): the exporter's lag grows with what is
    produced afterwards, and the group's members count drops to 0."""
    g, t = unique("expk"), services.create_topic(unique("expk"), 1)
    base = [sys.executable, "-m", "zkconsumer"]
    member = CliConsumer(services, g, [t], defaults=True)
    exporter = subprocess.Popen(base + ["exporter", "--zookeeper", services.zookeeper_connect, "--group", g,
                                        "--port", "0", "--interval", "1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        deliver_from_the_log_end(member, services.bootstrap_servers, t, 1, 5)
        assert member.terminate(60) == 0  # committed them at its graceful stop
        second = subprocess.Popen(base + ["consume", "--zookeeper", services.zookeeper_connect, "--group", g,
                                          "--topic", t], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        url = None
        while url is None:
            line = exporter.stderr.readline()
            assert line, "the exporter exited"
            m = re.search(r"serving group lag at (http://\S+)", line)
            url = m.group(1) if m else None
        wait_until(lambda: [v for lab, v in _series(url).get("zkconsumer_group_members", [])
                            if lab["group"] == g] == [1.0], 30, message="the second member seen")
        produce_tracked(services.bootstrap_servers, t, 7, partitions=1)
        assert all(second.stdout.readline() for _ in range(7))  # delivered, not committed (60 s interval)
        second.kill()
        second.wait(10)
        produce_tracked(services.bootstrap_servers, t, 3, partitions=1)
        wait_until(lambda: _lag(url, g) == {0: 10}, 60, message="lag = 7 delivered but uncommitted + 3 new")
        wait_until(lambda: [v for lab, v in _series(url)["zkconsumer_group_members"] if lab["group"] == g] == [0.0],
                   30, message="the killed member's registration gone with its session")
    finally:
        member.kill()
        for p in (second, exporter):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)


def test_exporter_once_json_and_bad_input(services, unique, zk):
    g, t = unique("exp1"), services.create_topic(unique("exp1"), 1)
    zk.create("/consumers/%s/offsets/%s/0" % (g, t), b"0", makepath=True)
    base = [sys.executable, "-m", "zkconsumer", "exporter", "--zookeeper", services.zookeeper_connect]
    r = subprocess.run(base + ["--groups-matching", re.escape(g), "--once", "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import json
    out = json.loads(r.stdout)
    assert out["groups"][g]["zookeeper_offsets"] == {"%s:0" % t: 0} and out["groups"][g]["store"] == "dual"
    r = subprocess.run(base + ["--group", g, "--all-groups", "--once"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "give one of" in r.stderr
    r = subprocess.run(base + ["--groups-matching", "(", "--once"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--groups-matching" in r.stderr
    r = subprocess.run(base + ["--all-groups", "--zookeeper-set-acl"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "No such option" in r.stderr  # read-only: nothing to set ACLs on


def test_split_brain_is_exported_and_a_rebalancing_broker_group_fails_no_refresh(services, unique, zk, conns):
    """A live ZooKeeper member and a broker-coordinated consumer of the same group id: the group's split-brain
    gauge reads 1, and the Kafka refresh (which lists the broker's groups in every active state, CompletingRebalance
    included) keeps succeeding."""
    g, t = unique("expsb"), services.create_topic(unique("expsb"), 2)
    produce_tracked(services.bootstrap_servers, t, 10, partitions=2)
    conn = connector(services, g)
    conns.append(conn)
    conn.create_message_streams({t: 1})
    wait_until(lambda: len(zk.get_children("/consumers/%s/owners/%s" % (g, t))) == 2, 30, message="owners")
    broker_member = BrokerMember(services.bootstrap_servers, g, t)
    cache = LagCache(zk, lambda name: name == g, services.bootstrap_servers, interval_s=0.5).start()
    server = MetricsServer(_registry(cache), 0)
    try:
        def split():
            return [v for lab, v in _series(server.url).get("zkconsumer_group_split_brain", []) if lab["group"] == g]
        wait_until(lambda: split() == [1.0], 60, message="the split-brain gauge (last refresh error: %s)"
                   % cache.last_refresh_error)
        assert cache.last_refresh_error is None, cache.last_refresh_error
    finally:
        server.close()
        cache.close()
        broker_member.close()
