"""bench/commit.py: the dual-commit goal row and the back-to-back figure beside it, on any cluster."""
from bench import commit, common


def test_commits_are_spaced_as_auto_commit_spaces_them():
    """auto.commit.interval.ms spaces commits 1-60 s apart: the goal is judged at both ends, the default's included."""
    from zkconsumer.core.config import ConsumerConfig
    default = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "z"}).auto_commit_interval_ms
    assert commit.SPACING_S == 1.0 and commit.DEFAULT_SPACING_S * 1000 == default == 60000
    assert min(commit.DEFAULT_PAIRS) >= 5  # issue 30: at least 5 samples for every client


def test_the_back_to_back_figure_is_beside_the_spaced_one_on_an_external_cluster(services, monkeypatch):
    """On a cluster whose servers' processes are not ours (no CPU figures), the back-to-back row is still there."""
    for name, value in (("PARTITIONS", 20), ("WARM_UP", 3), ("SPACING_S", 0.01), ("DEFAULT_SPACING_S", 0.02),
                        ("CPU_COMMITS", 3)):
        monkeypatch.setattr(commit, name, value)
    monkeypatch.setattr(commit, "_ten_thousand", lambda cluster, rounds, log: (1.0, 1.0))
    external = common.Cluster(None, zk_connect=services.zookeeper_connect, bootstrap=services.bootstrap_servers)
    assert external.server_pids() == {}
    got = commit.run(external, quick=True, log=lambda _m: None)
    rows = {r.key: r for r in got}
    assert set(rows) == {"commit.zk-1000", "dual.spaced", "dual.back-to-back", "commit.zk-10000"}
    spaced = [r for r in got if r.key == "dual.spaced"]
    assert len(spaced) == 2
    assert "the short end" in spaced[0].metric and "auto.commit.interval.ms's default" in spaced[1].metric
    assert "of the same 5 pairs" in spaced[1].note
    for r in spaced:
        assert r.goal.startswith("<= 1.3x ZooKeeper-only") and r.met is not None
    b2b = rows["dual.back-to-back"]
    assert b2b.value > 0 and b2b.baseline > 0 and b2b.met is None
    assert "not ours to read" in b2b.note
