"""Hypothesis bad-input pass over everything zkconsumer reads from outside: znode data written by
other members, brokers and tools, ``.properties`` files and ``--property`` values, ``zkmigrate import`` files and
the Spark source's options. For any input: no crash (only the documented error type, with a message naming the
znode path / key / file line), no partial write. ``tests/chaos/test_bad_input.py`` holds the hand-picked corpus run
through the real CLI; this file lets hypothesis pick the inputs.
"""
import json
import os

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from zkconsumer.core.config import KNOWN_KEYS, ConsumerConfig
from zkconsumer.consumer.leave_grace import decode_marker
from zkconsumer.errors import ConfigError, PropertiesSyntaxError, ZkConsumerError, ZnodeFormatError
from zkconsumer.core.layout import codecs, parse_offset_path, parse_zk_connect
from zkconsumer.core.layout.member_info import decode_member_info
from zkconsumer.core.properties import load_properties, parse_property_override

# -- strategies ------------------------------------------------------------------------------------------------------
json_scalars = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats(allow_nan=False,
                allow_infinity=False) | st.text(max_size=20) | st.sampled_from(["9092", "-1", "PLAINTEXT://h:1",
                                                                                   "static", "white_list", ""]))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8) | st.sampled_from(["0", "1", "version"]), inner,
                                             max_size=4), max_leaves=12)

# the fields each codec reads, so that hypothesis gets past "missing field" and into the typed checks
FIELDS = {
    "broker": ["version", "host", "port", "endpoints", "rack", "listener_security_protocol_map", "jmx_port",
               "timestamp", "features"],
    "topic": ["version", "partitions", "adding_replicas", "removing_replicas"],
    "state": ["leader", "leader_epoch", "isr", "controller_epoch", "version"],
    "registration": ["version", "subscription", "pattern", "timestamp"],
    "controller": ["brokerid", "version", "timestamp"],
    "member": ["version", "host", "client_id", "offsets_storage", "dual_commit", "pid", "library",
               "auto_commit_interval_ms"],
    "marker": ["version", "grace_ms", "registration"],
}


def objects_with(fields):
    """JSON objects whose keys are mostly the codec's own fields, with arbitrary (often almost right) values."""
    near = {"version": st.integers(-2, 6), "port": st.integers(-5, 70000),
            "endpoints": st.lists(st.sampled_from(["PLAINTEXT://h:9092", "SSL://[::1]:1", "x", "A://:0",
                                                   "PLAINTEXT://h:99999999999999999999"]), max_size=3),
            "partitions": st.dictionaries(st.sampled_from(["0", "1", "01", "-1", "a", "9" * 30]),
                                          st.lists(st.integers(-3, 3) | json_scalars, max_size=3), max_size=3),
            "subscription": st.dictionaries(st.text(max_size=6), st.integers(-2, 3) | json_scalars, max_size=3),
            "pattern": st.sampled_from(["static", "white_list", "black_list", "x"]),
            "offsets_storage": st.sampled_from(["zookeeper", "kafka", "x"]), "dual_commit": st.booleans(),
            "isr": st.lists(st.integers(-3, 3), max_size=3), "grace_ms": st.integers(-5, 10 ** 20)}
    return st.fixed_dictionaries({}, optional={f: (near.get(f, json_values) | json_values) for f in fields})


def as_bytes(v):
    return json.dumps(v).encode("utf-8")


garbage = (st.binary(max_size=200)
           | st.text(max_size=80).map(lambda s: s.encode("utf-8", "surrogatepass"))
           | json_values.map(as_bytes)
           | st.sampled_from([b"[" * 5000, b'{"a":' * 5000, b"9" * 5000, b"-" + b"1" * 5000, b"\x00",
                              b"*" + b"9" * 5000 + b"*x", b"consumer-" + b"9" * 5000, b"\xed\xa0\x80"]))

PATH = "/consumers/g/some/znode/path"


def _assert_clean(call, expected=(ZnodeFormatError,), needle=PATH):
    try:
        call()
    except expected as e:
        assert needle in str(e), "the error does not name %r: %s" % (needle, e)
        return e
    return None


