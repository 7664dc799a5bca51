"""The cutover fence on Apache Kafka 3.9 (ZooKeeper mode), with the consumers' default settings and kill -9:

* it outlives any later passing ``verify`` (which records its phase) and only ``rollback --execute`` lifts it: a
  zkconsumer deployment that restarts after the cutover and a fleet verify is refused, and joins after the rollback;
* it binds Kafka 1.1.1's own Scala consumer too: ``cutover --execute`` takes the create right off
  ``/consumers/G/ids`` (nobody can register), the rollback gives it back;
* cutover looks again for members after the copy and after the fence, and is not ready when one came back;
* a routine ``verify --phase zookeeper`` (or ``dual``) that passes on a fenced group does not end the evidence that
  the group kept its offsets in Kafka since the cutover: a rollback after its Kafka offsets were removed still
  refuses the frozen ZooKeeper offsets.
"""
import time
import pytest

from tests.support.consumer_helpers import CliConsumer, group_members, owners
from tests.support.jvm_helpers import JvmMember, compile_member
from tests.support.migrate_support import kafka_commit as _kafka_commit, kafka_fetch as _kafka_fetch
from tests.support.migrate_support import zkmigrate, zkmigrate_json
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths
from zkconsumer.offsets import ZooKeeperOffsetStore
from zkconsumer.offsets.kafka import KafkaOffsetStore

# the settings users run (the consumers' own defaults)
DEFAULTS = {"auto.offset.reset": "largest", "auto.commit.interval.ms": "60000", "zookeeper.session.timeout.ms": "6000",
            "rebalance.backoff.ms": "2000", "rebalance.max.retries": "4"}


@pytest.fixture(scope="module")
def jvm_cp(tmp_path_factory):
    return compile_member(str(tmp_path_factory.mktemp("jvm-classes")))


def _group_with_offsets(services, zk, unique, name, start=3, per_partition=10):
    """A 2-partition topic with *per_partition* records each, and a group whose ZooKeeper offsets are *start*."""
    t = services.create_topic(unique(name), 2)
    for p in (0, 1):
        services.produce(t, per_partition, partition=p)
    g = unique(name + "-g")
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): start, (t, 1): start}).raise_for_errors()
    return t, g


def _broker_consumer(services, g, t, reset):
    """A broker-coordinated consumer of *t* in group *g* (confluent-kafka: librdkafka's group client,
    ``auto.offset.reset`` *reset*) that holds its partitions (the caller closes it)."""
    from confluent_kafka import Consumer
    kc = Consumer({"bootstrap.servers": services.bootstrap_servers, "group.id": g, "enable.auto.commit": False,
                   "auto.offset.reset": reset, "session.timeout.ms": 10000})
    try:
        kc.subscribe([t])
        wait_until(lambda: kc.poll(0.2) is not None or kc.assignment(), 150, interval=0,
                   message="the broker-coordinated consumer to get its partitions")
        wait_until(lambda: kc.assignment(), 60, interval=0.2, message="the consumer's assignment")
    except BaseException:
        kc.close()
        raise
    return kc


def _broker_consumers_ran(services, g, t, offset):
    """Broker-coordinated consumers of *t* in group *g* that committed *offset* on partitions 0 and 1 and stopped
    (the broker-side group Empty again)."""
    from confluent_kafka import TopicPartition
    from zkconsumer.kafka.broker_group import describe_broker_group
    kc = _broker_consumer(services, g, t, "latest")
    try:
        kc.commit(offsets=[TopicPartition(t, p, offset) for p in (0, 1)], asynchronous=False)
    finally:
        kc.close()
    wait_until(lambda: not describe_broker_group(services.bootstrap_servers, g).active, 60, interval=0.5,
               message="the broker-side group to be empty")


def _cut_over_and_consume(services, t, g, tmp_path):
    """Cut *g* over and start a broker-coordinated consumer of *t* in it (confluent-kafka: librdkafka's group
    client) that holds its partitions and has committed, as the group's new consumers do (the caller closes it)."""
    from confluent_kafka import TopicPartition
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    kc = _broker_consumer(services, g, t, "error")
    try:
        # the offsets the cutover copied, committed again by the group's member
        committed = kc.committed([TopicPartition(t, p) for p in (0, 1)], timeout=30)
        assert all(tp.offset >= 0 for tp in committed), committed
        kc.commit(offsets=committed, asynchronous=False)
    except BaseException:
        kc.close()
        raise
    return kc


def _refused_at_start(member, needle, timeout=90):
    """Wait until the member's process has exited, or logged *needle*; the member registered nothing."""
    wait_until(lambda: not member.alive() or any(needle in ln for ln in member.log), timeout, interval=0.2,
               message="the member to be refused (%s)" % needle)


def test_the_fence_outlives_a_passing_verify_and_only_a_rollback_lifts_it(services, zk, unique, procs, tmp_path):
    t, g = _group_with_offsets(services, zk, unique, "fv")
    old = CliConsumer(services, g, [t], consumer_id="old", props=DEFAULTS)
    procs.append(old)
    wait_until(lambda: len(old.seen(t)) == 14, 60, message="the old deployment to consume from offset 3")
    old.kill()  # kill -9: no commit, no release; cutover waits for the session to expire
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--timeout", "60", "--backup-dir",
                                  str(tmp_path), expect=0)
    assert out["ready"] and out["copied"] == {"%s-0" % t: 3, "%s-1" % t: 3}
    # the routine fleet verify after the switch passes and records its phase
    code, rep, _ = zkmigrate_json(services, "verify", "--groups-matching", g, "--phase", "kafka", expect=0)
    [one] = rep["groups"]
    assert one["recorded_phase"]["phase"] == "kafka"
    # the old deployment restarts: refused before it registers
    again = CliConsumer(services, g, [t], consumer_id="old", props=DEFAULTS)
    procs.append(again)
    _refused_at_start(again, "cut over")
    wait_until(lambda: not again.alive(), 30, message="the refused member to exit")
    assert again.proc.returncode != 0 and any("cut over" in ln for ln in again.log), again.describe()
    assert again.seen() == [] and not group_members(zk, g) and not owners(zk, g, [t])
    # the fence is the record's own field, carried over by verify; status shows it and the fenced ids node
    assert one["recorded_phase"]["fence"]["by"] == "zkmigrate cutover"
    code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert st["fence"] and st["fence_acl"] == paths.group_ids_path(g)
    # only a deliberate rollback lifts it
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert rb["fence_lifted"]["changed"] and rb["recorded_phase"]["phase"] == "rollback"
    assert "fence" not in rb["recorded_phase"]
    back = CliConsumer(services, g, [t], consumer_id="old", props=DEFAULTS)
    procs.append(back)
    wait_until(lambda: len(back.seen(t)) == 14, 60, message="the member to join and consume from offset 3 again")


