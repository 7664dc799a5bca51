"""The rebalancer's states that only failures reach, each driven for real.

* a failed attempt (the member's own registration deleted out of band): the next attempt registers again;
* DEGRADED: ``rebalance.max.retries`` attempts fail (the only broker registered is unreachable, so fetchers cannot
  start); the member keeps retrying every ``rebalance.slow.retry.ms`` and recovers on its own once the broker is
  reachable;
* SUSPENDED: the ZooKeeper server is frozen (the session lives on); after ``zookeeper.suspended.grace.ms``
  delivery pauses although the broker keeps serving; the member resumes when ZooKeeper answers again;
* the bounded queue: with a slow application, ``queued.max.message.chunks`` bounds what is fetched ahead;
* a registration left by our own previous session (KAFKA-1387's stale ephemeral node): waited out, then taken.
"""
import json
import logging
import signal
import subprocess
import sys
import time


from chaos_support import own_cluster_fixture
from consumer_helpers import FAST_PROPS, BackgroundProducer, StreamCollector, produce_tracked, wait_until
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer import ZookeeperConsumerConnector
from zkconsumer.local import processes


def make(zookeeper_connect, group, conns, **props):
    merged = dict(FAST_PROPS, **{"group.id": group, "zookeeper.connect": zookeeper_connect})
    merged.update({k.replace("_", "."): str(v) for k, v in props.items()})
    conn = ZookeeperConsumerConnector(ConsumerConfig.from_properties(merged))
    conns.append(conn)
    return conn


def _delete_tree(zk, path):
    from kazoo.exceptions import NotEmptyError
    try:
        zk.delete(path, recursive=True)
        return True
    except NotEmptyError:  # an ephemeral node of a just-closed session is still being removed
        return False


def test_degraded_keeps_retrying_and_recovers(services, zk, unique, conns):
    chroot = "/" + unique("degraded")
    t = services.create_topic(unique("degraded"), 1)
    live_id = zk.get_children("/brokers/ids")[0]
    live_reg = zk.get("/brokers/ids/" + live_id)[0]
    dead = json.loads(live_reg)
    port = processes.free_port()
    dead.update({"port": port, "endpoints": ["PLAINTEXT://127.0.0.1:%d" % port]})
    zk.create(chroot + "/brokers/ids/" + live_id, json.dumps(dead).encode(), makepath=True)
    zk.create(chroot + "/brokers/topics/" + t, json.dumps({"version": 1, "partitions": {"0": [int(live_id)]}}).encode(),
              makepath=True)
    try:
        # socket.timeout.ms bounds how long a fetch client tries an unreachable broker (default 30 s)
        conn = make(services.zookeeper_connect + chroot, unique("g"), conns, rebalance_max_retries=2,
                    rebalance_backoff_ms=100, rebalance_slow_retry_ms=500, socket_timeout_ms=2000,
                    split_brain_check="warn", split_brain_check_timeout_ms=1000)  # its only broker is unreachable
        [stream] = conn.create_message_streams({t: 1})[t]
        col = StreamCollector(stream)
        col.start()
        wait_until(lambda: conn.state == "DEGRADED", 60, message="DEGRADED after rebalance.max.retries failures")
        time.sleep(1.5)  # still trying (slow retries), never idle
        assert conn.state in ("DEGRADED", "SETTLING", "ASSIGNING", "RELEASING", "CLAIMING", "FETCHING")
        zk.set(chroot + "/brokers/ids/" + live_id, live_reg)  # the broker is reachable again
        wait_until(lambda: conn.state == "IDLE", 60, message="recovery from DEGRADED by the slow retry")
        produced = produce_tracked(services.bootstrap_servers, t, 5, partition=0, tag="deg")
        wait_until(lambda: sorted(col.seen(t)) == sorted((t, p, o) for p, o, _ in produced), 20,
                   message="delivery after recovery")
    finally:
        for c in conns:
            c.shutdown()  # its ephemeral nodes go with its session, before the chroot is removed
        wait_until(lambda: _delete_tree(zk, chroot), 10, message="chroot %s removed" % chroot)