# -- (1) znode codecs: arbitrary bytes and JSON-ish values --------------------------------------------------------
ZNODE_DECODERS = {
    "broker registration": lambda d: codecs.decode_broker_registration(d, PATH).plaintext_endpoint(),
    "topic partition map": lambda d: codecs.decode_topic_assignment(d, PATH).partition_ids(),
    "partition state": lambda d: codecs.decode_partition_state(d, PATH),
    "consumer registration": lambda d: codecs.decode_consumer_registration(d, PATH),
    "consumer registration (0.7 forms)": lambda d: codecs.decode_consumer_registration(d, PATH, allow_legacy=True),
    "controller": lambda d: codecs.decode_controller(d, PATH),
    "controller epoch": lambda d: codecs.decode_controller_epoch(d, PATH),
    "owner": lambda d: codecs.decode_owner(d, PATH),
    "offset": lambda d: codecs.decode_offset(d, PATH),
    "member info": lambda d: decode_member_info(d, PATH),
    "leave marker": lambda d: decode_marker(d, PATH),
}
KIND_FIELDS = {"broker registration": "broker", "topic partition map": "topic", "partition state": "state",
               "consumer registration": "registration", "consumer registration (0.7 forms)": "registration",
               "controller": "controller", "member info": "member", "leave marker": "marker"}


@pytest.mark.parametrize("kind", sorted(ZNODE_DECODERS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=garbage)
def test_znode_decoders_on_arbitrary_bytes(kind, data):
    _assert_clean(lambda: ZNODE_DECODERS[kind](data))


@pytest.mark.parametrize("kind", sorted(KIND_FIELDS))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_znode_decoders_on_almost_right_json(kind, data):
    obj = data.draw(objects_with(FIELDS[KIND_FIELDS[kind]]))
    if kind == "leave marker" and data.draw(st.booleans()):
        obj["registration"] = data.draw(objects_with(FIELDS["registration"]))
    _assert_clean(lambda: ZNODE_DECODERS[kind](as_bytes(obj)))


@settings(max_examples=150, deadline=None)
@given(path=st.text(max_size=60) | st.builds(lambda parts: "/consumers/" + "/".join(parts),
                                              st.lists(st.text(max_size=10) | st.just("offsets"), max_size=5)))
def test_offset_paths(path):
    e = _assert_clean(lambda: parse_offset_path(path), needle="")
    if e is not None:
        assert path in str(e) or repr(path) in str(e)


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=60) | st.from_regex(r"[a-z0-9.:,/\[\]-]{0,40}", fullmatch=True))
def test_zookeeper_connect_strings(text):
    _assert_clean(lambda: parse_zk_connect(text), expected=(ZkConsumerError,), needle="")


# -- (2) consumer.properties files, --property values and ConsumerConfig ------------------------------------------
@settings(max_examples=150, deadline=None)
@given(data=garbage | st.text(alphabet=st.sampled_from(list("a.b=: \\\t\n\r#!u0Fx\u00e9\x00")), max_size=60)
       .map(lambda s: s.encode("utf-8")))
def test_properties_file_of_any_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("props") / "consumer.properties"
    path.write_bytes(data)
    try:
        props = load_properties(path)
    except PropertiesSyntaxError as e:
        assert str(path) in str(e) and "line" in str(e), e
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())


@settings(max_examples=150, deadline=None)
@given(arg=st.text(max_size=40))
def test_property_override_of_any_text(arg):
    try:
        k, v = parse_property_override(arg)
    except PropertiesSyntaxError as e:
        assert str(e)
        return
    assert isinstance(k, str) and isinstance(v, str)