def test_cutover_fence_keeps_a_scala_consumer_out_until_a_rollback(services, zk, unique, procs, jvm_cp, tmp_path):
    """Kafka 1.1.1's ZookeeperConsumerConnector knows nothing of the phase record; the ACL stops it."""
    from kazoo.security import Permissions
    t, g = _group_with_offsets(services, zk, unique, "fj")
    old = JvmMember(services, g, [t], jvm_cp, consumer_id="jvm", props=DEFAULTS, workdir=str(tmp_path))
    procs.append(old)
    wait_until(lambda: len(old.seen(t)) == 14, 90, message="the Scala member to consume from offset 3")
    old.kill()  # kill -9
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--timeout", "60", "--backup-dir",
                                  str(tmp_path), expect=0)
    assert out["ready"]
    # the old Scala deployment restarts: ZooKeeper refuses its registration, it consumes nothing
    again = JvmMember(services, g, [t], jvm_cp, consumer_id="jvm", props=DEFAULTS, workdir=str(tmp_path))
    procs.append(again)
    _refused_at_start(again, "NoAuth")
    assert any("NoAuth" in ln for ln in again.log), again.describe()
    assert again.seen() == [] and not group_members(zk, g) and not owners(zk, g, [t])
    again.kill()
    assert out["acl_fence"] == paths.group_ids_path(g)
    acls, _ = zk.get_acls(paths.group_ids_path(g))
    assert acls and not any(a.perms & Permissions.CREATE for a in acls)
    assert out["recorded_phase"]["fence"]["ids_acl"] == [{"perms": Permissions.ALL, "scheme": "world",
                                                          "id": "anyone"}]
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert rb["fence_lifted"]["acl"] == [{"perms": Permissions.ALL, "scheme": "world", "id": "anyone"}]
    back = JvmMember(services, g, [t], jvm_cp, consumer_id="jvm", props=DEFAULTS, workdir=str(tmp_path))
    procs.append(back)
    wait_until(lambda: len(back.seen(t)) == 14, 90, message="the Scala member to join after the rollback")
    assert set(back.seen(t)) == {(p, o) for p in (0, 1) for o in range(3, 10)}


def _cutover_with(services, zk, g, on_message, backup_dir):
    """cutover --execute in-process, calling on_message(text) for each progress message."""
    from zkconsumer_migrate.cutover import cutover
    from zkconsumer_migrate.group_offsets import GroupOffsets
    gofs = GroupOffsets(zk, services.bootstrap_servers, g)
    try:
        return cutover(gofs, execute=True, timeout=5, backup_dir=str(backup_dir), progress=on_message)
    finally:
        gofs.close()


def _register(zk, g, t, cid):
    body = b'{"version":1,"subscription":{"%s":1},"pattern":"static","timestamp":"1"}' % t.encode()
    zk.create(paths.consumer_registration_path(g, cid), body, ephemeral=True, makepath=True)


@pytest.mark.parametrize("when", ["copied", "fencing"])
def test_cutover_looks_again_after_the_copy_and_after_the_fence(services, zk, unique, tmp_path, when):
    """A member that registers while cutover copies (or just before the fence) makes it not ready, naming the
    member; after the copy nothing is fenced, after the fence the fence stays (the member must stop)."""
    t, g = _group_with_offsets(services, zk, unique, "fr")
    cid = g + "_back-1-abcdef12"

    def on_message(msg):
        if msg.startswith(when) and not group_members(zk, g):
            _register(zk, g, t, cid)
    out = _cutover_with(services, zk, g, on_message, tmp_path)
    assert out["ready"] is False and cid in out["reason"] and "came back" in out["reason"], out
    assert out["zookeeper_members"] == [cid]
    from zkconsumer_migrate import state
    fence = state.fence_of(state.read_phase(zk, g))
    assert (fence is None) == (when == "copied"), fence
    # once the member is gone, cutover finishes (the copy is idempotent)
    zk.delete(paths.consumer_registration_path(g, cid))
    out = _cutover_with(services, zk, g, lambda msg: None, tmp_path)
    assert out["ready"] is True and state.fence_of(state.read_phase(zk, g)) is not None


def test_cutover_without_the_right_to_fence_is_not_ready(services, zk, unique, tmp_path):
    """An identity without ADMIN on /consumers/G/ids: not ready, naming the path and the two ways out; no phase
    record. --no-acl-fence fences zkconsumer members only."""
    from kazoo.security import ACL, Id, Permissions
    from zkconsumer_migrate import state
    t, g = _group_with_offsets(services, zk, unique, "fa")
    ids = paths.group_ids_path(g)
    zk.ensure_path(ids)
    zk.set_acls(ids, [ACL(Permissions.ALL & ~Permissions.ADMIN, Id("world", "anyone"))])
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                  expect=1)
    assert not out["ready"] and ids in out["reason"] and "--zookeeper-credentials" in out["reason"] \
        and "--no-acl-fence" in out["reason"] and g in out["reason"]
    assert state.read_phase(zk, g) is None
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--no-acl-fence", "--backup-dir",
                                  str(tmp_path), expect=0)
    assert out["ready"] and "acl_fence" not in out and state.fence_of(out["recorded_phase"]) is not None
    assert _kafka_fetch(services, g, [(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 3}
    zkmigrate(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert state.fence_of(state.read_phase(zk, g)) is None


def test_rollback_is_refused_while_the_broker_coordinated_consumers_run(services, zk, unique, tmp_path):
    """Lifting the fence while the new consumers still run would let ZooKeeper members (a Scala one has no split-brain
    guard) consume their partitions, and the offsets copied to ZooKeeper would already be behind: refused, naming
    the group and what to do, nothing written, the fence kept; once they stopped, the rollback runs."""
    from zkconsumer_migrate import state
    t, g = _group_with_offsets(services, zk, unique, "fb")
    kc = _cut_over_and_consume(services, t, g, tmp_path)
    try:
        for args in ((), ("--execute",)):
            code, out, _ = zkmigrate_json(services, "rollback", "--group", g, *args, "--backup-dir",
                                          str(tmp_path / "rb"), expect=1)
            assert g in out["error"] and "broker-coordinated" in out["error"] and "stop" in out["error"], out
        assert state.fence_of(state.read_phase(zk, g)) is not None and not (tmp_path / "rb").exists()
        assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 3}
    finally:
        kc.close()
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert rb["fence_lifted"]["changed"] and state.fence_of(state.read_phase(zk, g)) is None
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        committed = ks.fetch([(t, 0), (t, 1)])
    finally:
        ks.close()
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == committed


def test_import_is_refused_while_the_broker_coordinated_consumers_run(services, zk, unique, tmp_path):
    """import follows the other writers: while the new consumers hold the group on the broker, an import into
    either store is refused for every group of the file before anything is written (their commits would overwrite
    a Kafka import, and a ZooKeeper import would be behind them); once they stopped, it runs."""
    t, g = _group_with_offsets(services, zk, unique, "fi")
    other = unique("fi-other")  # a second group of the same file, not in use
    f = tmp_path / "offsets.txt"
    f.write_text("".join("/consumers/%s/offsets/%s/%d:%d\n" % (name, t, p, o) for name in (other, g)
                         for p, o in ((0, 5), (1, 6))))
    kc = _cut_over_and_consume(services, t, g, tmp_path)
    try:
        for store in ("kafka", "zookeeper"):
            for args in ((), ("--execute",)):
                code, out, err = zkmigrate(services, "import", "--file", str(f), "--store", store, *args,
                                           "--backup-dir", str(tmp_path / "imp"))
                assert code == 1 and g in err and "broker-coordinated" in err and "stop" in err, (code, out, err)
        assert not (tmp_path / "imp").exists()
        assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 3}
        assert ZooKeeperOffsetStore(zk, other).fetch([(t, 0), (t, 1)]) == {}
    finally:
        kc.close()
    code, rep, _ = zkmigrate_json(services, "import", "--file", str(f), "--store", "zookeeper", "--execute",
                                  "--backup-dir", str(tmp_path / "imp"), expect=0)
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 5, (t, 1): 6}