def test_a_failed_attempt_keeps_the_group_read_cache_and_says_so(services, zk, unique, conns, caplog):
    """A failed attempt (here: the member's own registration deleted out of band) is followed by a new one, which
    registers again; the group read cache is kept, and the log says what happens rather than Kafka 1.1.1's
    "Clearing the cache before the next rebalancing operation is triggered"."""
    caplog.set_level(logging.INFO, logger="zkconsumer.consumer.rebalancer")
    t = services.create_topic(unique("failed"), 1)
    g = unique("g")
    conn = make(services.zookeeper_connect, g, conns)
    conn.create_message_streams({t: 1})
    wait_until(lambda: conn.state == "IDLE", 30, message="first rebalance")
    reader = conn.rebalancer._reader
    registration = "/consumers/%s/ids/%s" % (g, conn.consumer_id)
    zk.delete(registration)
    wait_until(lambda: conn.rebalancer.stats["failed_attempts"] >= 1 and conn.state == "IDLE"
               and zk.exists(registration) is not None, 30, message="failed attempt, then registered again")
    assert conn.rebalancer._reader is reader
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Rebalancing attempt failed")]
    assert said and not any("Clearing the cache" in m for m in said), said


own = own_cluster_fixture("states-own-cluster")


def test_suspended_pauses_delivery_after_the_grace(own, unique, conns):
    t = own.create_topic(unique("susp"), 2)
    conn = make(own.zookeeper_connect, unique("g"), conns, zookeeper_session_timeout_ms=20000,
                zookeeper_suspended_grace_ms=1000)
    [stream] = conn.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    wait_until(lambda: conn.state == "IDLE" and len(conn.owned_partitions()) == 2, 30, message="assigned")
    producer = BackgroundProducer(own.bootstrap_servers, t, 2, batch=4, pause=0.05, tag="susp")
    producer.start()
    try:
        wait_until(lambda: col.seen(t), 20, message="delivery before the outage")
        own.freeze("zookeeper")
        try:
            # kazoo notices a frozen server by its missed pings (about 2/3 of the session timeout)
            wait_until(lambda: conn.state == "SUSPENDED", 20, interval=0.02, message="SUSPENDED")
            suspended_at = time.monotonic()
            time.sleep(3.0)
            late = col.seen_between(suspended_at + 1.0 + 0.5, time.monotonic())  # grace + slack
            assert conn.state == "SUSPENDED"
        finally:
            own.thaw("zookeeper")
        assert late == [], "%d records delivered while suspended past the grace" % len(late)
        wait_until(lambda: conn.state == "IDLE", 30, message="back to IDLE after ZooKeeper answers")
        n = len(col.seen(t))
        wait_until(lambda: len(col.seen(t)) > n, 20, message="delivery resumes")
    finally:
        produced = producer.stop()
    want = {(t, p, o) for p, o, _ in produced}
    wait_until(lambda: want <= set(col.seen(t)), 30, message="nothing lost across the suspension")


def test_bounded_queue_holds_under_a_slow_application(services, unique, conns):
    t = services.create_topic(unique("bounded"), 1)
    services.produce(t, 5000, size=50, partition=0)
    conn = make(services.zookeeper_connect, unique("g"), conns, queued_max_message_chunks=2,
                fetch_message_max_bytes=20000)
    [stream] = conn.create_message_streams({t: 1})[t]
    first = next(stream)  # take one, then be "slow": do not iterate for a while
    time.sleep(3.0)
    buffered = sum(len(c.records) for c in list(stream.queue.queue) if hasattr(c, "records"))
    assert stream.queue.qsize() <= 2
    assert buffered < 5000 - 1, "everything was fetched ahead: the queue bound did not hold (%d)" % buffered
    rest = [next(stream) for _ in range(4999)]
    offsets = [first.offset] + [r.offset for r in rest]
    assert offsets == list(range(5000)), "gaps or reordering after the queue was full"


