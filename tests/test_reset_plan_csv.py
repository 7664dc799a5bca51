"""kafka-consumer-groups' reset-plan CSV in zkmigrate: ``reset-offsets --export`` prints it, ``reset-offsets
--from-file`` and ``import`` read it, ``export --format csv`` writes it, and the files cross both ways with Apache
Kafka 3.9's own ``ConsumerGroupCommand`` (``--reset-offsets --export`` / ``--from-file``).

The format (Kafka 3.9 ``ConsumerGroupCommand.exportOffsetsToCsv`` / ``parseResetPlan``): no header, one line per
partition, ``topic,partition,offset`` when exactly one ``--group`` was given, else ``group,topic,partition,offset``.
"""
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from test_migrate_support import zkmigrate, zkmigrate_json
from zkconsumer.local import discovery, maven
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore
from zkconsumer_migrate.offsets_csv import format_csv, parse_csv
from zkconsumer_migrate.offsets_file import OffsetsFileError, read_offsets_file

CGC = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def kafka_groups_tool(services, *args):
    """Apache Kafka 3.9's kafka-consumer-groups (its ConsumerGroupCommand from the cached 3.9 jars); stdout."""
    argv = [discovery.find_java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", maven.classpath("kafka"), CGC,
            "--bootstrap-server", services.bootstrap_servers] + [str(a) for a in args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, "%s failed (%d):\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr)
    return p.stdout


# ---- the format, alone --------------------------------------------------------------------------------------------

def test_parse_three_and_four_columns():
    assert parse_csv(["t,0,5", "t,1,7", ""], "f", group="g") == {"g": {("t", 0): 5, ("t", 1): 7}}
    assert parse_csv(["g1,t,0,5", "g2,t,0,9"], "f") == {"g1": {("t", 0): 5}, "g2": {("t", 0): 9}}
    # a file that names its groups is read as such even when one group is given (as parseResetPlan does)
    assert parse_csv(["g1,t,0,5"], "f", group="g1") == {"g1": {("t", 0): 5}}
    assert parse_csv(['"g1","t","0","5"', "# note", "  "], "f") == {"g1": {("t", 0): 5}}
    assert format_csv({"g": {("t", 1): 7, ("t", 0): 5}}, with_group=False) == ["t,0,5", "t,1,7"]
    assert format_csv({"b": {("t", 0): 1}, "a": {("t", 0): 2}}, with_group=True) == ["a,t,0,2", "b,t,0,1"]


@pytest.mark.parametrize("lines,group,needle", [
    (["t,0,5"], None, "give the group with --group"),
    (["t,0"], "g", "not a reset-plan CSV line"),
    (["g,t,0,5", "t,1,5"], None, "line 2: 't,1,5' has 3 columns, the lines before it 4"),
    (["t,0,-1"], "g", "line 1: bad offset '-1'"),
    (["t,0,5x"], "g", "bad offset '5x'"),
    (["t,01,5"], "g", "illegal partition '01'"),
    (["bad/topic,0,5"], "g", "illegal topic 'bad/topic'"),
    (["g/x,t,0,5"], None, "illegal group id 'g/x'"),
    (["t,0,5", "t,0,6"], "g", "line 2: t-0 of group g appears twice (first on line 1)"),
])
def test_parse_names_the_line_and_value(lines, group, needle):
    with pytest.raises(ValueError) as e:
        parse_csv(lines, "plan.csv", group)
    assert "plan.csv" in str(e.value) and needle in str(e.value), str(e.value)


names = st.text("abcXYZ019._-", min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
plans = st.dictionaries(names, st.dictionaries(st.tuples(names, st.integers(0, 2 ** 31 - 1)),
                                               st.integers(0, 2 ** 63 - 1), min_size=1, max_size=5),
                        min_size=1, max_size=4)


@given(plans)
def test_format_then_parse_is_the_identity(plan):
    assert parse_csv(format_csv(plan, with_group=True), "f") == plan
    g = sorted(plan)[0]
    assert parse_csv(format_csv({g: plan[g]}, with_group=False), "f", group=g) == {g: plan[g]}


def test_read_offsets_file_tells_the_formats_apart(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("/consumers/g/offsets/t/0:5\n")
    assert read_offsets_file(f) == {"g": {("t", 0): 5}}
    f.write_text("t,0,5\n")
    assert read_offsets_file(f, "g") == {"g": {("t", 0): 5}}
    with pytest.raises(OffsetsFileError) as e:
        read_offsets_file(f)
    assert str(f) in str(e.value) and "--group" in str(e.value)


# ---- the commands, against ZooKeeper + Apache Kafka 3.9 ---------------------------------------------------------

def test_reset_offsets_export_and_from_file(services, zk, unique, tmp_path, monkeypatch):
    monkeypatch.setenv("ZKMIGRATE_STATE_DIR", str(tmp_path / "state"))
    t = services.create_topic(unique("csv"), 3)
    for p in range(3):
        services.produce(t, 20, partition=p)
    g = unique("csv-g")
    zs = ZooKeeperOffsetStore(zk, g)
    zs.commit({(t, p): 4 for p in range(3)}).raise_for_errors()
    # --export: the planned offsets as CSV on stdout (one --group: no group column), nothing written
    code, out, err = zkmigrate(services, "reset-offsets", "--group", g, "--all-topics", "--shift-by", "2", "--export",
                               expect=0)
    assert out.splitlines() == ["%s,%d,6" % (t, p) for p in range(3)], out
    assert "dry run" in err and zs.fetch([(t, p) for p in range(3)]) == {(t, p): 4 for p in range(3)}
    # --from-file: those offsets (the file's partitions are the scope), clamped into the log range, backed up
    plan = tmp_path / "plan.csv"
    plan.write_text("%s,0,6\n%s,2,100000\n" % (t, t))
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--from-file", str(plan), "--execute",
                                  expect=0)
    assert {(r["partition"], r["new"]) for r in rep["partitions"]} == {(0, 6), (2, 20)}, rep
    assert "clamped" in [r for r in rep["partitions"] if r["partition"] == 2][0]["note"]
    assert sorted(b.rsplit(".", 1)[1] for b in rep["backup"]) == ["json", "txt", "txt"]  # both stores, a manifest
    assert zs.fetch([(t, p) for p in range(3)]) == {(t, 0): 6, (t, 1): 4, (t, 2): 20}
    # a partition the topic does not have is reported and fails the run (exit 1); the others are written
    plan.write_text("%s,1,9\n%s,7,3\n" % (t, t))
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--from-file", str(plan), "--execute",
                                  expect=1)
    assert [r["new"] for r in rep["partitions"]] == [9] and rep["gone_topics"] == {t: [7]}, rep
    assert any("partition(s) 7 of topic %s no longer exist" % t in w for w in rep["warnings"]), rep["warnings"]
    assert zs.fetch([(t, 1)]) == {(t, 1): 9}
    # several groups: the group column, and a file naming groups selects them with --all-groups
    g2 = unique("csv-g2")
    ZooKeeperOffsetStore(zk, g2).commit({(t, 0): 1}).raise_for_errors()
    code, out, _ = zkmigrate(services, "reset-offsets", "--group", g, "--group", g2, "--topic", "%s:0" % t,
                             "--to-earliest", "--export", expect=0)
    assert sorted(out.splitlines()) == sorted(["%s,%s,0,0" % (g, t), "%s,%s,0,0" % (g2, t)])
    both = tmp_path / "both.csv"
    both.write_text(out)
    code, rep, _ = zkmigrate_json(services, "reset-offsets", "--all-groups", "--from-file", str(both), "--execute",
                                  expect=0)
    assert {r["group"]: r["written"] for r in rep["groups"]} == {g: 1, g2: 1}
    assert zs.fetch([(t, 0)]) == {(t, 0): 0}


def test_from_file_bad_input_before_connecting(services, tmp_path):
    plan = tmp_path / "plan.csv"
    plan.write_text("t,0,5\n")
    other = tmp_path / "other.csv"
    other.write_text("g1,t,0,5\n")
    for args, needle in ((["--group", "g", "--from-file", str(plan), "--to-latest"], "--to-latest, --from-file"),
                         (["--group", "g", "--from-file", str(plan), "--all-topics"], "leave out --topic"),
                         (["--all-groups", "--from-file", str(plan)], "give the group with --group"),
                         (["--group", "g2", "--from-file", str(other)], "no offsets of group(s) g2"),
                         (["--group", "g", "--from-file", str(plan), "--export", "--json"], "give one of them")):
        code, out, err = zkmigrate(services, "reset-offsets", *args)
        assert code == 2 and needle in out + err, (args, code, out, err)


def test_import_reads_the_csv(services, zk, unique, tmp_path):
    t = services.create_topic(unique("csvi"), 2)
    g = unique("csvi-g")
    f = tmp_path / "offsets.csv"
    f.write_text("%s,0,3\n%s,1,8\n" % (t, t))
    code, _, err = zkmigrate(services, "import", "--file", str(f), "--store", "zookeeper", "--execute", expect=2)
    assert "give the group with --group" in err
    zkmigrate(services, "import", "--file", str(f), "--group", g, "--store", "zookeeper", "--execute",
              "--backup-dir", str(tmp_path), expect=0)
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 8}
    # a file naming its groups: --group picks one of them (and must be one of them)
    f.write_text("%s,%s,0,5\nother-group,%s,0,1\n" % (g, t, t))
    code, _, err = zkmigrate(services, "import", "--file", str(f), "--group", "nobody", "--store", "zookeeper",
                             expect=2)
    assert "no offsets of group nobody" in err
    zkmigrate(services, "import", "--file", str(f), "--group", g, "--store", "zookeeper", "--execute",
              "--backup-dir", str(tmp_path), expect=0)
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0)]) == {(t, 0): 5}
    assert zk.exists("/consumers/other-group") is None