def test_kafka_only_since_under_the_fence():
    """Pure: which records end the Kafka-only run (epoch ms of the run's start + 999, or None)."""
    from zkconsumer_migrate.state import kafka_only_since

    def rec(*records, fence="2026-01-02T00:00:00Z"):
        newest, older = records[0], [dict(phase=p, since=s, by=b) for p, s, b in records[1:]]
        out = dict(phase=newest[0], since=newest[1], by=newest[2], history=older)
        if fence:
            out["fence"] = {"since": fence, "by": "zkmigrate cutover"}
        return out
    t0, cut = 1767225600000 + 999, 1767312000000 + 999  # 2026-01-01T00:00:00Z, 2026-01-02T00:00:00Z
    kafka = ("kafka", "2026-01-01T00:00:00Z", "zkmigrate verify")
    cutover = ("cutover", "2026-01-02T00:00:00Z", "zkmigrate cutover")
    zk_verify = ("zookeeper", "2026-01-03T00:00:00Z", "zkmigrate verify")
    assert kafka_only_since(rec(cutover, kafka)) == t0
    assert kafka_only_since(rec(zk_verify, cutover, kafka)) == t0  # a verify under the fence
    assert kafka_only_since(rec(("dual", "2026-01-03T00:00:00Z", "zkmigrate verify"), zk_verify, cutover)) == cut
    assert kafka_only_since(rec(zk_verify, cutover, kafka, fence=None)) is None  # not fenced: it counts
    assert kafka_only_since(rec(("restore", "2026-01-03T00:00:00Z", "zkmigrate restore"), cutover)) is None
    assert kafka_only_since(rec(zk_verify, ("restore", "2026-01-02T12:00:00Z", "zkmigrate restore"), cutover)) \
        is None
    # a verify from before the fence (zookeeper, then kafka, then the cutover) still ends the older run
    assert kafka_only_since(rec(cutover, kafka, ("zookeeper", "2025-12-31T00:00:00Z", "zkmigrate verify"),
                                ("kafka", "2025-12-30T00:00:00Z", "zkmigrate verify"))) == t0


def test_a_verify_of_another_phase_keeps_the_fenced_groups_kafka_evidence(services, zk, unique, tmp_path):
    from zkconsumer_migrate import state
    for phase in (["zookeeper"], ["dual", "--to", "zookeeper"]):
        t, g = _group_with_offsets(services, zk, unique, "fk")
        parts = [(t, 0), (t, 1)]
        zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
        # the stopped cut-over group passes a routine fleet verify of another phase, which records that phase
        code, rep, _ = zkmigrate_json(services, "verify", "--groups-matching", g, "--phase", *phase, expect=0)
        assert rep["groups"][0]["recorded_phase"]["phase"] == phase[0]
        assert state.fence_of(state.read_phase(zk, g)) is not None
        # the new consumers commit past ZooKeeper's offsets and stop; then the group's Kafka offsets are removed (as
        # after offsets.retention.minutes without a commit)
        ks = KafkaOffsetStore(services.bootstrap_servers, g)
        try:
            assert ks.commit({(t, 0): 8, (t, 1): 9}).ok
            assert set(ks.delete_offsets(parts).committed) == set(parts) and ks.fetch(parts) == {}
        finally:
            ks.close()
        # ZooKeeper still holds the offsets of before the cutover, frozen behind what the new consumers committed
        code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir",
                                     str(tmp_path), expect=1)
        assert set(rb["refused"]) == {"%s-0" % t, "%s-1" % t}, (phase, rb)
        assert all("recorded phase" in why and "frozen" in why for why in rb["refused"].values()), rb["refused"]
        assert "recorded_phase" not in rb and state.fence_of(state.read_phase(zk, g)) is not None
        code, rep, _ = zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", "--no-record",
                                      expect=1)
        assert any("frozen" in p for p in rep["problems"]), rep["problems"]


def test_a_cutover_stopped_between_its_acl_and_its_record_is_rolled_back(services, zk, unique, procs, tmp_path):
    """cutover --execute killed after it took the create right off /consumers/G/ids and before it recorded the
    fence: nobody can register (a member is refused with NoAuth, pointing at the rollback), so the rollback must
    give the right back although no fence is recorded; status shows the fenced node meanwhile."""
    from kazoo.security import Permissions
    from zkconsumer_migrate import state
    from zkconsumer_migrate.fence import is_fenced, set_fence
    t, g = _group_with_offsets(services, zk, unique, "fh")
    set_fence(zk, g)  # the first of cutover's two writes; the process dies before the second
    assert state.read_phase(zk, g) is None
    code, st, _ = zkmigrate_json(services, "status", "--group", g, expect=0)
    assert st["fence_acl"] == paths.group_ids_path(g) and any("rollback" in w for w in st["warnings"]), st
    code, dry, _ = zkmigrate_json(services, "rollback", "--group", g, "--backup-dir", str(tmp_path), expect=0)
    assert any(paths.group_ids_path(g) in w for w in dry["warnings"]), dry["warnings"]
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert rb["fence_lifted"]["changed"], rb
    acls, _ = zk.get_acls(paths.group_ids_path(g))
    assert not is_fenced(acls) and all(a.perms == Permissions.ALL for a in acls), acls
    back = CliConsumer(services, g, [t], consumer_id="back", props=DEFAULTS)
    procs.append(back)
    wait_until(lambda: len(back.seen(t)) == 14, 60, message="a member to join and consume from offset 3")


