"""Kafka SSL and SASL (PLAIN, SCRAM) for every Kafka client zkconsumer makes, against a real Apache Kafka 3.9 broker
(ZooKeeper mode) with SSL, SASL_PLAINTEXT and SASL_SSL listeners; its keystore is made here with openssl.

One test-owned cluster for the module (~35 s to start). The configuration checks need no cluster."""
import json
import os
import subprocess
import sys
import time

import pytest

from chaos_support import OwnCluster
from test_migrate_support import run_cli
from tls_support import CLIENT_KEY_PASSWORD, make_pki
from zkconsumer import zk as zkmod
from zkconsumer.config import ConsumerConfig
from zkconsumer.errors import ConfigError, KafkaSecurityError, OffsetManagerUnavailableError
from zkconsumer.kafka_security import KafkaSecurity, parse_jaas_config
from zkconsumer.layout import codecs
from zkconsumer.local.security import BrokerSecurity

PLAIN_USER, PLAIN_PW = "alice", "alice-Pl4in-pw"
SCRAM_USER, SCRAM_PW = "bob", "bob-Scr4m-pw"
WRONG_PW = "wr0ng-Secret-xyz"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def jaas(module, user, password):
    return '%s required username="%s" password="%s";' % (module, user, password)


# -- configuration (no cluster) -----------------------------------------------------------------------------------
def test_security_keys_validate_and_never_show_the_password(tmp_path):
    base = {"group.id": "g", "zookeeper.connect": "zk:2181"}
    c = ConsumerConfig.from_properties(dict(base, **{
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": jaas(SCRAM, "bob", 'p\\"w\\\\' + SCRAM_PW),  # JAAS-escaped: p"w\<password>
        "ssl.endpoint.identification.algorithm": ""}))
    assert c.security_protocol == "SASL_SSL" and c.kafka_security.username == "bob"
    kw = c.kafka_security.client_kwargs()
    assert kw["sasl_plain_password"] == 'p"w\\' + SCRAM_PW  # JAAS quoting undone
    assert kw["security_protocol"] == "SASL_SSL" and kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kw["ssl_check_hostname"] is False
    for text in (repr(c), repr(c.kafka_security), c.kafka_security.describe()):
        assert SCRAM_PW not in text
    assert ConsumerConfig.from_properties(base).kafka_security.client_kwargs() == {"security_protocol": "PLAINTEXT"}

    creds = tmp_path / "creds.properties"
    creds.write_text("username=alice\npassword=%s\n" % PLAIN_PW)
    c2 = ConsumerConfig.from_properties(dict(base, **{"security.protocol": "SASL_PLAINTEXT",
                                                      "sasl.credentials.file": str(creds)}))
    assert (c2.sasl_mechanism, c2.kafka_security.username, c2.kafka_security.password) == ("PLAIN", "alice", PLAIN_PW)

    bad = [
        ({"security.protocol": "TLS"}, "security.protocol", "PLAINTEXT or SSL or SASL_PLAINTEXT or SASL_SSL"),
        ({"security.protocol": "SASL_SSL"}, "sasl.jaas.config", "neither is set"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas(SCRAM, "b", "x")},
         "sasl.mechanism", "not supported"),
        ({"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas(SCRAM, "b", SCRAM_PW)},  # mechanism PLAIN
         "sasl.jaas.config", "PlainLoginModule entry for sasl.mechanism=PLAIN"),
        ({"security.protocol": "SASL_SSL", "sasl.jaas.config": PLAIN + ' required username="a" password="%s"'
          % SCRAM_PW}, "sasl.jaas.config", "one ';' at the end"),
        ({"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas(PLAIN, "a", SCRAM_PW),
          "sasl.credentials.file": str(creds)}, "sasl.credentials.file", "both are set"),
        ({"sasl.jaas.config": jaas(PLAIN, "a", SCRAM_PW)}, "sasl.jaas.config", "security.protocol is PLAINTEXT"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas(PLAIN, "a", SCRAM_PW),
          "ssl.cafile": "/x"}, "ssl.cafile", "unset unless security.protocol is SSL"),
        ({"security.protocol": "SSL", "ssl.cafile": str(tmp_path / "missing.pem")}, "ssl.cafile", "readable file"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
         "ssl.endpoint.identification.algorithm", "https"),
        ({"security.protocol": "SSL", "ssl.keyfile": str(creds)}, "ssl.keyfile", "together with ssl.certfile"),
    ]
    for props, key, says in bad:
        with pytest.raises(ConfigError) as e:
            ConsumerConfig.from_properties(dict(base, **props))
        assert e.value.key == key and says in str(e.value), (props, str(e.value))
        assert SCRAM_PW not in str(e.value)
    assert parse_jaas_config("%s required username=bob password='x';" % SCRAM) == (SCRAM, {"username": "bob",
                                                                                          "password": "'x'"})


