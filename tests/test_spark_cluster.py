"""The Spark pipeline on a real distributed Spark cluster: a standalone master and two workers (their own JVMs),
the example job (zkconsumer/spark/job.py) submitted with spark-submit --master spark://..., executors in JVMs of
their own under the workers, reading from the real ZooKeeper + Apache Kafka of the test session.

Nothing here runs Spark in the test process: every job is a spark-submit child (a driver JVM + its Python), and
the test watches it from outside (ZooKeeper, the driver's REST API, the event log, the Parquet output, /proc).
"""
import glob
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from spark_support import Producer, log_ends as _log_ends, member_ids as _ids, node_python
from spark_support import owners as _owners
from spark_support import set_zk_offsets as _set_zk_offsets, wait_for as _wait, zk_offsets as _zk_offsets
from zkconsumer.local.processes import free_port, log_tail

pytestmark = pytest.mark.spark

JOB_TIMEOUT = 420  # seconds: spark-submit of a small job takes 20-60 s on 2 busy cores


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    """The Python of every driver and executor here: only what docs/spark.md says a node must install (no
    zkconsumer, kafka-python or kazoo: they come from the zkconsumer.zip of --py-files)."""
    return node_python(str(tmp_path_factory.mktemp("node-python") / "venv"))


# -- helpers ----------------------------------------------------------------------------------------------------
def _get_json(url):
    with urllib.request.urlopen(url, timeout=3) as r:
        return json.loads(r.read().decode())


def _output_rows(output):
    """Every (partition, offset) the job wrote (its records output, every batch directory), as a sorted list: a
    record read twice appears twice."""
    import pyarrow.parquet as pq
    rows = []
    for f in glob.glob(os.path.join(output, "batch_id=*", "*.parquet")):
        t = pq.read_table(f, columns=["partition", "offset"]).to_pydict()
        rows.extend(zip(t["partition"], t["offset"]))
    return sorted(rows)


def _ranges(ranges):
    """The exact (partition, offset) set of ``{partition: (start, end)}``, sorted."""
    return sorted((p, o) for p, (s, e) in ranges.items() for o in range(s, e))