def test_a_member_that_cannot_read_the_fence_does_not_join(services, zk, unique, procs, tmp_path):
    """The fence fails closed: a member whose read of the phase record is refused (here: no READ right on it; a
    ZooKeeper error alike) does not take that for "no fence" and join a cut-over group."""
    from kazoo.security import ACL, Id, Permissions
    t, g = _group_with_offsets(services, zk, unique, "fn")
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--no-acl-fence", "--backup-dir", str(tmp_path),
                   expect=0)
    record = paths.group_migration_path(g)
    zk.set_acls(record, [ACL(Permissions.ALL & ~Permissions.READ, Id("world", "anyone"))])
    try:
        again = CliConsumer(services, g, [t], consumer_id="old", props=DEFAULTS)
        procs.append(again)
        _refused_at_start(again, record)
        wait_until(lambda: not again.alive(), 30, message="the refused member to exit")
        assert again.proc.returncode != 0 and any(record in ln for ln in again.log), again.describe()
        assert again.seen() == [] and not group_members(zk, g) and not owners(zk, g, [t])
    finally:
        zk.set_acls(record, [ACL(Permissions.ALL, Id("world", "anyone"))])


def test_a_dry_run_cutover_does_not_call_an_unfenced_group_ready(services, zk, unique, tmp_path):
    """A group whose Kafka offsets are up to date (the Kafka phase, or a cutover --execute that exited 3 after its
    copy: 'run the command's dry run again') and which is not fenced: the dry run must not tell the operator that it
    is READY for broker-coordinated consumers without saying that nothing is fenced (the old deployment, a Scala one
    included, can still join)."""
    from zkconsumer_migrate.fence import fenced_ids_node
    from zkconsumer_migrate import state
    t, g = _group_with_offsets(services, zk, unique, "fd")
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        assert ks.commit({(t, 0): 3, (t, 1): 3}).ok
    finally:
        ks.close()
    code, out, err = zkmigrate(services, "cutover", "--group", g, "--backup-dir", str(tmp_path))
    assert state.fence_of(state.read_phase(zk, g)) is None and fenced_ids_node(zk, g) is None
    ready = [line for line in out.splitlines() if "READY" in line]
    assert ready and all("--execute" in line for line in ready), (code, out, err)


def test_status_does_not_say_members_cannot_join_while_the_ids_node_grants_create(services, zk, unique, tmp_path):
    """A fence recorded without its ACL half (cutover --no-acl-fence, or a rollback interrupted after it gave the
    create right back and before it cleared the record): JVM (Scala) members can register. status must not tell
    the operator that ZooKeeper members cannot join."""
    t, g = _group_with_offsets(services, zk, unique, "fs")
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--no-acl-fence", "--backup-dir", str(tmp_path),
                   expect=0)
    code, out, _ = zkmigrate(services, "status", "--group", g, expect=0)
    [line] = [ln for ln in out.splitlines() if ln.startswith("Cutover fence")]
    assert "ZooKeeper members cannot join" not in line and "JVM" in line, line


