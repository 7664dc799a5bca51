"""The starting point auto.offset.reset chose is recorded (committed) as the consumed offset, as the Scala consumer
did: otherwise, with the default ``largest``, a message produced while the group is down (or while it rebalances)
is skipped by a second reset to the end.
"""
from tests.support.consumer_helpers import StreamCollector, connector, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths


def _committed(zk, g, t):
    path = paths.partition_offset_path(g, t, 0)
    return int(zk.get(path)[0]) if zk.exists(path) else None


def test_restart_after_an_idle_member_delivers_what_was_produced_meanwhile(services, zk, unique, conns):
    g, t = unique("reset"), services.create_topic(unique("reset"), 1)
    a = connector(services, g, **{"auto.offset.reset": "largest"})  # the default
    conns.append(a)
    a.create_message_streams({t: 1})
    wait_until(lambda: len(a.owned_partitions()) == 1, 20, message="a owns the partition")
    a.shutdown()  # graceful: commits what it consumed (nothing but the reset point)
    assert _committed(zk, g, t) == 0, "the reset point (log end 0) was not committed"
    produced = produce_tracked(services.bootstrap_servers, t, 1, partition=0, tag="while-down")
    b = connector(services, g, **{"auto.offset.reset": "largest"})
    conns.append(b)
    [stream] = b.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    wait_until(lambda: col.seen(t) == [(t, 0, produced[0][1])], 20, message="the message produced while down")


def test_reset_point_survives_a_hand_over_with_records_queued(services, zk, unique, conns):
    g, t = unique("reset"), services.create_topic(unique("reset"), 1)
    produce_tracked(services.bootstrap_servers, t, 10, partition=0, tag="old")   # offsets 0..9: not for us
    a = connector(services, g, **{"auto.offset.reset": "largest"})
    conns.append(a)
    a.create_message_streams({t: 1})  # never iterated: fetched records stay queued
    wait_until(lambda: len(a.owned_partitions()) == 1, 20, message="a owns the partition")
    wait_until(lambda: a.rebalancer.parts[(t, 0)].consumed == 10, 10, message="the reset point 10 counted as consumed")
    produced = produce_tracked(services.bootstrap_servers, t, 1, partition=0, tag="queued")  # offset 10
    a.shutdown()
    assert _committed(zk, g, t) == 10
    b = connector(services, g, **{"auto.offset.reset": "largest"})
    conns.append(b)
    [stream] = b.create_message_streams({t: 1})[t]
    col = StreamCollector(stream)
    col.start()
    wait_until(lambda: col.seen(t) == [(t, 0, produced[0][1])], 20, message="offset 10 delivered by the successor")


def test_a_position_outside_the_log_is_reset_when_two_checks_find_it(services, unique):
    """A broker that answers a fetch outside the log with nothing (rather than OFFSET_OUT_OF_RANGE) leaves the
    fetcher to find the position outside the log itself: ListOffsets must say so at two checks, the first kept on the
    partition's PartitionTopicInfo, before auto.offset.reset moves it; the reset point becomes the consumed
    position. The checks run on a fetcher thread that is not started, with a real client of the real broker."""
    from kafka import TopicPartition

    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.consumer.fetcher import FetcherThread
    from zkconsumer.consumer.partition_info import PartitionTopicInfo
    t = services.create_topic(unique("outside"), 1)
    services.produce(t, 5, partition=0)
    config = ConsumerConfig.from_properties({"group.id": unique("g"), "zookeeper.connect": services.zookeeper_connect,
                                             "auto.offset.reset": "largest"})
    fetcher = FetcherThread(0, services.bootstrap_servers, config)
    consumer = fetcher._ensure_consumer()
    try:
        tp, ktp = (t, 0), TopicPartition(t, 0)
        part = PartitionTopicInfo(tp, "g_c-0")
        consumer.assign([ktp])
        consumer.seek(ktp, 0)
        wait_until(lambda: consumer.poll(timeout_ms=200) and consumer.highwater(ktp) == 5, 20,
                   message="a fetch that tells the client the high watermark")
        # a position the log does not have, not fetched (so the broker has not said so)
        consumer.seek(ktp, 1000)
        part.consumed = part.fetched = 1000
        fetcher._assignment = {tp: part}
        fetcher._check_out_of_range()
        assert part.range_suspect == 1000 and part.consumed == 1000, "reset after one check"
        fetcher._last_range_check = 0.0
        fetcher._check_out_of_range()
        assert part.range_suspect is None
        assert part.consumed == part.fetched == 5, "not reset to the log end after the second check"
    finally:
        consumer.close(autocommit=False)


def test_the_fetch_loop_looks_for_unresolved_reset_points_only_while_there_is_one(services, unique):
    """The fetch loop records the reset points not known when an assignment was applied (a partition without a
    leader, say: test_leaderless_partition.py). It once scanned its whole assignment for them every 0.2 s, whether or
    not one was unresolved. A running fetcher of the real broker: with every partition at a consumed position it
    never scans; a partition to reset is resolved while its assignment is applied, and no scan follows."""
    import queue
    import time

    from zkconsumer.core.config import ConsumerConfig
    from zkconsumer.consumer.fetcher import RESOLVE_WAIT_S, FetcherThread
    from zkconsumer.consumer.partition_info import PartitionTopicInfo
    t = services.create_topic(unique("scan"), 2)
    services.produce(t, 5, partition=0)
    config = ConsumerConfig.from_properties({"group.id": unique("g"), "zookeeper.connect": services.zookeeper_connect,
                                             "auto.offset.reset": "largest"})
    fetcher = FetcherThread(0, services.bootstrap_servers, config)
    scans = []
    resolve = fetcher._resolve_resets
    fetcher._resolve_resets = lambda wait_s=0.0: (scans.append(wait_s), resolve(wait_s))[1]

    def part(p, consumed):
        info = PartitionTopicInfo((t, p), "c-0")
        info.consumed = consumed
        info.queue = queue.Queue()
        return info
    fetcher.start()
    try:
        first = part(0, 0)
        fetcher.assign(0, {(t, 0): first})
        wait_until(lambda: first.fetched == 5, 20, message="the records of partition 0 fetched")
        time.sleep(1.0)
        assert scans == [], "scanned for unresolved reset points while there was none"
        second = part(1, None)                     # nothing committed: reset to the log end (0)
        fetcher.assign(1, {(t, 0): first, (t, 1): second})
        assert scans == [RESOLVE_WAIT_S] and not second.reset_unresolved and second.consumed == 0
        time.sleep(1.0)
        assert scans == [RESOLVE_WAIT_S], "scanned again after every reset point was resolved"
    finally:
        fetcher.shutdown()
        fetcher.join(10)
