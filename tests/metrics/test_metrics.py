"""Metrics named after the Scala consumer's JMX metrics: connector.metrics() and the Prometheus endpoint
(zkconsumer consume --metrics-port, start_metrics_server). A scrape during consumption shows the lag going to zero
and rebalances counted. Real ZooKeeper + Apache Kafka."""
import re
import urllib.request

from tests.support.consumer_helpers import StreamCollector, connector, produce_tracked
from tests.support.waiting import wait_until
from zkconsumer.local.processes import free_port
from zkconsumer.metrics.member import start_metrics_server


def _scrape(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(zkconsumer_[a-z_]+)(\{.*\})? ([0-9.eE+-]+)$", line)
        if m:
            out.setdefault(m.group(1), []).append((m.group(2) or "", float(m.group(3))))
    return out


def _one(scr, name):
    [(labels, value)] = scr[name]
    return value


def test_metrics_during_consumption(services, unique, conns):
    g, t = unique("met"), services.create_topic(unique("met"), 2)
    produced = produce_tracked(services.bootstrap_servers, t, 300, partitions=2, tag="met")
    a = connector(services, g, **{"auto.offset.reset": "smallest", "auto.commit.interval.ms": "300"})
    conns.append(a)
    port = free_port()
    server = start_metrics_server(a, port, addr="127.0.0.1")
    assert server.port == port
    try:
        _scraped_while_consuming(services, unique, conns, a, g, t, produced, port)
    finally:
        server.close()


def _scraped_while_consuming(services, unique, conns, a, g, t, produced, port):
    [stream] = a.create_message_streams({t: 1})[t]
    col = StreamCollector(stream, delay=0.01)  # a slow application: ~3 s for 300 messages
    col.start()
    lags = []

    def lag_seen_then_zero():
        scr = _scrape(port)
        lags.append(_one(scr, "zkconsumer_max_lag"))
        return len(col.seen(t)) == 300 and lags[-1] == 0 and max(lags) > 0
    wait_until(lag_seen_then_zero, 60, interval=0.2, message="the lag to be seen, then to reach zero")
    scr = _scrape(port)
    assert _one(scr, "zkconsumer_messages_total") == 300
    assert _one(scr, "zkconsumer_bytes_total") >= sum(len(v) for _, _, v in produced)
    assert _one(scr, "zkconsumer_owned_partitions") == 2
    assert _one(scr, "zkconsumer_rebalances_total") >= 1
    import socket
    host = socket.gethostname()
    assert [lab for lab, v in scr["zkconsumer_state"] if v == 1.0] == [
        '{client_id="%s",group="%s",host="%s",state="IDLE"}' % (g, g, host)]
    assert {lab.split('partition="')[1].split('"')[0] for lab, _ in scr["zkconsumer_consumer_lag"]} == {"0", "1"}
    wait_until(lambda: _one(_scrape(port), "zkconsumer_zookeeper_commits_total") >= 1, 10,
               message="an auto-commit counted")
    before = _one(_scrape(port), "zkconsumer_rebalances_total")
    b = connector(services, g)
    conns.append(b)
    b.create_message_streams({t: 1})
    wait_until(lambda: _one(_scrape(port), "zkconsumer_rebalances_total") > before and
               _one(_scrape(port), "zkconsumer_owned_partitions") == 1, 30,
               message="the join counted as a rebalance")
    # MinFetchRate reads 0 until a meter's first 5 s tick (a new Scala fetcher thread did too)
    wait_until(lambda: a.metrics()["MinFetchRate"] > 0, 30, message="a fetch rate")
    assert a.metrics()["RebalanceRateAndTime"]["seconds"] > 0
    assert _one(_scrape(port), "zkconsumer_kafka_commits_total") == 0  # ZooKeeper storage


def test_consume_cli_serves_metrics_on_the_port_it_prints(services, unique):
    """``zkconsumer consume --metrics-port 0``: the CLI prints where it serves, the page counts what it printed."""
    import subprocess
    import sys
    t = services.create_topic(unique("metcli"), 1)
    services.produce(t, 25, size=10)
    cmd = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", services.zookeeper_connect,
           "--group", unique("metcli"), "--topic", t, "--from-beginning", "--metrics-port", "0", "--format", "value"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        seen = []
        while True:  # log lines may come first
            seen.append(p.stderr.readline())
            m = re.search(r"serving metrics at http://[^:]+:(\d+)/metrics", seen[-1])
            if m or not seen[-1] or len(seen) > 50:
                break
        assert m, seen
        port = int(m.group(1))
        for _ in range(25):
            assert p.stdout.readline()  # the CLI printed every message
        wait_until(lambda: _one(_scrape(port), "zkconsumer_messages_total") == 25, 30,
                   message="the printed messages counted on the page")
    finally:
        p.terminate()
        p.communicate(timeout=60)
    assert p.returncode == 0


def test_member_metrics_per_topic_fetch_commit_failures_session_expiries_and_info(services, unique, conns):
    """Per-topic and all-topics counters, fetch requests and their time, the fetch queue, a failed commit, a
    session expiry and zkconsumer_info; every series' labels are group, client_id and host (they survive a restart:
    the generated consumer id is only in zkconsumer_info)."""
    from kazoo.client import KazooClient
    g = unique("met2")
    t1, t2 = services.create_topic(unique("met2a"), 1), services.create_topic(unique("met2b"), 1)
    produce_tracked(services.bootstrap_servers, t1, 30, partitions=1)
    produce_tracked(services.bootstrap_servers, t2, 20, partitions=1)
    a = connector(services, g, **{"auto.offset.reset": "smallest", "zookeeper.session.timeout.ms": "4000"})
    conns.append(a)
    server = start_metrics_server(a, 0)
    try:
        assert server.addr == "127.0.0.1"  # loopback unless told otherwise
        streams = a.create_message_streams({t1: 1, t2: 1})
        cols = [StreamCollector(streams[t][0]) for t in (t1, t2)]
        for c in cols:
            c.start()
        wait_until(lambda: len(cols[0].seen(t1)) == 30 and len(cols[1].seen(t2)) == 20, 60,
                   message="both topics read")
        text = urllib.request.urlopen(server.url, timeout=10).read().decode()
        scr = _scrape(server.port)
        per_topic = {re.search(r'topic="([^"]+)"', lab).group(1): v for lab, v in scr["zkconsumer_topic_messages_total"]}
        assert per_topic == {t1: 30, t2: 20} and _one(scr, "zkconsumer_messages_total") == 50
        assert _one(scr, "zkconsumer_fetch_requests_total") > 0 and _one(scr, "zkconsumer_fetch_request_seconds_total") > 0
        assert _one(scr, "zkconsumer_fetch_queue_chunks") >= 0 and _one(scr, "zkconsumer_fetch_errors_total") == 0
        [(info, one)] = scr["zkconsumer_info"]
        assert one == 1 and 'consumer_id="%s"' % a.consumer_id in info and 'engine="%s"' % a.config.fetch_engine in info
        assert re.search(r'decoder="(c|python|kafka-python)"', info) and 'version="' in info
        for name, series in scr.items():
            if name != "zkconsumer_info":
                for lab, _ in series:
                    assert "consumer_id" not in lab, (name, lab)
        assert "# TYPE zkconsumer_topic_bytes_total counter" in text or "# TYPE zkconsumer_topic_bytes counter" in text
        # a commit fenced by an owner node someone else took is a failed commit
        owner = "/consumers/%s/owners/%s/0" % (g, t1)
        a.zk.delete(owner)
        a.zk.create(owner, b"someone-else")
        a.zk.set(owner, b"someone-else")  # version 1: the fence checks our node's version 0
        a.rebalancer.parts[(t1, 0)].consumed = 29  # something to commit
        a.commit_offsets()
        wait_until(lambda: _one(_scrape(server.port), "zkconsumer_commit_failures_total") >= 1, 10,
                   message="the fenced commit counted")
        # the session expires (another client takes over its id and closes it): counted once it is noticed
        sid, pwd = a.zk.client_id
        thief = KazooClient(hosts=services.zookeeper_connect, client_id=(sid, pwd))
        thief.start(timeout=10)
        thief.stop()
        thief.close()
        wait_until(lambda: _one(_scrape(server.port), "zkconsumer_session_expiries_total") >= 1, 30,
                   message="the session expiry counted")
    finally:
        server.close()


def test_fetch_request_metrics_count_requests_as_scala_did(services, unique, conns):
    """zkconsumer_fetch_requests_total and MinFetchRate count the Fetch requests answered (Scala's
    FetchRequestRateAndTimeMs, MinFetchRate), not the fetch loop's polls: an idle member with the defaults and
    Scala's cadence (fetch.idle.wait.ms=100 = fetch.wait.max.ms) is asked again by the broker's answer every ~0.1 s,
    ~10 requests/s of <= ~0.1 s each (its polls are ~2/s of ~0.5 s). How MinFetchRate falls when a broker stops
    answering: tests/consumer/test_min_fetch_rate.py."""
    import time
    topic = services.create_topic(unique("metreq"), 2)
    # the kafka-python engine whatever ZKCONSUMER_TEST_FETCH_ENGINE says: the librdkafka engine counts its polls
    a = connector(services, unique("metreq"), defaults=True, **{"fetch.engine": "kafka-python",
                                                                 "fetch.idle.wait.ms": "100"})
    conns.append(a)
    a.create_message_streams({topic: 1})
    wait_until(lambda: a.metrics_snapshot().fetch.requests > 0, 30, message="a first fetch answered")
    time.sleep(1.0)
    before, t0 = a.metrics_snapshot().fetch, time.monotonic()
    time.sleep(5.0)
    after, elapsed = a.metrics_snapshot().fetch, time.monotonic() - t0
    n = after.requests - before.requests
    mean = (after.seconds - before.seconds) / max(1, n)
    # ~50 expected; polls would be ~10 of ~0.5 s. Bounds loose for a loaded machine, far from the polls' figures
    assert n >= 2.5 * elapsed, "%d fetch requests in %.1f s: polls counted, not requests?" % (n, elapsed)
    assert mean <= 0.3, "%.3f s per fetch request while idle (fetch.wait.max.ms=100): polls counted?" % mean
    wait_until(lambda: a.metrics()["MinFetchRate"] >= 2.0, 30, message="MinFetchRate of an idle member >= 2/s")


def test_an_idle_member_at_the_defaults_is_asked_about_once_a_second(services, unique, conns):
    """At the defaults (fetch.idle.wait.ms=1000, fetch.min.bytes=1) an idle member's watch asks each leader to hold
    its Fetch 1 s: ~1 request/s of ~1 s (fetch.wait.max.ms=100 alone would be ~10/s of ~0.1 s), so the brokers
    answer an idle fleet a tenth as often; MinFetchRate stays above 0 (a live fetcher)."""
    import time
    topic = services.create_topic(unique("metidle"), 2)
    a = connector(services, unique("metidle"), defaults=True, **{"fetch.engine": "kafka-python"})
    conns.append(a)
    a.create_message_streams({topic: 1})
    wait_until(lambda: a.metrics_snapshot().fetch.requests > 0, 30, message="a first fetch answered")

    def rounds():
        return sum(f.watch_rounds for f in a.fetchers.fetchers)

    def troubles():
        return sum(f.watch_troubles for f in a.fetchers.fetchers)

    def watching():  # no fetcher in its backoff after a watch's trouble, and watch answers coming
        seen = rounds()
        return all(time.monotonic() >= f._watch_not_before for f in a.fetchers.fetchers) and wait_until(
            lambda: rounds() > seen, 30, message="a watch answer")
    wait_until(lambda: rounds() > 1, 30, message="the idle watch answered")
    for attempt in range(3):  # a window in which no watch ended in trouble (its client polls meanwhile, ~10/s)
        wait_until(watching, 60, message="the fetcher watching (not backing off after a trouble)")
        seen, before, t0 = troubles(), a.metrics_snapshot().fetch, time.monotonic()
        time.sleep(6.0)
        after, elapsed = a.metrics_snapshot().fetch, time.monotonic() - t0
        if troubles() == seen:
            break
        assert attempt < 2, "a watch ended in trouble in each of 3 windows: %d troubles" % troubles()
    n = after.requests - before.requests
    mean = (after.seconds - before.seconds) / max(1, n)
    # ~6 expected (one broker); ~60 of ~0.1 s at the old cadence. Loose for a loaded machine (fewer, longer answers)
    # and for one pass of the client between two watches (a handful of ~0.1 s fetches)
    assert 1 <= n <= 2.5 * elapsed, "%d fetch requests in %.1f s while idle: not ~1/s" % (n, elapsed)
    assert mean >= 0.4, "%.3f s per fetch request while idle: the broker does not hold the watch's Fetch 1 s" % mean
    wait_until(lambda: a.metrics()["MinFetchRate"] > 0, 30, message="MinFetchRate of an idle member above 0")