def test_cutover_is_not_ready_when_the_broker_coordinated_consumers_started_first(services, zk, unique, tmp_path):
    """The ZooKeeper members have stopped, but the new (broker-coordinated) consumers were started before cutover
    said READY: the group held no Kafka offsets, so they began at auto.offset.reset (latest) and committed there,
    past records the group never consumed (ZooKeeper: 3). cutover must not report READY (the broker-side group is
    active and Kafka's offsets did not come from ZooKeeper's)."""
    from confluent_kafka import TopicPartition
    t, g = _group_with_offsets(services, zk, unique, "fe")
    kc = _broker_consumer(services, g, t, "latest")
    try:
        # it began at the log end (10) and commits there
        kc.commit(offsets=[TopicPartition(t, p, 10) for p in (0, 1)], asynchronous=False)
        code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    finally:
        kc.close()
    assert code != 0 and not out["ready"], out
    # what the refusal says to do, once the consumers are stopped: Kafka set back to ZooKeeper's offsets, cutover again
    import re
    import shlex
    [command] = re.findall(r"'(zkmigrate copy [^']*)'", out["reason"])
    wait_until(lambda: zkmigrate_json(services, *shlex.split(command)[1:])[0] == 0, 60, interval=1.0,
               message="%s to go through once the broker-side group is empty" % command)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 0 and out["ready"], out
    assert _kafka_fetch(services, g, [(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 3}


def test_cutover_is_not_ready_when_broker_coordinated_consumers_ran_and_stopped_before_it(services, zk, unique,
                                                                                         tmp_path):
    """The new consumers were started before cutover (at auto.offset.reset=latest: they committed the log end, 10,
    past ZooKeeper's 3) and stopped again before cutover ran, or after its refusal. The broker-side group is Empty:
    cutover must still not fence and say READY over the records 3..9 they skipped. Its printed command, then cutover
    again: READY at ZooKeeper's offsets. Kafka ahead of ZooKeeper from commits alone (ZooKeeper members with
    offsets.storage=kafka, no broker-coordinated consumer) stays READY."""
    import re
    import shlex
    from zkconsumer_migrate import state
    from zkconsumer_migrate.fence import fenced_ids_node
    t, g = _group_with_offsets(services, zk, unique, "fs")
    _broker_consumers_ran(services, g, t, 10)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and not out["ready"] and "Kafka 10, ZooKeeper 3" in out["reason"], out
    assert state.fence_of(state.read_phase(zk, g)) is None and fenced_ids_node(zk, g) is None
    [command] = re.findall(r"'(zkmigrate copy [^']*)'", out["reason"])
    zkmigrate_json(services, *shlex.split(command)[1:], expect=0)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 0 and out["ready"], out
    assert _kafka_fetch(services, g, [(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 3}
    # the Kafka phase: ZooKeeper-coordinated members commit to Kafka only, past ZooKeeper's frozen offsets
    t2, g2 = _group_with_offsets(services, zk, unique, "fz")
    ks = KafkaOffsetStore(services.bootstrap_servers, g2)
    try:
        ks.commit({(t2, 0): 7, (t2, 1): 7}).raise_for_errors()
    finally:
        ks.close()
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g2, "--execute", "--backup-dir", str(tmp_path))
    assert code == 0 and out["ready"], out


def test_a_second_migration_after_a_rollback_is_ready_unless_consumers_started_early_again(services, zk, unique,
                                                                                          tmp_path):
    """A group cut over (its broker-coordinated consumers ran), then rolled back; its ZooKeeper members then run a
    second Kafka phase (offsets.storage=kafka: Kafka 9 above ZooKeeper's 5). The broker-side group keeps the
    protocol type of the first consumers, but they left before the rollback: cutover is READY. Rolled back again,
    consumers started early (they committed 10 and left after the rollback): not ready."""
    t, g = _group_with_offsets(services, zk, unique, "f2")

    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _broker_consumers_ran(services, g, t, 5)
    time.sleep(1.1)
    zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _kafka_commit(services, g, {(t, 0): 9, (t, 1): 9})
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 0 and out["ready"], out
    time.sleep(1.1)
    zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    time.sleep(1.1)
    _broker_consumers_ran(services, g, t, 10)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and not out["ready"] and "Kafka 10, ZooKeeper 9" in out["reason"], out


def test_a_rollback_of_a_group_never_cut_over_does_not_excuse_consumers_that_started_early(services, zk, unique,
                                                                                           tmp_path):
    """Never cut over: broker-coordinated consumers started early (committed 10 over ZooKeeper's 3) and stopped;
    cutover is not ready. A rollback that lifts no fence (here one that leaves the topic out) must not make it
    ready: only a rollback of a cut-over group tells consumers of that cutover from early ones."""
    t, g = _group_with_offsets(services, zk, unique, "fn")
    _broker_consumers_ran(services, g, t, 10)
    time.sleep(1.1)
    zkmigrate_json(services, "rollback", "--group", g, "--exclude-topic", t, "--execute", "--backup-dir",
                   str(tmp_path), expect=0)
    code, out, _ = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and not out["ready"] and "Kafka 10, ZooKeeper 3" in out["reason"], out


def test_undoing_a_cutover_keeps_the_fence_when_the_new_consumers_committed_a_partition_it_did_not_cover(
        services, zk, unique, tmp_path):
    """Cut over at ZooKeeper's 3 (its backup covers T-0 and T-1); T grew a partition and the new consumers committed
    T-2 only (T-0 and T-1 still hold the cutover's copies, so nothing refuses the restore). Restoring the cutover's
    backup must not lift the fence: ZooKeeper has no T-2 offset, and returning members would start it at
    auto.offset.reset. The rollback it names copies T-2 and lifts the fence."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    from zkconsumer_migrate import state
    t, g = _group_with_offsets(services, zk, unique, "fp2", start=3)
    co = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    admin = AdminClient({"bootstrap.servers": services.bootstrap_servers})
    for f in admin.create_partitions([NewPartitions(t, 3)]).values():
        f.result(30)
    wait_until(lambda: b'"2"' in zk.get("/brokers/topics/%s" % t)[0], 30, message="T-2 in ZooKeeper")
    services.produce(t, 10, partition=2)
    _kafka_commit(services, g, {(t, 2): 7})
    code, rs, _ = zkmigrate_json(services, "restore", _manifest(co), "--execute", "--backup-dir", str(tmp_path))
    assert not rs.get("fence_lifted") and state.fence_of(state.read_phase(zk, g)) is not None, rs
    [why] = [w for w in rs["warnings"] if "the fence stays" in w]
    assert "%s-2" % t in why and "zkmigrate rollback --group %s --execute" % g in why, why
    rb = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    assert rb["fence_lifted"] and ZooKeeperOffsetStore(zk, g).fetch([(t, 2)]) == {(t, 2): 7}, rb


def test_undoing_the_restore_that_undid_a_cutover_puts_the_fence_back(services, zk, unique, tmp_path):
    """Restoring a cutover's backup lifts its fence; the restore's own undo line (its backup) must put the fence back
    along with the cutover's Kafka offsets."""
    from zkconsumer_migrate import state
    from zkconsumer_migrate.fence import fenced_ids_node
    t, g = _group_with_offsets(services, zk, unique, "fu", start=3)
    co = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    rs = zkmigrate_json(services, "restore", _manifest(co), "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    assert rs["fence_lifted"] and state.fence_of(state.read_phase(zk, g)) is None, rs
    zkmigrate_json(services, "restore", _manifest(rs), "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert state.fence_of(state.read_phase(zk, g)) is not None and fenced_ids_node(zk, g) is not None
    assert _kafka_fetch(services, g, [(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 3}


def test_every_restores_zookeeper_write_stays_no_evidence_of_a_member(services, zk, unique, tmp_path):
    """Cut over at 8; Kafka 10, then T-1 reset in Kafka to 2 (reprocess). Two ZooKeeper resets (T-0, then T-1) undone
    in reverse order by restoring their backups: the first restore wrote T-1's 8 back. The second restore must not
    make the rollback forget it: ZooKeeper's 8 on T-1 is a restore's write, not a member's, and keeping it over
    Kafka's 2 would skip 2..7."""
    t, g = _group_with_offsets(services, zk, unique, "fw", start=8)
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:1" % t, "--store", "kafka", "--to-offset",
                   "2", "--execute", "--backup-dir", str(tmp_path), expect=0)
    time.sleep(0.2)
    backups = [zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:%d" % (t, p), "--store",
                              "zookeeper", "--to-offset", "2", "--execute", "--backup-dir", str(tmp_path),
                              expect=0)[1] for p in (0, 1)]
    for b in reversed(backups):
        zkmigrate_json(services, "restore", _manifest(b), "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 1 and "%s-1" % t in rb["skipped_rewind"] and "%s-1" % t not in rb["kept_ahead"], rb


def test_fences_are_not_moved_over_partitions_the_backup_does_not_cover(services, zk, unique, tmp_path):
    """Undoing a cutover after the new consumers took up a topic the cutover's backup does not cover (Kafka offsets
    only): the fence stays. Undoing that undo after ZooKeeper members committed a partition it does not cover
    (ZooKeeper offsets only): refused, nothing written, until its printed copy has run."""
    import re
    import shlex
    from zkconsumer_migrate import state
    t, g = _group_with_offsets(services, zk, unique, "fo", start=3)
    co = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    u = services.create_topic(unique("fo-u"), 1)
    _kafka_commit(services, g, {(u, 0): 0})
    code, rs, _ = zkmigrate_json(services, "restore", _manifest(co), "--execute", "--backup-dir", str(tmp_path))
    assert not rs.get("fence_lifted") and state.fence_of(state.read_phase(zk, g)) is not None, rs
    assert "%s-0" % u in rs["not_in_backup"], rs
    # another group: its cutover undone; then members commit a partition of a topic the undo's backup lacks
    t, g = _group_with_offsets(services, zk, unique, "fo2", start=3)
    co = zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    rs = zkmigrate_json(services, "restore", _manifest(co), "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    assert rs["fence_lifted"], rs
    v = services.create_topic(unique("fo-v"), 1)
    ZooKeeperOffsetStore(zk, g).commit({(v, 0): 0}).raise_for_errors()
    code, out, err = zkmigrate(services, "restore", _manifest(rs), "--execute", "--backup-dir", str(tmp_path))
    assert code != 0 and "nothing written" in err and state.fence_of(state.read_phase(zk, g)) is None, (out, err)
    [command] = re.findall(r"'(zkmigrate copy [^']*)'", err)
    zkmigrate_json(services, *shlex.split(command)[1:], "--backup-dir", str(tmp_path), expect=0)
    zkmigrate_json(services, "restore", _manifest(rs), "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert state.fence_of(state.read_phase(zk, g)) is not None


def test_a_rollback_after_a_partial_cutover_lifts_the_fence(services, zk, unique, tmp_path):
    """A member registered just before the fence (cutover: not ready, the fence stays) consumed on and committed to
    ZooKeeper; the operator stops it and gives the cutover up with a rollback: it must lift the fence and leave
    ZooKeeper where the member stopped (ahead of what the cutover copied to Kafka), not refuse as a rewind."""
    from zkconsumer_migrate import state
    t, g = _group_with_offsets(services, zk, unique, "fp")
    _partial_cutover(services, zk, g, t, tmp_path)
    assert state.fence_of(state.read_phase(zk, g)) is not None
    code, out, err = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 0 and out["ok"], (code, out)
    assert state.fence_of(state.read_phase(zk, g)) is None
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 9}


def test_undoing_a_rollback_keeps_the_old_deployment_out(services, zk, unique, procs, jvm_cp, tmp_path):
    """After a cutover the new consumers consume on (Kafka ahead of ZooKeeper's frozen offsets); a rollback copies
    their offsets into ZooKeeper and lifts the fence, and prints how to undo it. Undoing it ('zkmigrate restore' of
    the backup it printed: the group goes back to the broker-coordinated consumers) puts ZooKeeper's frozen offsets
    back: the group must be fenced again (or the restore refused), or an old Scala deployment restarting joins and
    consumes again everything the new consumers consumed."""
    t, g = _group_with_offsets(services, zk, unique, "fu")
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    # the new consumers consumed every record and stopped (the broker-side group is Empty)
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        assert ks.commit({(t, 0): 10, (t, 1): 10}).ok
    finally:
        ks.close()
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    assert rb["fence_lifted"]["changed"]
    manifest = [p for p in rb["backup"] if p.endswith(".json")][0]
    code, rs, _ = zkmigrate_json(services, "restore", manifest, "--execute", "--backup-dir", str(tmp_path))
    from zkconsumer_migrate.fence import fenced_ids_node
    from zkconsumer_migrate import state
    fenced = state.fence_of(state.read_phase(zk, g)) is not None or fenced_ids_node(zk, g) is not None
    zk_now = ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)])
    # the old Scala deployment restarts
    old = JvmMember(services, g, [t], jvm_cp, consumer_id="jvm", props=DEFAULTS, workdir=str(tmp_path))
    procs.append(old)
    wait_until(lambda: len(old.seen(t)) >= 14 or any("NoAuth" in ln for ln in old.log) or not old.alive(), 90,
               message="the Scala member to join or be refused")
    seen = sorted(old.seen(t))
    old.kill()
    assert (code != 0 or fenced) and not seen, (
        "restore exit %d, fenced %s, ZooKeeper offsets %s; the Scala member consumed again %d record(s) the new "
        "consumers had consumed: %s" % (code, fenced, zk_now, len(seen), seen))


def test_a_rollback_does_not_keep_a_frozen_zookeeper_offset_above_a_deliberate_kafka_reset(services, zk, unique,
                                                                                          tmp_path):
    """Cut over at ZooKeeper's 8; the new consumers committed 10, then the operator reset Kafka to 2 to reprocess.
    ZooKeeper's 8 was last written before the cutover record (frozen there, no consumer stopped at it): a rollback
    that kept it would skip 2..7. It is a skipped rewind (exit 1, the fence kept, ZooKeeper unchanged) and
    --allow-rewind takes Kafka's 2."""
    from zkconsumer_migrate import state
    t, g = _group_with_offsets(services, zk, unique, "fr", start=8)
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "kafka", "--to-offset", "2",
                   "--execute", "--backup-dir", str(tmp_path), expect=0)
    # --allow-stale (which every stale refusal names) lets stale offsets through, not this rewind
    for extra in ((), ("--allow-stale",)):
        code, out, err = zkmigrate(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                   *extra)
        assert code == 1, (extra, out, err)
        assert "kept " not in out and "skipped %s-0: zookeeper has 8, source 2" % t in err, (extra, out, err)
        assert "--allow-rewind" in err and "before Kafka's offset became 2" in err, err
        assert state.fence_of(state.read_phase(zk, g)) is not None
        assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--allow-rewind", "--backup-dir",
                                 str(tmp_path), expect=0)
    assert rb["fence_lifted"] and ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 2, (t, 1): 2}


def test_a_rollback_keeps_a_zookeeper_offset_ahead_only_when_written_after_kafkas_last_commit(services, zk, unique,
                                                                                             tmp_path):
    """No phase record (never verified, never cut over). A member on ZooKeeper storage committed 8 after Kafka's
    last commit (3): ZooKeeper is where the group stopped, kept. Then the group committed 10 to Kafka and the
    operator reset Kafka to 2 to reprocess: ZooKeeper's 8 is now older than Kafka's last commit, and keeping it would
    skip 2..7; a skipped rewind, with --allow-stale too (exit 1, ZooKeeper unchanged)."""
    t, g = _group_with_offsets(services, zk, unique, "fk", start=1)
    _kafka_commit(services, g, {(t, 0): 3, (t, 1): 3})
    time.sleep(0.2)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 8, (t, 1): 8}).raise_for_errors()
    out = zkmigrate_json(services, "rollback", "--group", g, "--backup-dir", str(tmp_path), expect=0)[1]
    assert set(out["kept_ahead"]) == {"%s-0" % t, "%s-1" % t} and not out["skipped_rewind"], out
    time.sleep(0.2)
    _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "kafka", "--to-offset", "2",
                   "--execute", "--backup-dir", str(tmp_path), expect=0)
    for extra in ((), ("--allow-stale",)):
        code, out, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                      *extra)
        assert code == 1 and not out["kept_ahead"], (extra, out)
        assert set(out["skipped_rewind"]) == {"%s-0" % t, "%s-1" % t}, (extra, out)
        assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}
    # its way to keep ZooKeeper's, run as printed: Kafka set up to 8, then the rollback has nothing left behind
    import re
    import shlex
    [command] = set(re.findall(r"'(zkmigrate copy [^']*)'", out["skipped_rewind"]["%s-0" % t]["why"]))
    zkmigrate_json(services, *shlex.split(command)[1:], "--backup-dir", str(tmp_path), expect=0)
    zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}