def test_brokers_are_found_by_the_endpoint_of_the_security_protocol():
    reg = codecs.decode_broker_registration(json.dumps({
        "version": 5, "host": "h", "port": 9092, "endpoints": [
            "PLAINTEXT://h:9092", "EXTERNAL://ext:9094", "SASL_SSL://h:9095", "INTERNAL_TLS://h:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "SASL_SSL", "SASL_SSL": "SASL_SSL",
                                           "INTERNAL_TLS": "SSL"}, "jmx_port": -1}).encode(), "/brokers/ids/1")
    assert reg.endpoint_for("PLAINTEXT") == ("h", 9092)
    assert reg.endpoint_for("SASL_SSL") == ("h", 9095)  # the listener named like the protocol first
    assert reg.endpoint_for("SSL") == ("h", 9093)
    assert reg.endpoint_for("SASL_PLAINTEXT") is None


def test_the_consume_cli_refuses_a_password_on_the_command_line():
    from zkconsumer.cli.main import cli
    code, out, err = run_cli(cli, ["consume", "--zookeeper", "127.0.0.1:1", "--group", "g", "--topic", "t",
                                    "--property", "sasl.jaas.config=" + jaas(PLAIN, "a", PLAIN_PW)])
    assert code == 2 and "sasl.jaas.config holds a password" in err + out
    assert PLAIN_PW not in err + out


# -- against the secured broker ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    d = tmp_path_factory.mktemp("kafkasec")
    pki = make_pki(d)
    cluster = OwnCluster(str(d / "cluster"), security=BrokerSecurity(
        keystore=pki.keystore, keystore_password=pki.keystore_password, truststore=pki.truststore,
        truststore_password=pki.keystore_password, client_auth="required",  # the SSL listener wants a client cert
        plain_users={PLAIN_USER: PLAIN_PW}, scram_users={SCRAM_USER: SCRAM_PW}))
    cluster.pki = pki
    cluster.listeners = cluster.info["listeners"]
    cluster.dir = d
    try:
        yield cluster
    finally:
        cluster.down()


def client_props(secure, protocol, mechanism="PLAIN", password=None, ca=None, client_cert=True):
    props = {"security.protocol": protocol}
    if protocol.startswith("SASL_"):
        user = PLAIN_USER if mechanism == "PLAIN" else SCRAM_USER
        pw = password or (PLAIN_PW if mechanism == "PLAIN" else SCRAM_PW)
        props.update({"sasl.mechanism": mechanism, "sasl.jaas.config": jaas(PLAIN if mechanism == "PLAIN" else SCRAM,
                                                                            user, pw)})
    if protocol.endswith("SSL"):
        props["ssl.cafile"] = ca or secure.pki.ca
    if protocol == "SSL" and client_cert:  # mutual TLS: an encrypted client key and its password file
        pw = secure.dir / "client-key-password"
        pw.write_text(CLIENT_KEY_PASSWORD + "\n")
        props.update({"ssl.certfile": secure.pki.client_cert, "ssl.keyfile": secure.pki.client_key,
                      "ssl.password.file": str(pw)})
    return props


