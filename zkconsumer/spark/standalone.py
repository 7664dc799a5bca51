"""A Spark standalone cluster (one master, N workers) from the installed pyspark, on loopback, for tests and demos.

    from zkconsumer.spark.standalone import StandaloneCluster
    cluster = StandaloneCluster("/tmp/spark-cluster")
    cluster.up(workers=2, cores=1, memory="512m")          # master + workers, each its own JVM
    cluster.master_url                                     # spark://127.0.0.1:PORT
    ...                                                    # spark-submit --master <url> (see submit_argv)
    cluster.down()

Every daemon is a *process record* in ``DIR/state.json`` (argv, environment, log, ports), like the embedded
ZooKeeper/Kafka cluster's: ``up()`` starts them, ``stop(name)`` / ``start(name)`` stop and start one again on the
same ports, ``down()`` stops every one and checks that none is left.  Readiness comes from the master's JSON
status page (``/json/``): the master is ready once it reports ``ALIVE`` (it was elected leader), a worker once the
master lists it ``ALIVE`` (registered).  Executors are the workers' child JVMs
(``CoarseGrainedExecutorBackend``); :meth:`StandaloneCluster.executors` finds them, e.g. to kill one.

Memory is kept small: daemons get ``SPARK_DAEMON_MEMORY`` (256m), each worker offers ``memory`` to executors.
Workers run Python tasks with ``python`` (default: this interpreter, ``PYSPARK_PYTHON``).

``python -m zkconsumer.spark.standalone up|down|status --dir DIR`` does the same from a shell.
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
import zipfile
from typing import Any, Dict, List, Optional, Sequence

from ..errors import LocalClusterError
from ..local import processes
from ..local.records import ProcessRecords, wait_until_ready

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> str:
    """The installed pyspark's directory (it holds ``bin/spark-class``, ``bin/spark-submit`` and the jars)."""
    if os.environ.get("SPARK_HOME") and os.path.exists(os.path.join(os.environ["SPARK_HOME"], "bin", "spark-class")):
        return os.environ["SPARK_HOME"]
    try:
        import pyspark
    except ImportError as e:
        raise LocalClusterError("a Spark standalone cluster needs pyspark (pip install 'zkconsumer[spark]'): %s"
                                % e) from e
    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    if not os.path.exists(os.path.join(home, "bin", "spark-class")):
        raise LocalClusterError("pyspark at %s has no bin/spark-class" % home)
    return home


def _get_json(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode("utf-8"))