def _manifest(report):
    return [p for p in report["backup"] if p.endswith(".json")][0]


def _skips_and_keeps_the_fence(services, zk, g, t, tmp_path, zk_offsets):
    """rollback --execute: exit 1, a skipped rewind for every partition, the fence kept, ZooKeeper unchanged."""
    from zkconsumer_migrate import state
    code, out, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 1 and not out["kept_ahead"], out
    assert set(out["skipped_rewind"]) == {"%s-0" % t, "%s-1" % t}, out
    assert state.fence_of(state.read_phase(zk, g)) is not None
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == zk_offsets
    return out


def test_a_restore_of_another_partition_does_not_vouch_for_a_frozen_zookeeper_offset(services, zk, unique, tmp_path):
    """Cut over at 8; the new consumers committed 10; T-0 reset in Kafka to 2 to reprocess. Then a reset of T-1 by
    mistake, undone by restoring its backup (a restore that wrote Kafka). The rollback must still not keep
    ZooKeeper's frozen 8 over T-0's 2: the restore put back T-1 only, and a reset-offsets backup vouches for
    nothing."""
    t, g = _group_with_offsets(services, zk, unique, "fv", start=8)
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    time.sleep(0.2)
    for p, to in ((0, "2"), (1, "4")):
        code, rs, _ = zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:%d" % (t, p), "--store",
                                     "kafka", "--to-offset", to, "--execute", "--backup-dir", str(tmp_path), expect=0)
    zkmigrate_json(services, "restore", _manifest(rs), "--execute", "--backup-dir", str(tmp_path), expect=0)
    code, out, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 1 and "%s-0" % t in out["skipped_rewind"] and "%s-0" % t not in out["kept_ahead"], out
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0)]) == {(t, 0): 8}


