"""zkconsumer.kafka.internals, the one place zkconsumer uses kafka-python's and kazoo's non-public APIs: every
function, run against the session's ZooKeeper and Apache Kafka 3.9 with the installed kafka-python and kazoo. An
upgrade that removes or changes any internal the adapter relies on fails here, by name, before it shows up as a
commit, a describe or a decoder that quietly falls back."""
import threading

import pytest
from kafka import KafkaConsumer
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from zkconsumer.kafka import internals
from zkconsumer.kafka import fast_records
from zkconsumer.zookeeper import multi as zk_multi
from zkconsumer.kafka.protocol.offset_commit import OffsetCommitResult, make_request


def _versions():
    from importlib.metadata import version
    return "kafka-python %s, kazoo %s" % (version("kafka-python"), version("kazoo"))


@pytest.fixture
def admin(services):
    client = internals.AdminClient(bootstrap_servers=services.bootstrap_servers, client_id="internals-test",
                                   request_timeout_ms=10000)
    yield client
    client.close()


def test_requests_of_our_own_reach_the_group_coordinator(admin, services, unique):
    group, topic = unique("internals"), services.create_topic(unique("internals"), 2)

    async def find():
        resp = await internals.send(admin, FindCoordinatorRequest(key=group, key_type=0, max_version=3))
        return internals.add_group_coordinator(admin, resp, group)
    node = internals.run(admin, find)
    assert node is not None, _versions()

    async def commit():  # our OffsetCommit v2-v5: its answer is read by our reader (wrap_header)
        return await internals.send(admin, make_request(group, {(topic, 0): 5, (topic, 1): 7}), node_id=node)
    answer = internals.run(admin, commit)
    assert isinstance(answer, OffsetCommitResult), "%s: the OffsetCommit answer was not read by zkconsumer's " \
        "reader (%r)" % (_versions(), answer)
    assert answer.error_codes == {(topic, 0): 0, (topic, 1): 0}

    async def fetch():
        req = OffsetFetchRequest(group_id=group, max_version=7, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])])
        return await internals.send(admin, req, node_id=node)
    future = internals.submit(admin, fetch)
    assert future is not None, "%s: no IO thread found on the admin client" % _versions()
    done = threading.Event()
    future.add_both(lambda _: done.set())
    assert done.wait(30) and future.exception is None, future.exception
    assert {(t.name, p.partition_index): p.committed_offset for t in future.value.topics for p in t.partitions} == {
        (topic, 0): 5, (topic, 1): 7}
    internals.close_connection(admin, node)
    assert internals.run(admin, fetch).topics  # a new connection to the same node


def test_a_failed_admin_client_leaves_no_thread(services):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = "127.0.0.1:%d" % s.getsockname()[1]
    before = set(threading.enumerate())
    with pytest.raises(Exception):
        internals.AdminClient(bootstrap_servers=dead, request_timeout_ms=1000, bootstrap_timeout_ms=1000)
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    for t in leaked:
        t.join(5)
    assert not [t for t in leaked if t.is_alive()], "%s: threads left behind: %s" % (_versions(), leaked)


_CLOSE_IN_FLIGHT = """
import logging, sys, time
from kafka import KafkaAdminClient, KafkaConsumer
from zkconsumer.cli.common import setup_logging
from zkconsumer.kafka import internals
setup_logging("warning")


def closes(quiet):
    for client in (internals.AdminClient(bootstrap_servers=sys.argv[1], client_id="internals-test"),
                   KafkaConsumer(bootstrap_servers=sys.argv[1], client_id="internals-test")):
        time.sleep(0.05)
        internals.submit(client, client._manager.cluster.refresh_metadata)
        if not quiet:
            (KafkaAdminClient.close(client) if isinstance(client, KafkaAdminClient)
             else client.close(autocommit=False))
        elif isinstance(client, KafkaConsumer):
            internals.close_quietly(client, autocommit=False)
        else:
            client.close()


hidden = []
judge = internals.logged_while_closing


def counting(record):
    quiet = judge(record)
    if quiet and "Metadata refresh: failed" in record.getMessage():
        hidden.append(record)
    return quiet


internals.logged_while_closing = counting
for _ in range(100):  # until a close has caught a refresh in flight
    closes(True)
    if hidden:
        break
print("-- %d left out --" % len(hidden), file=sys.stderr, flush=True)
print("-- closed as kafka-python closes --", file=sys.stderr, flush=True)
seen = []
counter = logging.Handler()
counter.emit = lambda record: seen.append(record) if "Metadata refresh: failed" in record.getMessage() else None
logging.getLogger().addHandler(counter)
for _ in range(100):  # until the noise shows
    closes(False)
    if seen:
        break
"""

_NOISE = ("Metadata refresh: failed", "Connection lost", "Abort (")


