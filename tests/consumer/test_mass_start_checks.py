"""The start-up checks under a mass start: the members of one group starting together in one process share one
split-brain check (one connection to the cluster, not one per member per attempt), it keeps its connection between
attempts, and it still refuses when the broker cannot answer or the broker-side group is active."""
import socket
import threading

import pytest

from tests.support.consumer_helpers import BrokerMember
from tests.support.waiting import wait_until
from zkconsumer.consumer.join_guards import refuse_split_brain
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.errors import GroupConflictError, SplitBrainUnknownError
from zkconsumer.kafka import internals

MEMBERS = 12


@pytest.fixture
def clients_opened(monkeypatch):
    """How many kafka-python admin clients (each a bootstrap and connections of its own) were made."""
    opened = []
    init = internals.AdminClient.__init__

    def counting(self, **configs):
        opened.append(configs.get("bootstrap_servers"))
        init(self, **configs)
    monkeypatch.setattr(internals.AdminClient, "__init__", counting)
    return opened


def _config(services, group, **props):
    merged = {"group.id": group, "zookeeper.connect": services.zookeeper_connect}
    merged.update(props)
    return ConsumerConfig.from_properties(merged)


def _check_together(zk, config, bootstrap, n=MEMBERS, check=None):
    """Run a start-up check of *n* members at once (the split-brain check unless *check*, called as
    ``check(i)``): each one's outcome ("join", or its error)."""
    outcomes = [None] * n
    go = threading.Barrier(n)

    def member(i):
        go.wait()
        try:
            if check is None:
                refuse_split_brain(zk, config, lambda: bootstrap)
            else:
                check(i)
            outcomes[i] = "join"
        except Exception as e:  # noqa: BLE001 - the outcome is asserted
            outcomes[i] = e
    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return outcomes


def test_members_starting_together_share_one_check(services, zk, unique, clients_opened):
    g = unique("mass-g")
    outcomes = _check_together(zk, _config(services, g), services.bootstrap_servers)
    assert outcomes == ["join"] * MEMBERS
    # the first member's check, then one for all who came while it ran (not one client per member)
    assert 1 <= len(clients_opened) <= 2, clients_opened


def test_members_starting_together_are_all_refused_beside_an_active_broker_group(services, zk, unique,
                                                                                clients_opened):
    t = services.create_topic(unique("mass"), 2)
    g = unique("mass-g")
    kc = BrokerMember(services.bootstrap_servers, g, t)
    try:
        from zkconsumer.kafka.broker_group import describe_broker_group
        wait_until(lambda: describe_broker_group(services.bootstrap_servers, g).active, 30,
                   message="the broker-side group to be active")
        del clients_opened[:]
        outcomes = _check_together(zk, _config(services, g), services.bootstrap_servers)
    finally:
        kc.close()
    assert all(isinstance(o, GroupConflictError) and "split brain" in str(o) for o in outcomes), outcomes
    assert 1 <= len(clients_opened) <= 2, clients_opened


