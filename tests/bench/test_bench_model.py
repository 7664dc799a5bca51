"""bench/model.py, the rebalance model for groups too big for this machine: pure code, no services."""
import pytest

from bench import model


def test_members_changed_come_from_the_real_assignor():
    # 3 members x 6 partitions: [0,1] [2,3] [4,5]; a joiner sorting after the second gives 2,2,1,1: the joiner and
    # the last member change, the first two keep theirs
    _, changed = model.assignor_cost(3, 6, min_time=0.0)
    assert changed == 2
    _, changed = model.assignor_cost(4, 4, min_time=0.0)  # 1 each; the joiner after #2 takes #3's: 2 change
    assert changed == 2
    _, changed = model.assignor_cost(4, 12, min_time=0.0)  # 3 each -> 3,3,2,2,2: all but the first two change
    assert changed == 3


def test_moved_partitions_come_from_the_real_assignor():
    # 3 members x 6 partitions [0,1] [2,3] [4,5]; a joiner after the second: [0,1] [2,3] [4] [5]: p4 moves
    assert model.moved_partitions(3, 6) == 1
    # 4 x 12: [0-2] [3-5] [6-8] [9-11]; the joiner after the third: [0-2] [3-5] [6,7] [8,9] [10,11]: p8, p9 move
    assert model.moved_partitions(4, 12) == 2
    reads = model.predict(3, 6, model.Ensemble(), 0.0, assignor=(0.0, 2)).zk_reads
    assert reads == model.READS_PER_ATTEMPT * 4 + 3 + 2 * 1 + 2 * 2


def test_prediction_counts_and_modes():
    ens = model.Ensemble(read_rate=1000.0, write_rate=100.0, rtt_s=0.001)
    fleet = model.predict(10, 100, ens, 0.002, "fleet", assignor=(0.001, 4), moved=7)
    assert fleet.zk_reads == model.READS_PER_ATTEMPT * 11 + 10 + 2 * 7 + 2 * 4 and fleet.zk_writes == 1 + 2 * 4
    assert fleet.watch_notifications == 10 + 4
    one = model.predict(10, 100, ens, 0.002, "shared", assignor=(0.001, 4))
    assert one.cpu_s == pytest.approx(11 * 0.003) and fleet.cpu_s == pytest.approx(0.003)
    assert one.converge_s > fleet.converge_s
    two = model.predict(10, 100, ens, 0.002, "shared", assignor=(0.001, 4), cores=2)  # the attempts on 2 cores
    assert two.cpu_s == pytest.approx(11 * 0.003 / 2, abs=1e-3)  # rounded to the ms
    # the ensemble's rates bound a big group: ten times the members, about ten times the ZooKeeper time
    big = model.predict(100, 1000, ens, 0.002, "fleet", assignor=(0.001, 40), moved=70)
    queued = lambda p: p.zk_s - 4 * ens.rtt_s  # noqa: E731  (the round trips do not grow with the group)
    assert queued(big) == pytest.approx(10 * queued(fleet), rel=0.1)
    with pytest.raises(ValueError):
        model.predict(10, 100, ens, 0.0, "cluster")
    with pytest.raises(ValueError):
        model.predict(10, 100, ens, 0.0, "shared", cores=0)


def test_calibration_reproduces_its_point_and_checks_the_others(tmp_path):
    results = tmp_path / "results.json"
    results.write_text('[{"metric": "scale: 20 consumers x 200 partitions, one joins", "value": 0.3},'
                       ' {"metric": "scale: 40 consumers x 400 partitions, one joins", "value": 0.9},'
                       ' {"metric": "consume messages/s", "value": 1}]')
    points = model.measured_points(str(results))
    assert points == {20: 0.3, 40: 0.9}
    fixed, check = model.calibrate(points)
    assert fixed > 0
    assert check[20][1] == pytest.approx(0.3, abs=0.01)  # fitted here
    assert check[40][0] == 0.9 and check[40][1] > check[20][1]  # predicted, shown beside the measurement
    assert check[40][2] is None  # no CPU measured
    assert model.measured_points(str(tmp_path / "missing.json")) == model.RECORDED_POINTS


def test_the_cpu_measured_per_attempt_gives_a_second_prediction(tmp_path):
    results = tmp_path / "results.json"
    results.write_text('[{"metric": "scale: 20 consumers x 200 partitions, one joins", "value": 0.3, "note": '
                       '"21 attempts; CPU while converging: the members\' process 0.2 s (9.5 ms per attempt)"},'
                       ' {"metric": "scale: 40 consumers x 400 partitions, one joins", "value": 0.9, "note": '
                       '"41 attempts; CPU while converging: the members\' process 0.8 s (20.0 ms per attempt)"}]')
    cpu = model.measured_cpu(str(results))
    assert cpu == {20: pytest.approx(0.0095), 40: pytest.approx(0.020)}
    fixed, check = model.calibrate(model.measured_points(str(results)), cpu)
    # the second prediction uses the point's own CPU per attempt: more CPU, a longer prediction than the first
    assert check[40][2] is not None and check[40][2] > check[40][1]
    # 41 attempts at 20 ms of CPU each, one after another in one interpreter, plus ZooKeeper's time and the waits
    assert 41 * 0.020 <= check[40][2] <= 41 * 0.020 + 0.1


def test_member_processes_in_the_note_share_the_machines_cores(tmp_path):
    results = tmp_path / "results.json"
    machine = '"machine": {"cpus": 2}'
    results.write_text('[{"metric": "scale: 20 consumers x 200 partitions, one joins", "value": 0.3, "note": '
                       '"members in 4 processes, the joiner in another; CPU 0.2 s (9.5 ms per attempt)", %s},'
                       ' {"metric": "scale: 40 consumers x 400 partitions, one joins", "value": 0.9, "note": '
                       '"members in 1 processes; (20.0 ms per attempt)", %s},'
                       ' {"metric": "scale: 60 consumers x 600 partitions, one joins", "value": 2.0, "note": '
                       '"(20.0 ms per attempt)", %s}]' % (machine, machine, machine))
    assert model.measured_cores(str(results)) == {20: 2, 40: 1, 60: 1}  # min(processes, cpus); none: one process
    points, cpu = model.measured_points(str(results)), model.measured_cpu(str(results))
    _, on_two = model.calibrate(points, cpu, model.measured_cores(str(results)))
    _, on_one = model.calibrate(points, cpu)
    # the same CPU per attempt on 2 cores takes about half the time of 1 core
    assert on_two[20][2] < on_one[20][2] and on_two[20][2] == pytest.approx(on_one[20][2] / 2, rel=0.3)
    assert on_two[40][2] == on_one[40][2]
    assert model.measured_cores(str(tmp_path / "missing.json")) == {n: model.RECORDED_CORES
                                                                    for n in model.RECORDED_POINTS}


def test_cli_json(capsys):
    assert model.main(["--members", "50", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"members": 50' in out and '"predictions"' in out
