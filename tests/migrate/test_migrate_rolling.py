"""The full migration under load: a producer thread, three consumer processes, rolling bounces
ZooKeeper -> dual -> Kafka, then the rollback Kafka -> dual -> ZooKeeper.  After every bounce no produced message is
lost (every acknowledged (partition, offset) was printed by some consumer) and, sampled all along, no committed
offset went backwards in either store; zkmigrate verify passes after each phase. Duplicates are bounded by one
commit interval of messages per hand-over (the bounces are graceful: the leaver commits first). Run with
auto.offset.reset=smallest and =largest (the reset point counts as consumed, so largest loses nothing either)."""
import time

import pytest

from tests.support.migrate_support import DUAL, KAFKA, ZOOKEEPER, ConsumerProc, OffsetSampler, Producer, zkmigrate_json
from tests.support.waiting import wait_until
from zkconsumer.consumer.registration import live_members
from zkconsumer.tools import groups as zkgroups

N = 3


@pytest.mark.parametrize("reset", ["smallest", "largest"])
def test_rolling_migration_and_rollback_under_load(services, zk, unique, tmp_path, reset):
    topic = services.create_topic(unique("roll"), 3)
    g = unique("g-roll")
    parts = [(topic, p) for p in range(3)]
    producer = Producer(services.bootstrap_servers, topic, rate=100)
    sampler = OffsetSampler(services.zookeeper_connect, services.bootstrap_servers, g, parts)
    consumers = []
    gen = [0]

    def start(props):
        gen[0] += 1
        return ConsumerProc(tmp_path, "c%d" % gen[0], services.zookeeper_connect, g, topic,
                            list(props) + ["auto.offset.reset=" + reset])

    def all_seen():
        out = set()
        for c in every:
            out |= c.seen()
        return out

    def group_healthy():
        return len(live_members(zk, g)) == N and zkgroups.verify(zk, g).ok

    def no_loss(label):
        want = producer.snapshot()
        missing = wait_until(lambda: not (want - all_seen()), 40, "every message produced before %s" % label)
        assert missing
        assert not producer.errors, producer.errors

    def rolling_bounce(props, label):
        for i in range(N):
            assert consumers[i].stop() == 0, consumers[i].stderr()[-2000:]
            consumers[i] = start(props)
            every.append(consumers[i])
            wait_until(group_healthy, 40, "group healthy after restarting member %d (%s)" % (i, label))
            bounces[0] += 1
        no_loss(label)

    every = []
    bounces = [0]
    try:
        sampler.start()
        for _ in range(N):
            consumers.append(start(ZOOKEEPER))
            every.append(consumers[-1])
        wait_until(group_healthy, 40, "3 ZooKeeper-storage members")
        time.sleep(1.0)  # the reset points are committed (with largest: the log end, before anything is produced)
        producer.start()
        no_loss("the migration")
        zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", expect=0)

        rolling_bounce(DUAL, "phase 1 (dual commit)")
        zkmigrate_json(services, "verify", "--group", g, "--phase", "dual", "--to", "kafka", expect=0)
        rolling_bounce(KAFKA, "phase 2 (Kafka only)")
        zkmigrate_json(services, "verify", "--group", g, "--phase", "kafka", expect=0)

        # rollback: dual commit first, then ZooKeeper storage
        rolling_bounce(DUAL, "rollback phase 1 (dual commit)")
        zkmigrate_json(services, "verify", "--group", g, "--phase", "dual", "--to", "zookeeper", expect=0)
        rolling_bounce(ZOOKEEPER, "rollback phase 2 (ZooKeeper only)")
        zkmigrate_json(services, "verify", "--group", g, "--phase", "zookeeper", expect=0)
        time.sleep(0.5)
    finally:
        producer.stop()
        for c in every:
            c.stop(15)
            c.kill()
        sampler.stop()
    assert sampler.samples > 20
    assert {name for name, _ in sampler.high} == {"zookeeper", "kafka"}  # both stores were really written
    assert all(sampler.high[("zookeeper", tp)] >= sampler.high[("kafka", tp)] for tp in parts)  # rolled back
    assert not sampler.backwards, sampler.backwards[:10]
    assert len(producer.snapshot()) > 300
    assert not (producer.snapshot() - all_seen())
    printed = [x for c in every for x in c.seen_list()]
    dups = len(printed) - len(set(printed))
    window = max(1, producer.rate * 200 // 1000)  # auto.commit.interval.ms=200 (FAST) at producer.rate msg/s
    assert dups <= bounces[0] * window, "%d duplicates over %d hand-overs (bound %d per hand-over)" % (
        dups, bounces[0], window)
    print("\nrolling migration (%s): %d messages, %d hand-overs, %d delivered twice" % (
        reset, len(producer.snapshot()), bounces[0], dups))