def write_properties(path, props):
    path.write_text("".join("%s=%s\n" % (k, v.replace("\\", "\\\\")) for k, v in props.items()))
    return str(path)


CASES = [("SSL", "PLAIN", "kafka", "kafka-python"), ("SASL_PLAINTEXT", "PLAIN", "dual", "kafka-python"),
         ("SASL_SSL", "SCRAM-SHA-512", "kafka", "kafka-python"), ("SASL_SSL", "SCRAM-SHA-512", "kafka", "librdkafka")]


def _read_all(secure, config, topic, protocol, commit=False):
    """Every record one member of ``config``'s group reads from ``topic`` until ``consumer.timeout.ms`` passes
    without one, as ``(partition, offset, value)``; its offsets committed at the end when ``commit``."""
    from zkconsumer.consumer import ZookeeperConsumerConnector
    from zkconsumer.errors import ConsumerTimeoutError
    seen = []
    with ZookeeperConsumerConnector(config) as conn:
        stream = conn.create_message_streams({topic: 1})[topic][0]
        try:
            for msg in stream:
                seen.append((msg.partition, msg.offset, msg.value))
        except ConsumerTimeoutError:
            pass
        # the brokers were found in ZooKeeper by their endpoint of this protocol (the broker registers all four)
        assert conn._bootstrap == secure.listeners[protocol]
        if commit:
            conn.commit_offsets()
    return seen


@pytest.mark.parametrize("protocol,mechanism,storage,engine", CASES,
                         ids=["ssl", "sasl_plaintext-plain", "sasl_ssl-scram512", "sasl_ssl-scram512-librdkafka"])
def test_a_member_consumes_everything_and_commits_over_the_secured_listener(secure, protocol, mechanism, storage,
                                                                           engine, tmp_path):
    from zkconsumer.local import tools
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    topic = group = "sec-%s-%s-%s" % (protocol.lower(), storage, engine)
    secure.create_topic(topic, 2)
    assert tools.produce(secure.bootstrap_servers, topic, 40) == 40
    props = dict(client_props(secure, protocol, mechanism), **{
        "group.id": group, "zookeeper.connect": secure.zookeeper_connect, "auto.offset.reset": "smallest",
        "auto.commit.enable": "false", "consumer.timeout.ms": "3000", "offsets.storage": "kafka",
        "dual.commit.enabled": str(storage == "dual").lower(), "split.brain.check.timeout.ms": "10000",
        "fetch.engine": engine})
    if protocol == "SASL_PLAINTEXT":  # the other way to give credentials: a file of its own
        creds = tmp_path / "kafka-credentials.properties"
        creds.write_text("username=%s\npassword=%s\n" % (PLAIN_USER, PLAIN_PW))
        del props["sasl.jaas.config"]
        props["sasl.credentials.file"] = str(creds)
    config = ConsumerConfig.from_properties(props)
    seen = _read_all(secure, config, topic, protocol, commit=True)
    assert sorted(json.loads(value)["seq"] for _, _, value in seen) == list(range(40))
    store = KafkaOffsetStore(secure.listeners[protocol], group, security=config.kafka_security)
    try:
        offsets = store.fetch([(topic, 0), (topic, 1)])
    finally:
        store.close()
    assert sum(offsets.values()) == 40
    if storage == "dual":
        from zkconsumer.offsets import ZooKeeperOffsetStore
        zk = zkmod.connect(secure.zookeeper_connect)
        try:
            assert ZooKeeperOffsetStore(zk, group).fetch([(topic, 0), (topic, 1)]) == offsets
        finally:
            zkmod.close(zk)


