"""How a streaming query's end reaches the group, through a real SparkSession (the shared local[2] one) on the real
ZooKeeper + Apache Kafka: a query stopped with ``query.stop()`` commits its last batch and then leaves the group by
itself (no ``finish_query``, no listener), and a ``Trigger.AvailableNow`` run whose group never settles fails
instead of ending with the backlog unread.

What was read is compared as the exact set of (topic, partition, offset) with what was produced."""
import json
import time

import pytest
from kazoo.exceptions import NoNodeError

from tests.support.spark_support import (log_ends, member_ids, owners, produced_set, set_zk_offsets,
                                         source_options, start_collecting as _start, zk_offsets)
from tests.support.waiting import wait_until
from zkconsumer.core.layout import paths

pytestmark = pytest.mark.spark


@pytest.fixture
def without_listener(spark):
    """The query listener that other tests install on the shared session releases members too: not here."""
    from zkconsumer.spark.listener import _INSTALLED
    listener = _INSTALLED.pop(id(spark), None)
    if listener is not None:
        spark.streams.removeListener(listener)
    yield


def test_a_stopped_query_commits_its_last_batch_then_leaves_the_group(spark, services, zk, unique, tmp_path,
                                                                       without_listener):
    """q.stop() with neither finish_query nor the query listener, the consumer's defaults (reaper on,
    startingOffsets latest, auto.offset.reset largest) except a 60 s ZooKeeper session, so that a release is told
    from the session's end. The source's own commits lag a batch (Spark never commits the last one to a source);
    on stop it commits the end of the last batch in Spark's commit log, then deletes its owner nodes and
    registration at once. A second member (an AvailableNow query on its own checkpoint) continues exactly there,
    and its own end leaves the group the same way."""
    from zkconsumer.spark import last_committed_end
    topic, group = services.create_topic(unique("st"), 2), unique("g")
    services.produce(topic, 30)
    set_zk_offsets(zk, group, topic, {0: 0, 1: 0})
    opts = source_options(services, group, topic, startingOffsets=None, maxOffsetsPerTrigger=8,
                          **{"zookeeper.session.timeout.ms": "60000"})
    ckpt, rows = str(tmp_path / "first"), []
    q = _start(spark, opts, ckpt, rows)
    try:
        wait_until(lambda: len(rows) >= 30, 120, lambda: (len(rows), q.exception()))
        wait_until(lambda: sum(last_committed_end(ckpt).values()) == 30, 60, "the checkpoint to commit offset 30")
        # a trigger after the last batch found no new data: Spark asked the source from the last batch's end
        wait_until(lambda: not q.status["isDataAvailable"], 60, lambda: q.status)
        assert len(owners(zk, group, topic)) == 2 and len(member_ids(zk, group)) == 1
        assert sum(zk_offsets(zk, group, topic).values()) < 30          # the source's commit lags a batch
    finally:
        q.stop()
    t = time.monotonic()
    wait_until(lambda: not owners(zk, group, topic) and not member_ids(zk, group), 20,
               lambda: (owners(zk, group, topic), member_ids(zk, group)))
    released_after = time.monotonic() - t
    end = {p: o for (_t, p), o in last_committed_end(ckpt).items()}
    assert zk_offsets(zk, group, topic) == end and sum(end.values()) == 30, (zk_offsets(zk, group, topic), end)
    assert released_after < 20                                           # released, not the 60 s session's end
    services.produce(topic, 10)
    more = []
    q2 = _start(spark, opts, str(tmp_path / "second"), more, trigger="availableNow")
    assert q2.awaitTermination(120) and q2.exception() is None, q2.exception()
    produced = sorted((topic, p, o) for p, o in produced_set(services, topic, 2))
    assert len(produced) == 40 and sorted(rows + more) == produced       # nothing twice, nothing skipped
    wait_until(lambda: not owners(zk, group, topic) and not member_ids(zk, group), 20,
               lambda: (owners(zk, group, topic), member_ids(zk, group)))
    assert sum(zk_offsets(zk, group, topic).values()) == 40


