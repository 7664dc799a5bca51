"""Kafka's own legacy tools (Kafka 1.1.1, the last release that has them) run against groups zkconsumer members
wrote, on Apache Kafka 3.9 (ZooKeeper mode). The 1.1.1 jar has ``kafka.admin.ConsumerGroupCommand`` (with
``--zookeeper``), ``kafka.tools.ExportZkOffsets``, ``kafka.tools.ImportZkOffsets``, ``kafka.tools.UpdateOffsetsInZK``
and ``kafka.tools.ConsoleConsumer``; ``ConsumerOffsetChecker`` was removed in 1.0 (KAFKA-3356).

* ``ConsumerGroupCommand --zookeeper --describe`` shows our members' offsets and owners, as ``zkconsumer groups
  describe --json`` does;
* ``ExportZkOffsets`` output equals ``zkmigrate export`` line for line (order aside), with only ``--zookeeper``;
* files cross both ways: ``zkmigrate export`` -> ``ImportZkOffsets`` and ``ExportZkOffsets`` -> ``zkmigrate import``;
* ``UpdateOffsetsInZK latest|earliest`` moves our group's offsets and our members start where it put them.
"""
import glob
import json
import os
import re
import subprocess
import sys
import time
import zipfile

import pytest

from tests.support.consumer_helpers import CliConsumer, produce_tracked, wait_for_assignment
from tests.support.jvm_helpers import legacy_classpath, run_tool
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths

pytestmark = pytest.mark.live

PROPS = {"auto.commit.interval.ms": "200"}
ZKMIGRATE = os.path.join(os.path.dirname(sys.executable), "zkmigrate")  # the console script of this venv


def zk_offsets(zk, group, topic, n):
    return {p: int(zk.get(paths.partition_offset_path(group, topic, p))[0]) for p in range(n)
            if zk.exists(paths.partition_offset_path(group, topic, p))}


