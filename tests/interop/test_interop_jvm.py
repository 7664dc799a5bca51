"""Mixed groups: zkconsumer members and Kafka 1.1.1's own Scala ``ZookeeperConsumerConnector`` in one group, on
Apache Kafka 3.9 (ZooKeeper mode). The JVM members are the oracle: every member creates only its own owner nodes,
so when both kinds compute different assignments partitions stay unowned (or owner nodes conflict forever) — the
owner nodes equal to the Scala assignors' result over the registered members prove both sides agree.

* range and roundrobin, two streams per member, two topics: owner nodes = the assignment, every message delivered
  exactly once;
* hand-over both ways: kill -9 and SIGTERM of a JVM member (ours take over from its committed offsets) and of a
  zkconsumer member (the JVM members take over): nothing lost, nothing delivered twice (the members were idle
  past a commit interval before each stop);
* a wildcard (whitelist) member of each kind in one group;
* a conflicting ``consumer.id`` each way, and a rolling bounce of the mixed group under load.
"""
import time

import pytest

from tests.support.consumer_helpers import (BackgroundProducer, CliConsumer, duplicates, group_members, owners,
                                            produce_tracked, topic_partitions)
from tests.support.jvm_helpers import JvmMember, compile_member
from tests.support.waiting import wait_until
from zkconsumer.core.assignors import get_assignor
from zkconsumer.core.subscription.topic_count import consumers_per_topic

PROPS = {"zookeeper.session.timeout.ms": "6000", "auto.commit.interval.ms": "200", "rebalance.backoff.ms": "500",
         "rebalance.max.retries": "30", "auto.offset.reset": "smallest"}


@pytest.fixture(scope="module")
def jvm_cp(tmp_path_factory):
    return compile_member(str(tmp_path_factory.mktemp("jvm-classes")))


def expected(zk, group, topics, strategy="range"):
    members = group_members(zk, group)
    cft = consumers_per_topic({cid: (r.subscription, r.pattern) for cid, r in members.items()}, topics)
    return get_assignor(strategy)(cft, {t: topic_partitions(zk, t) for t in topics})


def wait_agreed(zk, group, topics, n, strategy="range", timeout=60):
    """Wait until n members are registered and the owner nodes equal the assignment of those members."""
    last = {}

    def check():
        if len(group_members(zk, group)) != n:
            return None
        want = expected(zk, group, topics, strategy)
        have = owners(zk, group, topics)
        last.update(diff=sorted((tp, want.get(tp), have.get(tp)) for tp in set(want) | set(have)
                                if want.get(tp) != have.get(tp)))
        return want if want and have == want else None
    try:
        return wait_until(check, timeout, interval=0.2, message="%d members of %s to agree (%s)"
                          % (n, group, strategy))
    except AssertionError as e:
        raise AssertionError("%s; (partition, expected, owner node) that differ: %s" % (e, last.get("diff")))


def delivered(members, topic):
    return [x for m in members for x in m.seen(topic)]