def test_available_now_fails_when_the_group_never_settles(spark, services, zk, unique, tmp_path):
    """Trigger.AvailableNow through Spark: while batch 0 is written, a partition is added and a previous owner (a
    ghost owner node) holds it for good, so the member's rebalance never completes (it waits for the ghost's release;
    the run's other 15 records take three more batches, planned only while the member's partitions are known). The
    run must fail naming the group once groupSettleTimeoutMs (2 s here) plus the session timeout (6 s) is over,
    never end as a success with the backlog unread."""
    topic, group = services.create_topic(unique("ns"), 2), unique("g")
    services.produce(topic, 20)
    ghost = paths.partition_owner_path(group, topic, 2)

    def hold_the_new_partition(df, batch_id):
        if batch_id == 0:
            zk.create(ghost, b"%s_ghost-0" % group.encode(), ephemeral=True, makepath=True)
            services.create_topic(topic, 3)
            services.produce(topic, 9)

    opts = source_options(services, group, topic, maxOffsetsPerTrigger=5, groupSettleTimeoutMs=2000, **{
        "rebalance.max.retries": "1", "rebalance.backoff.ms": "100", "zookeeper.session.timeout.ms": "6000"})
    rows = []
    q = _start(spark, opts, str(tmp_path / "ck"), rows, trigger="availableNow", each=hold_the_new_partition)
    try:
        with pytest.raises(Exception, match=r"group %s: the partitions of member \S+ are not known after 8 s.*"
                                            r"a Trigger.AvailableNow batch cannot be planned" % group):
            q.awaitTermination(90)
        assert not q.isActive and len(rows) < 29
    finally:
        q.stop()
        try:
            zk.delete(ghost)
        except NoNodeError:
            pass


def test_stop_releases_only_when_the_commit_log_is_known(services, zk, unique, tmp_path):
    """The reader driven in the test process as Spark's source runner drives it (60 s ZooKeeper session, no reaper).
    A run that was asked for new data from batch 0's end (Spark had committed batch 0) and then stopped commits that
    end, then releases its partitions. A run stopped after batch 1 was planned (partitions) and before Spark asked for
    new data again cannot tell whether batch 1 is in Spark's commit log: it keeps its owner nodes, and the
    application's finish_query, which reads the commit log, commits batch 1's end fenced by them and then releases."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    from zkconsumer.spark import finish_query, name_member, stream
    from zkconsumer.spark.offsets import from_spark
    from zkconsumer.spark.options import parse_options
    topic, group = services.create_topic(unique("sl"), 2), unique("g")
    services.produce(topic, 20)
    opts = name_member(source_options(services, group, topic, ownerReaper="false",
                                      **{"zookeeper.session.timeout.ms": "60000"}))
    by_partition = lambda offsets: {p: o for (_t, p), o in from_spark(offsets).items()}  # noqa: E731
    first = stream.ZkStreamReader(parse_options(opts))
    try:
        start = first.initialOffset()
        end0 = first.latestOffset(start, ReadAllAvailable())
        assert first.partitions(start, end0) and sum(by_partition(end0).values()) == 20
        assert first.latestOffset(end0, ReadAllAvailable()) == end0          # batch 0 committed, nothing new
    finally:
        first.stop()
    assert zk_offsets(zk, group, topic) == by_partition(end0)
    assert not owners(zk, group, topic) and not member_ids(zk, group)
    services.produce(topic, 10)
    second = stream.ZkStreamReader(parse_options(opts))
    member = None
    try:
        end1 = second.latestOffset(end0, ReadAllAvailable())
        assert second.partitions(end0, end1) and sum(by_partition(end1).values()) == 30
        member = second._member
        second.stop()
        assert set(owners(zk, group, topic)) == {0, 1} and member_ids(zk, group) == [member.consumer_id]
        assert zk_offsets(zk, group, topic) == by_partition(end0)
        # Spark's checkpoint (its v1 offset log) holds batch 1 as committed
        ckpt = tmp_path / "ck"
        for d in ("offsets", "commits"):
            (ckpt / d).mkdir(parents=True)
        (ckpt / "offsets" / "1").write_text('v1\n{}\n%s\n' % json.dumps(end1))
        (ckpt / "commits" / "1").write_text('v1\n{}\n')
        report = finish_query(opts, str(ckpt))
        assert not report["failed"] and report["released"], report
        assert zk_offsets(zk, group, topic) == by_partition(end1)
        assert not owners(zk, group, topic) and not member_ids(zk, group)
    finally:
        if member is not None:
            # (in Spark the source's process ends instead, and its session after zookeeper.session.timeout.ms)
            member.shutdown()
        else:
            second.stop()


def test_stop_writes_a_data_loss_reset_the_store_did_not_take(services, zk, unique):
    """failOnDataLoss=false, the reader driven in the test process. The group's stored offset is a stale 20 that the
    reader counts as 5: a data-loss reset (a truncated log's new end, a recreated topic's start) the store did not
    take, the partition not owned by the member at that moment (how that happens: the recreated-topic test of
    test_spark_semantics). The member owns the partition again and the query stops before its next plan, which would
    have written the reset. Released with the stale 20 in the store, the partition's next owner would find its offset
    past the log end and reset to the log end (auto.offset.reset=largest), skipping what the query had not read:
    stop() writes the reset, then commits the last batch of the commit log and releases."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    from zkconsumer.spark import stream
    from zkconsumer.spark.offsets import from_spark
    from zkconsumer.spark.options import parse_options
    topic, group = services.create_topic(unique("ur"), 1), unique("g")
    tp = (topic, 0)
    services.produce(topic, 5)
    set_zk_offsets(zk, group, topic, {0: 0})
    reader = stream.ZkStreamReader(parse_options(source_options(
        services, group, topic, failOnDataLoss="false", ownerReaper="false",
        **{"zookeeper.session.timeout.ms": "60000"})))
    asked = []                                   # the member's ownership read by stop()
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert reader.partitions(start, end) and from_spark(end) == {tp: 5}
        assert reader.latestOffset(end, ReadAllAvailable()) == end          # batch 0 committed, nothing new
        # what a reset the store did not take leaves behind: a stale stored offset that counts as the reset one
        set_zk_offsets(zk, group, topic, {0: 20})
        reader._unwritten_reset[tp] = (20, 5)
        ownership = reader._member.ownership
        reader._member.ownership = lambda *a, **kw: (asked.append(kw), ownership(*a, **kw))[1]
    finally:
        reader.stop()
    assert zk_offsets(zk, group, topic) == {0: 5}
    assert not owners(zk, group, topic) and not member_ids(zk, group)
    assert len(asked) == 1, "the member's ownership read %d times (once is enough)" % len(asked)


