"""The safe first contact with ``zkconsumer consume``: without --group it joins a throwaway group
(console-consumer-NNNNN, as Kafka's console consumer) deleted at exit; --from-group reads a production group's
stream from its committed offsets without joining it or writing anything (its member, at the default settings,
is not rebalanced and its offsets do not move); kafka-console-consumer's formatter options (--property print.key
...) and jsonl's timestamp. Real ZooKeeper + Apache Kafka."""
import json
import os
import re
import subprocess
import sys

from tests.support import ROOT
from tests.support.consumer_helpers import StreamCollector, connector, produce_tracked, recent_timestamp_ms
from tests.support.waiting import wait_until
from zkconsumer.tools.groups import list_groups

CMD = [sys.executable, "-m", "zkconsumer", "consume"]


def _run(services, *args, timeout=120):
    return subprocess.run(CMD + ["--zookeeper", services.zookeeper_connect] + list(args), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _tree(zk, path):
    """{path: (data, mzxid)} of every node under path."""
    out = {}
    data, stat = zk.get(path)
    out[path] = (data, stat.mzxid)
    for c in zk.get_children(path):
        out.update(_tree(zk, path + "/" + c))
    return out


def test_without_group_a_throwaway_group_is_joined_and_deleted_at_exit(services, unique, zk):
    t = services.create_topic(unique("throwaway"), 2)
    produce_tracked(services.bootstrap_servers, t, 4, partitions=2)
    before = set(list_groups(zk))
    p = subprocess.Popen(CMD + ["--zookeeper", services.zookeeper_connect, "--topic", t, "--from-beginning"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        lines = [p.stdout.readline() for _ in range(4)]
        assert all(json.loads(x)["topic"] == t for x in lines)
        new = set(list_groups(zk)) - before
        throwaway = [g for g in new if re.fullmatch(r"console-consumer-\d{1,5}", g)]
        assert len(throwaway) == 1, new
        group = throwaway[0]
        assert zk.get_children("/consumers/%s/ids" % group)  # it is a member while it runs
    finally:
        p.terminate()
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "joined the throwaway group %s" % group in err
    assert zk.exists("/consumers/" + group) is None, "the throwaway group is deleted at exit"


def test_the_throwaway_group_is_never_a_group_that_exists(services, zk):
    """The throwaway group is joined and deleted at exit, so a console-consumer-NNNNN some group already has (a
    colleague's console consumer, one left by a kill -9, a group so named on purpose) is never the one picked:
    joining it would take its partitions, and deleting it would delete its offsets."""
    import random
    from zkconsumer.cli.consume import build_config, unused_throwaway_group
    seed = random.randrange(1 << 30)
    taken = "console-consumer-%d" % random.Random(seed).randrange(100000)
    zk.create("/consumers/%s/offsets/t/0" % taken, b"42", makepath=True)
    try:
        config, throwaway = build_config(services.zookeeper_connect, None, None, [], throwaway_name=taken)
        assert throwaway and config.group_id == taken and not config.auto_commit_enable
        name = unused_throwaway_group(config, random.Random(seed))
        assert name != taken and re.fullmatch(r"console-consumer-\d{1,5}", name)
        assert zk.exists("/consumers/" + name) is None
        assert zk.get("/consumers/%s/offsets/t/0" % taken)[0] == b"42"
    finally:
        zk.delete("/consumers/" + taken, recursive=True)


def test_from_group_reads_without_joining_or_committing(services, unique, zk):
    """A production member at the default settings (auto.offset.reset=largest, auto.commit.interval.ms=60000):
    --from-group prints what follows its committed offsets, and nothing of the group changes."""
    g, t = unique("peek"), services.create_topic(unique("peek"), 2)
    produce_tracked(services.bootstrap_servers, t, 10, partitions=2, tag="old")
    member = connector(services, g, **{"auto.offset.reset": "smallest", "auto.commit.interval.ms": "60000",
                                       "zookeeper.session.timeout.ms": "6000"})
    try:
        [stream] = member.create_message_streams({t: 1})[t]
        col = StreamCollector(stream)
        col.start()
        wait_until(lambda: len(col.seen(t)) == 10, 60, message="the member read the first 10")
        member.commit_offsets()
        rebalances = member.metrics()["RebalanceRateAndTime"]["count"]
        col_stop_at = len(col.seen(t))
        snapshot = _tree(zk, "/consumers/" + g)
        new = produce_tracked(services.bootstrap_servers, t, 6, partitions=2, tag="new")
        # the member reads them too, but commits them only at its next interval (60 s away)
        wait_until(lambda: len(col.seen(t)) == col_stop_at + 6, 60, message="the member read the new 6")
        r = _run(services, "--from-group", g, "--max-messages", "6", "--property", "print.value=true",
                 "--timeout-ms", "20000")
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.splitlines()) == sorted(v for _, _, v in new)
        assert "without joining it" in r.stderr
        assert _tree(zk, "/consumers/" + g) == snapshot, "nothing under /consumers/G was written"
        assert member.metrics()["RebalanceRateAndTime"]["count"] == rebalances, "the member was not rebalanced"
        assert member.metrics()["OwnedPartitionsCount"] == 2
    finally:
        member.shutdown()


def test_from_group_of_a_kafka_phase_group_reads_kafkas_offsets_and_writes_nothing_even_killed(services, unique, zk):
    """A group in the Kafka phase (members commit to Kafka only; ZooKeeper's offsets frozen behind), its member at
    the default settings: --from-group starts from the Kafka offsets, and neither a reader that exits nor one
    killed with kill -9 leaves anything: no node under /consumers/G changed, the Kafka offsets as they were, no
    member of a broker-side group."""
    import signal
    import time
    from kafka.admin import KafkaAdminClient
    from tests.support.consumer_helpers import kafka_commit
    from zkconsumer_migrate import state
    g, t = unique("peekk"), services.create_topic(unique("peekk"), 2)
    produce_tracked(services.bootstrap_servers, t, 20, partitions=2)
    for p in (0, 1):
        zk.create("/consumers/%s/offsets/%s/%d" % (g, t, p), b"2", makepath=True)
    kafka_commit(services.bootstrap_servers, g, {(t, 0): 6, (t, 1): 7})
    state.record_phase(zk, g, "kafka", "test")
    member = connector(services, g, defaults=True, **{"offsets.storage": "kafka", "dual.commit.enabled": "false"})
    admin = KafkaAdminClient(bootstrap_servers=services.bootstrap_servers)
    try:
        member.create_message_streams({t: 1})
        wait_until(lambda: len(zk.get_children("/consumers/%s/owners/%s" % (g, t))) == 2, 30, message="owners")

        def kafka_offsets():
            got = admin.list_group_offsets({g: None}).get(g, {})
            return {(tp.topic, tp.partition): m.offset for tp, m in got.items()}
        snapshot, offsets = _tree(zk, "/consumers/" + g), kafka_offsets()
        assert offsets == {(t, 0): 6, (t, 1): 7}
        r = _run(services, "--from-group", g, "--max-messages", "27", "--timeout-ms", "20000")
        assert r.returncode == 0, r.stderr
        first = {}
        for line in r.stdout.splitlines():
            rec = json.loads(line)
            first.setdefault(rec["partition"], rec["offset"])
        assert first == {0: 6, 1: 7}, "Kafka's offsets, not ZooKeeper's frozen ones"
        p = subprocess.Popen(CMD + ["--zookeeper", services.zookeeper_connect, "--from-group", g],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            produce_tracked(services.bootstrap_servers, t, 2, partitions=2)
            assert p.stdout.readline()  # it reads
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait(30)
        time.sleep(1)
        assert _tree(zk, "/consumers/" + g) == snapshot, "nothing under /consumers/G was written"
        assert kafka_offsets() == offsets, "no offset was committed to Kafka"
        described = admin.describe_groups([g])[g]
        assert not described.get("members"), described
    finally:
        admin.close()
        member.shutdown()


def test_from_group_of_a_missing_group_is_bad_input(services, unique):
    r = _run(services, "--from-group", unique("nosuch"), "--max-messages", "1")
    assert r.returncode != 0 and "does not exist" in r.stderr
    r = _run(services, "--from-group", "a/b", "--max-messages", "1")
    assert r.returncode == 2 and "--from-group" in r.stderr


def test_formatter_properties_as_kafka_console_consumer(services, unique):
    t = services.create_topic(unique("fmt"), 1)
    from kafka import KafkaProducer
    # recent timestamps: a record older than the broker's retention (7 days) is deleted at its next retention check
    # (every minute on the test cluster), and a read after that waits for ever
    ts1, ts2 = recent_timestamp_ms() + 123, recent_timestamp_ms() + 456
    prod = KafkaProducer(bootstrap_servers=services.bootstrap_servers)
    prod.send(t, key=b"k1", value=b"v1", headers=[("h", b"x")], timestamp_ms=ts1)
    prod.send(t, key=None, value=b"v2", timestamp_ms=ts2)
    prod.flush()
    prod.close()
    r = _run(services, "--topic", t, "--from-beginning", "--max-messages", "2", "--property", "print.key=true",
             "--property", "print.timestamp=true", "--property", "print.partition=true", "--property",
             "print.offset=true", "--property", "print.headers=true", "--property", "key.separator=|")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["CreateTime:%d|Partition:0|Offset:0|h:x|k1|v1" % ts1,
                                     "CreateTime:%d|Partition:0|Offset:1|NO_HEADERS|null|v2" % ts2]
    r = _run(services, "--topic", t, "--from-beginning", "--max-messages", "1")
    rec = json.loads(r.stdout.splitlines()[0])
    assert rec["timestamp"] == ts1 and rec["timestamp_type"] == "CreateTime"
    r = _run(services, "--topic", t, "--format", "jsonl", "--property", "print.key=true", "--max-messages", "1")
    assert r.returncode == 2 and "formatter option" in r.stderr
    # a consumer key given with --property still reaches the consumer (earlier releases took it there), warned
    r = _run(services, "--topic", t, "--from-beginning", "--max-messages", "1", "--format", "value",
             "--property", "auto.offset.reset=smallest", "--group", unique("fmt-g"))
    assert r.returncode == 0 and r.stdout == "v1\n" and "--consumer-property" in r.stderr


def test_readme_names_the_safe_commands_first():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = text.split("## Point it at your cluster", 1)[1].split("```", 2)[1]
    commands = [line for line in block.splitlines() if line.startswith("zkconsumer consume")]
    assert "--group" not in commands[0] and "--from-group" in commands[1], commands
    joined = [c for c in commands if " --group " in c]
    assert joined and commands.index(joined[0]) > 1
    assert "takes partitions from" in text and "commits" in text