class Job:
    """One ``spark-submit --master spark://...`` run of the example job (driver JVM + driver Python), in its own
    process group, with the driver's UI (REST API) on a free port and an uncompressed event log."""

    def __init__(self, cluster, python, workdir, args, name="job", conf=None):
        from zkconsumer.spark.standalone import job_script, package_zip, submit_argv
        self.cluster = cluster
        self.dir = os.path.join(str(workdir), name)
        os.makedirs(self.dir, exist_ok=True)
        self.events_dir = os.path.join(self.dir, "events")
        os.makedirs(self.events_dir, exist_ok=True)
        self.ui_port = free_port()
        zip_path = package_zip(os.path.join(self.dir, "zkconsumer.zip"))   # executors import the tree under test
        c = {"spark.ui.port": str(self.ui_port), "spark.port.maxRetries": "64",
             "spark.ui.showConsoleProgress": "false", "spark.driver.host": "127.0.0.1",
             "spark.eventLog.enabled": "true", "spark.eventLog.dir": "file://" + self.events_dir,
             "spark.eventLog.compress": "false", "spark.sql.shuffle.partitions": "2",
             "spark.executor.cores": "1", "spark.sql.session.timeZone": "UTC"}
        c.update(conf or {})
        self.argv = submit_argv(cluster.master_url, job_script(), list(args), conf=c, py_files=[zip_path])
        # the driver, too, imports zkconsumer from the shipped zip only: --py-files for its own Python, and
        # PYTHONPATH for the streaming source's process, which Spark starts without the --py-files (docs/spark.md)
        env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1",
                   PYTHONPATH=zip_path)
        self.log = os.path.join(self.dir, "driver.log")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=self.dir, start_new_session=True)

    def wait(self, timeout=JOB_TIMEOUT):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("the job did not finish within %d s; driver log:\n%s" % (timeout, log_tail(self.log, 60)))
        assert rc == 0, "the job failed (exit %s); driver log:\n%s" % (rc, log_tail(self.log, 80))
        return rc

    def kill(self):
        """kill -9 the driver (its JVM and every Python process of its group)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)

    def driver_python(self):
        """pid of the driver's Python process (the job itself), a child of the spark-submit JVM."""
        from zkconsumer.spark.standalone import _cmdline, child_pids
        for pid in child_pids(self.proc.pid):
            if any(a.endswith("job.py") for a in _cmdline(pid)):
                return pid
        return None

    def ui(self):
        """The driver UI's base URL, from the driver log (Spark moves to the next port when ours was taken)."""
        import re
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                m = re.search(r"Successfully started service 'SparkUI' on port (\d+)", f.read())
        except OSError:
            m = None
        return "http://127.0.0.1:%s" % m.group(1) if m else None

    def app_id(self):
        if self.ui() is None:
            return None
        try:
            apps = _get_json(self.ui() + "/api/v1/applications")
        except Exception:
            return None
        return apps[0]["id"] if apps else None

    def busy_executors(self, app):
        """Executor ids (not the driver) with a running task, from the driver's REST API."""
        try:
            exe = _get_json("%s/api/v1/applications/%s/executors" % (self.ui(), app))
        except Exception:
            return []
        return [e["id"] for e in exe if e["id"] != "driver" and e.get("activeTasks", 0) > 0]

    def events(self):
        out = []
        # Spark 4 writes rolling event logs: eventlog_v2_<app>/events_<n>_<app>[.inprogress]
        for f in sorted(glob.glob(os.path.join(self.events_dir, "**", "events_*"), recursive=True),
                        key=lambda f: (os.path.dirname(f), int(os.path.basename(f).split("_")[1]))):
            with open(f, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        try:
                            out.append(json.loads(line))
                        except ValueError:
                            pass  # a line being written
        return out


def _executors_added(events):
    return {e["Executor ID"]: e["Executor Info"]["Host"] for e in events if e["Event"] ==
            "org.apache.spark.scheduler.SparkListenerExecutorAdded" or e["Event"] == "SparkListenerExecutorAdded"}


def _task_ends(events):
    return [e for e in events if e["Event"] == "SparkListenerTaskEnd"]


def _job_args(services, group, topic, output, extra=(), starting="earliest"):
    """The example job writing the records it read (--output-format records), so that every check compares the
    exact set of (partition, offset) read with what was produced."""
    return ["--zookeeper", services.zookeeper_connect, "--bootstrap-server", services.bootstrap_servers,
            "--group", group, "--topic", topic, "--output", output, "--output-format", "records",
            "--log-level", "INFO"] + (["--starting-offsets", starting] if starting else []) + list(extra)


# -- the cluster itself -----------------------------------------------------------------------------------------
def test_standalone_cluster_has_two_workers_and_restarts_one(spark_cluster):
    status = spark_cluster.wait_workers(2, timeout=60)
    assert status["status"] == "ALIVE" and status["url"] == spark_cluster.master_url
    workers = sorted(status["workers"], key=lambda w: w["port"])
    assert [(w["state"], w["cores"], w["memory"]) for w in workers] == [("ALIVE", 1, 512)] * 2
    info = spark_cluster.info()
    pids = {n: p["pid"] for n, p in info["processes"].items()}
    assert len(set(pids.values())) == 3 and all(p["alive"] for p in info["processes"].values())
    # a worker's record restarts it on the same port; the master sees it leave and come back
    rec = spark_cluster.record("worker-1")
    spark_cluster.stop("worker-1")
    assert _wait(lambda: sum(w["state"] == "ALIVE" and w["port"] == rec["port"]
                             for w in spark_cluster.status()["workers"]) == 0, 90)
    new_pid = spark_cluster.start("worker-1")
    assert new_pid != pids["worker-1"]
    status = spark_cluster.wait_workers(2, timeout=90)
    assert any(w["port"] == rec["port"] and w["state"] == "ALIVE" for w in status["workers"])


def test_tasks_run_in_executor_jvms_and_import_the_shipped_package(spark_cluster, python, tmp_path):
    from zkconsumer.spark.standalone import descendants, package_zip, submit_argv
    zip_path = package_zip(str(tmp_path / "zkconsumer.zip"))
    app = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark_probe_app.py")
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.Popen(submit_argv(spark_cluster.master_url, app, py_files=[zip_path],
                                        conf={"spark.ui.enabled": "false"}),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, cwd=str(tmp_path),
                            start_new_session=True)
    executors, under_executor = {}, {}
    try:
        while proc.poll() is None:  # executor JVMs and their Python workers exist only while the application runs
            for ex in spark_cluster.executors():
                executors[ex["pid"]] = ex
                for pid in descendants(ex["pid"]):
                    under_executor[pid] = ex["pid"]
            time.sleep(0.2)
        out = proc.stdout.read()
        assert proc.wait(JOB_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    line = [x for x in out.splitlines() if x.startswith("PROBE ")]
    assert line, out
    report = json.loads(line[0][len("PROBE "):])
    assert len(report["tasks"]) == 8
    # every task's Python imported zkconsumer, and kafka-python and kazoo, from the zip shipped with --py-files (the
    # tree under test), not from an installed copy
    assert all(".zip" in t[m] for t in report["tasks"] for m in ("zkconsumer", "kafka", "kazoo")), report["tasks"]
    # ... and ran under an executor JVM (CoarseGrainedExecutorBackend) of this application, started by a worker
    assert executors and {ex["app_id"] for ex in executors.values()} == {report["app"]}
    assert {ex["worker"] for ex in executors.values()} <= {"worker-0", "worker-1"}
    for t in report["tasks"]:
        assert t["pid"] in under_executor or t["ppid"] in under_executor, (t, under_executor)


# -- the example job on the cluster -----------------------------------------------------------------------------
def test_batch_job_on_cluster_reads_exactly_the_unconsumed_range(spark_cluster, python, services, zk, unique,
                                                                  tmp_path):
    topic, group = services.create_topic(unique("cb"), 4), unique("g")
    services.produce(topic, 400)
    ends = _log_ends(services, topic, 4)
    assert sum(ends.values()) == 400
    committed = {0: ends[0] // 2, 1: ends[1]}              # 2 and 3: nothing committed -> earliest
    _set_zk_offsets(zk, group, topic, committed)
    ranges = {p: (committed.get(p, 0), ends[p]) for p in range(4)}
    want = _ranges(ranges)
    assert len(want) == sum(e - s for s, e in ranges.values()) > 0
    output = str(tmp_path / "out")
    job = Job(spark_cluster, python, tmp_path, _job_args(services, group, topic, output, ["--batch"]))
    job.wait()
    assert _output_rows(output) == want                     # exactly the unconsumed range: no more, no less
    assert _zk_offsets(zk, group, topic) == ends            # committed after the output was written
    events = job.events()
    execs = _executors_added(events)
    assert len(execs) == 2 and set(execs.values()) == {"127.0.0.1"}, execs
    ran_on = {e["Task Info"]["Executor ID"] for e in _task_ends(events)}
    assert ran_on and ran_on <= set(execs), ran_on          # every task ran in an executor JVM, none in the driver
    # a second run finds nothing to read and changes nothing
    Job(spark_cluster, python, tmp_path, _job_args(services, group, topic, output, ["--batch"]), name="again").wait()
    assert _output_rows(output) == want and _zk_offsets(zk, group, topic) == ends


def test_streaming_job_on_cluster_reads_unconsumed_range_and_releases_owners(spark_cluster, python, services, zk,
                                                                             unique, tmp_path):
    topic, group = services.create_topic(unique("cs"), 4), unique("g")
    services.produce(topic, 200)
    before = _log_ends(services, topic, 4)
    big, full = sorted(range(4), key=lambda p: -before[p])[:2]
    committed = {big: before[big] // 2, full: before[full]}   # the others: nothing committed -> earliest
    _set_zk_offsets(zk, group, topic, committed)
    output = str(tmp_path / "out")
    ckpt_dir = tmp_path / "check points" / "job 1"             # a file: URI with spaces, not a plain path
    checkpoint = "file://" + str(ckpt_dir)
    # a long ZooKeeper session: owner nodes that vanish within it were deleted (by the job's finish_query after its
    # last commit), not expired
    job = Job(spark_cluster, python, tmp_path, _job_args(services, group, topic, output, [
        "--checkpoint", checkpoint, "--trigger-seconds", "1", "--property", "zookeeper.session.timeout.ms=60000"]))
    try:
        # the driver's source joins the group and claims every partition (it is the only member)
        owners = _wait(lambda: (lambda o: o if len(o) == 4 and all("_spark-" in v for v in o.values()) else None)(
            _owners(zk, group, topic)), 240)
        assert owners, "the job did not claim the partitions; driver log:\n%s" % log_tail(job.log, 60)
        assert len(_ids(zk, group)) == 1, (_ids(zk, group), owners)
        services.produce(topic, 100)                             # more data while the query runs
        ends = _log_ends(services, topic, 4)
        assert _wait(lambda: _zk_offsets(zk, group, topic) == ends, 180), \
            (_zk_offsets(zk, group, topic), ends, log_tail(job.log, 40))
        # and Spark's own commit log has the batch: the source's commit can land a moment before Spark finishes
        # writing commits/N, and a stop in between leaves commits/N as a temporary file (Spark then re-runs the
        # batch at restart); the graceful stop below must find the batch complete
        from zkconsumer.spark import last_committed_end

        def checkpoint_end():
            try:
                return {p: o for (_, p), o in last_committed_end(checkpoint, filesystem="pyarrow").items()}
            except Exception:
                return None
        assert _wait(lambda: checkpoint_end() == ends, 60), (checkpoint_end(), ends)
        driver = job.driver_python()
        assert driver, "no driver Python process under spark-submit"
        t0 = time.monotonic()
        os.kill(driver, signal.SIGTERM)                          # graceful stop: query stops, last batch committed
        job.wait(180)
    finally:
        job.kill()
    # the group's owner nodes and the registration are gone as soon as the query stopped (well within the session)
    assert _wait(lambda: not _owners(zk, group, topic) and not _ids(zk, group), max(1.0, t0 + 45 - time.monotonic())), \
        (_owners(zk, group, topic), _ids(zk, group), "%.1f s after SIGTERM" % (time.monotonic() - t0))
    ranges = {p: (committed.get(p, 0), ends[p]) for p in range(4)}
    got, want = _output_rows(output), _ranges(ranges)
    assert got == want, (len(got), len(want), ranges)                        # exactly the unconsumed range
    assert _zk_offsets(zk, group, topic) == ends, (_zk_offsets(zk, group, topic), ends)
    assert os.path.isdir(ckpt_dir / "offsets") and os.path.isdir(ckpt_dir / "commits")
    last = checkpoint_end()
    assert last == ends, (last, ends, sorted(os.listdir(ckpt_dir / "commits")))


def test_partitions_added_while_producing_are_read_from_their_first_record(spark_cluster, python, services, zk,
                                                                           unique, tmp_path):
    """Spark's rule for partitions that join a running query: they start at earliest, whatever startingOffsets says.
    The job runs with the default startingOffsets (latest); two partitions are added while a producer writes to
    every partition; rebalance.settle.ms=15000 holds the member's claim back, so the new partitions hold records
    before the member adopts them. Every record produced is read exactly once."""
    topic, group = services.create_topic(unique("pa"), 2), unique("g")
    _set_zk_offsets(zk, group, topic, {0: 0, 1: 0})             # the first partitions: from the group's offsets
    output, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    job = Job(spark_cluster, python, tmp_path, _job_args(services, group, topic, output, [
        "--checkpoint", ckpt, "--trigger-seconds", "1", "--property", "rebalance.settle.ms=15000"], starting=None))
    producer, early, stop = Producer(services), Producer(services), threading.Event()
    partitions = [0, 1]

    def produce():
        while not stop.is_set():
            for p in list(partitions):
                producer.send(topic, 1, partition=p)
            time.sleep(0.2)
    writer = threading.Thread(target=produce, daemon=True)
    try:
        assert _wait(lambda: len(_owners(zk, group, topic)) == 2, 240), \
            "the job did not claim the partitions; driver log:\n%s" % log_tail(job.log, 60)
        writer.start()
        assert _wait(lambda: sum(_zk_offsets(zk, group, topic).values()) >= 20, 180), log_tail(job.log, 40)
        altered = time.monotonic()
        services.create_topic(topic, 4)                           # kafka-topics --alter --partitions 4
        early.send(topic, 5, partition=2)                         # at once, well within the 15 s before the claim
        early.send(topic, 5, partition=3)
        # the case under test: the new partitions hold records before the member adopts them
        assert not {2, 3} & set(_owners(zk, group, topic)), \
            "the member claimed the new partitions %.1f s after they were added, before their first records were " \
            "written: raise rebalance.settle.ms for this machine" % (time.monotonic() - altered)
        partitions[:] = producer.partitions(topic, at_least=4)
        assert partitions == [0, 1, 2, 3]
        assert _wait(lambda: len(_owners(zk, group, topic)) == 4, 120), log_tail(job.log, 40)
        time.sleep(3)                                              # producing on, to all four
        stop.set()
        writer.join(60)
        ends = _log_ends(services, topic, 4)
        assert all(ends[p] > 0 for p in (2, 3)), ends
        assert _wait(lambda: _zk_offsets(zk, group, topic) == ends, 180), (_zk_offsets(zk, group, topic), ends,
                                                                            log_tail(job.log, 40))
        driver = job.driver_python()
        assert driver, "no driver Python process under spark-submit"
        os.kill(driver, signal.SIGTERM)
        job.wait(180)
    finally:
        stop.set()
        producer.close()
        early.close()
        job.kill()
    produced = producer.acked | early.acked
    assert _output_rows(output) == sorted(produced), (len(_output_rows(output)), len(produced))


def _kill_busy_executor(job, cluster, timeout=240):
    """kill -9 the JVM of an executor that is running a task of ``job`` (mid-batch); return its record."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job.proc.poll() is None:
        app = job.app_id()
        for eid in job.busy_executors(app) if app else ():
            for ex in cluster.executors(app):
                if ex["executor_id"] == eid:
                    os.kill(ex["pid"], signal.SIGKILL)
                    return ex
        time.sleep(0.1)
    return None


def test_executor_killed_mid_batch_task_retried_sink_exact(spark_cluster, python, services, zk, unique,
                                                           tmp_path):
    topic, group = services.create_topic(unique("ck"), 4), unique("g")
    services.produce(topic, 60000)
    ends = _log_ends(services, topic, 4)
    output, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    job = Job(spark_cluster, python, tmp_path, _job_args(services, group, topic, output, [
        "--checkpoint", ckpt, "--available-now", "--max-offsets-per-trigger", "15000"]))
    try:
        killed = _kill_busy_executor(job, spark_cluster)
        assert killed, "no executor of the job was ever seen running a task; driver log:\n%s" % log_tail(job.log, 40)
        job.wait()
    finally:
        job.kill()
    events = job.events()
    ends_of = _task_ends(events)
    lost = [e for e in ends_of if e["Task Info"]["Executor ID"] == killed["executor_id"]
            and e["Task End Reason"]["Reason"] != "Success"]
    assert lost, "no task of the killed executor %s failed" % killed["executor_id"]
    assert {e["Task End Reason"]["Reason"] for e in lost} <= {"ExecutorLostFailure", "FetchFailed", "TaskKilled"}
    ok = {(e["Stage ID"], e["Task Info"]["Index"]) for e in ends_of if e["Task End Reason"]["Reason"] == "Success"}
    for e in lost:  # each failed task ran again, elsewhere or in the replacement executor, and succeeded
        assert (e["Stage ID"], e["Task Info"]["Index"]) in ok, e["Task Info"]
    assert any(e["Event"] == "SparkListenerExecutorRemoved" and e["Executor ID"] == killed["executor_id"]
               for e in events)
    # the sink: every record written once (no duplicates, no gaps); the group committed up to the log end
    assert _output_rows(output) == _ranges({p: (0, ends[p]) for p in range(4)})
    assert _zk_offsets(zk, group, topic) == ends
    assert len(glob.glob(os.path.join(output, "batch_id=*"))) >= 4       # maxOffsetsPerTrigger: several batches


def _files_of_batches(output, ids):
    return {b: sorted(os.listdir(os.path.join(output, "batch_id=%d" % b))) for b in ids}


def test_driver_killed_and_restarted_resumes_from_checkpoint(spark_cluster, python, services, zk, unique,
                                                             tmp_path):
    from zkconsumer.spark import read_checkpoint_offsets
    from zkconsumer.spark.checkpoint import checkpoint_files
    topic, group = services.create_topic(unique("cr"), 4), unique("g")
    services.produce(topic, 40000)
    output, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    args = _job_args(services, group, topic, output, ["--checkpoint", ckpt, "--max-offsets-per-trigger", "6000",
                                                      "--property", "zookeeper.session.timeout.ms=60000"])
    job = Job(spark_cluster, python, tmp_path, args + ["--trigger-seconds", "1"], name="first")
    try:
        # let at least one batch finish (output written, offsets committed), then kill -9 the driver mid-batch
        assert _wait(lambda: sum(_zk_offsets(zk, group, topic).values()) > 0, 240), log_tail(job.log, 40)
        assert _wait(lambda: job.app_id() and job.busy_executors(job.app_id()), 120), "no batch running"
        job.kill()
        killed_at = time.monotonic()
    finally:
        job.kill()
    done = checkpoint_files(ckpt, "pyarrow").batch_ids("commits")
    assert done, "no batch finished before the kill"
    kept = _files_of_batches(output, done)
    at_kill = _zk_offsets(zk, group, topic)
    assert 0 < sum(at_kill.values()) < 40000
    # the group holds the end of the last batch Spark marked done, or of the next one when the kill came between
    # its commit-after-output and Spark's own commit log entry
    planned = checkpoint_files(ckpt, "pyarrow").batch_ids("offsets")
    candidates = [{p: o for (_, p), o in read_checkpoint_offsets(ckpt, b, filesystem="pyarrow").items()}
                  for b in (done[-1], done[-1] + 1) if b in planned]
    assert at_kill in candidates, (at_kill, candidates)
    # the dead driver's member leaves the group at once (its reaper), not after the ZooKeeper session timeout (60 s)
    assert _wait(lambda: not _owners(zk, group, topic) and not _ids(zk, group),
                 max(1.0, killed_at + 45 - time.monotonic())), _owners(zk, group, topic)
    services.produce(topic, 4000)
    ends = _log_ends(services, topic, 4)
    again = Job(spark_cluster, python, tmp_path, args + ["--available-now"], name="restarted")
    try:
        again.wait()
    finally:
        again.kill()
    # resumed after the batches finished before the kill: their output was not rewritten
    assert _files_of_batches(output, done) == kept
    assert _output_rows(output) == _ranges({p: (0, ends[p]) for p in range(4)})   # every record once
    assert _zk_offsets(zk, group, topic) == ends