def cli(*args):
    p = subprocess.run([sys.executable, "-m"] + [str(a) for a in args], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, "%s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr)
    return p.stdout


def consumed_group(services, zk, unique, procs, partitions=4, messages=80):
    """A group of two zkconsumer members that consumed `messages` and committed them; still running."""
    g, t = unique("tools"), services.create_topic(unique("tools"), partitions)
    produced = produce_tracked(services.bootstrap_servers, t, messages, partitions=partitions, tag="tools")
    members = [CliConsumer(services, g, [t], consumer_id=n, props=PROPS) for n in ("a", "b")]
    procs.extend(members)
    wait_for_assignment(zk, g, [t], 2, timeout=40)
    ends = {}
    for p, o, _ in produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    wait_until(lambda: zk_offsets(zk, g, t, partitions) == ends, 30, message="offsets committed")
    return g, t, ends, members


def test_the_jar_has_the_legacy_tools():
    jar = [p for p in legacy_classpath().split(":") if p][0].rstrip("*")
    names = set(zipfile.ZipFile(glob.glob(jar + "kafka_2.12-1.1.1.jar")[0]).namelist())
    for cls in ("kafka/admin/ConsumerGroupCommand.class", "kafka/tools/ExportZkOffsets.class",
                "kafka/tools/ImportZkOffsets.class", "kafka/tools/UpdateOffsetsInZK.class",
                "kafka/tools/ConsoleConsumer.class", "kafka/consumer/ZookeeperConsumerConnector.class"):
        assert cls in names, cls
    assert "kafka/tools/ConsumerOffsetChecker.class" not in names  # removed in 1.0 (KAFKA-3356)


def test_consumer_group_command_describes_our_group(services, zk, unique, procs):
    g, t, ends, members = consumed_group(services, zk, unique, procs)
    p = run_tool("kafka.admin.ConsumerGroupCommand", "--zookeeper", services.zookeeper_connect, "--describe",
                 "--group", g)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {}
    for line in p.stdout.splitlines():
        cols = line.split()
        if len(cols) == 6 and cols[0] == t:
            rows[int(cols[1])] = {"offset": int(cols[2]), "log_end": int(cols[3]), "lag": int(cols[4]),
                                  "owner": cols[5]}
    assert sorted(rows) == list(range(4)), p.stdout
    owners = {p_: zk.get(paths.partition_owner_path(g, t, p_))[0].decode() for p_ in range(4)}
    ours = json.loads(cli("zkconsumer", "groups", "describe", "--group", g, "--zookeeper", services.zookeeper_connect,
                          "--json"))
    ours_rows = {r["partition"]: r for r in ours if r["topic"] == t}
    for part, row in rows.items():
        assert row["offset"] == ends.get(part, 0) == ours_rows[part]["current_offset"]
        assert row["log_end"] == ends.get(part, 0) == ours_rows[part]["log_end_offset"] and row["lag"] == 0
        # the tool prints the owner's consumer id (the thread id without its "-N")
        assert row["owner"] == owners[part].rsplit("-", 1)[0] == ours_rows[part]["consumer_id"], (row, owners)
        assert ours_rows[part]["owner"] == owners[part]


def test_export_zk_offsets_equals_zkmigrate_export(services, zk, unique, procs, tmp_path):
    g, t, ends, _ = consumed_group(services, zk, unique, procs)
    kafka_file = tmp_path / "kafka.txt"
    p = run_tool("kafka.tools.ExportZkOffsets", "--zkconnect", services.zookeeper_connect, "--group", g,
                 "--output-file", kafka_file)
    assert p.returncode == 0, p.stdout + p.stderr
    ours = subprocess.run([ZKMIGRATE, "export", "--zookeeper", services.zookeeper_connect, "--group", g],
                          capture_output=True, text=True, timeout=120)
    assert ours.returncode == 0, ours.stderr
    theirs = kafka_file.read_text().splitlines()
    assert sorted(ours.stdout.splitlines()) == sorted(theirs)
    assert sorted(theirs) == sorted("/consumers/%s/offsets/%s/%d:%d" % (g, t, p_, o) for p_, o in ends.items())


def test_offsets_files_cross_both_ways(services, zk, unique, procs, tmp_path):
    g, t, ends, _ = consumed_group(services, zk, unique, procs)
    zkmigrate = ZKMIGRATE
    # ours -> ImportZkOffsets (the file renamed to another group)
    g2 = unique("imported")
    ours = subprocess.run([zkmigrate, "export", "--zookeeper", services.zookeeper_connect, "--group", g],
                          capture_output=True, text=True, timeout=120).stdout
    f = tmp_path / "ours.txt"
    f.write_text(ours.replace("/consumers/%s/" % g, "/consumers/%s/" % g2))
    p = run_tool("kafka.tools.ImportZkOffsets", "--zkconnect", services.zookeeper_connect, "--input-file", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert zk_offsets(zk, g2, t, 4) == ends
    # ExportZkOffsets -> zkmigrate import --execute
    g3 = unique("imported")
    theirs = tmp_path / "theirs.txt"
    p = run_tool("kafka.tools.ExportZkOffsets", "--zkconnect", services.zookeeper_connect, "--group", g,
                 "--output-file", theirs)
    assert p.returncode == 0, p.stdout + p.stderr
    renamed = tmp_path / "theirs-renamed.txt"
    renamed.write_text(theirs.read_text().replace("/consumers/%s/" % g, "/consumers/%s/" % g3))
    r = subprocess.run([zkmigrate, "import", "--zookeeper", services.zookeeper_connect, "--file", renamed,
                        "--store", "zookeeper", "--execute", "--backup-dir", tmp_path / "backups"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert zk_offsets(zk, g3, t, 4) == ends


def test_update_offsets_in_zk_and_our_members_start_there(services, zk, unique, procs, tmp_path):
    g, t, ends, members = consumed_group(services, zk, unique, procs)
    for m in members:
        assert m.terminate() == 0
    props = tmp_path / "consumer.properties"
    props.write_text("zookeeper.connect=%s\ngroup.id=%s\n" % (services.zookeeper_connect, g))
    # earliest: every offset back to 0 (the log start), and a new member replays everything
    p = run_tool("kafka.tools.UpdateOffsetsInZK", "earliest", props, t)
    assert p.returncode == 0, p.stdout + p.stderr
    assert zk_offsets(zk, g, t, 4) == {p_: 0 for p_ in range(4)}
    m = CliConsumer(services, g, [t], consumer_id="after-earliest", props=PROPS)
    procs.append(m)
    want = {(p_, o) for p_, end in ends.items() for o in range(end)}
    wait_until(lambda: set(m.seen(t)) == want and len(m.seen(t)) == len(want), 30,
               message="replay from the offsets UpdateOffsetsInZK wrote")
    assert m.terminate() == 0
    # latest: offsets at the log end; a new member delivers only what comes after
    p = run_tool("kafka.tools.UpdateOffsetsInZK", "latest", props, t)
    assert p.returncode == 0, p.stdout + p.stderr
    assert zk_offsets(zk, g, t, 4) == {p_: ends.get(p_, 0) for p_ in range(4)}
    m2 = CliConsumer(services, g, [t], consumer_id="after-latest", props=dict(PROPS, **{"auto.offset.reset": "smallest"}))
    procs.append(m2)
    wait_for_assignment(zk, g, [t], 1, timeout=30)
    fresh = produce_tracked(services.bootstrap_servers, t, 8, partitions=4, tag="fresh")
    wait_until(lambda: sorted(m2.seen(t)) == sorted((p_, o) for p_, o, _ in fresh), 30,
               message="only the new messages after 'latest'")
    time.sleep(0.5)
    assert sorted(m2.seen(t)) == sorted((p_, o) for p_, o, _ in fresh)
    assert not re.search(r"Exception", p.stderr or "")
