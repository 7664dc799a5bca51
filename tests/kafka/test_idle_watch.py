"""The idle watch (zkconsumer.kafka.idle_watch) against the real broker: what it asks (internals.caught_up_plan from a
kafka-python client at the end of its partitions), when an answer says "fetch" (records, another high watermark, an
error) and when it does not; that it asks again as soon as a leader answered, and that one silent leader neither
delays what another leader's answer says nor stops that leader's answers being counted; that a wake ends it, while
the broker holds a request or while a connection hangs; that a record produced while the broker holds the request
ends it; that a broker it cannot reach or that stays silent is trouble, never "nothing arrived"; and that it works
with descriptors above 1024; that it keeps its connection from one watch to the next and closes it with itself; and
that a client before or after the end of a partition gets no plan. A listening socket that never answers stands for
a silent leader."""
import os
import resource
import socket
import threading
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.support.consumer_helpers import produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.kafka.idle_watch import IdleWatch, WatchTrouble
from zkconsumer.kafka.internals import caught_up_plan

HOLD_MS = 20_000  # the broker holds a request this long when nothing arrives: a missed wake or record shows
# (the watches end after 60 s at the latest: a missed wake fails the test instead of hanging it)


def _watch(max_wait_ms=HOLD_MS, margin_s=30.0):
    return IdleWatch("idle-watch-test", max_wait_ms, 1, 1 << 20, answer_margin_s=margin_s)