# -- /proc helpers (Linux) --------------------------------------------------------------------------------------
def _cmdline(pid: int) -> List[str]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _ppid(pid: int) -> Optional[int]:
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read().decode("utf-8", "replace")
        return int(stat[stat.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def child_pids(pid: int) -> List[int]:
    """Direct children of ``pid`` (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _ppid(int(name)) == pid:
            out.append(int(name))
    return sorted(out)


def descendants(pid: int) -> List[int]:
    todo, out = [pid], []
    while todo:
        for c in child_pids(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def _arg(argv: List[str], flag: str) -> Optional[str]:
    try:
        return argv[argv.index(flag) + 1]
    except (ValueError, IndexError):
        return None


class StandaloneCluster(ProcessRecords):
    """A Spark standalone master and workers, described by process records in ``DIR/state.json``."""

    what = "the Spark standalone cluster"
    stop_timeout = 20.0

    def _state(self) -> Dict[str, Any]:
        state = self.read_state()
        if not state:
            raise LocalClusterError("no Spark standalone cluster in %s (run up() first)" % self.dir)
        return state

    @property
    def master_url(self) -> str:
        return self._state()["master_url"]

    @property
    def master_webui(self) -> str:
        return "http://%s:%d" % (HOST, self._state()["processes"]["master"]["webui_port"])

    def worker_names(self) -> List[str]:
        return [n for n in self._state()["order"] if n.startswith("worker-")]

    # -- up ----------------------------------------------------------------------------------------------------
    def up(self, workers: int = 2, cores: int = 1, memory: str = "512m", python: Optional[str] = None,
           env: Optional[Dict[str, str]] = None, daemon_memory: str = "256m", start_timeout: float = 120.0,
           log=lambda msg: None) -> Dict[str, Any]:
        """Start the master and ``workers`` workers (``cores`` and ``memory`` each); return :meth:`info`.

        ``env`` is added to every daemon's environment (workers pass theirs on to executors and Python workers)."""
        os.makedirs(self.dir, exist_ok=True)
        state = self.read_state()
        if state and self.is_running(state):
            log("Spark standalone cluster already running (state %s)" % self.state_path)
            return self.info()
        if state:
            log("cleaning up a previous Spark standalone cluster that is no longer complete")
            self.down()
        home = spark_home()
        # empty: no spark-defaults.conf / spark-env.sh from elsewhere
        conf_dir = os.path.join(self.dir, "conf")
        os.makedirs(conf_dir, exist_ok=True)
        base_env = {"SPARK_HOME": home, "SPARK_CONF_DIR": conf_dir, "SPARK_LOCAL_IP": HOST,
                    "SPARK_LOCAL_HOSTNAME": HOST, "SPARK_DAEMON_MEMORY": daemon_memory,
                    "SPARK_LOG_DIR": self.dir, "PYSPARK_PYTHON": python or sys.executable,
                    # no fixed-port REST submission server (6066) that parallel clusters would fight over
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        base_env.update(env or {})
        spark_class = os.path.join(home, "bin", "spark-class")
        port, webui = processes.free_port(), processes.free_port()
        master_url = "spark://%s:%d" % (HOST, port)
        state = {"dir": self.dir, "master_url": master_url, "processes": {}, "order": []}
        state["processes"]["master"] = {
            "kind": "master", "port": port, "webui_port": webui, "env": base_env,
            "argv": [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", str(webui)],
            "log": os.path.join(self.dir, "master.log")}
        state["order"].append("master")
        for i in range(workers):
            wport, wui = processes.free_port(), processes.free_port()
            work_dir = os.path.join(self.dir, "worker-%d" % i)
            os.makedirs(work_dir, exist_ok=True)
            state["processes"]["worker-%d" % i] = {
                "kind": "worker", "port": wport, "webui_port": wui, "env": base_env, "work_dir": work_dir,
                "argv": [spark_class, WORKER_CLASS, master_url, "--host", HOST, "--port", str(wport),
                         "--webui-port", str(wui), "--cores", str(cores), "--memory", memory,
                         "--work-dir", work_dir],
                "log": os.path.join(self.dir, "worker-%d.log" % i)}
            state["order"].append("worker-%d" % i)
        self._write_state(state)
        try:
            for name in state["order"]:
                log("starting Spark %s" % name)
                self._spawn(state, name, start_timeout)
        except BaseException:
            self.down()
            raise
        log("Spark standalone cluster %s: %d worker(s) x %d core(s), %s each" % (master_url, workers, cores, memory))
        return self.info()

    def _spawn(self, state: Dict[str, Any], name: str, timeout: float) -> int:
        rec = state["processes"][name]
        env = dict(os.environ)
        env.update(rec["env"])
        proc = processes.spawn(rec["argv"], rec["log"], cwd=self.dir, env=env)
        rec["pid"] = proc.pid
        self._write_state(state)
        try:
            self._wait_ready(state, rec, proc, timeout)
        except BaseException:
            processes.stop(proc.pid)
            raise
        return proc.pid

    def _wait_ready(self, state: Dict[str, Any], rec: Dict[str, Any], proc, timeout: float) -> None:
        webui = "http://%s:%d/json/" % (HOST, state["processes"]["master"]["webui_port"])
        if rec["kind"] == "master":
            what = "the Spark master on port %d" % rec["port"]

            def ready():
                # "I have been elected leader! New state: ALIVE"
                return _get_json(webui).get("status") == "ALIVE"
        else:
            what = "the Spark worker on port %d" % rec["port"]

            def ready():
                return any(w.get("port") == rec["port"] and w.get("state") == "ALIVE"
                           for w in _get_json(webui).get("workers", []))
        wait_until_ready(rec, proc, timeout, what, ready, interval=0.2)

    # -- status ------------------------------------------------------------------------------------------------
    def status(self) -> Dict[str, Any]:
        """The master's JSON status page (workers, cores, active and completed applications)."""
        status: Dict[str, Any] = _get_json(self.master_webui + "/json/", timeout=5.0)
        return status

    def wait_workers(self, n: Optional[int] = None, timeout: float = 60.0) -> Dict[str, Any]:
        """Wait until the master lists ``n`` (default: all) workers ALIVE; return the status page."""
        n = len(self.worker_names()) if n is None else n
        deadline = time.monotonic() + timeout
        status: Dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                status = self.status()
                if status.get("aliveworkers", 0) >= n:
                    return status
            except Exception:
                pass
            time.sleep(0.2)
        raise LocalClusterError("the Spark master lists %s ALIVE worker(s), not %d, after %.0f s"
                                % (status.get("aliveworkers", "no"), n, timeout))

    def info(self) -> Dict[str, Any]:
        state = self.read_state()
        if not state:
            return {"running": False, "dir": self.dir}
        return {"running": self.is_running(state), "dir": self.dir, "master_url": state["master_url"],
                "master_webui": "http://%s:%d" % (HOST, state["processes"]["master"]["webui_port"]),
                "processes": {n: {"pid": state["processes"][n].get("pid"),
                                  "alive": processes.is_alive(state["processes"][n].get("pid")),
                                  "log": state["processes"][n]["log"]} for n in state["order"]}}

    def executors(self, app_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """Executor JVMs started by this cluster's workers: ``[{pid, app_id, executor_id, worker}]``."""
        state = self._state()
        out = []
        for name in state["order"]:
            rec = state["processes"][name]
            if rec["kind"] != "worker" or not processes.is_alive(rec.get("pid")):
                continue
            for pid in child_pids(rec["pid"]):
                argv = _cmdline(pid)
                if EXECUTOR_CLASS not in argv:
                    continue
                app = _arg(argv, "--app-id")
                if app_id is None or app == app_id:
                    out.append({"pid": pid, "app_id": app, "executor_id": _arg(argv, "--executor-id"),
                                "worker": name})
        return out

    # -- one daemon at a time ----------------------------------------------------------------------------------
    def start(self, name: str, timeout: float = 120.0) -> int:
        state = self._state()
        rec = state["processes"][name]
        if rec.get("pid") and processes.is_alive(rec["pid"]):
            return int(rec["pid"])
        return self._spawn(state, name, timeout)

    def _strays(self, pid: int) -> List[int]:
        """Executors live in the worker's process group; make sure none outlives it."""
        return [p for p in descendants(pid) if EXECUTOR_CLASS in _cmdline(p)]


# -- submitting applications ------------------------------------------------------------------------------------
#: the pure-Python packages the source needs besides zkconsumer (import name -> distribution): the driver joins the
#: group with kazoo and reads offsets with kafka-python, executors read with kafka-python; click for the job's
#: helpers, pure-sasl for ZooKeeper SASL. Compiled ones cannot be imported from a zip: pyarrow (pyspark[sql]
#: needs it on every node anyway), regex (subscribePattern), and kafka-python's optional crc32c / lz4 / snappy / zstd
#: must be installed on the nodes.
ZIP_DEPENDENCIES = {"kafka": "kafka-python", "kazoo": "kazoo", "click": "click", "puresasl": "pure-sasl"}


def _zip_package(z: zipfile.ZipFile, root: str, parent: str, keep) -> None:
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if keep(f):
                full = os.path.join(d, f)
                z.write(full, os.path.relpath(full, parent))


def package_zip(dest: str) -> str:
    """Zip the ``zkconsumer`` package this module was imported from, with the pure-Python packages it needs
    (:data:`ZIP_DEPENDENCIES`: kafka-python, kazoo, click, pure-sasl, as installed here, with their data files),
    into ``dest`` for ``spark-submit --py-files``: every executor's Python workers (and a driver on another node)
    import the same code as here. On the driver, ``PYTHONPATH`` must name it too: Spark starts the streaming
    source's process without the ``--py-files``. Compiled extensions are left out (Python imports none from a zip)."""
    import importlib
    import zkconsumer
    root = os.path.dirname(os.path.abspath(zkconsumer.__file__))
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        _zip_package(z, root, os.path.dirname(root), lambda f: f.endswith((".py", ".xml", ".json")))
        for name in sorted(ZIP_DEPENDENCIES):
            pkg = os.path.dirname(os.path.abspath(importlib.import_module(name).__file__ or ""))
            _zip_package(z, pkg, os.path.dirname(pkg), lambda f: not f.endswith((".pyc", ".so", ".pyd")))
    return dest


def job_script() -> str:
    """Path of the example job's file, to hand to ``spark-submit``."""
    from . import job
    return os.path.abspath(job.__file__)


def submit_argv(master: str, app: str, app_args: Sequence[str] = (), conf: Optional[Dict[str, str]] = None,
                py_files: Optional[List[str]] = None, driver_memory: str = "512m",
                executor_memory: str = "512m") -> List[str]:
    """``spark-submit --master MASTER [--py-files ...] [--conf k=v ...] APP ARGS...`` of the installed pyspark."""
    argv = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", master,
            "--driver-memory", driver_memory, "--executor-memory", executor_memory]
    if py_files:
        argv += ["--py-files", ",".join(py_files)]
    for k, v in sorted((conf or {}).items()):
        argv += ["--conf", "%s=%s" % (k, v)]
    return argv + [app] + list(app_args)


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m zkconsumer.spark.standalone",
                                 description="A Spark standalone cluster from the installed pyspark, on loopback.")
    ap.add_argument("command", choices=("up", "down", "status"))
    ap.add_argument("--dir", required=True, help="state and logs directory")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--memory", default="512m")
    args = ap.parse_args(argv)
    cluster = StandaloneCluster(args.dir)
    if args.command == "up":
        info = cluster.up(workers=args.workers, cores=args.cores, memory=args.memory,
                          log=lambda m: print(m, file=sys.stderr))
    elif args.command == "down":
        info = {"stopped": cluster.down()}
    else:
        info = cluster.info()
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