@pytest.mark.parametrize("keystore", ["JKS", "PKCS12"])
def test_the_librdkafka_engine_takes_java_stores(secure, tmp_path, keystore):
    """fetch.engine=librdkafka with the Java client's stores (a JKS truststore; the client's key in a JKS keystore
    with a key password of its own, or in a PKCS12 keystore), against the SSL listener that requires a client
    certificate: librdkafka takes neither store type, the stores are read here and handed to it as PEM."""
    from zkconsumer.local import tools
    from spark_support import produced_set
    from tls_support import make_java_stores
    stores = make_java_stores(secure.pki, tmp_path)
    topic = group = "sec-rdkafka-" + keystore.lower()
    secure.create_topic(topic, 2)
    assert tools.produce(secure.bootstrap_servers, topic, 30) == 30
    props = {"security.protocol": "SSL", "ssl.truststore.location": stores.truststore_jks,
             "ssl.truststore.password": stores.store_password, "ssl.keystore.password": stores.store_password,
             "group.id": group, "zookeeper.connect": secure.zookeeper_connect, "auto.offset.reset": "smallest",
             "auto.commit.enable": "false", "consumer.timeout.ms": "3000", "split.brain.check.timeout.ms": "10000",
             "fetch.engine": "librdkafka"}
    if keystore == "JKS":
        props.update({"ssl.keystore.location": stores.keystore_jks, "ssl.key.password": stores.key_password})
    else:
        props.update({"ssl.keystore.location": stores.keystore_p12, "ssl.keystore.type": "PKCS12"})
    seen = _read_all(secure, ConsumerConfig.from_properties(props), topic, "SSL")
    assert sorted((p, o) for p, o, _ in seen) == sorted(produced_set(secure, topic, 2))     # every record once


def test_a_wrong_password_fails_clearly_and_is_never_printed(secure, tmp_path):
    cfg = write_properties(tmp_path / "bad.properties", dict(client_props(
        secure, "SASL_SSL", "SCRAM-SHA-512", password=WRONG_PW), **{"split.brain.check.timeout.ms": "60000"}))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "zkconsumer", "--log-level", "info", "consume", "--zookeeper",
                           secure.zookeeper_connect, "--group", "sec-wrong", "--topic", "sec-wrong-t", "--config", cfg,
                           "--max-messages", "1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    took = time.monotonic() - start
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode != 0, err
    assert took < 45, "an authentication failure is not retried like an outage (took %.1f s)" % took
    assert secure.listeners["SASL_SSL"] in err and "security.protocol=SASL_SSL" in err, err
    assert "sasl.mechanism=SCRAM-SHA-512" in err and "refused the SASL authentication" in err, err
    assert WRONG_PW not in err + proc.stdout.decode(errors="replace")

    # zkmigrate status --json reports the broker-side group as unknown, with the reason; the password is nowhere
    from zkconsumer_migrate.cli import cli
    code, out, err2 = run_cli(cli, ["status", "--group", "sec-wrong", "--json", "--kafka-config", cfg,
                                    "--zookeeper", secure.zookeeper_connect])
    broker = json.loads(out)["broker_group"]
    assert broker["state"] == "unknown" and "refused the SASL authentication" in broker["error"], out
    assert "sasl.mechanism=SCRAM-SHA-512" in broker["error"] and WRONG_PW not in out + err2


def test_a_wrong_ca_is_a_clear_tls_error(secure):
    from zkconsumer.kafka_metadata import admin_client
    sec = KafkaSecurity.from_properties(client_props(secure, "SSL", ca=secure.pki.wrong_ca))
    with pytest.raises(KafkaSecurityError) as e:
        admin_client(secure.listeners["SSL"], timeout_ms=3000, security=sec, bootstrap_timeout_ms=3000)
    text = str(e.value)
    assert "TLS handshake with %s failed" % secure.listeners["SSL"] in text and "certificate" in text, text
    assert "security.protocol=SSL" in text and secure.pki.wrong_ca in text
    # the offset store says the same (it keeps its own error class: the dual store treats it as an outage)
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    store = KafkaOffsetStore(secure.listeners["SASL_SSL"], "g-ca", security=KafkaSecurity.from_properties(
        client_props(secure, "SASL_SSL", "SCRAM-SHA-256", ca=secure.pki.wrong_ca)))
    store.socket_timeout_ms = 3000
    with pytest.raises(OffsetManagerUnavailableError) as e2:
        store.fetch([("t", 0)])
    assert "TLS handshake" in str(e2.value) and "sasl.mechanism=SCRAM-SHA-256" in str(e2.value)
    assert SCRAM_PW not in str(e2.value)
    # with the right CA, SCRAM-SHA-256 logs in (a group without offsets: nothing, and no error)
    store = KafkaOffsetStore(secure.listeners["SASL_SSL"], "g-ca", security=KafkaSecurity.from_properties(
        client_props(secure, "SASL_SSL", "SCRAM-SHA-256")))
    try:
        assert store.fetch([("t", 0)]) == {}
    finally:
        store.close()


