"""Tests for zkconsumer.core.config.ConsumerConfig (Kafka's ConsumerConfig.scala)."""

import dataclasses
import logging

import pytest

from tests.support import ROOT
from zkconsumer.core.config import (EXTENSION_KEYS, KNOWN_KEYS, ConsumerConfig, describe_keys,
                               parse_zookeeper_connect)
from zkconsumer.errors import ConfigError

BASE = {"group.id": "grp", "zookeeper.connect": "zk1:2181"}


def cfg(**extra):
    props = dict(BASE)
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return ConsumerConfig.from_properties(props)


def make(overrides):
    return ConsumerConfig.from_properties(BASE, overrides)


# Kafka 0.8.2.2 ConsumerConfig's defaults (fetch.max.bytes from 0.10.1).
REFERENCE_DEFAULTS = {
    "consumer_id": None,
    "legacy_consumer_version": "1.1",
    "fetch_engine": "kafka-python",
    "split_brain_check": "refuse",
    "rebalance_leave_grace_ms": 0,
    "dual_commit_kafka_outage_ms": 60000,
    "offsets_storage_switch_check": "refuse",
    "split_brain_check_timeout_ms": 30000,
    "cutover_fence": "refuse",
    "security_protocol": "PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_jaas_config": None,
    "sasl_credentials_file": None,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_password_file": None,
    "ssl_endpoint_identification_algorithm": "https",
    "ssl_truststore_location": None, "ssl_truststore_type": "JKS", "ssl_truststore_password": None,
    "ssl_keystore_location": None, "ssl_keystore_type": "JKS", "ssl_keystore_password": None,
    "ssl_key_password": None,
    "zookeeper_session_timeout_ms": 6000,
    "zookeeper_connection_timeout_ms": 6000,
    "zookeeper_sync_time_ms": 2000,
    "socket_timeout_ms": 30 * 1000,
    "socket_receive_buffer_bytes": 64 * 1024,
    "fetch_message_max_bytes": 1024 * 1024,
    "num_consumer_fetchers": 1,
    "auto_commit_enable": True,
    "auto_commit_interval_ms": 60 * 1000,
    "queued_max_message_chunks": 2,
    "rebalance_max_retries": 4,
    "rebalance_backoff_ms": 2000,
    "refresh_leader_backoff_ms": 200,
    "fetch_min_bytes": 1,
    "fetch_wait_max_ms": 100,
    "auto_offset_reset": "largest",
    "consumer_timeout_ms": -1,
    "client_id": "grp",
    "exclude_internal_topics": True,
    "partition_assignment_strategy": "range",
    "offsets_storage": "zookeeper",
    "offsets_channel_backoff_ms": 1000,
    "offsets_channel_socket_timeout_ms": 10000,
    "offsets_commit_max_retries": 5,
    "dual_commit_enabled": False,
    "fetch_max_bytes": 50 * 1024 * 1024,
    # extensions
    "fetch_idle_wait_ms": 1000,
    "rebalance_settle_ms": 20,
    "rebalance_slow_retry_ms": 10000,
    "zookeeper_suspended_grace_ms": 1000,
    "zookeeper_auth_scheme": "none",
    "zookeeper_sasl_mechanism": "DIGEST-MD5",
    "zookeeper_set_acl": False,
}


def test_every_default():
    c = ConsumerConfig.from_properties(BASE)
    for attr, expected in REFERENCE_DEFAULTS.items():
        assert getattr(c, attr) == expected, attr
        assert type(getattr(c, attr)) is type(expected), attr
    assert c.group_id == "grp"
    assert c.zookeeper_connect == "zk1:2181"
    assert c.zookeeper_hosts == (("zk1", 2181),)
    assert c.zookeeper_chroot is None