def test_files_cross_both_ways_with_kafka_consumer_groups(services, zk, unique, tmp_path):
    """Kafka's --export -> zkmigrate --from-file / import; zkmigrate --export / export --format csv -> Kafka's
    --from-file (applied to a broker-side group, read back from Kafka's offset manager)."""
    t = services.create_topic(unique("cross"), 2)
    for p in range(2):
        services.produce(t, 20, partition=p)
    g, k = unique("cross-zk"), unique("cross-kafka")
    # Kafka 3.9 plans a reset of a broker-side group that does not exist yet and exports it
    kafka_csv = kafka_groups_tool(services, "--group", k, "--reset-offsets", "--topic", t, "--to-offset", "7",
                                  "--export", "--dry-run")
    f = tmp_path / "from-kafka.csv"
    f.write_text(kafka_csv)
    zkmigrate(services, "reset-offsets", "--group", g, "--from-file", str(f), "--execute", expect=0)
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 7, (t, 1): 7}
    g_import = unique("cross-import")
    zkmigrate(services, "import", "--file", str(f), "--group", g_import, "--store", "zookeeper", "--execute",
              "--backup-dir", str(tmp_path), expect=0)
    assert ZooKeeperOffsetStore(zk, g_import).fetch([(t, 0), (t, 1)]) == {(t, 0): 7, (t, 1): 7}
    # zkmigrate's plan for the ZooKeeper group, applied by Kafka's tool to the broker-side group
    code, ours, _ = zkmigrate(services, "reset-offsets", "--group", g, "--topic", "%s:1" % t, "--shift-by", "5",
                              "--export", expect=0)
    f2 = tmp_path / "from-zkmigrate.csv"
    f2.write_text(ours)
    kafka_groups_tool(services, "--group", k, "--reset-offsets", "--from-file", f2, "--execute")
    ks = KafkaOffsetStore(services.bootstrap_servers, k)
    try:
        assert ks.fetch([(t, 0), (t, 1)]) == {(t, 1): 12}
        # export --format csv of several groups (the group column): Kafka applies each group's lines
        code, out, _ = zkmigrate(services, "export", "--group", g, "--group", g_import, "--format", "csv", expect=0)
        other = unique("cross-other")
        f3 = tmp_path / "export.csv"
        f3.write_text(out.replace(g_import + ",", k + ",").replace(g + ",", other + ","))
        kafka_groups_tool(services, "--group", k, "--group", other, "--reset-offsets", "--from-file", f3,
                          "--execute")
        assert ks.fetch([(t, 0), (t, 1)]) == {(t, 0): 7, (t, 1): 7}
    finally:
        ks.close()