def test_a_client_closed_with_requests_in_flight_logs_no_error(services):
    """A command that closes its Kafka clients while a request is still in flight (a metadata refresh) prints no
    error of kafka-python's about it ("Metadata refresh: failed Cancelled", "Connection lost") at the default log
    level: AdminClient closes quietly, and so does a client given to close_quietly (the filter on kafka-python's
    loggers left such a line out). The same closes through kafka-python's own close() print those errors."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _CLOSE_IN_FLIGHT, services.bootstrap_servers], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    quiet, _, plain = p.stderr.partition("-- closed as kafka-python closes --")
    assert plain, p.stderr[-3000:]
    assert not [line for line in quiet.splitlines() if any(n in line for n in _NOISE)], \
        "%s: %s" % (_versions(), quiet[-3000:])
    assert "-- 0 left out --" not in quiet, "no quiet close caught a metadata refresh in flight: the test shows nothing"
    assert [line for line in plain.splitlines() if "Metadata refresh: failed" in line], \
        "the closes did not catch a metadata refresh in flight: the test shows nothing (%s)" % plain[-2000:]


def test_the_fast_record_decoder_installs(services):
    assert internals.partition_records_class() is not None, "%s: no Fetcher.PartitionRecords" % _versions()
    assert fast_records.fast_partition_records_class() is not None, \
        "%s: kafka-python's record decoding no longer matches zkconsumer's decoder (see the log)" % _versions()
    assert fast_records.decoder_in_use() != "kafka-python"
    consumer = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, enable_auto_commit=False)
    try:
        assert internals.consumer_fetcher(consumer) is not None
        assert fast_records.install(consumer), "%s: the fast decoder was not installed" % _versions()
    finally:
        consumer.close()


def test_a_consumers_plain_connections_take_a_socket_reader_of_ours(services, unique):
    from kafka import TopicPartition
    from zkconsumer.kafka import socket_reads
    topic = services.create_topic(unique("internals-reads"), 1)
    consumer = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, enable_auto_commit=False)
    try:
        consumer.topics()  # a connection exists before the reader is installed, others come after
        seen = []
        assert internals.plain_connections(consumer, lambda transport, sock: seen.append((transport, sock))), \
            "%s: KafkaConsumer._manager._build_transport/_conns or KafkaTCPTransport._sock_recv is gone" % _versions()
        assert seen and all(sock.fileno() >= 0 for _, sock in seen)
        assert socket_reads.install(consumer)
        assert all(internals.socket_reader_replaced(transport) for transport, _ in seen)
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        assert consumer.poll(timeout_ms=2000) == {}  # an empty topic, read through our readers without an error
    finally:
        consumer.close()


def test_fetch_responses_are_observed(services, unique):
    """observe_fetch_responses: each Fetch response of a KafkaConsumer's fetcher is reported with its broker (the
    partition's leader, as fetch_leaders says) and the time since its request; an idle partition with
    fetch_max_wait_ms=100 is answered again and again, and the records still come."""
    import time
    from kafka import KafkaProducer, TopicPartition
    topic = services.create_topic(unique("internals-fetchobs"), 1)
    consumer = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    seen = []
    try:
        assert internals.observe_fetch_responses(consumer, lambda node, s: seen.append((node, s))), \
            "%s: KafkaConsumer._fetcher._handle_fetch_response(node_id, fetch_offsets, send_time, response) is " \
            "gone" % _versions()
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = time.monotonic() + 30
        while len(seen) < 5 and time.monotonic() < end:
            consumer.poll(timeout_ms=200)
        [leader] = internals.fetch_leaders(consumer, [tp])
        assert len(seen) >= 5 and all(node == leader and 0 <= s < 5 for node, s in seen), seen
        assert internals.fetch_leaders(consumer, [TopicPartition(topic, 9)]) == set()  # no such partition
        producer = KafkaProducer(bootstrap_servers=services.bootstrap_servers)
        for i in range(3):
            producer.send(topic, b"%d" % i, partition=0)
        producer.close()
        got = []
        end = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < end:
            got.extend(r.offset for rs in consumer.poll(timeout_ms=500).values() for r in rs)
        assert got == [0, 1, 2]
    finally:
        consumer.close()


def test_a_consumers_poll_can_be_woken(services, unique):
    """install_poll_wake: a 10 s poll of an idle partition ends at once with PollWoken when woken from another thread;
    a wake that comes while no poll runs ends the next one after its first round; records are never dropped by it
    (a round that drained records returns them); a position() after a wake still waits for its answer."""
    import time
    from kafka import KafkaProducer, TopicPartition
    topic = services.create_topic(unique("internals-wake"), 1)
    consumer = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        wake = internals.install_poll_wake(consumer)
        assert wake is not None, "%s: KafkaConsumer._net.run/_poll_once, its _fetcher.fetch_records or its " \
            "_manager.wait_for is gone" % _versions()
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        assert consumer.position(tp) == 0
        threading.Timer(1.0, wake).start()
        t0 = time.monotonic()
        with pytest.raises(internals.PollWoken):
            consumer.poll(timeout_ms=10000)
        assert time.monotonic() - t0 < 5.0, "the wake did not end the poll"
        wake()  # no poll running: a position() is not cut short by it ...
        assert consumer.position(tp) == 0
        producer = KafkaProducer(bootstrap_servers=services.bootstrap_servers)
        for i in range(5):
            producer.send(topic, b"%d" % i, partition=0)
        producer.flush()
        producer.close()
        time.sleep(0.5)
        got = []
        for _ in range(10):  # ... and the next poll ends early, keeping every record it drained
            try:
                got.extend(r.offset for rs in consumer.poll(timeout_ms=2000).values() for r in rs)
            except internals.PollWoken:
                continue
            if len(got) >= 5:
                break
        assert got == [0, 1, 2, 3, 4]
    finally:
        consumer.close()


def test_kazoo_takes_our_multi_op(zk, unique):
    assert internals.kazoo_supports_call(zk), "%s: KazooClient._call is gone" % _versions()
    base = "/internals-%s" % unique("zk")
    for i in range(3):
        zk.create("%s/%d" % (base, i), b"0", makepath=True)
    root = zk.chroot or ""
    parts = [zk_multi.set_data(zk_multi.set_data_prefix(root + "%s/%d" % (base, i)), b"%d" % (10 + i))
             for i in range(3)]
    result = internals.kazoo_call(zk, zk_multi.SetDataMulti(parts, 3, False)).get(timeout=30)
    assert zk_multi.all_ok(result), result
    assert [zk.get("%s/%d" % (base, i))[0] for i in range(3)] == [b"10", b"11", b"12"]
    zk.delete(base, recursive=True)


def test_kazoo_requests_can_be_observed(zk):
    seen = []
    internals.kazoo_observe_requests(zk, lambda request: seen.append(getattr(request, "type", None)))
    zk.exists("/")
    zk.get_children("/")
    assert seen[-2:] == [3, 8], "%s: kazoo no longer hands its requests to _call (%r)" % (_versions(), seen)


def test_kazoo_transactions_take_our_requests(zk, unique):
    """The ZooKeeper offset store appends requests it built to a new transaction's request list."""
    from kazoo.protocol.serialization import SetData
    path = "/internals-%s" % unique("txn")
    zk.create(path, b"0", makepath=True)
    txn = zk.transaction()
    ops = internals.kazoo_transaction_requests(txn)
    assert ops is not None, "%s: KazooClient.transaction() has no request list (operations)" % _versions()
    ops.append(SetData((zk.chroot or "") + path, b"7", -1))
    assert [type(r).__name__ for r in txn.commit()] == ["ZnodeStat"]
    assert zk.get(path)[0] == b"7"
    assert internals.kazoo_transaction_requests(txn) is None  # committed: nothing more goes in
    zk.delete(path)


