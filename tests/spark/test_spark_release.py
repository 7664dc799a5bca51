"""The streaming source leaving the group when its query stops (StreamingQueryListener, without the reaper) and the
streaming failOnDataLoss path of a topic deleted and recreated under a running query."""
import threading
import time

import pytest

from tests.support.spark_support import member_ids as _ids, owners as _owners, recreate_topic, source_options as _opts
from tests.support.waiting import wait_until

pytestmark = pytest.mark.spark


def test_listener_releases_the_member_when_the_query_stops(spark, services, zk, unique, tmp_path):
    """No reaper (ownerReaper=false) and a 60 s ZooKeeper session. The query is stopped while a batch runs: the
    source cannot tell whether Spark committed that batch, so it keeps its owner nodes; only the listener can
    release them within seconds of q.stop()."""
    from zkconsumer.spark import install_release_listener
    listener = install_release_listener(spark)
    assert install_release_listener(spark) is listener                     # once per session
    topic, group = services.create_topic(unique("rl"), 2), unique("g")
    services.produce(topic, 10)
    opts = _opts(services, group, topic, ownerReaper="false", **{"zookeeper.session.timeout.ms": "60000"})
    running, go_on = threading.Event(), threading.Event()

    def batch(df, batch_id):
        if batch_id > 0:
            running.set()
            go_on.wait(30)
    q = (spark.readStream.format("zkconsumer").options(**opts).load().writeStream.foreachBatch(batch)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="300 milliseconds").start())
    stopper = threading.Thread(target=q.stop)
    try:
        member = wait_until(lambda: [s.latestOffset for p in q.recentProgress for s in p.sources
                                     if "zkconsumer member" in (s.latestOffset or "")], 90,
                            lambda: q.recentProgress[-1:] or q.exception())
        ids = _ids(zk, group)
        assert len(ids) == 1 and ids[0] in member[-1] and len(_owners(zk, group, topic)) == 2
        assert '"%s": {"0": ' % topic in member[-1]                            # the latest offsets, as Spark's
        services.produce(topic, 4)
        wait_until(running.is_set, 60, "batch 1 to run")
        stopper.start()
        time.sleep(1)
    finally:
        go_on.set()
        if stopper.ident:
            stopper.join(60)
        else:
            q.stop()
    t = time.monotonic()
    wait_until(lambda: not _owners(zk, group, topic) and not _ids(zk, group), 20,
               lambda: (_ids(zk, group), _owners(zk, group, topic)))
    assert time.monotonic() - t < 20                                          # not the 60 s session expiry
    assert any(g == group and c == ids[0] and deleted for g, c, deleted in listener.released), listener.released


@pytest.mark.parametrize("fail", [True, False])
def test_streaming_topic_deleted_and_recreated(spark, services, zk, unique, tmp_path, fail):
    """failOnDataLoss=true: the query fails naming the partition and the option; false: it goes on with the new
    topic from its start (offset 0), nothing of it skipped."""
    from zkconsumer.spark import commit_batch, last_committed_end
    topic, group = services.create_topic(unique("rc"), 1), unique("g")
    services.produce(topic, 20)
    opts = _opts(services, group, topic, failOnDataLoss=str(fail).lower())
    ckpt = str(tmp_path / "ck")
    seen = []
    q = (spark.readStream.format("zkconsumer").options(**opts).load().writeStream
         .foreachBatch(lambda df, b: seen.extend(r.offset for r in df.select("offset").collect()))
         .option("checkpointLocation", ckpt).trigger(processingTime="300 milliseconds").start())
    try:
        wait_until(lambda: len(seen) >= 20, 90, lambda: (len(seen), q.exception()))
        wait_until(lambda: sum(last_committed_end(ckpt).values()) == 20, 30, "the checkpoint to commit offset 20")
        commit_batch(opts, last_committed_end(ckpt))                        # the group's store holds 20 too
        recreate_topic(services, zk, topic)
        services.produce(topic, 3)                                           # the new topic's log end: 3 < 20
        if fail:
            # the topic gone (a plan between the deletion and the new topic) or recreated behind the query's offset
            with pytest.raises(Exception, match=r"%s-0.*failOnDataLoss=false" % topic):
                q.awaitTermination(120)
            return
        services.produce(topic, 2)
        wait_until(lambda: len(seen) >= 25, 120, lambda: (sorted(seen), q.exception()))
        time.sleep(1)
        assert sorted(seen) == sorted(list(range(20)) + list(range(5))), sorted(seen)  # the new topic from 0
        assert q.isActive and q.exception() is None
    finally:
        q.stop()