def test_every_reference_key_is_known():
    reference_keys = {"group.id", "consumer.id", "zookeeper.connect", "zookeeper.auth.credentials.file"} | {
        a.replace("_", ".") for a in REFERENCE_DEFAULTS}
    assert set(KNOWN_KEYS) == reference_keys
    assert set(EXTENSION_KEYS) == {"fetch.idle.wait.ms", "rebalance.settle.ms", "rebalance.slow.retry.ms",
                                   "zookeeper.suspended.grace.ms", "legacy.consumer.version", "split.brain.check",
                                   "split.brain.check.timeout.ms", "cutover.fence", "rebalance.leave.grace.ms",
                                   "dual.commit.kafka.outage.ms", "offsets.storage.switch.check", "fetch.engine",
                                   "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.credentials.file",
                                   "ssl.cafile", "ssl.certfile", "ssl.keyfile", "ssl.password.file",
                                   "ssl.endpoint.identification.algorithm", "ssl.truststore.location",
                                   "ssl.truststore.type", "ssl.truststore.password", "ssl.keystore.location",
                                   "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
                                   "zookeeper.auth.scheme", "zookeeper.auth.credentials.file",
                                   "zookeeper.sasl.mechanism", "zookeeper.set.acl"}


def test_immutable():
    c = ConsumerConfig.from_properties(BASE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.group_id = "x"
    with pytest.raises(TypeError):
        c.raw["group.id"] = "x"
    assert hash(c) == hash(ConsumerConfig.from_properties(dict(BASE)))


def test_quirk_connection_timeout_follows_session_timeout():
    c = cfg(zookeeper_session_timeout_ms="9000")
    assert c.zookeeper_connection_timeout_ms == 9000
    c = cfg(zookeeper_session_timeout_ms="9000", zookeeper_connection_timeout_ms="1234")
    assert c.zookeeper_connection_timeout_ms == 1234


def test_quirk_rebalance_backoff_follows_sync_time():
    assert cfg(zookeeper_sync_time_ms="777").rebalance_backoff_ms == 777
    assert cfg(zookeeper_sync_time_ms="777", rebalance_backoff_ms="5").rebalance_backoff_ms == 5


def test_quirk_client_id_follows_group_id():
    assert cfg().client_id == "grp"
    assert cfg(client_id="me").client_id == "me"


@pytest.mark.parametrize("storage,expected_storage,dual", [
    ("zookeeper", "zookeeper", False), ("kafka", "kafka", True), ("KAFKA", "kafka", True),
    (" Kafka ", "kafka", True), ("ZooKeeper", "zookeeper", False),
])
def test_quirk_dual_commit_default(storage, expected_storage, dual):
    c = make({"offsets.storage": storage})
    assert c.offsets_storage == expected_storage
    assert c.dual_commit_enabled is dual
    assert make({"offsets.storage": storage, "dual.commit.enabled": "false"}).dual_commit_enabled is False
    assert make({"offsets.storage": storage, "dual.commit.enabled": "TRUE"}).dual_commit_enabled is True


def test_int_parsing_java_semantics():
    assert make({"fetch.min.bytes": " 42 "}).fetch_min_bytes == 42
    assert make({"fetch.min.bytes": "+7"}).fetch_min_bytes == 7
    assert make({"fetch.message.max.bytes": "2147483647"}).fetch_message_max_bytes == 2 ** 31 - 1
    for bad in ["2147483648", "1_000", "1.5", "", "0x10", "ten", "\u0661", "9" * 5000]:
        with pytest.raises(ConfigError) as e:
            make({"fetch.message.max.bytes": bad})
        assert "fetch.message.max.bytes" in str(e.value) and repr(bad)[:40] in str(e.value)
        assert e.value.key == "fetch.message.max.bytes" and e.value.value == bad


@pytest.mark.parametrize("key,bad,ok", [
    ("zookeeper.session.timeout.ms", "0", "1"),
    ("zookeeper.connection.timeout.ms", "0", "1"),
    ("socket.timeout.ms", "0", "100"),
    ("socket.receive.buffer.bytes", "-1", "1"),
    ("fetch.message.max.bytes", "0", "1"),
    ("num.consumer.fetchers", "0", "1"),
    ("auto.commit.interval.ms", "0", "1"),
    ("queued.max.message.chunks", "0", "1"),
    ("rebalance.max.retries", "0", "1"),
    ("rebalance.backoff.ms", "-1", "0"),
    ("refresh.leader.backoff.ms", "-1", "0"),
    ("fetch.min.bytes", "-1", "0"),
    ("fetch.wait.max.ms", "-1", "0"),
    ("consumer.timeout.ms", "-2", "-1"),
    ("offsets.channel.backoff.ms", "-5", "0"),
    ("offsets.channel.socket.timeout.ms", "0", "1"),
    ("offsets.commit.max.retries", "-1", "0"),
    ("fetch.max.bytes", "0", "1"),
    ("rebalance.settle.ms", "-1", "0"),
    ("fetch.idle.wait.ms", "-1", "0"),
    ("rebalance.slow.retry.ms", "0", "1"),
    ("zookeeper.suspended.grace.ms", "-1", "0"),
])
def test_int_ranges(key, bad, ok):
    with pytest.raises(ConfigError) as e:
        make({key: bad})
    assert key in str(e.value) and repr(bad) in str(e.value)
    assert make({key: ok}).get(key) == int(ok)


def test_consumer_timeout_zero_allowed():
    assert make({"consumer.timeout.ms": "0"}).consumer_timeout_ms == 0


@pytest.mark.parametrize("key", ["auto.commit.enable", "exclude.internal.topics", "dual.commit.enabled"])
def test_booleans(key):
    assert make({key: "TRUE"}).get(key) is True
    assert make({key: " False "}).get(key) is False
    for bad in ["yes", "1", "", "on"]:
        with pytest.raises(ConfigError, match=key + ".*true or false") as e:
            make({key: bad})
        assert repr(bad) in str(e.value)


@pytest.mark.parametrize("key,good,bad", [
    ("auto.offset.reset", ["smallest", "largest"], ["earliest", "latest", "anything", "SMALLEST"]),
    ("partition.assignment.strategy", ["range", "roundrobin"], ["sticky", "RoundRobin", ""]),
    ("offsets.storage", ["zookeeper", "kafka"], ["redis", ""]),
])
def test_enums(key, good, bad):
    for value in good:
        assert make({key: value}).get(key) == value
    for value in bad:
        with pytest.raises(ConfigError) as e:
            make({key: value})
        msg = str(e.value)
        assert key in msg and repr(value) in msg and " or ".join(good) in msg


@pytest.mark.parametrize("key", ["group.id", "client.id", "consumer.id"])
def test_names(key):
    assert make({key: "a.B_c-9"}).get(key) == "a.B_c-9"
    for bad in ["", "a b", "a/b", "ü", ".", "..", "a:b"]:
        with pytest.raises(ConfigError) as e:
            make({key: bad})
        assert key in str(e.value) and repr(bad) in str(e.value)


def test_group_id_length():
    assert make({"group.id": "g" * 249}).group_id == "g" * 249
    with pytest.raises(ConfigError, match="group.id.*249"):
        make({"group.id": "g" * 250})


def test_required_keys():
    with pytest.raises(ConfigError, match="group.id.*required"):
        ConsumerConfig.from_properties({"zookeeper.connect": "h:1"})
    with pytest.raises(ConfigError, match="zookeeper.connect.*required"):
        ConsumerConfig.from_properties({"group.id": "g"})
    c = ConsumerConfig.from_properties({}, require_group=False, require_zookeeper=False)
    assert c.group_id is None and c.client_id is None and c.zookeeper_connect is None
    assert c.zookeeper_hosts == ()


@pytest.mark.parametrize("connect,hosts,chroot", [
    ("h:2181", (("h", 2181),), None),
    ("a:1,b.example.com:2,10.0.0.1:3", (("a", 1), ("b.example.com", 2), ("10.0.0.1", 3)), None),
    ("a:1, b:2/kafka", (("a", 1), ("b", 2)), "/kafka"),
    ("a:1/kafka/prod", (("a", 1),), "/kafka/prod"),
    ("a:1/", (("a", 1),), None),
    ("[::1]:2181/x", (("::1", 2181),), "/x"),
    ("h", (("h", 2181),), None),  # ZooKeeper's default port, as ConnectStringParser
])
def test_zookeeper_connect_ok(connect, hosts, chroot):
    c = make({"zookeeper.connect": connect})
    assert c.zookeeper_connect == connect
    assert (c.zookeeper_hosts, c.zookeeper_chroot) == (hosts, chroot)
    assert parse_zookeeper_connect(connect) == (hosts, chroot)


@pytest.mark.parametrize("connect", [
    "", "h:", ":2181", "h:0", "h:65536", "h:abc", "h:1,", "h:1,,g:2", "h:1/chroot/",
    "h:1//x", "h:1/a//b", "/chroot", "h:1/a/../b", "h x:1", "::1:2181",
])
def test_zookeeper_connect_bad(connect):
    with pytest.raises(ConfigError) as e:
        make({"zookeeper.connect": connect})
    assert "zookeeper.connect" in str(e.value) and repr(connect) in str(e.value)
    assert "host[:port]" in str(e.value)


def test_the_idle_watch_s_wait():
    """fetch.idle.wait.ms: at most 30000 (a watch lasts at most 30 s), refused with its value; the watch's wait is
    it with fetch.min.bytes=1, never below fetch.wait.max.ms, and fetch.wait.max.ms with fetch.min.bytes > 1."""
    from zkconsumer.consumer.fetcher import idle_wait_ms
    with pytest.raises(ConfigError, match=r"'30001' for fetch.idle.wait.ms: at most 30000") as e:
        make({"fetch.idle.wait.ms": "30001"})
    assert e.value.key == "fetch.idle.wait.ms"
    assert make({"fetch.idle.wait.ms": "30000"}).fetch_idle_wait_ms == 30000
    assert idle_wait_ms(make({})) == 1000
    assert idle_wait_ms(make({"fetch.idle.wait.ms": "100"})) == 100
    assert idle_wait_ms(make({"fetch.idle.wait.ms": "0", "fetch.wait.max.ms": "250"})) == 250
    assert idle_wait_ms(make({"fetch.wait.max.ms": "5000"})) == 5000
    assert idle_wait_ms(make({"fetch.min.bytes": "2"})) == 100


def test_fetch_wait_must_not_exceed_socket_timeout():
    with pytest.raises(ConfigError, match=r"'5000' for fetch.wait.max.ms: at most socket.timeout.ms \(4000\)"):
        make({"fetch.wait.max.ms": "5000", "socket.timeout.ms": "4000"})
    with pytest.raises(ConfigError, match=r"fetch.wait.max.ms.*socket.timeout.ms \(50\)"):
        make({"socket.timeout.ms": "50"})
    assert make({"fetch.wait.max.ms": "4000", "socket.timeout.ms": "4000"}).fetch_wait_max_ms == 4000


def test_suspended_grace_below_session_timeout():
    with pytest.raises(ConfigError, match=r"'6000' for zookeeper.suspended.grace.ms: less than zookeeper.session.timeout.ms"):
        make({"zookeeper.suspended.grace.ms": "6000"})
    assert make({"zookeeper.suspended.grace.ms": "5999"}).zookeeper_suspended_grace_ms == 5999
    # unset: the 1000 default is clamped below a tiny session timeout instead of failing
    assert make({"zookeeper.session.timeout.ms": "800"}).zookeeper_suspended_grace_ms == 400


def test_unknown_keys_warn_once_each(caplog):
    with caplog.at_level(logging.WARNING, logger="zkconsumer.core.config"):
        c = make({"bogus.key": "1", "mirror.topics.whitelist": "x"})
    msgs = [r.getMessage() for r in caplog.records if r.name == "zkconsumer.core.config"]
    assert len(msgs) == 2
    assert any("bogus.key" in m for m in msgs) and any("mirror.topics.whitelist" in m for m in msgs)
    assert c.raw["bogus.key"] == "1"


def test_no_warning_for_known_keys(caplog):
    with caplog.at_level(logging.WARNING, logger="zkconsumer.core.config"):
        make({k: v for k, v in [("rebalance.settle.ms", "5"), ("client.id", "c")]})
    assert not [r for r in caplog.records if r.name == "zkconsumer.core.config"]


def test_overrides_win_and_none_removes():
    c = ConsumerConfig.from_properties(dict(BASE, **{"fetch.min.bytes": "10", "client.id": "x"}),
                                       {"fetch.min.bytes": 20, "client.id": None, "auto.commit.enable": False})
    assert c.fetch_min_bytes == 20
    assert c.client_id == "grp"
    assert c.auto_commit_enable is False


def test_load_from_file_with_overrides(tmp_path):
    p = tmp_path / "consumer.properties"
    p.write_text("# consumer\ngroup.id = file-group\nzookeeper.connect: zk:2181/chroot\n"
                 "auto.offset.reset=smallest\nfetch.min.bytes 5\n")
    c = ConsumerConfig.load(p)
    assert (c.group_id, c.zookeeper_chroot, c.auto_offset_reset, c.fetch_min_bytes) == \
        ("file-group", "/chroot", "smallest", 5)
    c = ConsumerConfig.load(str(p), {"group.id": "cli-group", "fetch.min.bytes": "7"})
    assert (c.group_id, c.client_id, c.fetch_min_bytes) == ("cli-group", "cli-group", 7)
    assert ConsumerConfig.load(None, BASE).group_id == "grp"
    with pytest.raises(ConfigError, match="group.id.*required"):
        ConsumerConfig.load(None, {"zookeeper.connect": "a:1"})


def test_to_properties_roundtrip_and_with_overrides(caplog):
    c = make({"offsets.storage": "KAFKA", "fetch.min.bytes": " 3 ", "auto.commit.enable": "TRUE",
              "x.unknown": "v"})
    props = c.to_properties()
    assert props == {"group.id": "grp", "zookeeper.connect": "zk1:2181", "offsets.storage": "kafka",
                     "fetch.min.bytes": "3", "auto.commit.enable": "true", "x.unknown": "v"}
    assert ConsumerConfig.from_properties(props) == c
    d = c.with_overrides({"fetch.min.bytes": "9"})
    assert d.fetch_min_bytes == 9 and c.fetch_min_bytes == 3
    assert d.offsets_storage == "kafka" and d.dual_commit_enabled is True
    with pytest.raises(ConfigError, match="rebalance.max.retries"):
        c.with_overrides({"rebalance.max.retries": "0"})
    assert ConsumerConfig.from_properties(ConsumerConfig.from_properties(BASE).to_properties()) == \
        ConsumerConfig.from_properties(BASE)


def test_describe_keys():
    rows = describe_keys()
    assert [r[0] for r in rows] == list(KNOWN_KEYS)
    table = {k: (d, doc) for k, d, doc in rows}
    assert table["group.id"][0] == "(required)"
    assert table["zookeeper.connect"][0] == "(required)"
    assert table["zookeeper.connection.timeout.ms"][0] == "= zookeeper.session.timeout.ms"
    assert table["rebalance.backoff.ms"][0] == "= zookeeper.sync.time.ms"
    assert table["client.id"][0] == "= group.id"
    assert table["fetch.message.max.bytes"][0] == "1048576"
    assert table["auto.commit.enable"][0] == "true"
    assert "kafka" in table["dual.commit.enabled"][0]
    for key in EXTENSION_KEYS:
        assert table[key][1].startswith("Extension:")
    assert all(doc for _, _, doc in rows)


def test_the_operators_guide_lists_every_key_as_describe_keys_says():
    import os
    from zkconsumer.core.config import describe_keys
    text = open(os.path.join(ROOT, "docs",
                             "operators.md")).read()
    for key, default, doc in describe_keys():
        doc = doc.replace("<group>_<host>-<millis>-<uuid8>", "`<group>_<host>-<millis>-<uuid8>`")
        assert "| `%s` | %s | %s |" % (key, default, doc) in text, key