def test_zkmigrate_copy_and_verify_over_sasl_ssl(secure, tmp_path):
    from zkconsumer.offsets import ZooKeeperOffsetStore
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    from zkconsumer_migrate.cli import cli
    topic = group = "sec-migrate"
    secure.create_topic(topic, 2)
    zk = zkmod.connect(secure.zookeeper_connect)
    try:
        ZooKeeperOffsetStore(zk, group).commit({(topic, 0): 0, (topic, 1): 0}).raise_for_errors()
    finally:
        zkmod.close(zk)
    props = client_props(secure, "SASL_SSL", "SCRAM-SHA-512")
    cfg = write_properties(tmp_path / "kafka.properties", props)
    common = ["--json", "--kafka-config", cfg, "--zookeeper", secure.zookeeper_connect]  # brokers from ZooKeeper
    code, out, err = run_cli(cli, ["copy", "--group", group, "--execute", "--backup-dir", str(tmp_path)] + common,
                             expect=0)
    res = json.loads(out)
    assert res["written"] == 2 and SCRAM_PW not in out + err
    code, out, err = run_cli(cli, ["verify", "--group", group, "--phase", "dual", "--no-expiry-check"] + common,
                             expect=0)
    assert SCRAM_PW not in out + err
    store = KafkaOffsetStore(secure.listeners["SASL_SSL"], group, security=KafkaSecurity.from_properties(props))
    try:
        assert store.fetch([(topic, 0), (topic, 1)]) == {(topic, 0): 0, (topic, 1): 0}
    finally:
        store.close()


def test_the_registry_mirror_reads_over_ssl_and_registers_the_ssl_endpoint(secure):
    from zkconsumer.kafka_metadata import admin_client
    from zkconsumer.registry_mirror import RegistryMirror
    from zkconsumer.errors import ClusterUnavailableError
    # the SSL listener requires a client certificate: without one the connection is refused ...
    with pytest.raises(ClusterUnavailableError):
        admin_client(secure.listeners["SSL"], timeout_ms=3000, bootstrap_timeout_ms=3000,
                     security=KafkaSecurity.from_properties(client_props(secure, "SSL", client_cert=False)))
    # ... with ssl.certfile + ssl.keyfile (encrypted) + ssl.password.file it is accepted
    sec = KafkaSecurity.from_properties(client_props(secure, "SSL"))
    assert sec.certfile and sec.key_password == CLIENT_KEY_PASSWORD
    chroot = secure.zookeeper_connect + "/mirror-over-ssl"  # the real broker's own /brokers stays untouched
    zk = zkmod.connect(chroot)
    admin = admin_client(secure.listeners["SSL"], security=sec)
    try:
        report = RegistryMirror(zk, admin, security_protocol="SSL").sync_once()
        assert report.registered == [0]
        reg = codecs.decode_broker_registration(zk.get("/brokers/ids/0")[0], "/brokers/ids/0")
        assert reg.endpoints == ["SSL://%s" % secure.listeners["SSL"]] and reg.plaintext_endpoint() is None
        assert zkmod.bootstrap_from_zk(zk, chroot, "SSL") == secure.listeners["SSL"]
    finally:
        admin.close()
        zkmod.close(zk)


