"""Metrics named after the Scala consumer's JMX metrics: connector.metrics() and the Prometheus endpoint
(zkconsumer consume --metrics-port, start_metrics_server). A scrape during consumption shows the lag going to zero
and rebalances counted. Real ZooKeeper + Apache Kafka."""
import re
import urllib.request

from consumer_helpers import StreamCollector, connector, produce_tracked, wait_until
from zkconsumer.local.processes import free_port
from zkconsumer.metrics import start_metrics_server


def _scrape(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(zkconsumer_[a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$", line)
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
    assert [lab for lab, v in scr["zkconsumer_state"] if v == 1.0] == [
        '{client_id="%s",consumer_id="%s",group="%s",state="IDLE"}' % (g, a.consumer_id, g)]
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
    m = a.metrics()
    assert m["RebalanceRateAndTime"]["seconds"] > 0 and m["MinFetchRate"] > 0
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