def test_registration_of_our_own_old_session_is_waited_out(services, zk, unique, conns):
    """A previous process with the same consumer.id was killed: its ephemeral registration lives on until its
    session expires. The new process must wait for it (not fail, not delete it) and then register."""
    g = unique("g")
    t = services.create_topic(unique("stale"), 1)
    old_session_ms = 4000
    path = "/consumers/%s/ids/%s_same" % (g, g)
    code = ("import sys,time\nfrom kazoo.client import KazooClient\n"
            "z=KazooClient(hosts=sys.argv[1], timeout=%f)\nz.start(10)\n"
            "z.create(sys.argv[2], b'{\"version\":1,\"subscription\":{\"%s\":1},\"pattern\":\"static\","
            "\"timestamp\":\"1\"}', ephemeral=True, makepath=True)\nprint('ready', flush=True)\ntime.sleep(600)\n"
            % (old_session_ms / 1000.0, t))
    old = subprocess.Popen([sys.executable, "-c", code, services.zookeeper_connect, path], stdout=subprocess.PIPE,
                           text=True)
    try:
        assert old.stdout.readline().strip() == "ready"
        old.send_signal(signal.SIGKILL)  # the "old process" dies; its session (and node) live until expiry
        old.wait(10)
        killed_at = time.monotonic()
        conn = make(services.zookeeper_connect, g, conns, consumer_id="same")
        [stream] = conn.create_message_streams({t: 1})[t]
        registered_after = time.monotonic() - killed_at
        stat = zk.exists(path)
        assert stat is not None and stat.ephemeralOwner == conn.zk.client_id[0]
        assert registered_after >= old_session_ms / 1000.0 * 0.5, "registered before the old session could expire"
        col = StreamCollector(stream)
        col.start()
        produced = produce_tracked(services.bootstrap_servers, t, 3, partition=0, tag="stale")
        wait_until(lambda: sorted(col.seen(t)) == sorted((t, p, o) for p, o, _ in produced), 20,
                   message="the new registration consumes")
    finally:
        if old.poll() is None:
            old.kill()


def test_shutdown_while_zookeeper_is_unreachable_is_bounded(own, unique, conns, procs):
    """ZooKeeper frozen (SIGSTOP): shutdown() of an in-process member and SIGTERM of a `zkconsumer consume` process
    both finish within a bound and say what they could not do (no TypeError, no hang until ZooKeeper returns)."""
    from consumer_helpers import CliConsumer
    t = own.create_topic(unique("shut"), 2)
    conn = make(own.zookeeper_connect, unique("g"), conns, zookeeper_session_timeout_ms=20000,
                zookeeper_connection_timeout_ms=3000)
    [stream] = conn.create_message_streams({t: 1})[t]
    cli = CliConsumer(own, unique("g"), [t], consumer_id="cli",
                      props={"zookeeper.session.timeout.ms": "20000", "zookeeper.connection.timeout.ms": "3000"})
    procs.append(cli)
    wait_until(lambda: conn.state == "IDLE" and len(conn.owned_partitions()) == 2 and cli.events, 30,
               message="both members assigned")
    produce_tracked(own.bootstrap_servers, t, 10, partitions=2, tag="shut")
    wait_until(lambda: len(cli.seen(t)) == 10, 20, message="the CLI member consumed")
    next(stream)  # the in-process member consumed something: it has an offset to commit
    own.freeze("zookeeper")
    try:
        t0 = time.monotonic()
        conn.shutdown()
        took = time.monotonic() - t0
        cli.proc.send_signal(signal.SIGTERM)
        rc = cli.proc.wait(30)
        cli_took = time.monotonic() - t0 - took
    finally:
        own.thaw("zookeeper")
    cli.join_readers()
    bound = conn.shutdown_bound_s()  # 2 x zookeeper.connection.timeout.ms = 6 s here
    assert took < bound + 2, "shutdown() took %.1f s with ZooKeeper unreachable (bound %.0f s)" % (took, bound)
    assert cli_took < bound + 5 and rc == 0, (cli_took, rc, cli.describe())
    assert any("shutdown:" in line for line in cli.log), cli.describe()
    assert not any("Traceback" in line for line in cli.log), cli.describe()
