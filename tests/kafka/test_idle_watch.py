"""The idle watch (zkconsumer.kafka.idle_watch) against the real broker: what it asks (internals.caught_up_plan from a
kafka-python client at the end of its partitions), when an answer says "fetch" (records, a high watermark above a
position, an error) and when it does not, that a wake ends a round the broker is holding, that a record produced
during a held round ends it, and that a broker it cannot reach is trouble, never "nothing arrived"."""
import socket
import threading
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.support.consumer_helpers import produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.kafka.idle_watch import IdleWatch, WatchTrouble
from zkconsumer.kafka.internals import caught_up_plan

HOLD_MS = 20_000  # the broker holds a round this long when nothing arrives: a missed wake or record shows


def _watch(max_wait_ms=HOLD_MS):
    return IdleWatch("idle-watch-test", max_wait_ms, 1, 1 << 20, timeout_s=max_wait_ms / 1000.0 + 30,
                     connect_timeout_s=10)


def _caught_up(services, t, partitions):
    """A plan from a kafka-python client that fetched each partition of *t* to its end."""
    c = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(t, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_end()

        def plan():
            c.poll(timeout_ms=200)
            return caught_up_plan(c, tps)
        return wait_until(plan, 30, message="the client to reach the end of every partition")
    finally:
        c.close()


def test_the_plan_is_every_partition_at_its_end_and_an_unchanged_log_is_not_moved(services, unique):
    t = services.create_topic(unique("iw"), 3)
    produce_tracked(services.bootstrap_servers, t, 6, partitions=2)  # partition 2 stays empty
    plan = _caught_up(services, t, 3)
    assert sorted(p for _, parts in plan.values() for p in parts) == [(t, 0, 3), (t, 1, 3), (t, 2, 0)]
    w = _watch(max_wait_ms=300)
    try:
        moved, answered = w.round(plan)
        assert moved is False and [n for n, _ in answered] == list(plan)
        moved, _ = w.round(plan)  # the same sockets again
        assert moved is False
    finally:
        w.close()


def test_a_position_below_the_end_or_an_unknown_partition_moves(services, unique):
    t = services.create_topic(unique("iw"), 2)
    produce_tracked(services.bootstrap_servers, t, 4, partitions=2)
    plan = _caught_up(services, t, 2)
    node, (address, parts) = next(iter(plan.items()))
    w = _watch(max_wait_ms=300)
    try:
        assert w.round({node: (address, [(t, 0, 2), (t, 1, 2)])})[0] is False
        assert w.round({node: (address, [(t, 0, 1), (t, 1, 2)])})[0] is True   # records at 1
        assert w.round({node: (address, [(t, 0, 2), (t, 7, 0)])})[0] is True   # no partition 7: an error
        assert w.round({node: (address, [(t, 0, 9), (t, 1, 2)])})[0] is True   # beyond the log: out of range
    finally:
        w.close()


def test_a_record_produced_while_the_broker_holds_the_round_ends_it(services, unique):
    t = services.create_topic(unique("iw"), 1)
    plan = _caught_up(services, t, 1)
    w = _watch()
    timer = threading.Timer(1.0, lambda: produce_tracked(services.bootstrap_servers, t, 1, partition=0))
    timer.start()
    started = time.monotonic()
    try:
        moved, answered = w.round(plan)
    finally:
        timer.join()
        w.close()
    assert moved is True and len(answered) == 1
    assert time.monotonic() - started < HOLD_MS / 1000.0, "the round waited for the broker's hold, not the record"


def test_a_wake_ends_a_round_the_broker_holds(services, unique):
    t = services.create_topic(unique("iw"), 1)
    plan = _caught_up(services, t, 1)
    w = _watch()
    timer = threading.Timer(1.0, w.wake)
    timer.start()
    started = time.monotonic()
    try:
        assert w.round(plan) == (None, [])
        assert time.monotonic() - started < HOLD_MS / 1000.0, "the wake did not end the round"
        # the dropped request's answer never reaches the next round: a new connection, an unchanged log
        short = _watch(max_wait_ms=200)
        try:
            assert short.round(plan)[0] is False
        finally:
            short.close()
    finally:
        timer.join()
        w.close()


def test_a_broker_it_cannot_reach_is_trouble(services, unique):
    t = services.create_topic(unique("iw"), 1)
    plan = _caught_up(services, t, 1)
    node, (_, parts) = next(iter(plan.items()))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed_port = s.getsockname()[1]
    s.close()
    w = _watch()
    try:
        with pytest.raises(WatchTrouble):
            w.round({node: (("127.0.0.1", closed_port), parts)})
    finally:
        w.close()