def test_a_broker_that_never_answers_is_bootstrapped_once_and_refused(services, zk, unique, clients_opened):
    """A listener that accepts connections and never answers: the check's one client waits for its bootstrap over
    the whole split.brain.check.timeout.ms (6 s; attempts of at most 5 s each opened a client per attempt), then
    the member is refused (refuse, the default)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        bootstrap = "127.0.0.1:%d" % silent.getsockname()[1]
        config = _config(services, unique("silent-g"), **{"split.brain.check.timeout.ms": "6000"})
        with pytest.raises(SplitBrainUnknownError) as info:
            refuse_split_brain(zk, config, lambda: bootstrap)
    finally:
        silent.close()
    assert "cannot tell" in str(info.value) and "split.brain.check=warn" in str(info.value)
    assert clients_opened == [bootstrap]


def test_members_starting_together_share_the_storage_check_and_all_refuse(services, zk, unique, clients_opened):
    """Kafka holds newer offsets than ZooKeeper: every member on ZooKeeper storage starting at once is refused,
    from a shared OffsetFetch (each member asks twice, 2 s apart, as a dual commit may be in flight)."""
    from tests.support.consumer_helpers import kafka_commit
    from zkconsumer.consumer.join_guards import refuse_stale_zookeeper_offsets
    from zkconsumer.core.layout import paths
    t = services.create_topic(unique("mass-st"), 2)
    g = unique("mass-st-g")
    kafka_commit(services.bootstrap_servers, g, {(t, 0): 5, (t, 1): 5})
    zk.create(paths.partition_offset_path(g, t, 0), b"1", makepath=True)
    del clients_opened[:]
    config = _config(services, g)
    outcomes = _check_together(zk, config, services.bootstrap_servers, check=lambda i: refuse_stale_zookeeper_offsets(
        zk, config, "m%d" % i, None, lambda: services.bootstrap_servers))
    assert all(isinstance(o, GroupConflictError) and "newer offsets in Kafka" in str(o) for o in outcomes), outcomes
    # two rounds of asking, each at most two askings on one client (not a client per member per round)
    assert 1 <= len(clients_opened) <= 4, clients_opened


def test_a_member_past_its_own_deadline_refuses_or_warns_while_a_shared_check_runs_on(services, zk, unique, caplog):
    """Members sharing a check against a broker that never answers: each one decides at its own deadline, by its
    own split.brain.check, while the check a patient member waits for goes on."""
    import logging
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    bootstrap = "127.0.0.1:%d" % silent.getsockname()[1]
    g = unique("shared-g")
    patient = _config(services, g, **{"split.brain.check.timeout.ms": "5000"})
    outcome = []
    t = threading.Thread(target=lambda: outcome.append(_outcome(zk, patient, bootstrap)), daemon=True)
    try:
        t.start()
        from zkconsumer.consumer.join_guards import SPLIT_BRAIN_CHECKS
        wait_until(lambda: SPLIT_BRAIN_CHECKS.waiting >= 1, 10, message="the patient member's check")
        with pytest.raises(SplitBrainUnknownError):
            refuse_split_brain(zk, _config(services, g, **{"split.brain.check.timeout.ms": "1000"}),
                               lambda: bootstrap)
        assert t.is_alive() and not outcome
        with caplog.at_level(logging.WARNING, logger="zkconsumer.consumer.join_guards"):
            refuse_split_brain(zk, _config(services, g, **{"split.brain.check.timeout.ms": "1000",
                                                           "split.brain.check": "warn"}), lambda: bootstrap)
        assert "joining anyway (split.brain.check=warn)" in caplog.text
        t.join(60)
    finally:
        silent.close()
    assert len(outcome) == 1 and isinstance(outcome[0], SplitBrainUnknownError)


def _outcome(zk, config, bootstrap):
    try:
        refuse_split_brain(zk, config, lambda: bootstrap)
        return "join"
    except Exception as e:  # noqa: BLE001 - the outcome is asserted
        return e


def test_a_kept_client_asks_again_for_each_check(services, zk, unique, clients_opened, monkeypatch):
    """The connection kept after a check answers the next check with a new DescribeGroups: a member checking
    after the broker-side group became active is refused, on the client that said "not active" before."""
    from zkconsumer.consumer import join_guards
    from zkconsumer.kafka.broker_group import BrokerGroupClient
    monkeypatch.setattr(join_guards.SPLIT_BRAIN_CHECKS, "_linger_s", 60.0)
    t = services.create_topic(unique("kept"), 2)
    g = unique("kept-g")
    config = _config(services, g)
    refuse_split_brain(zk, config, lambda: services.bootstrap_servers)
    assert len(clients_opened) == 1
    kc = BrokerMember(services.bootstrap_servers, g, t)
    try:
        probe = BrokerGroupClient(services.bootstrap_servers)
        try:
            wait_until(lambda: probe.describe(g, 10000, 10000).active, 30,
                       message="the broker-side group to be active")
        finally:
            probe.close()
        del clients_opened[:]
        with pytest.raises(GroupConflictError, match="split brain"):
            refuse_split_brain(zk, config, lambda: services.bootstrap_servers)
    finally:
        kc.close()
    assert clients_opened == [], "the second check opened a client of its own: the kept one was not tested"


def test_a_describe_sends_no_request_past_its_deadline(services, unique):
    """A shared asking ends by its deadline: its FindCoordinator, DescribeGroups and ConsumerGroupDescribe each
    waited up to 10 s from the time each was sent, so one asking could run ~30 s past the deadline while the members
    that arrived during it waited for the next asking until their own deadlines passed, refused without having been
    asked for (the 300-member bench: 1 refused). Here the deadline passes while FindCoordinator is answered: the
    DescribeGroups is not sent and the asking fails as for a broker that did not answer (the caller asks again or
    decides at its own deadline)."""
    import time

    from zkconsumer.errors import ClusterUnavailableError
    from zkconsumer.kafka.broker_group import BrokerGroupClient
    g = unique("late-g")
    client = BrokerGroupClient(services.bootstrap_servers)
    try:
        client.describe(g, 10000, 10000)                  # bootstrapped: only the requests remain
        start, reads = time.monotonic(), []

        def clock():                                      # FindCoordinator is sent in time; after it, 60 s later
            reads.append(1)
            return start if len(reads) == 1 else start + 60
        with pytest.raises(ClusterUnavailableError, match="ran out before DescribeGroups"):
            client.describe(g, 10000, 10000, deadline=start + 30, clock=clock)
        assert client.describe(g, 10000, 10000, deadline=time.monotonic() + 30).state == "Dead"  # still usable
    finally:
        client.close()
