"""bench/scale.py's member processes (bench/scale_members.py): the suite end to end on a small group, and its
convergence check, so the bench's scale rows are measured by code the suite has run."""
import re

from bench import model, scale
from bench.scale_members import expected_share, share_converged
from zkconsumer.core.assignors import range_assign


def test_expected_share_is_each_members_part_of_the_range_assignment():
    threads = ["g_b-0", "g_a-0", "g_c-0"]
    share = expected_share(threads, 10, ["g_a", "g_c"], "t")
    everything = range_assign({"t": threads}, {"t": list(range(10))})
    assert share == {cid: {tp: th for tp, th in everything.items() if th == cid + "-0"} for cid in ("g_a", "g_c")}
    assert sorted(p for _, p in share["g_a"]) == [0, 1, 2, 3]  # g_a-0 sorts first: 4, 3, 3
    assert [scale._split(n, 4) for n in (300, 6, 3)] == [[75] * 4, [2, 2, 1, 1], [1, 1, 1, 0]]


class _Member:
    def __init__(self, state, owned, attempts, fetching=True):
        self.rebalancer = type("R", (), {"state": state, "owned": owned, "stats": {"attempts": attempts},
                                         "fetching": fetching})()


def test_converged_needs_idle_fetching_members_an_attempt_since_the_join_and_exactly_their_share():
    want = {"a": {("t", 0): "a-0"}, "b": {("t", 1): "b-0"}}
    done = {"a": _Member("IDLE", {("t", 0): "a-0"}, 3), "b": _Member("IDLE", {("t", 1): "b-0"}, 5)}
    assert share_converged(done, want) and share_converged(done, want, since={"a": 2, "b": 4})
    assert not share_converged(done, want, since={"a": 3, "b": 4})  # a has not attempted since the join
    assert not share_converged(dict(done, b=_Member("CLAIMING", {("t", 1): "b-0"}, 5)), want)
    assert not share_converged(dict(done, b=_Member("IDLE", {("t", 1): "b-0", ("t", 2): "b-0"}, 5)), want)
    assert not share_converged(dict(done, b=_Member("IDLE", {("t", 1): "b-0"}, 5, fetching=False)), want)


def test_the_scale_suite_runs_its_members_in_processes(services):
    logged = []
    row = scale._run(services, 6, 60, logged.append, "scale.100", processes=2)
    assert row.met, (row, logged)
    assert row.metric == "scale: 6 consumers x 60 partitions, one joins: time until every member fetches its share"
    assert "fetching, auto-commit and start-up checks on; ZooKeeper: 1 server(s)" in row.note
    assert "members in 2 processes" in row.note and " 0 failed" in row.note
    # the ZooKeeper requests the rebalance cost, counted at the members' clients: the joiner's registration, then
    # a release and a claim (one multi-op each) by the members whose ranges change, and every member's reads
    reads, writes = map(int, re.search(r"\(the joiner's included\): (\d+) reads, (\d+) writes", row.note).groups())
    assert writes >= 3 and reads >= 7 * 7, row.note
    assert any("6 members in 2 processes converged after start-up" in line for line in logged), logged
    assert any("7 members stopped" in line for line in logged), logged
    # the note is what bench/model.py reads: CPU per attempt, and the cores the members shared
    assert 0 < float(row.note.split(" ms per attempt")[0].rsplit("(", 1)[1]) < 1000
    assert model._PROCESSES_NOTE.search(row.note).group(1) == "2"
    # what the idle group alone cost before the join (its fetchers' polls): the reason for a slow row on few cores
    assert re.search(r"before the join, the idle group's processes used \d+% of a core \(\d+ cores here\)", row.note)