def test_kazoo_tells_the_session_timeout_it_was_granted(services):
    """The session lease's length is the timeout the server granted, not the one asked for: a member asking for
    100 s from a server whose maxSessionTimeout is 60 s (the local cluster's) has a 60 s session, and a lease of
    0.6 x 100 s would outlive it (kazoo keeps only the timeout asked for)."""
    from zkconsumer.consumer.lease import SessionLease
    from zkconsumer.zookeeper import client as zkmod
    client = zkmod.connect(services.zookeeper_connect, session_timeout_ms=100000)
    try:
        granted = internals.kazoo_session_timeout_ms(client)
        assert granted == 60000, "%s: granted %r" % (_versions(), granted)
        assert SessionLease(client, 100000).timeout_s() == 60.0
    finally:
        zkmod.close(client)
    assert internals.kazoo_session_timeout_ms(object()) is None


def test_kazoo_takes_a_bound_on_the_handshake(zk):
    """kazoo_bound_handshake works on this kazoo's client (the relay test in tests/zookeeper/test_zk_attempts.py
    shows the bound), and refuses a client whose connection is not kazoo's own ConnectionHandler."""
    from kazoo.client import KazooClient
    client = KazooClient(hosts="127.0.0.1:1")
    internals.kazoo_bound_handshake(client, 1.5)
    assert type(client._connection).__name__ == "_BoundedHandshake"
    assert client._connection._zkconsumer_handshake_s == 1.5
    with pytest.raises(internals.IncompatibleClientError) as e:
        internals.kazoo_bound_handshake(client, 1.5)  # already bound: not kazoo's own class any more
    assert "kazoo" in str(e.value) and "ConnectionHandler" in str(e.value)


def test_a_missing_internal_is_named():
    class Bare:
        pass
    with pytest.raises(internals.IncompatibleClientError) as e:
        internals.run(Bare(), lambda: None)
    assert "kafka-python" in str(e.value) and "Bare._net" in str(e.value) and "setup.cfg" in str(e.value)
    with pytest.raises(internals.IncompatibleClientError) as e:
        internals.kazoo_call(type("Zk", (), {"handler": type("H", (), {"async_result": lambda self: None})()})(), 1)
    assert "kazoo" in str(e.value) and "_call" in str(e.value)