def wait_delivered(members, topic, produced, timeout=40):
    want = {(p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(delivered(members, topic)), timeout, interval=0.2,
               message="every message of %s delivered (%d)" % (topic, len(want)))


def no_jvm_errors(members):
    for m in members:
        if isinstance(m, JvmMember):
            assert not m.errors(), m.describe()


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_mixed_group_agrees_with_the_scala_assignment_and_delivers_once(services, zk, unique, procs, jvm_cp,
                                                                         tmp_path, strategy):
    g = unique("mixed")
    topics = [services.create_topic(unique("mx"), 8), services.create_topic(unique("mx"), 11)]  # 8 threads
    props = dict(PROPS, **{"partition.assignment.strategy": strategy})
    members = [CliConsumer(services, g, topics, consumer_id="py%d" % i, props=props, streams=2) for i in (1, 2)]
    members += [JvmMember(services, g, topics, jvm_cp, consumer_id="jvm%d" % i, props=props, streams=2,
                          workdir=str(tmp_path)) for i in (1, 2)]
    procs.extend(members)
    assignment = wait_agreed(zk, g, topics, 4, strategy)
    assert {th.rsplit("-", 1)[0] for th in assignment.values()} == {m.consumer_id for m in members}
    for t in topics:
        produced = produce_tracked(services.bootstrap_servers, t, 120, partitions=len(topic_partitions(zk, t)),
                                   tag=strategy)
        wait_delivered(members, t, produced)
        # each message exactly once, by the member whose thread owns its partition
        assert not duplicates(delivered(members, t))
        for m in members:
            for p, _ in m.seen(t):
                assert assignment[(t, p)].rsplit("-", 1)[0] == m.consumer_id, (m.name, t, p)
    assert owners(zk, g, topics) == assignment
    no_jvm_errors(members)


def test_handover_both_ways_kill9_and_graceful(services, zk, unique, procs, jvm_cp, tmp_path):
    g, t = unique("handover"), services.create_topic(unique("ho"), 6)
    py1 = CliConsumer(services, g, [t], consumer_id="py1", props=PROPS)
    jvm1 = JvmMember(services, g, [t], jvm_cp, consumer_id="jvm1", props=PROPS, workdir=str(tmp_path))
    jvm2 = JvmMember(services, g, [t], jvm_cp, consumer_id="jvm2", props=PROPS, workdir=str(tmp_path))
    members = [py1, jvm1, jvm2]
    procs.extend(members)
    produced = []

    def phase(tag, n_members, live):
        wait_agreed(zk, g, [t], n_members)
        produced.extend(produce_tracked(services.bootstrap_servers, t, 60, partitions=6, tag=tag))
        wait_delivered(members, t, produced)
        time.sleep(1.0)  # idle past several auto-commit intervals: everything delivered is committed

    phase("a", 3, members)
    jvm1.kill()                      # JVM member killed: ours and the other JVM take over from its offsets
    phase("b", 2, members)
    assert jvm2.terminate() == 0     # JVM member stopped gracefully (commits, releases owners)
    phase("c", 1, members)
    jvm3 = JvmMember(services, g, [t], jvm_cp, consumer_id="jvm3", props=PROPS, workdir=str(tmp_path))
    members.append(jvm3)
    procs.append(jvm3)
    phase("d", 2, members)
    py1.kill()                       # our member killed: the JVM member takes over from our committed offsets
    phase("e", 1, members)
    py2 = CliConsumer(services, g, [t], consumer_id="py2", props=PROPS)
    members.append(py2)
    procs.append(py2)
    phase("f", 2, members)
    assert jvm3.terminate() == 0     # and ours takes over from a graceful JVM stop
    phase("g", 1, members)
    seen = delivered(members, t)
    assert {(p, o) for p, o, _ in produced} <= set(seen), "lost messages"
    assert not duplicates(seen), "delivered twice across hand-overs: %s" % sorted(duplicates(seen))[:10]
    no_jvm_errors(members)


def test_wildcard_member_of_each_kind(services, zk, unique, procs, jvm_cp, tmp_path):
    g = unique("wc")
    prefix = unique("wc")
    topics = [services.create_topic(prefix + "-a", 3), services.create_topic(prefix + "-b", 4)]
    regex = prefix + "-.*"
    py = CliConsumer(services, g, [], consumer_id="py", props=PROPS, extra_args=["--whitelist", regex])
    jvm = JvmMember(services, g, "whitelist:" + regex, jvm_cp, consumer_id="jvm", props=PROPS, workdir=str(tmp_path))
    members = [py, jvm]
    procs.extend(members)
    assignment = wait_agreed(zk, g, topics, 2)
    regs = group_members(zk, g)
    assert regs[py.consumer_id].pattern == regs[jvm.consumer_id].pattern == "white_list"
    assert {th.rsplit("-", 1)[0] for th in assignment.values()} == {py.consumer_id, jvm.consumer_id}
    for t in topics:
        produced = produce_tracked(services.bootstrap_servers, t, 40, partitions=len(topic_partitions(zk, t)), tag="w")
        wait_delivered(members, t, produced)
        assert not duplicates(delivered(members, t))
    no_jvm_errors(members)


def test_whitelist_with_a_backslash_means_the_same_to_both(services, zk, unique, procs, jvm_cp, tmp_path):
    """Kafka 1.1.1 stores a wildcard registration's regex escaped twice (WildcardTopicCount escapes it with
    Utils.JSONEscapeString, then the JSON encoder escapes it again) and reads it back once: a JVM member whose
    whitelist has a backslash (``a\\-.*``) is, for every member that reads ZooKeeper — itself included — subscribed
    to a regex that matches no topic. zkconsumer reads the registration the same way, so both agree that the JVM
    member owns nothing; our own member writes its regex escaped once, as JSON requires, and consumes."""
    g, prefix = unique("bs"), unique("bs")
    t = services.create_topic(prefix + "-a", 3)
    regex = prefix + "\\-.*"
    py = CliConsumer(services, g, [], consumer_id="py", props=PROPS, extra_args=["--whitelist", regex])
    jvm = JvmMember(services, g, "whitelist:" + regex, jvm_cp, consumer_id="jvm", props=PROPS, workdir=str(tmp_path))
    procs.extend([py, jvm])
    assignment = wait_agreed(zk, g, [t], 2)
    assert set(assignment.values()) == {py.consumer_id + "-0"}
    regs = group_members(zk, g)
    assert list(regs[jvm.consumer_id].subscription) == [prefix + "\\\\-.*"]  # as Kafka 1.1.1 wrote it
    assert list(regs[py.consumer_id].subscription) == [regex]
    produced = produce_tracked(services.bootstrap_servers, t, 30, partitions=3, tag="bs")
    wait_delivered([py], t, produced)
    assert jvm.seen(t) == []


def test_conflicting_consumer_id_each_way(services, zk, unique, procs, jvm_cp, tmp_path):
    g, t = unique("dupid"), services.create_topic(unique("dupid"), 2)
    py = CliConsumer(services, g, [t], consumer_id="same", props=PROPS)
    procs.append(py)
    wait_agreed(zk, g, [t], 1)
    reg_before = zk.exists("/consumers/%s/ids/%s" % (g, py.consumer_id))
    # a JVM member with the same consumer.id: the Scala consumer refuses to register over a live node of another
    # session (ZkNodeExistsException after its checked-ephemeral wait) and exits; ours is untouched
    jvm = JvmMember(services, g, [t], jvm_cp, consumer_id="same", props=PROPS, workdir=str(tmp_path))
    procs.append(jvm)
    wait_until(lambda: not jvm.alive() or jvm.started(), 60, message="the JVM member to give up or start")
    assert not jvm.started(), "the Scala consumer registered over a live registration"
    reg_after = zk.exists("/consumers/%s/ids/%s" % (g, py.consumer_id))
    assert reg_after is not None and reg_after.ephemeralOwner == reg_before.ephemeralOwner
    produced = produce_tracked(services.bootstrap_servers, t, 20, partitions=2, tag="dup")
    wait_delivered([py], t, produced)

    # and the reverse: a live JVM member, then ours with its consumer.id: ours waits, then fails clearly
    g2 = unique("dupid")
    jvm2 = JvmMember(services, g2, [t], jvm_cp, consumer_id="same", props=PROPS, workdir=str(tmp_path))
    procs.append(jvm2)
    wait_agreed(zk, g2, [t], 1)
    py2 = CliConsumer(services, g2, [t], consumer_id="same",
                      props=dict(PROPS, **{"zookeeper.session.timeout.ms": "3000"}))
    procs.append(py2)
    wait_until(lambda: not py2.alive(), 60, message="our member to give up on the live JVM registration")
    assert py2.proc.returncode == 1 and any("consumer.id" in line or "registered" in line for line in py2.log), \
        py2.describe()
    assert "Traceback" not in "\n".join(py2.log)
    assert jvm2.alive() and not jvm2.errors()
    produced = produce_tracked(services.bootstrap_servers, t, 20, partitions=2, tag="dup2")
    wait_delivered([jvm2], t, produced)


def test_rolling_bounce_of_a_mixed_group_under_load(services, zk, unique, procs, jvm_cp, tmp_path):
    g, t = unique("bounce"), services.create_topic(unique("bounce"), 8)

    def start(kind, name):
        if kind == "py":
            m = CliConsumer(services, g, [t], consumer_id=name, props=PROPS)
        else:
            m = JvmMember(services, g, [t], jvm_cp, consumer_id=name, props=PROPS, workdir=str(tmp_path))
        procs.append(m)
        return m

    spec = [("py", "p1"), ("jvm", "j1"), ("py", "p2"), ("jvm", "j2")]
    live = {name: start(kind, name) for kind, name in spec}
    everyone = list(live.values())
    wait_agreed(zk, g, [t], 4)
    producer = BackgroundProducer(services.bootstrap_servers, t, 8, batch=8, pause=0.1, tag="bounce")
    producer.start()
    rebalances = []  # per bounce: the most assign events any other zkconsumer member saw (a rebalance each)

    def assigns(m):
        with m.lock:
            return sum(1 for e in m.events if e.get("event") == "assign")
    try:
        for kind, name in spec:
            others = [m for n, m in live.items() if n != name and not isinstance(m, JvmMember)]
            before = {id(m): assigns(m) for m in others}
            assert live[name].terminate() == 0, live[name].describe()
            live[name] = start(kind, name)
            everyone.append(live[name])
            wait_agreed(zk, g, [t], 4, timeout=90)
            time.sleep(1.0)  # let any late rebalance show
            rebalances.append(max(assigns(m) - before[id(m)] for m in others))
    finally:
        produced = producer.stop()
    wait_delivered(everyone, t, produced, timeout=60)
    for m in everyone:
        if isinstance(m, JvmMember):
            assert not any("ConsumerRebalanceFailedException" in line for line in m.log), m.describe()
            assert not m.errors(), m.describe()
        else:
            assert not any("can't rebalance" in line or "Traceback" in line for line in m.log), m.describe()
    # a bounce is a leave and a join: at most two rebalances for the others (no storm)
    assert all(r <= 2 for r in rebalances), rebalances
    print("\nrolling bounce of a mixed group: rebalances seen by the other zkconsumer members per bounce %s"
          % rebalances)