def test_a_restored_zookeeper_offset_is_no_evidence_of_a_member(services, zk, unique, tmp_path):
    """Cut over at 8; Kafka 10, then reset to 2. A rollback --allow-rewind (ZooKeeper to 2, fence lifted), undone
    by restoring its backup (ZooKeeper's 8 written back, the fence put back): the stores are as before, where a
    rollback is a skipped rewind. The restore's own ZooKeeper write must not count as a member's, a second restore
    prints no advice to roll back, and the rollback stays a skipped rewind."""
    t, g = _group_with_offsets(services, zk, unique, "fl", start=8)
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "kafka", "--to-offset", "2",
                   "--execute", "--backup-dir", str(tmp_path), expect=0)
    rb = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--allow-rewind", "--backup-dir",
                        str(tmp_path), expect=0)[1]
    time.sleep(0.2)
    for _ in range(2):
        code, out, err = zkmigrate(services, "restore", _manifest(rb), "--execute", "--backup-dir", str(tmp_path),
                                   expect=0)
        # the fence is the restored state: no advice to lift it (a rollback would undo the restore)
        assert "rollback --" not in out + err and "lifts" not in out + err, (out, err)
    out = _skips_and_keeps_the_fence(services, zk, g, t, tmp_path, {(t, 0): 8, (t, 1): 8})
    assert "zkmigrate restore" in out["skipped_rewind"]["%s-0" % t]["why"], out


def test_a_removed_kafka_offset_below_zookeepers_does_not_clear_a_frozen_one(services, zk, unique, tmp_path):
    """Cut over at 8; Kafka 10, then reset to 2 to reprocess; the group stays stopped and the broker removes its
    Kafka offsets (OffsetDelete here, expiry in the field). The removed commit, 2, is not where ZooKeeper stands:
    the frozen refusal stands (exit 1, ZooKeeper unchanged). A removed commit equal to ZooKeeper's clears it."""
    t, g = _group_with_offsets(services, zk, unique, "fx", start=8)
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:0" % t, "--store", "kafka", "--to-offset",
                   "2", "--execute", "--backup-dir", str(tmp_path), expect=0)
    zkmigrate_json(services, "reset-offsets", "--group", g, "--topic", "%s:1" % t, "--store", "kafka", "--to-offset",
                   "8", "--execute", "--backup-dir", str(tmp_path), expect=0)
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        assert ks.delete_offsets([(t, 0), (t, 1)]).ok
    finally:
        ks.close()
    code, out, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path))
    assert code == 1 and set(out["refused"]) == {"%s-0" % t}, out
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 8}


def test_a_refresh_does_not_make_a_zookeeper_offset_ahead_look_frozen(services, zk, unique, tmp_path):
    """A group back from the dual phase (Kafka 3, ZooKeeper 8 written later): the rollback keeps ZooKeeper's 8. A
    refresh (the keep-alive cutover's warning names) commits Kafka's 3 again: Kafka's offset did not change, the
    rollback still keeps 8 (it went by the refresh's commit time)."""
    t, g = _group_with_offsets(services, zk, unique, "ff", start=1)
    _kafka_commit(services, g, {(t, 0): 3, (t, 1): 3})
    time.sleep(0.2)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 8, (t, 1): 8}).raise_for_errors()
    time.sleep(0.2)
    zkmigrate(services, "refresh", "--group", g, "--execute", expect=0)
    code, out, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                  expect=0)
    assert set(out["kept_ahead"]) == {"%s-0" % t, "%s-1" % t} and not out["skipped_rewind"], out


