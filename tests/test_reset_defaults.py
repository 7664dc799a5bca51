"""Reset points under the settings users run: ``auto.offset.reset=largest``, ``auto.commit.interval.ms=60000``,
members killed with ``kill -9``.

A reset (no committed offset, or one the log no longer has) becomes the member's consumed position and is committed
at once, as the Scala consumer recorded it in ``PartitionTopicInfo.resetConsumeOffset`` (Kafka 1.1.1
``ConsumerFetcherThread.handleOffsetOutOfRange``) and then some: Scala wrote it only at the next auto-commit, so a
member killed before its first commit left no offset, and its successor reset to the end again and skipped what was
produced meanwhile. Every member here is a ``zkconsumer consume`` process run with the defaults
(``consumer_helpers.PRODUCTION_PROPS``), except where a test says otherwise.
"""
import time

import pytest

from consumer_helpers import CliConsumer, produce_tracked, wait_until
from zkconsumer.layout import paths


def _zk_offset(zk, g, t, p=0):
    path = paths.partition_offset_path(g, t, p)
    return int(zk.get(path)[0]) if zk.exists(path) else None


def _set_zk_offset(zk, g, t, value, p=0):
    path = paths.partition_offset_path(g, t, p)
    zk.ensure_path(path)
    zk.set(path, b"%d" % value)


def _delete_records_before(services, t, offset, p=0):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=services.bootstrap_servers)
    try:
        admin.delete_records({TopicPartition(t, p): offset})
    finally:
        admin.close()


def _caught_up(services, member, t, deadline_s=30):
    """Produce one probe at a time until the member delivers one: it is then fetching at the log end (a probe
    produced before its reset to the end is skipped by that reset, as it should be)."""
    probes = []

    def delivered():
        probes.extend(produce_tracked(services.bootstrap_servers, t, 1, partition=0, tag="probe%d" % len(probes)))
        try:
            wait_until(lambda: probes[-1][1] in {o for _, o in member.seen(t)}, 2, interval=0.05)
        except AssertionError:
            return False
        return True
    wait_until(delivered, deadline_s, interval=0, message="a probe delivered by %s" % member.name)
    return probes[-1][1]


def _delivers(services, member, t, produced, timeout=40):
    want = {o for _, o, _ in produced}
    wait_until(lambda: want <= {o for _, o in member.seen(t)}, timeout,
               message="offsets %s delivered to %s" % (sorted(want), member.name))


@pytest.mark.parametrize("where", ["beyond the log end", "before the log start"])
def test_the_reset_of_an_out_of_range_offset_is_committed(services, zk, unique, procs, where):
    """The issue's steps: the committed offset is out of range (a bogus value, or retention overtook a stopped
    group); the member resets to the log end and its next commit records it, so what is produced after a restart
    is delivered."""
    g, t = unique("oor"), services.create_topic(unique("oor"), 1)
    produce_tracked(services.bootstrap_servers, t, 20, partition=0, tag="old")
    if where == "beyond the log end":
        _set_zk_offset(zk, g, t, 1000000000)
    else:
        _set_zk_offset(zk, g, t, 5)
        _delete_records_before(services, t, 15)
    first = CliConsumer(services, g, [t], consumer_id="first", props={"auto.commit.interval.ms": "1000"},
                        defaults=True)
    procs.append(first)
    wait_until(lambda: _zk_offset(zk, g, t) == 20, 30, message="the reset point 20 committed (%s)" % first.describe())
    assert first.terminate() == 0, first.describe()
    produced = produce_tracked(services.bootstrap_servers, t, 5, partition=0, tag="after")
    again = CliConsumer(services, g, [t], consumer_id="again", defaults=True)
    procs.append(again)
    _delivers(services, again, t, produced)
    assert not any(o < 20 for _, o in again.seen(t)), again.seen(t)


# each fetch engine, whatever ZKCONSUMER_TEST_FETCH_ENGINE says: librdkafka reports an out-of-range position its own
# way (after the records of the same poll), and the suite's usual run is on the default engine
ENGINES = pytest.mark.parametrize("engine", ["kafka-python", "librdkafka"])


@ENGINES
def test_an_out_of_range_reset_survives_kill_9_before_the_first_auto_commit(services, zk, unique, procs, engine):
    """Defaults (60 s commit interval): the reset point is committed when the reset happens, not a minute later,
    so a member killed in between leaves it behind for its successor."""
    g, t = unique("oor9"), services.create_topic(unique("oor9"), 1)
    produce_tracked(services.bootstrap_servers, t, 20, partition=0, tag="old")
    _set_zk_offset(zk, g, t, 1000000000)
    props = {"fetch.engine": engine}
    first = CliConsumer(services, g, [t], consumer_id="first", props=props, defaults=True)
    procs.append(first)
    _caught_up(services, first, t)
    first.kill()
    produced = produce_tracked(services.bootstrap_servers, t, 5, partition=0, tag="while-down")
    again = CliConsumer(services, g, [t], consumer_id="again", props=props, defaults=True)
    procs.append(again)
    _delivers(services, again, t, produced)


@pytest.mark.parametrize("storage, engine", [("zookeeper", "kafka-python"), ("kafka", "kafka-python"),
                                             ("dual", "kafka-python"), ("zookeeper", "librdkafka")])