def _caught_up(services, t, partitions, client=None):
    """A plan from a kafka-python client (*client*, else one of its own) that fetched each partition of *t* to its
    end."""
    c = client or KafkaConsumer(bootstrap_servers=services.bootstrap_servers, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(t, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_end()

        def plan():
            c.poll(timeout_ms=200)
            return caught_up_plan(c, tps)
        return wait_until(plan, 30, message="the client to reach the end of every partition")
    finally:
        if client is None:
            c.close()


def _descriptors():
    return len(os.listdir("/proc/self/fd"))


def _one(plan):
    node, (address, parts) = next(iter(plan.items()))
    return node, address, parts


class Answers(list):
    def __call__(self, node, seconds):
        self.append((node, seconds))


@pytest.fixture
def hanging():
    """An address whose connections hang: a listener with a full backlog (one connection waiting, never accepted)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    filler = socket.create_connection(s.getsockname())
    yield s.getsockname()
    filler.close()
    s.close()


def test_the_plan_is_every_partition_at_its_end_and_an_unchanged_log_is_asked_again_and_again(services, unique):
    t = services.create_topic(unique("iw"), 3)
    produce_tracked(services.bootstrap_servers, t, 6, partitions=2)  # partition 2 stays empty
    plan = _caught_up(services, t, 3)
    assert sorted(p for _, parts in plan.values() for p in parts) == [(t, 0, 3), (t, 1, 3), (t, 2, 0)]
    w, answers = _watch(max_wait_ms=100), Answers()
    try:
        assert w.watch(plan, time.monotonic() + 1.0, answers) is False
        assert len(answers) >= 3 and {n for n, _ in answers} == set(plan)
    finally:
        w.close()


def test_a_position_other_than_the_end_or_an_unknown_partition_moves(services, unique):
    t = services.create_topic(unique("iw"), 2)
    produce_tracked(services.bootstrap_servers, t, 4, partitions=2)
    node, address, _ = _one(_caught_up(services, t, 2))
    w = _watch(max_wait_ms=100)

    def ask(parts):
        return w.watch({node: (address, parts)}, time.monotonic() + 0.3, Answers())
    try:
        assert ask([(t, 0, 2), (t, 1, 2)]) is False
        assert ask([(t, 0, 1), (t, 1, 2)]) is True   # records at 1
        assert ask([(t, 0, 2), (t, 7, 0)]) is True   # no partition 7: an error
        assert ask([(t, 0, 9), (t, 1, 2)]) is True   # beyond the log: out of range
    finally:
        w.close()


def test_a_record_produced_while_the_broker_holds_the_request_ends_the_watch(services, unique):
    t = services.create_topic(unique("iw"), 1)
    plan = _caught_up(services, t, 1)
    w, answers = _watch(), Answers()
    timer = threading.Timer(1.0, lambda: produce_tracked(services.bootstrap_servers, t, 1, partition=0))
    timer.start()
    started = time.monotonic()
    try:
        assert w.watch(plan, time.monotonic() + 60, answers) is True and len(answers) == 1
    finally:
        timer.join()
        w.close()
    assert time.monotonic() - started < HOLD_MS / 1000.0, "the watch waited for the broker's hold, not the record"


def _woken(w, plan, within_s):
    """*w* watches *plan* and is woken 1 s in: the watch ends (None) within *within_s* seconds."""
    timer = threading.Timer(1.0, w.wake)
    timer.start()
    started = time.monotonic()
    try:
        assert w.watch(plan, time.monotonic() + 60, Answers()) is None
    finally:
        timer.join()
    assert time.monotonic() - started < within_s, "the wake did not end the watch"


def test_a_wake_ends_the_watch_while_the_broker_holds_the_request(services, unique):
    t = services.create_topic(unique("iw"), 1)
    plan = _caught_up(services, t, 1)
    w = _watch()
    try:
        _woken(w, plan, HOLD_MS / 1000.0)
        # the request the wake left unanswered is not in the next watch's way (its socket was closed): an unchanged log
        assert w.connections() == 0
        w.max_wait_ms = 100
        assert w.watch(plan, time.monotonic() + 0.2, Answers()) is False
    finally:
        w.close()


def test_a_wake_ends_the_watch_while_a_connection_hangs(services, unique, hanging):
    t = services.create_topic(unique("iw"), 1)
    node, _, parts = _one(_caught_up(services, t, 1))
    w = _watch(margin_s=60.0)
    w.connect_s = 60.0
    try:
        _woken(w, {node: (hanging, parts)}, 30)
    finally:
        w.close()


def test_a_leader_that_does_not_connect_in_time_is_late_trouble(services, unique, hanging):
    t = services.create_topic(unique("iw"), 1)
    node, _, parts = _one(_caught_up(services, t, 1))
    w = _watch()
    w.connect_s = 0.5
    try:
        with pytest.raises(WatchTrouble, match="did not connect") as trouble:
            w.watch({node: (hanging, parts)}, time.monotonic() + 60, Answers())
        assert trouble.value.late  # an overloaded broker's, for a while: the fetcher tries again soon
    finally:
        w.close()


def test_a_silent_leader_delays_nothing_another_leader_says_and_is_trouble_in_the_end(services, unique, silent):
    t = services.create_topic(unique("iw"), 1)
    node, address, parts = _one(_caught_up(services, t, 1))
    plan = {node: (address, parts), "silent": (silent, [(t, 0, 0)])}
    # the real leader is asked every 100 ms and each answer counted while the other says nothing; then a record on
    # the real leader ends the watch at once
    w, answers = _watch(max_wait_ms=100, margin_s=15.0), Answers()
    timer = threading.Timer(1.5, lambda: produce_tracked(services.bootstrap_servers, t, 1, partition=0))
    timer.start()
    started = time.monotonic()
    try:
        assert w.watch(plan, time.monotonic() + 60, answers) is True
        assert time.monotonic() - started < 30, "the silent leader held the watch"
        assert len(answers) >= 5 and {n for n, _ in answers} == {node}
    finally:
        timer.join()
    # nothing arrives anywhere: the silent leader is trouble once its bound is gone, counted from its request (sent
    # when the first watch began, with that watch's 15 s margin), not from this watch's start or with this watch's
    # 60 s margin; the other's answers counted meanwhile
    answers = Answers()
    plan[node] = (address, [(t, 0, 1)])  # at the end again
    asked = w._kept["silent"].sent_at
    time.sleep(1.0)
    try:
        w.answer_margin_s = 60.0
        with pytest.raises(WatchTrouble, match="did not answer") as trouble:
            w.watch(plan, time.monotonic() + 120, answers)
        assert trouble.value.late  # an overloaded broker's, for a while: the fetcher tries again soon
        # ~15.1 s after the silent leader was asked; a bound begun again, or this watch's, would be >= 60 s
        assert time.monotonic() - asked < 40, "the silent leader's bound began again with the second watch"
        assert len(answers) >= 5
    finally:
        w.close()


def test_a_broker_it_cannot_reach_is_trouble(services, unique):
    t = services.create_topic(unique("iw"), 1)
    node, _, parts = _one(_caught_up(services, t, 1))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed_port = s.getsockname()[1]
    s.close()
    w = _watch()
    try:
        with pytest.raises(WatchTrouble, match="cannot connect") as trouble:
            w.watch({node: (("127.0.0.1", closed_port), parts)}, time.monotonic() + 60, Answers())
        assert not trouble.value.late
    finally:
        w.close()


def test_a_client_before_or_after_the_end_of_a_partition_gets_no_plan(services, unique):
    t = services.create_topic(unique("iw"), 1)
    produce_tracked(services.bootstrap_servers, t, 3, partition=0)
    c = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(t, 0)
        assert _caught_up(services, t, 1, client=c)
        c.seek(tp, 1)
        assert caught_up_plan(c, [tp]) is None
        c.seek(tp, 3)
        c._subscription.assignment[tp].highwater = 2  # a position above the high watermark the client last saw
        assert caught_up_plan(c, [tp]) is None
    finally:
        c.close()


def test_the_connection_is_kept_from_one_watch_to_the_next_and_closed_with_the_watch(services, unique):
    t = services.create_topic(unique("iw"), 1)
    plan = _caught_up(services, t, 1)
    node = next(iter(plan))
    before = _descriptors()
    w = _watch(max_wait_ms=100)
    try:
        ends = set()
        for _ in range(3):
            assert w.watch(plan, time.monotonic() + 0.3, Answers()) is False
            assert w.connections() == 1
            ends.add(w._kept[node].sock.getsockname())
        assert len(ends) == 1, "a new connection for each watch"
        assert _descriptors() == before + 3  # the wake pair and one connection
    finally:
        w.close()
    assert _descriptors() == before


def test_a_request_held_when_another_leader_ended_the_watch_is_answered_first_in_the_next(services, unique):
    """Two leaders (two connections to the one broker, a partition each): a record on the first ends the watch while
    the broker holds the second's request; the next watch takes that request's answer first, drops it, and asks
    again on the same connection: no trouble, and the answers it counts are its own."""
    t = services.create_topic(unique("iw"), 2)
    node, address, _ = _one(_caught_up(services, t, 2))
    plan = {"first": (address, [(t, 0, 0)]), "second": (address, [(t, 1, 0)])}
    w, answers = _watch(max_wait_ms=1500), Answers()
    timer = threading.Timer(0.5, lambda: produce_tracked(services.bootstrap_servers, t, 1, partition=0))
    timer.start()
    try:
        assert w.watch(plan, time.monotonic() + 60, answers) is True
        timer.join()
        second = w._kept["second"]
        assert second.asked is not None, "the second leader's request was not in flight any more"
        kept = second.sock.getsockname()
        plan["first"] = (address, [(t, 0, 1)])
        answers = Answers()
        assert w.watch(plan, time.monotonic() + 2.0, answers) is False
        assert w._kept["second"].sock.getsockname() == kept
        assert all(seconds < 1.5 + 0.4 for _, seconds in answers), "an earlier request's hold counted as this one's"
        assert {n for n, _ in answers} == {"first", "second"}
    finally:
        timer.join()
        w.close()


def test_a_partition_that_moved_to_a_leader_holding_an_earlier_request_is_asked_about_at_once(services, unique):
    """A record on the first leader ends a watch while the broker holds the second's request (partition 1 only);
    then partition 2 moves to the second leader. That held request does not ask about partition 2, so a record there
    would not end its hold: the next watch asks the second leader afresh (a new connection) and a record on
    partition 2 ends it at once, not when the earlier request's hold (20 s) ends."""
    t = services.create_topic(unique("iw"), 3)
    node, address, _ = _one(_caught_up(services, t, 3))
    plan = {"first": (address, [(t, 0, 0)]), "second": (address, [(t, 1, 0)])}
    w = _watch()
    timer = threading.Timer(0.5, lambda: produce_tracked(services.bootstrap_servers, t, 1, partition=0))
    timer.start()
    try:
        assert w.watch(plan, time.monotonic() + 60, Answers()) is True
        timer.join()
        assert w._kept["second"].asked is not None, "the second leader's request was not in flight any more"
        held = w._kept["second"].sock.getsockname()
        plan = {"first": (address, [(t, 0, 1)]), "second": (address, [(t, 1, 0), (t, 2, 0)])}
        timer = threading.Timer(0.5, lambda: produce_tracked(services.bootstrap_servers, t, 1, partition=2))
        timer.start()
        started = time.monotonic()
        assert w.watch(plan, time.monotonic() + 60, Answers()) is True
        assert time.monotonic() - started < 10, "the record on the moved partition waited for the earlier hold"
        assert w._kept["second"].sock.getsockname() != held
    finally:
        timer.join()
        w.close()


def test_an_earlier_request_answered_while_nobody_watched_is_read_not_taken_for_silence(services, unique):
    """A watch ends at once (the first leader's partition is behind its end) while the broker holds the second's
    request; the broker answers it (nothing arrived) while nobody watches, and the next watch begins well after that
    request's bound: its answer, waiting in the socket, is read and dropped, not taken for a silent leader (which
    would be trouble: sockets closed and the client polling for 10 s or more)."""
    t = services.create_topic(unique("iw"), 2)
    produce_tracked(services.bootstrap_servers, t, 1, partition=0)
    node, address, _ = _one(_caught_up(services, t, 2))
    w = _watch(max_wait_ms=300, margin_s=0.5)
    try:
        plan = {"first": (address, [(t, 0, 0)]), "second": (address, [(t, 1, 0)])}
        assert w.watch(plan, time.monotonic() + 60, Answers()) is True
        assert w._kept["second"].asked is not None, "the second leader's request was not in flight any more"
        time.sleep(2.0)  # answered after 0.3 s; its bound (0.8 s) long gone
        plan["first"] = (address, [(t, 0, 1)])
        answers = Answers()
        assert w.watch(plan, time.monotonic() + 1.0, answers) is False
        assert {n for n, _ in answers} == {"first", "second"}
    finally:
        w.close()


def test_descriptors_above_1024(services, unique):
    t = services.create_topic(unique("iw"), 1)
    plan = _caught_up(services, t, 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = _descriptors() + 1200
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip("this process may not open %d descriptors (RLIMIT_NOFILE %d)" % (need, hard))
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    spare = [os.dup(0) for _ in range(1100)]
    try:
        w = _watch(max_wait_ms=100)
        try:
            assert w.watch(plan, time.monotonic() + 0.3, Answers()) is False
        finally:
            w.close()
    finally:
        for fd in spare:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