def _partial_cutover(services, zk, g, t, tmp_path):
    """A member registered just before the fence and committed ZooKeeper 8 and 9 (ahead of what the cutover copied
    to Kafka), then stopped."""
    cid = g + "_back-1-abcdef12"

    def on_message(msg):
        if msg.startswith("fencing") and not group_members(zk, g):
            _register(zk, g, t, cid)
    out = _cutover_with(services, zk, g, on_message, tmp_path)
    assert out["ready"] is False and "came back" in out["reason"], out
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 8, (t, 1): 9}).raise_for_errors()
    zk.delete(paths.consumer_registration_path(g, cid))


def test_a_rollback_that_writes_nothing_but_lifts_the_fence_can_be_undone(services, zk, unique, tmp_path):
    """Only kept ZooKeeper offsets (ahead of Kafka): the rollback writes no offset but lifts the fence. It leaves a
    backup and prints its undo line all the same, and that line puts the fence back."""
    import shlex
    from zkconsumer_migrate import state
    from zkconsumer_migrate.fence import fenced_ids_node
    t, g = _group_with_offsets(services, zk, unique, "fw")
    _partial_cutover(services, zk, g, t, tmp_path)
    code, out, err = zkmigrate(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                               expect=0)
    assert "wrote 0 offset(s)" in out and "lifted the cutover fence" in out, (out, err)
    assert state.fence_of(state.read_phase(zk, g)) is None and fenced_ids_node(zk, g) is None
    undo = [ln for ln in err.splitlines() if ln.startswith("undo: zkmigrate restore ")]
    assert len(undo) == 1, err
    zkmigrate(services, *shlex.split(undo[0])[2:], "--backup-dir", str(tmp_path), expect=0)
    assert state.fence_of(state.read_phase(zk, g)) is not None and fenced_ids_node(zk, g) is not None
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 8, (t, 1): 9}


def _rolled_back_after_new_consumers(services, zk, unique, name, tmp_path):
    """A group cut over at ZooKeeper's 3 whose new consumers committed 10, rolled back: (topic, group, the manifest of
    the rollback's backup)."""
    t, g = _group_with_offsets(services, zk, unique, name)
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    _kafka_commit(services, g, {(t, 0): 10, (t, 1): 10})
    rb = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)[1]
    return t, g, _manifest(rb)


def test_a_restore_does_not_put_the_fence_back_over_registered_members(services, zk, unique, tmp_path):
    """Undoing a rollback (its backup lifted the fence) while ZooKeeper members are registered, --force or not: the
    fence would shut each of them out at its next session; refused, naming the ways out, nothing written. With
    --no-fence the offsets go back and the group stays unfenced."""
    from zkconsumer_migrate import state
    from zkconsumer_migrate.fence import fenced_ids_node
    t, g, manifest = _rolled_back_after_new_consumers(services, zk, unique, "fm", tmp_path)
    _register(zk, g, t, g + "_live-1-abcdef12")
    for force in ((), ("--force",)):
        code, out, err = zkmigrate(services, "restore", manifest, "--execute", *force, "--backup-dir", str(tmp_path),
                                   expect=1)
        assert "puts the fence back" in out + err and "--no-fence" in out + err, (out, err)
        assert state.fence_of(state.read_phase(zk, g)) is None and fenced_ids_node(zk, g) is None
        assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 10, (t, 1): 10}
    zkmigrate(services, "restore", manifest, "--execute", "--force", "--no-fence", "--backup-dir", str(tmp_path),
              expect=0)
    assert state.fence_of(state.read_phase(zk, g)) is None and fenced_ids_node(zk, g) is None
    assert ZooKeeperOffsetStore(zk, g).fetch([(t, 0), (t, 1)]) == {(t, 0): 3, (t, 1): 3}


def test_a_restore_that_puts_the_fence_back_keeps_its_own_restore_record(services, zk, unique, tmp_path):
    """A rollback's backup restored after Kafka moved (here: reset below it): the restore writes Kafka back and puts
    the fence back. Its record is the phase restore with the fence (restored_since: the offsets it left are
    kept by a later rollback within one retention), not a cutover record that hides it."""
    from zkconsumer_migrate import state
    t, g, manifest = _rolled_back_after_new_consumers(services, zk, unique, "fk", tmp_path)
    zkmigrate_json(services, "reset-offsets", "--group", g, "--all-topics", "--store", "kafka", "--to-offset", "5",
                   "--execute", "--backup-dir", str(tmp_path), expect=0)
    code, rs, _ = zkmigrate_json(services, "restore", manifest, "--execute", "--backup-dir", str(tmp_path),
                                 expect=0)
    rec = state.read_phase(zk, g)
    assert rec["phase"] == "restore" and state.fence_of(rec) is not None, rec
    assert state.restored_since(rec) is not None, rec


def test_a_zookeeper_offset_kept_ahead_but_refused_is_not_reported_kept(services, zk, unique, tmp_path):
    """ZooKeeper ahead of Kafka and beyond the log end: refused, and not also listed as kept."""
    t, g = _group_with_offsets(services, zk, unique, "fb")
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    ZooKeeperOffsetStore(zk, g).commit({(t, 0): 15}).raise_for_errors()
    code, out, err = zkmigrate(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                               expect=1)
    assert "REFUSED %s-0" % t in err and "kept %s-0" % t not in out, (out, err)
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--backup-dir", str(tmp_path), expect=1)
    assert "%s-0" % t in rb["refused"] and "%s-0" % t not in rb["kept_ahead"], rb


def test_a_frozen_refusal_says_when_the_removed_kafka_offset_could_not_be_read(services, zk, unique, tmp_path,
                                                                               monkeypatch):
    """A ZooKeeper offset without a Kafka one, frozen by the cutover record: the rollback reads __consumer_offsets
    to see whether Kafka went past it. When that read fails the refusal says so and names the Read right."""
    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.offsets import expiry
    t, g = _group_with_offsets(services, zk, unique, "fn")
    zkmigrate_json(services, "cutover", "--group", g, "--execute", "--backup-dir", str(tmp_path), expect=0)
    ks = KafkaOffsetStore(services.bootstrap_servers, g)
    try:
        assert ks.delete_offsets([(t, 0), (t, 1)]).ok
    finally:
        ks.close()

    def unreadable(*a, **kw):
        raise ClusterUnavailableError("TOPIC_AUTHORIZATION_FAILED")
    monkeypatch.setattr(expiry, "read_commit_log", unreadable)
    code, rb, _ = zkmigrate_json(services, "rollback", "--group", g, "--execute", "--backup-dir", str(tmp_path),
                                 expect=1)
    why = rb["refused"]["%s-0" % t]
    assert "frozen" in why and "could not be read (TOPIC_AUTHORIZATION_FAILED)" in why, why
    assert "Read on topic __consumer_offsets" in why, why
