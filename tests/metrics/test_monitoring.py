"""The Grafana dashboard and the Prometheus alert rules in monitoring/: promtool checks the rules and runs their unit
tests (monitoring/alerts_test.yml), and every metric the dashboard's queries and the rules' expressions name is one
the code exports (the member's collector and the group lag exporter's, rendered from stand-ins: pure code)."""
import json
import os
import re
import shutil
import subprocess
import types

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.support import ROOT
from zkconsumer.tools.lag_exporter import LagCache, LagCollector, _Group
from zkconsumer.consumer.member_metrics import FetchCounters, MemberMetrics
from zkconsumer.metrics.member import MetricsCollector

MON = os.path.join(ROOT, "monitoring")
PROMQL_WORDS = {"sum", "by", "max", "min", "rate", "increase", "delta", "and", "or", "unless", "time", "without",
                "avg", "count", "on", "ignoring", "group_left", "group_right", "bool", "offset", "label_values"}


def _promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is needed (Debian's prometheus package: apt-get install prometheus; .ci/bootstrap "
                    "installs it)")
    return path


def test_alert_rules_check_and_their_unit_tests_pass():
    promtool = _promtool()
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]):
        r = subprocess.run([promtool] + args, cwd=MON, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    assert "SUCCESS" in r.stdout


def _exported_names():
    """Every series name the member's and the exporter's collectors put on a page."""
    snapshot = MemberMetrics(
        group="g", consumer_id="g_h-1-abc", client_id="g", engine="kafka-python", state="IDLE",
        consumer_lag={("t", 0): 1}, min_fetch_rate=1.0, messages=1, bytes=2, topic_counts={"t": (1, 2)},
        queued_chunks=1, fetch=FetchCounters(requests=1, seconds=0.1, errors=0), zookeeper_commits=1, kafka_commits=0,
        commit_failures=0, session_expiries=0, rebalances=1, rebalance_seconds=0.1, failed_rebalance_attempts=0,
        owned_partitions=1, claim_wait_seconds=0.0, claim_wait_owners={}, offsets_degraded=False)
    conn = types.SimpleNamespace(metrics_snapshot=lambda: snapshot)
    cache = LagCache(None, lambda g: True)
    cache.groups["g"] = _Group(offset_topics={"t"}, zk_offsets={("t", 0): 1}, owners={("t", 0): "g_h-1-abc-0"},
                               members={"g_h-1-abc"}, phase="kafka", kafka_offsets={("t", 0): 2}, expires_ms=1000)
    cache.partition_counts["t"] = 1
    cache.log_end[("t", 0)] = 5
    cache.log_start[("t", 0)] = 0
    cache.last_refresh_ok = 1700000000.0
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(conn))
    registry.register(LagCollector(cache, "c"))
    page = generate_latest(registry).decode()
    return {m.group(1) for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )", page, re.M)}


def _names_in(expr):
    expr = re.sub(r'\{[^}]*\}', "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r'"[^"]*"', "", expr)
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if w not in PROMQL_WORDS and "_" in w}


def test_every_metric_the_dashboard_and_the_rules_use_is_exported():
    import yaml
    exported = _exported_names()
    assert "kafka_consumergroup_group_lag" in exported and "zkconsumer_topic_messages_total" in exported
    dash = json.load(open(os.path.join(MON, "grafana-dashboard.json")))
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dash["templating"]["list"] if v.get("type") == "query"]
    rules = yaml.safe_load(open(os.path.join(MON, "alerts.yml")))
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    used = set().union(*(_names_in(e) for e in exprs))
    assert used and used <= exported, sorted(used - exported)
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("lag", "rebalances", "commits", "fetch", "states"):
        assert topic in titles, topic
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {"ZkConsumerGroupLagGrowing", "ZkConsumerGroupWithoutOwners", "ZkConsumerMemberDegraded",
            "ZkConsumerOffsetsExpireSoon", "ZkConsumerSplitBrain", "ZkConsumerExporterStale"} <= alerts
    for g in rules["groups"]:
        for r in g["rules"]:
            anchor = r["annotations"]["runbook"]
            path, _, frag = anchor.partition("#")
            text = open(os.path.join(ROOT, path)).read()
            if frag:
                heads = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                         for h in re.findall(r"^#+ (.+)$", text, re.M)}
                assert frag in heads, (r["alert"], anchor)