def test_the_first_reset_point_is_committed_at_the_claim(services, zk, unique, procs, storage, engine):
    """A new group with ``largest``: the reset point is committed right after the claim, to the group's offset
    store (both stores for dual commit), so a member killed before its first 60 s auto-commit resumes from it."""
    g, t = unique("claim"), services.create_topic(unique("claim"), 1)
    produce_tracked(services.bootstrap_servers, t, 3, partition=0, tag="old")  # before the group: not for it
    props = {"fetch.engine": engine}
    if storage != "zookeeper":
        props.update({"offsets.storage": "kafka", "dual.commit.enabled": "true" if storage == "dual" else "false"})
    first = CliConsumer(services, g, [t], consumer_id="first", props=props, defaults=True)
    procs.append(first)
    probe = _caught_up(services, first, t)
    first.kill()
    # the reset point (3), or the consumed position if the prompt commit came after a probe was delivered
    committed = []
    if storage != "kafka":
        committed.append(_zk_offset(zk, g, t))
    if storage != "zookeeper":
        from zkconsumer.offsets.kafka import KafkaOffsetStore
        store = KafkaOffsetStore(services.bootstrap_servers, g)
        try:
            committed.append(store.fetch([(t, 0)]).get((t, 0)))
        finally:
            store.close()
    assert all(c is not None and 3 <= c <= probe + 1 for c in committed), \
        "no reset point committed before the first auto-commit (%s)" % committed
    produced = produce_tracked(services.bootstrap_servers, t, 5, partition=0, tag="while-down")
    again = CliConsumer(services, g, [t], consumer_id="again", props=props, defaults=True)
    procs.append(again)
    _delivers(services, again, t, produced)
    assert min(o for _, o in again.seen(t)) == max(committed), again.seen(t)  # from there: no older record


def test_a_reset_behind_queued_records_is_recorded_after_them(services, zk, unique, conns):
    """Retention overtakes a member that lags (its stream's queue is full): the fetch position falls out of range and
    is reset to the log end while records fetched before are still queued. They are delivered, then the reset point
    becomes the consumed position (queued behind them) and is committed then, not at the next auto-commit a minute
    later: a member killed in between would leave the position the log no longer has, and its successor would reset
    to the then end of the log, skipping what was produced meanwhile. In-process member with the defaults (60 s
    commits, ``largest``); small fetches so the records come in chunks. The default fetch engine: librdkafka's
    prefetches at least 16 MiB per partition, so with it the log would have to be far larger for the fetch position
    to fall out of range while records are queued (the fetcher's reset code is the same for both engines)."""
    from consumer_helpers import StreamCollector, connector
    g, t = unique("lag"), services.create_topic(unique("lag"), 1)
    for batch in range(6):  # offsets 0..59 in six batches of ten 200-byte records
        produce_tracked(services.bootstrap_servers, t, 10, partition=0, tag="b%d-%s" % (batch, "x" * 190))
    _set_zk_offset(zk, g, t, 0)
    started = time.monotonic()
    a = connector(services, g, defaults=True, **{"fetch.message.max.bytes": "1024", "queued.max.message.chunks": "1",
                                                 "fetch.engine": "kafka-python"})
    conns.append(a)
    [stream] = a.create_message_streams({t: 1})[t]
    part = a.rebalancer.parts[(t, 0)]
    wait_until(lambda: part.fetched is not None and part.fetched >= 10 and part.queue.full(), 20,
               message="the stream's queue full, the fetcher waiting")
    _delete_records_before(services, t, 50)  # everything the fetcher has not fetched yet is gone
    col = StreamCollector(stream, delay=0.02)
    col.start()
    # well before the first auto-commit (60 s after the start), which would record it anyway
    wait_until(lambda: _zk_offset(zk, g, t) == 60, min(30.0, max(5.0, 50.0 - (time.monotonic() - started))),
               message="the reset point 60 committed before the first auto-commit")
    delivered = sorted(o for _, _, o in col.seen(t))
    assert delivered == list(range(len(delivered))) and len(delivered) >= 20, delivered  # fetched before: delivered


def test_a_reset_point_whose_commit_failed_is_committed_when_the_store_answers(services, zk, unique, procs):
    """The prompt commit of a new group's reset point fails (here ZooKeeper refuses the offset node: the topic's
    offsets node is read-only for a while; a connection lost during a ZooKeeper election does the same): it is tried
    again until it goes through, not left to the first auto-commit a minute later. A member killed with ``kill -9``
    after the store answers again leaves the reset point behind, and its successor delivers what was produced while
    it was down."""
    from kazoo.security import OPEN_ACL_UNSAFE, make_acl
    g, t = unique("retry"), services.create_topic(unique("retry"), 1)
    produce_tracked(services.bootstrap_servers, t, 3, partition=0, tag="old")  # before the group: not for it
    offsets_node = paths.topic_offsets_path(g, t)
    zk.ensure_path(paths.group_offsets_path(g))
    zk.create(offsets_node, b"", acl=[make_acl("world", "anyone", read=True, admin=True)])
    started = time.monotonic()
    first = CliConsumer(services, g, [t], consumer_id="first", defaults=True)
    procs.append(first)
    _caught_up(services, first, t)  # its reset point is known: the commit of it was refused
    assert _zk_offset(zk, g, t) is None
    zk.set_acls(offsets_node, OPEN_ACL_UNSAFE)
    wait_until(lambda: _zk_offset(zk, g, t) is not None, min(30.0, max(5.0, 50.0 - (time.monotonic() - started))),
               message="the reset point committed once ZooKeeper accepts it, before the first auto-commit")
    first.kill()
    produced = produce_tracked(services.bootstrap_servers, t, 5, partition=0, tag="while-down")
    again = CliConsumer(services, g, [t], consumer_id="again", defaults=True)
    procs.append(again)
    _delivers(services, again, t, produced)