keys = st.sampled_from(sorted(KNOWN_KEYS)) | st.text(max_size=12)
values = (st.text(max_size=20) | st.integers(-(2 ** 80), 2 ** 80) | st.booleans() | st.none()
          | st.sampled_from(["smallest", "largest", "kafka", "zookeeper", "true", "FALSE", " 10 ", "1e3", "-1",
                             "127.0.0.1:2181/chroot", "h:99999", "", "range", "roundrobin", "9" * 5000])
          | st.floats() | st.lists(st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(props=st.dictionaries(keys, values, max_size=8), base=st.booleans())
def test_consumer_config_from_any_properties(props, base):
    given_props = dict({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"} if base else {}, **props)
    try:
        cfg = ConsumerConfig.from_properties(given_props)
    except ConfigError as e:
        assert e.key in str(e), e
        assert e.key in given_props or e.key in KNOWN_KEYS or e.key.split("/")[0] in KNOWN_KEYS, e
        return
    assert ConsumerConfig.from_properties(cfg.to_properties()) == cfg


# -- (3) zkmigrate import files -------------------------------------------------------------------------------------
from zkconsumer_migrate.offsets_file import OffsetsFileError, parse_offsets, read_offsets_file  # noqa: E402

offset_lines = (st.text(max_size=60)
                | st.builds(lambda g, t, p, o: "/consumers/%s/offsets/%s/%s:%s" % (g, t, p, o),
                            st.sampled_from(["g", "..", "a b", "g\x00", ""]) | st.text(max_size=6),
                            st.sampled_from(["t", "t/x", "", "\u00e9"]) | st.text(max_size=6),
                            st.sampled_from(["0", "01", "-1", "2147483648", "9" * 5000]) | st.text(max_size=4),
                            st.sampled_from(["0", "-3", "9223372036854775808", "1.5", "", "9" * 5000])
                            | st.text(max_size=4)))
offsets_files = (st.lists(offset_lines, max_size=6).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass"))
                 | garbage)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(offset_lines, max_size=6))
def test_offsets_parser_on_any_lines(lines):
    try:
        out = parse_offsets(lines, "offsets.txt")
    except OffsetsFileError as e:
        assert str(e).startswith("offsets.txt line "), e
        assert isinstance(e, ValueError)  # bad input: exit code 2
        return
    for group, offs in out.items():
        assert all(isinstance(p, int) and 0 <= o < 2 ** 63 for (_, p), o in offs.items())


@settings(max_examples=150, deadline=None)
@given(data=offsets_files)
def test_offsets_file_of_any_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("offsets") / "offsets.txt"
    path.write_bytes(data)
    try:
        read_offsets_file(path)
    except OffsetsFileError as e:
        assert str(path) + " line " in str(e), e


@pytest.fixture(scope="module")
def import_topic(services):
    t = "badimport-%s" % os.urandom(4).hex()
    services.create_topic(t, 2)
    return t


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_zkmigrate_import_of_a_bad_file_writes_nothing(services, zk, import_topic, tmp_path_factory, data):
    """Good lines for fresh groups around one (or more) bad lines / garbage: exit code 2, a message naming the file
    and line, and no znode of any of the file's groups — the good lines before the bad one are not written either
    (and with --store kafka no Kafka offsets: the command fails before it connects anywhere)."""
    from zkconsumer_migrate.cli import cli
    from tests.support.migrate_support import run_cli
    groups = ["badimport-%s" % os.urandom(4).hex() for _ in range(2)]
    good = ["/consumers/%s/offsets/%s/%d:%d" % (g, import_topic, p, 5 + p) for g in groups for p in (0, 1)]
    bad = data.draw(offsets_files, label="bad part")
    at = data.draw(st.integers(0, len(good)), label="position")
    body = ("\n".join(good[:at]) + "\n").encode() + bad + ("\n" + "\n".join(good[at:]) + "\n").encode()
    path = tmp_path_factory.mktemp("import") / "offsets.txt"
    path.write_bytes(body)
    try:
        read_offsets_file(path)
        assume(False)  # hypothesis made a valid file: not this test's subject
    except OffsetsFileError:
        pass
    store = data.draw(st.sampled_from(["zookeeper", "kafka"]), label="store")
    code, out, err = run_cli(cli, ["import", "--file", str(path), "--store", store, "--execute", "--zookeeper",
                                   services.zookeeper_connect, "--bootstrap-server", services.bootstrap_servers,
                                   "--backup-dir", str(path.parent)])
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and str(path) + " line " in err, err
    for g in groups:
        assert zk.exists("/consumers/" + g) is None, "import wrote offsets of %s from a rejected file" % g
    assert not [p for p in path.parent.iterdir() if p.name != "offsets.txt"], "a backup was written"
    if store == "kafka":
        from zkconsumer.offsets.kafka import KafkaOffsetStore
        kafka = KafkaOffsetStore(services.bootstrap_servers, groups[0])
        try:
            assert kafka.fetch([(import_topic, 0), (import_topic, 1)]) == {}, "import committed to Kafka"
        finally:
            kafka.close()


# -- (4) the Spark source's options ---------------------------------------------------------------------------------
from zkconsumer.spark.options import SOURCE_OPTIONS, SourceOptions, parse_options  # noqa: E402

option_names = (st.sampled_from(list(SOURCE_OPTIONS) + sorted(KNOWN_KEYS) + ["assign", "ASSIGN", "Subscribe"])
                .map(lambda k: k.lower()) | st.text(max_size=10))
option_values = (st.text(max_size=30)
                 | st.sampled_from(["earliest", "latest", "true", "false", "0", "-1", "5", "9" * 5000, "fetch",
                                    "t1,t2", ",", "a..b", "(", "\\p{Lu}", "[" * 3000, "{\"t\":{\"0\":-2}}",
                                    "{\"t\":{\"x\":1}}", "{\"t\":[1]}", "{\"\":{\"0\":1}}", "{\"t\":{\"0\":1.5}}",
                                    "{\"t\":{\"" + "9" * 5000 + "\":1}}", "{\"../x\":{\"0\":1}}"])
                 | json_values.map(json.dumps))


@settings(max_examples=200, deadline=None)
@given(opts=st.dictionaries(option_names, option_values, max_size=6), base=st.sampled_from(["none", "sub", "pat"]))
def test_spark_options_of_any_map(opts, base):
    given_opts = {"zookeeper.connect": "127.0.0.1:2181", "group.id": "g"}
    if base == "sub":
        given_opts["subscribe"] = "t"
    elif base == "pat":
        given_opts["subscribepattern"] = "t.*"
    given_opts.update(opts)
    try:
        parsed = parse_options(given_opts)
    except ConfigError as e:
        assert str(e).startswith("invalid value ") and " for %s: " % e.key in str(e), e
        return
    assert isinstance(parsed, SourceOptions)
    for (t, p), off in (parsed.starting.items() if isinstance(parsed.starting, dict) else ()):
        assert isinstance(p, int) and 0 <= p < 2 ** 31 and isinstance(off, int), (t, p, off)


# -- (5) a live member among other processes' garbage ------------------------------------------------------------------
DEEP = b'{"a":' * 3000 + b"1" + b"}" * 3000   # valid JSON nested deeper than Python's recursion limit


def test_live_member_consumes_beside_garbage_of_others(services, zk, unique, procs):
    """In a chroot: beside the live broker's registration a broker id whose registration is nested JSON thousands
    deep, a subscribed topic whose partition map is not UTF-8, and in the group another member's registration
    nested thousands deep plus a garbage member info node, leave marker and migration record. The real member owns
    and consumes every partition of the good topic, stays alive and names each problem in its log, once."""
    from tests.support.chaos_support import TimedConsumer
    from tests.support.consumer_helpers import produce_tracked
    from tests.support.waiting import wait_until
    from zkconsumer.core.layout import paths
    chroot = "/" + unique("garbage")
    g = "g"
    t = services.create_topic(unique("garbage"), 3)
    t_bad = unique("garbage-map")
    live_id = zk.get_children("/brokers/ids")[0]
    try:
        zk.create(chroot + "/brokers/ids/" + live_id, zk.get("/brokers/ids/" + live_id)[0], makepath=True)
        zk.create(chroot + "/brokers/ids/999", DEEP)
        zk.create(chroot + "/brokers/topics/" + t, zk.get("/brokers/topics/" + t)[0], makepath=True)
        zk.create(chroot + "/brokers/topics/" + t_bad, b"\xff\xfe{\"partitions\"")
        zk.create(chroot + paths.consumer_registration_path(g, g + "_deep"), DEEP, makepath=True)
        zk.create(chroot + paths.member_info_path(g, g + "_deep"), b"[" * 3000, makepath=True)
        zk.create(chroot + paths.group_leaving_dir(g) + "/" + g + "_gone", b'{"grace_ms":', makepath=True)
        zk.create(chroot + paths.group_migration_path(g), b"\x00\xff", makepath=True)
        c = TimedConsumer(type("S", (), {"zookeeper_connect": services.zookeeper_connect + chroot})(), g,
                          [t, t_bad], consumer_id="real", props={"auto.commit.interval.ms": "60000"})
        procs.append(c)
        produced = produce_tracked(services.bootstrap_servers, t, 30, partitions=3, tag="gb")
        want = {(p, o) for p, o, _ in produced}
        wait_until(lambda: want <= set(c.seen(t)), 60, interval=0.2,
                   message=lambda: "all 30 messages of the good topic\n" + c.describe())
        assert {tuple(x) for x in c.events[-1]["partitions"]} == {(t, 0), (t, 1), (t, 2)}, c.describe()
        assert c.alive(), c.describe()
        log = "\n".join(c.log)
        assert "Traceback" not in log and "RecursionError" not in log and "can't rebalance" not in log, log
        for needle in ("/brokers/ids/999", "/brokers/topics/" + t_bad, "/consumers/g/ids/g_deep",
                       "/consumers/g/zkconsumer/members/g_deep", "/consumers/g/zkconsumer/leaving/g_gone",
                       "/consumers/g/zkconsumer/migration"):
            hits = [ln for ln in c.log if needle in ln]
            assert len(hits) == 1, "%r logged %d times (once wanted):\n%s" % (needle, len(hits), log)
        assert "ERROR" in [ln for ln in c.log if "/consumers/g/ids/g_deep" in ln][0], log
        assert c.terminate(timeout=30) == 0, c.describe()
    finally:
        for p in procs:
            p.kill()
        zk.delete(chroot, recursive=True)


# -- zkmigrate's phase record and Kafka's offset commit records ------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=garbage | objects_with(["version", "phase", "to", "since", "by", "history"]).map(as_bytes))
def test_migration_record_of_any_bytes(services, zk, data):
    """/consumers/G/zkconsumer/migration with anything in it: status reads it (a record or an error entry naming
    the path), the next phase change replaces it with a well-formed record."""
    from zkconsumer_migrate import state
    group = "badphase-%s" % os.urandom(4).hex()
    path = state.migration_path(group)
    zk.create(path, data, makepath=True)
    try:
        got = state.read_phase(zk, group)
        assert isinstance(got, dict) and ("phase" in got or path in got["error"]), got
        rec = state.record_phase(zk, group, "copied-by-test", by="test")
        stored = json.loads(zk.get(path)[0])
        assert stored["phase"] == rec["phase"] == "copied-by-test" and isinstance(stored["history"], list)
    finally:
        zk.delete("/consumers/" + group, recursive=True)


@settings(max_examples=300, deadline=None)
@given(key=st.none() | st.binary(max_size=40), value=st.none() | st.binary(max_size=60))
def test_offsets_topic_records_of_any_bytes(key, value):
    """zkmigrate's expiry check reads __consumer_offsets records (Kafka's own binary format): anything that is not
    an offset commit record is None or a ValueError, which the reader skips."""
    from zkconsumer.offsets.expiry import parse_commit_record
    try:
        parsed = parse_commit_record(key, value)
    except ValueError:
        return
    assert parsed is None or (len(parsed) == 4 and isinstance(parsed[2], int))


# -- Spark checkpoints the commit helpers read ------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(line=(json_values.map(json.dumps) | st.text(max_size=40) | garbage.map(lambda b: b.decode("latin-1"))
             | st.builds(lambda t, p, o: json.dumps({t: {p: o}}), st.sampled_from(["t", "..", "a/b", ""]),
                         st.sampled_from(["0", "01", "-1", "x", "9" * 5000, "\u0661"]),
                         st.integers(-3, 3) | st.floats() | st.just(True)))
       .filter(lambda s: "\n" not in s and "\r" not in s and s.strip() not in ("", "-")))
def test_checkpoint_offsets_of_any_line(tmp_path_factory, line):
    """read_checkpoint_offsets / last_committed_end on an offset log whose source line is anything: offsets of
    legal topics and partitions, or a ValueError naming the file (never KeyError, TypeError, OverflowError...)."""
    from zkconsumer.spark.commit import last_committed_end, read_checkpoint_offsets
    root = tmp_path_factory.mktemp("checkpoint")
    (root / "offsets").mkdir()
    (root / "commits").mkdir()
    (root / "offsets" / "0").write_text("v1\n{}\n%s\n" % line, encoding="utf-8", errors="surrogatepass")
    (root / "commits" / "0").write_text("v1\n{}\n")
    for read in (lambda: read_checkpoint_offsets(str(root), 0, filesystem="pyarrow"),
                 lambda: last_committed_end(str(root), filesystem="pyarrow")):
        try:
            out = read()
        except ValueError as e:
            assert "offsets/0" in str(e), e
            continue
        assert all(isinstance(t, str) and isinstance(p, int) and p >= 0 and isinstance(o, int) and o >= 0
                   for (t, p), o in out.items()), out