@pytest.mark.spark
def test_the_spark_source_reads_and_commits_over_sasl_ssl(spark, secure):
    from zkconsumer.local import tools
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    from zkconsumer.spark import commit_batch, plan_batch
    topic = group = "sec-spark"
    secure.create_topic(topic, 2)
    assert tools.produce(secure.bootstrap_servers, topic, 30) == 30
    sec = client_props(secure, "SASL_SSL", "SCRAM-SHA-512")
    # Spark's Kafka source style: kafka.-prefixed client options; no kafka.bootstrap.servers (found in ZooKeeper)
    opts = dict({"kafka." + k: v for k, v in sec.items()}, **{
        "zookeeper.connect": secure.zookeeper_connect, "group.id": group, "subscribe": topic,
        "startingOffsets": "earliest", "offsets.storage": "kafka", "dual.commit.enabled": "false"})
    plan = plan_batch(opts)
    assert plan.total == 30 and plan.bootstrap == secure.listeners["SASL_SSL"]
    assert SCRAM_PW not in repr(plan) + repr(__import__("zkconsumer.spark.options", fromlist=["x"]).parse_options(opts))
    rows = spark.read.format("zkconsumer").options(**opts).load().select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(   # executors read over SASL_SSL, every record once
        (tp[1], o) for tp, e in plan.end.items() for o in range(e))
    assert not commit_batch(opts, plan.end)["failed"]
    store = KafkaOffsetStore(secure.listeners["SASL_SSL"], group, security=KafkaSecurity.from_properties(sec))
    try:
        assert store.fetch(sorted(plan.end)) == plan.end
    finally:
        store.close()


@pytest.mark.spark
@pytest.mark.parametrize("keystore", ["JKS", "PKCS12"])
def test_the_spark_source_takes_java_stores_as_spark_users_give_them(spark, secure, tmp_path, keystore):
    """kafka.ssl.truststore.* / kafka.ssl.keystore.* / kafka.ssl.key.password, as in a Spark Kafka-source job: a JKS
    truststore and the client's key in a JKS (key password of its own) or PKCS12 keystore, against the SSL listener
    that requires a client certificate: the plan (driver), the read (executors) and the Kafka offset store (commit)
    all connect with them."""
    from zkconsumer.local import tools
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    from zkconsumer.spark import commit_batch, plan_batch
    from tls_support import make_java_stores
    stores = make_java_stores(secure.pki, tmp_path)
    topic = group = "sec-spark-" + keystore.lower()
    secure.create_topic(topic, 2)
    assert tools.produce(secure.bootstrap_servers, topic, 20) == 20
    tls = {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": stores.truststore_jks,
           "kafka.ssl.truststore.password": stores.store_password,
           "kafka.ssl.keystore.password": stores.store_password}
    if keystore == "JKS":
        tls.update({"kafka.ssl.keystore.location": stores.keystore_jks, "kafka.ssl.key.password": stores.key_password})
    else:
        tls.update({"kafka.ssl.keystore.location": stores.keystore_p12, "kafka.ssl.keystore.type": "PKCS12"})
    opts = dict(tls, **{"zookeeper.connect": secure.zookeeper_connect, "group.id": group, "subscribe": topic,
                        "startingOffsets": "earliest", "offsets.storage": "kafka", "dual.commit.enabled": "false"})
    plan = plan_batch(opts)
    assert plan.total == 20 and plan.bootstrap == secure.listeners["SSL"]
    rows = spark.read.format("zkconsumer").options(**opts).load().select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted((tp[1], o) for tp, e in plan.end.items()
                                                                   for o in range(e))
    assert not commit_batch(opts, plan.end)["failed"]
    sec = KafkaSecurity.from_properties({k[len("kafka."):]: v for k, v in tls.items()})
    store = KafkaOffsetStore(secure.listeners["SSL"], group, security=sec)
    try:
        assert store.fetch(sorted(plan.end)) == plan.end
    finally:
        store.close()