def test_a_plan_reads_the_store_once_to_recheck_and_write_a_data_loss_reset(services, zk, unique):
    """failOnDataLoss=false, the reader driven in the test process. A plan that rechecks a partition against the
    group's stored offset (the run's first plan: a restart from a checkpoint) while a data-loss reset the store did
    not take is pending for it once read the store twice, once to write the reset again and once for the recheck:
    one read does both. The reset is written and counts as the stored offset (not "ahead of the checkpoint")."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    from zkconsumer.spark import stream
    from zkconsumer.spark.offsets import from_spark, to_spark
    from zkconsumer.spark.options import parse_options
    topic, group = services.create_topic(unique("ur"), 1), unique("g")
    tp = (topic, 0)
    services.produce(topic, 5)
    reader = stream.ZkStreamReader(parse_options(source_options(
        services, group, topic, failOnDataLoss="false", ownerReaper="false")))
    try:
        member = reader._ensure_member()
        assert member.wait_ownership(60) is not None
        set_zk_offsets(zk, group, topic, {0: 20})
        reader._unwritten_reset[tp] = (20, 5)
        fetch, reads = member.offset_store.fetch, []
        member.offset_store.fetch = lambda tps: (reads.append(sorted(tps)), fetch(tps))[1]
        end = reader.latestOffset(to_spark({tp: 5}), ReadAllAvailable())
        assert from_spark(end) == {tp: 5}
        assert reads == [[tp]], reads
        assert zk_offsets(zk, group, topic) == {0: 5} and not reader._unwritten_reset
    finally:
        reader.stop()


_SIGTERM_FLOOD = r"""
import signal, sys, time
from zkconsumer.spark import leave
signal.signal(signal.SIGTERM, leave._on_sigterm)
raised = False
try:
    print("ready", flush=True)
    time.sleep(30)
except leave.SourceStopped:  # only the first SIGTERM raises, wherever it lands in this block
    raised = True
end = time.monotonic() + 3.0
while time.monotonic() < end:
    time.sleep(0.0005)
