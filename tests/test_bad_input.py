"""Bad input corpus: malformed configuration, illegal names, corrupt znodes, impossible offsets, oversized messages,
missing topics and unreachable servers — through the real CLI against the real services. Every case ends with a
clear message and a bounded outcome (an exit code, or a consumer that keeps consuming), never a traceback, a silent
stall or a crash loop.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from chaos_support import TimedConsumer, stable_tree, tree_diff, zk_tree
from consumer_helpers import produce_tracked, wait_until
from zkconsumer.layout import paths
from zkconsumer.local import processes

CLI = [sys.executable, "-m", "zkconsumer"]


def run_cli(args, timeout=60):
    t0 = time.monotonic()
    p = subprocess.run(CLI + list(args), capture_output=True, timeout=timeout, env=dict(os.environ,
                                                                                    PYTHONUNBUFFERED="1"))
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


def assert_clear_error(rc, err, *needles, code=2):
    """code: 2 = bad input, 3 = could not check (ZooKeeper or Kafka unreachable)."""
    assert rc == code, "exit code %s (expected %d), stderr:\n%s" % (rc, code, err)
    assert "Traceback" not in err, err
    assert "zkconsumer: error:" in err, err
    for n in needles:
        assert n in err, "%r not in error output:\n%s" % (n, err)


# -- consumer.properties ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, needles", [
    ("group.id=g\nzookeeper.connect=127.0.0.1:1\nbad=\\uZZZZ\n", ["line 3", "\\u"]),
    ("group.id=g\nzookeeper.connect=127.0.0.1:1\nbad=\\u12\n", ["line 3", "\\u"]),
    ("group.id=g\nzookeeper.connect=127.0.0.1:1\nzookeeper.session.timeout.ms=abc\n",
     ["zookeeper.session.timeout.ms", "'abc'"]),
    ("group.id=g\nzookeeper.connect=127.0.0.1:1\nzookeeper.session.timeout.ms=99999999999\n",
     ["zookeeper.session.timeout.ms", "99999999999"]),
    ("group.id=g\nzookeeper.connect=127.0.0.1:1\nauto.offset.reset=middle\n", ["auto.offset.reset", "middle"]),
    ("group.id=g\nzookeeper.connect=127.0.0.1:1\nauto.commit.enable=yes\n", ["auto.commit.enable", "yes"]),
    ("group.id=g\nzookeeper.connect=127.0.0.1:1\nrebalance.max.retries=-3\n", ["rebalance.max.retries", "-3"]),
    ("group.id=g\nzookeeper.connect=not a host\n", ["zookeeper.connect"]),
    ("group.id=../brokers\nzookeeper.connect=127.0.0.1:1\n", ["group.id", "../brokers"]),
], ids=["bad-unicode-escape", "short-unicode-escape", "non-integer", "int-overflow", "bad-enum", "bad-bool",
        "negative", "bad-connect", "group-path-injection"])
def test_malformed_properties_file_is_a_clear_error(tmp_path, body, needles):
    cfg = tmp_path / "consumer.properties"
    cfg.write_text(body)
    rc, out, err, took = run_cli(["consume", "--config", str(cfg), "--topic", "x"], timeout=30)
    assert_clear_error(rc, err, *needles)
    assert out == ""
    assert took < 15  # fails before connecting anywhere (port 1 is closed anyway)


def test_unknown_property_is_a_warning_and_consumption_works(services, zk, unique, tmp_path):
    g, t = unique("unk"), unique("unk")
    services.create_topic(t, 1)
    produce_tracked(services.bootstrap_servers, t, 5, partition=0)
    cfg = tmp_path / "consumer.properties"
    cfg.write_text("group.id=%s\nzookeeper.connect=%s\nauto.offset.reset=smallest\nno.such.key=1\n"
                   "zookeeper.sesion.timeout.ms=3000\n" % (g, services.zookeeper_connect))
    rc, out, err, _ = run_cli(["consume", "--config", str(cfg), "--topic", t, "--max-messages", "5"], timeout=60)
    assert rc == 0, err
    assert [json.loads(x)["offset"] for x in out.splitlines()] == [0, 1, 2, 3, 4]
    assert "unknown consumer property 'no.such.key'" in err, err
    assert "unknown consumer property 'zookeeper.sesion.timeout.ms'" in err, err  # a typo is named
    assert "Traceback" not in err


# -- illegal names: nothing in ZooKeeper may change ------------------------------------------------------------
BAD_NAMES = ["../brokers", "a/b", "..", ".", "/consumers", "a b", "x" * 250, ""]  # (NUL cannot be in argv)


def test_illegal_group_and_topic_names_change_no_znode(services, zk, unique):
    before = stable_tree(zk)
    good = unique("good")
    for bad in BAD_NAMES:
        for args in (["--group", bad, "--topic", good], ["--group", good, "--topic", bad],
                     ["--group", good, "--topic", good, "--topic", bad]):
            rc, out, err, _ = run_cli(["consume", "--zookeeper", services.zookeeper_connect] + args
                                      + ["--property", "zookeeper.session.timeout.ms=3000"], timeout=60)
            assert rc != 0, (args, err)
            assert "Traceback" not in err, err
            assert "error" in err.lower(), (args, err)
            if bad:
                # the message names the bad value (as given or repr'd)
                assert (bad in err) or (repr(bad)[1:-1] in err) or (len(bad) > 200 and "250" in err), (args, err)
            assert out == ""
    after = zk_tree(zk)
    diff = tree_diff(before, after)
    assert not diff, "illegal names changed ZooKeeper:\n%s" % "\n".join(diff[:20])
    assert not zk.exists("/consumers/" + good)


# -- corrupt znodes of the group ---------------------------------------------------------------------------------
def test_corrupt_group_znodes(services, zk, unique, procs):
    """A non-JSON registration of another 'member', a non-integer offset node and a persistent owner node of a
    member that does not exist: the consumer starts, logs each problem, and consumes all its partitions. The corrupt
    offset node counts as "no offset" (auto.offset.reset): the reset point is committed over it at the claim."""
    g, t = unique("corrupt"), unique("corrupt")
    services.create_topic(t, 3)
    produced = produce_tracked(services.bootstrap_servers, t, 30, partitions=3)
    zk.create(paths.consumer_registration_path(g, g + "_bogus"), b"{not json", makepath=True)
    zk.create(paths.partition_offset_path(g, t, 0), b"abc", makepath=True)
    zk.create(paths.partition_owner_path(g, t, 1), (g + "_ghost-0").encode(), makepath=True)
    c = TimedConsumer(services, g, [t], consumer_id="real",
                      props={"auto.commit.interval.ms": "60000"})   # no periodic commit during the check
    procs.append(c)
    want = {(p, o) for p, o, _ in produced}
    try:
        wait_until(lambda: want <= set(c.seen(t)), 40, interval=0.2, message="all 30 messages")
    except AssertionError:
        raise AssertionError("%s\nmissing %s" % (c.describe(), sorted(want - set(c.seen(t)))))
    log = "\n".join(c.log)
    assert "malformed registration" in log and g + "_bogus" in log, log
    assert "offset" in log and "abc" in log, "the corrupt offset node was not logged:\n" + log
    assert "ghost" in log, "the stale owner node was not logged:\n" + log
    owned = {tuple(x) for x in c.events[-1]["partitions"]}
    assert owned == {(t, 0), (t, 1), (t, 2)}
    # consumed but not yet committed (interval 60 s): the corrupt offset node holds the reset point committed at the
    # claim (auto.offset.reset=smallest: 0), not the consumed position
    assert zk.get(paths.partition_offset_path(g, t, 0))[0] == b"0"
    # the bogus registration is left alone (not ours to delete)
    assert zk.get(paths.consumer_registration_path(g, g + "_bogus"))[0] == b"{not json"
    assert c.terminate(timeout=30) == 0, c.describe()
    # the graceful shutdown commits real offsets: the node now holds the next offset
    assert zk.get(paths.partition_offset_path(g, t, 0))[0] == b"10"
    assert "Traceback" not in "\n".join(c.log)


# -- committed offset out of range -------------------------------------------------------------------------------
@pytest.mark.parametrize("reset", ["smallest", "largest"])
def test_out_of_range_committed_offset(services, zk, unique, procs, reset):
    g, t = unique("oor"), unique("oor")
    services.create_topic(t, 1)
    services.produce(t, 20, partition=0, one_per_batch=True)  # tansu: latest offsets right only per record
    zk.create(paths.partition_offset_path(g, t, 0), b"1000000000", makepath=True)
    c = TimedConsumer(services, g, [t], consumer_id="r", props={"auto.offset.reset": reset})
    procs.append(c)
    wait_until(lambda: c.events and c.events[-1]["event"] == "assign", 30, message="assignment")
    # A real Kafka broker answers a fetch beyond the log end with OFFSET_OUT_OF_RANGE; tansu 0.6 returns an empty
    # response instead. Either way the fetcher must notice (position > the high watermark the broker reports) and
    # apply auto.offset.reset, as the Scala consumer did (Kafka 1.1.1 ConsumerFetcherThread.handleOffsetOutOfRange).
    if reset == "smallest":
        wait_until(lambda: len(c.seen(t)) >= 20, 30, message="re-consumption from the start")
        assert [o for _, o in c.seen(t)][:20] == list(range(20))
    else:
        time.sleep(3.0)  # the reset to the log end happens on the first fetch
        assert c.seen(t) == []
        services.produce(t, 5, partition=0, one_per_batch=True)
        wait_until(lambda: len(c.seen(t)) >= 5, 30, message="new messages after the reset to the end")
        assert [o for _, o in c.seen(t)] == [20, 21, 22, 23, 24]
    # the impossible offset is replaced by a real one at the next commit
    wait_until(lambda: int(zk.get(paths.partition_offset_path(g, t, 0))[0]) <= 25, 10,
               message="a real committed offset")
    assert c.alive() and not c.stderr_problems(), c.describe()


# -- oversized message -------------------------------------------------------------------------------------------
def test_message_larger_than_fetch_max_bytes(services, zk, unique, procs):
    """kafka-python 3 fetches with Fetch v4+: a record batch larger than max_partition_fetch_bytes is still
    returned whole when it is the first in the partition (KIP-74), so the consumer delivers it (unlike the Scala
    consumer, which stalled with MessageSizeTooLargeException). Asserted: it is delivered, with the messages
    around it, and nothing stalls or crashes."""
    g, t = unique("big"), unique("big")
    services.create_topic(t, 1)
    from kafka import KafkaProducer
    pr = KafkaProducer(bootstrap_servers=services.bootstrap_servers, max_request_size=2_000_000, linger_ms=0,
                       enable_idempotence=False)
    try:
        for v in (b"small-1", b"B" * 300_000, b"small-2"):
            pr.send(t, value=v, partition=0).get(timeout=30)
    finally:
        pr.close()
    c = TimedConsumer(services, g, [t], consumer_id="big", props={"fetch.message.max.bytes": "65536"})
    procs.append(c)
    try:
        wait_until(lambda: len(c.seen(t)) >= 3, 40, message="all three messages, the 300 kB one included")
    except AssertionError:
        log = "\n".join(c.log)
        # acceptable alternative: a clear error naming fetch.message.max.bytes, logged a bounded number of times
        assert "fetch.message.max.bytes" in log, "silent stall:\n" + c.describe()
        raise
    assert [o for _, o in c.seen(t)] == [0, 1, 2]
    assert len(c.values()[1]) == 300_000
    assert c.alive() and not c.stderr_problems(), c.describe()


# -- unknown topic -----------------------------------------------------------------------------------------------
def test_unknown_topic_owns_nothing_then_consumes_once_created(services, zk, unique, procs):
    g, t = unique("nosuch"), unique("nosuch")
    c = TimedConsumer(services, g, [t], consumer_id="u")
    procs.append(c)
    wait_until(lambda: zk.exists(paths.consumer_registration_path(g, c.consumer_id)), 20, message="registration")
    wait_until(lambda: any(t in ln and "does not exist" in ln for ln in list(c.log)), 20,
               message="a log line about the missing topic")
    time.sleep(1.0)
    assert c.alive(), c.describe()
    assert not zk.exists(paths.topic_owners_path(g, t)) or not zk.get_children(paths.topic_owners_path(g, t))
    assert all(not e["partitions"] for e in c.events)
    services.create_topic(t, 2)
    produced = produce_tracked(services.bootstrap_servers, t, 10, partitions=2)
    wait_until(lambda: {(p, o) for p, o, _ in produced} <= set(c.seen(t)), 30,
               message="consumption once the topic exists")
    assert not c.stderr_problems(), c.describe()


# -- unreachable servers -----------------------------------------------------------------------------------------
def test_unreachable_zookeeper_exits_1_within_connection_timeout():
    port = processes.free_port()  # nothing listens there
    rc, out, err, took = run_cli(["consume", "--zookeeper", "127.0.0.1:%d" % port, "--group", "g", "--topic", "t",
                                  "--property", "zookeeper.connection.timeout.ms=2000"], timeout=30)
    assert_clear_error(rc, err, "cannot connect to ZooKeeper", "127.0.0.1:%d" % port, code=3)
    assert took < 2.0 + 8.0, took  # connection timeout + interpreter start-up


def test_unreachable_broker_is_retried_with_a_clear_message_then_consumed(services, zk, unique, procs):
    """The only broker registered (in a chroot) points at a closed port. The member must keep running (brokers
    come back; the Scala consumer retried leader lookups every refresh.leader.backoff.ms too), say which broker it
    cannot reach without flooding the log, deliver nothing — and consume as soon as the registration points at a
    live broker again."""
    chroot = "/" + unique("chroot")
    t = services.create_topic(unique("unreach"), 1)
    dead_port = processes.free_port()
    live_id = zk.get_children("/brokers/ids")[0]
    live_reg = zk.get("/brokers/ids/" + live_id)[0]
    reg = json.loads(live_reg)
    reg.update({"host": "127.0.0.1", "port": dead_port, "endpoints": ["PLAINTEXT://127.0.0.1:%d" % dead_port]})
    zk.create(chroot + "/brokers/ids/" + live_id, json.dumps(reg).encode(), makepath=True)
    zk.create(chroot + "/brokers/topics/" + t,
              json.dumps({"version": 1, "partitions": {"0": [int(live_id)]}}).encode(), makepath=True)
    try:
        c = TimedConsumer(type("S", (), {"zookeeper_connect": services.zookeeper_connect + chroot})(), "g", [t],
                          consumer_id="x", props={"refresh.leader.backoff.ms": "200"})
        procs.append(c)
        time.sleep(12)
        assert c.alive(), "the member gave up on an unreachable broker:\n" + c.describe()
        log = "\n".join(c.log)
        assert "127.0.0.1:%d" % dead_port in log, "no message naming the unreachable broker:\n" + c.describe()
        assert "Traceback" not in log, log
        assert len(c.log) < 100, "%d log lines in 12 s: a flood, not a retry" % len(c.log)
        assert c.seen() == []
        # the broker "comes back": its registration now points at the live broker
        zk.set(chroot + "/brokers/ids/" + live_id, live_reg)
        produced = produce_tracked(services.bootstrap_servers, t, 5, partition=0, tag="back")
        want = sorted((p, o) for p, o, _ in produced)
        wait_until(lambda: sorted(c.seen(t)) == want, 30, message="delivery once the broker is reachable")
    finally:
        for c in procs:
            c.kill()
        zk.delete(chroot, recursive=True)