# a SIGTERM during the interpreter's exit (handlers back to SIG_DFL) would kill the process, not the handler's fault
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.alarm(0)
print("done" if raised else "never raised", flush=True)
"""


def test_sigterms_back_to_back_never_block_the_runner():
    """Spark may end the source's runner with more than one SIGTERM: a handler that lands while the one before it
    is still running must not block (with a lock taken inside the handler, the runner deadlocked and stop() never
    ran, so the member kept its owner nodes while the driver lived). A process with the handler is flooded with
    SIGTERMs and must still finish its 3 s loop."""
    import os
    import signal
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", _SIGTERM_FLOOD], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        end = time.monotonic() + 2.0
        while time.monotonic() < end and p.poll() is None:
            for _ in range(50):
                os.kill(p.pid, signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0 and out == "done\n", (p.returncode, out)


_SIGTERM_DURING_STOP = r"""
import json, logging, os, signal, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from pyspark.sql.streaming.datasource import ReadAllAvailable
from zkconsumer.spark import leave, stream
from zkconsumer.spark.options import parse_options
signal.signal(signal.SIGTERM, leave._on_sigterm)
reader = stream.ZkStreamReader(parse_options(json.loads(sys.argv[1])))
start = reader.initialOffset()
end = reader.latestOffset(start, ReadAllAvailable())
reader.partitions(start, end)
reader.latestOffset(end, ReadAllAvailable())  # batch 0 is in Spark's commit log
probe = reader._probe


class SigtermWhileClosing:
    # stop() closes the log-end probe first: Spark's SIGTERM lands there
    def close(self):
        if probe is not None:
            probe.close()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2.0)


reader._probe = SigtermWhileClosing()
print("stopping", flush=True)
try:
    raise EOFError("Spark closed the socket")  # the runner's loop ends before any SIGTERM
finally:
    reader.stop()
"""


def _run_runner_like(script, opts):
    """Run *script* (a runner-like child, given the source options as JSON) to its end: (exit code, stdout, stderr)."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", script, json.dumps(opts)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, out, err


def test_a_sigterm_while_stop_runs_does_not_interrupt_it(services, zk, unique):
    """Spark's query.stop() interrupts the query's thread, which closes the runner's socket (a SocketChannel) when
    it is blocked on it: the runner's loop ends by EOF and calls the reader's stop(), and Spark's SIGTERM
    (PythonStreamingSourceRunner.stop) arrives while stop() runs. It must not end stop() before the member committed
    and left: the runner process is a child here, the SIGTERM lands in stop()'s first step, and the owner nodes are
    gone when the process has exited (its 60 s ZooKeeper session would otherwise keep them)."""
    from zkconsumer.spark import name_member
    topic, group = services.create_topic(unique("st"), 2), unique("g")
    services.produce(topic, 20)
    opts = name_member(source_options(services, group, topic, ownerReaper="false",
                                      **{"zookeeper.session.timeout.ms": "60000"}))
    code, out, err = _run_runner_like(_SIGTERM_DURING_STOP, opts)
    assert code == 0 and out == "stopping\n", (code, out, err[-3000:])
    assert "and left it" in err, err[-3000:]
    assert zk_offsets(zk, group, topic) == log_ends(services, topic, 2)  # batch 0's end, committed before leaving
    assert not owners(zk, group, topic) and not member_ids(zk, group), err[-3000:]


_LEAVE_FAILS_AFTER_SIGTERM = _SIGTERM_DURING_STOP.replace('''reader._probe = SigtermWhileClosing()''', '''reader._probe = SigtermWhileClosing()


def failing_leave(r):
    raise RuntimeError("the offset store is down")


stream.leave = failing_leave''')


def test_a_stop_that_fails_after_a_sigterm_says_why_and_ends_the_process(services, unique):
    """Spark asked the runner to end (SIGTERM) and the reader's stop() then fails (leaving the group raised): the
    process still ends at once, and its log says why the stop failed (Spark's runner would report the error only on
    the socket Spark closed: pyspark.util.handle_worker_exception drops it when that write fails)."""
    from zkconsumer.spark import name_member
    topic, group = services.create_topic(unique("st"), 2), unique("g")
    services.produce(topic, 20)
    opts = name_member(source_options(services, group, topic, ownerReaper="false"))
    code, out, err = _run_runner_like(_LEAVE_FAILS_AFTER_SIGTERM, opts)
    assert code == 0 and out == "stopping\n", (code, out, err[-3000:])
    assert "stopping the source failed" in err and "the offset store is down" in err, err[-3000:]
