"""The embedded local cluster: a real ZooKeeper server, the tansu Kafka-protocol broker and the registry mirror.

``LocalCluster(dir).up()`` starts all three on free loopback ports as detached process groups and records them in
``DIR/state.json``; ``status()`` reads that file and probes each process; ``down()`` stops every process it
recorded and checks that none is left. The README demo, the CLI (``zkconsumer local ...``) and the test fixtures
all use this one class.
"""
import json
import os
import socket
import sys
import time

from ..errors import LocalClusterError
from . import discovery, processes

DEFAULT_DIR_ENV = "ZKCONSUMER_LOCAL_DIR"


def default_dir():
    return os.environ.get(DEFAULT_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".zkconsumer", "local")


def zk_four_letter(host, port, word=b"srvr", timeout=1.0):
    """Send a ZooKeeper four-letter command; return the answer text ('' if nothing came back)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word)
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


class LocalCluster:
    HOST = "127.0.0.1"

    def __init__(self, directory=None):
        self.dir = os.path.abspath(directory or default_dir())
        self.state_path = os.path.join(self.dir, "state.json")

    # -- state -------------------------------------------------------------------------------------------------
    def read_state(self):
        try:
            with open(self.state_path) as f:
                return json.load(f)
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise LocalClusterError("state file %s is corrupt (%s); remove it after checking for stray processes"
                                    % (self.state_path, e))

    def _write_state(self, state):
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=2, sort_keys=True)
        os.replace(tmp, self.state_path)

    @staticmethod
    def _pids(state):
        return [(name, state[name]["pid"]) for name in ("mirror", "broker", "zookeeper")
                if state.get(name) and state[name].get("pid")]

    def is_running(self, state=None):
        state = state if state is not None else self.read_state()
        return bool(state) and all(processes.is_alive(pid) for _, pid in self._pids(state))

    # -- up ----------------------------------------------------------------------------------------------------
    def up(self, start_timeout=60.0, log=lambda msg: None):
        os.makedirs(self.dir, exist_ok=True)
        state = self.read_state()
        if state and self.is_running(state):
            log("local cluster already running (state %s)" % self.state_path)
            return self.info(state)
        if state:
            log("cleaning up a previous local cluster that is no longer complete")
            self.down()
        # resolve programs before starting anything, so a missing one fails cleanly
        java = discovery.find_java()
        classpath = discovery.find_zookeeper_classpath()
        tansu = discovery.find_tansu()
        state = {"dir": self.dir, "started_at": int(time.time() * 1000)}
        try:
            state["zookeeper"] = self._start_zookeeper(java, classpath, start_timeout, log)
            self._write_state(state)
            state["broker"] = self._start_broker(tansu, start_timeout, log)
            self._write_state(state)
            state["mirror"] = self._start_mirror(state, start_timeout, log)
            self._write_state(state)
        except BaseException:
            self._write_state(state)
            self.down()
            raise
        return self.info(state)

    def _start_zookeeper(self, java, classpath, timeout, log):
        port = processes.free_port()
        data_dir = os.path.join(self.dir, "zookeeper-data")
        os.makedirs(data_dir, exist_ok=True)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("\n".join([
                "tickTime=500", "initLimit=10", "syncLimit=5",
                "dataDir=%s" % data_dir,
                "clientPort=%d" % port, "clientPortAddress=%s" % self.HOST,
                "admin.enableServer=false",
                "minSessionTimeout=1000", "maxSessionTimeout=60000",
                "maxClientCnxns=0",
                "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons",
                ""]))
        log_path = os.path.join(self.dir, "zookeeper.log")
        argv = [java, "-Xmx512m", "-Dzookeeper.admin.enableServer=false", "-cp", classpath,
                discovery.ZK_MAIN_CLASS, cfg]
        log("starting ZooKeeper on %s:%d" % (self.HOST, port))
        proc = processes.spawn(argv, log_path, cwd=self.dir)
        processes.wait_for_port(self.HOST, port, proc, timeout, "ZooKeeper", log_path)
        deadline = time.monotonic() + timeout
        while True:  # listening is not enough: the server must answer
            try:
                if "Zookeeper version" in zk_four_letter(self.HOST, port):
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LocalClusterError("ZooKeeper on port %d does not answer; last log lines:\n%s"
                                        % (port, processes.log_tail(log_path)))
            time.sleep(0.1)
        return {"pid": proc.pid, "port": port, "connect": "%s:%d" % (self.HOST, port), "log": log_path,
                "data_dir": data_dir}

    def _start_broker(self, tansu, timeout, log):
        port = processes.free_port()
        url = "tcp://%s:%d" % (self.HOST, port)
        log_path = os.path.join(self.dir, "broker.log")
        argv = [tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        log("starting the tansu broker on %s:%d" % (self.HOST, port))
        proc = processes.spawn(argv, log_path, cwd=self.dir)
        processes.wait_for_port(self.HOST, port, proc, timeout, "tansu broker", log_path)
        return {"pid": proc.pid, "port": port, "bootstrap": "%s:%d" % (self.HOST, port), "log": log_path}

    def _start_mirror(self, state, timeout, log):
        log_path = os.path.join(self.dir, "mirror.log")
        argv = [sys.executable, "-m", "zkconsumer", "registry", "sync",
                "--zookeeper", state["zookeeper"]["connect"], "--bootstrap-server", state["broker"]["bootstrap"],
                "--interval", "0.5"]
        log("starting the registry mirror")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p for p in [_package_root(), env.get("PYTHONPATH")] if p])
        proc = processes.spawn(argv, log_path, cwd=self.dir, env=env)
        # wait for the first sync: the broker registration appears under /brokers/ids
        from kazoo.client import KazooClient
        zk = KazooClient(hosts=state["zookeeper"]["connect"])
        zk.start(timeout=10)
        try:
            deadline = time.monotonic() + timeout
            while not (zk.exists("/brokers/ids") and zk.get_children("/brokers/ids")):
                if proc.poll() is not None:
                    raise LocalClusterError("the registry mirror exited with code %s; last log lines:\n%s"
                                            % (proc.returncode, processes.log_tail(log_path)))
                if time.monotonic() > deadline:
                    raise LocalClusterError("the registry mirror did not register the broker in ZooKeeper within "
                                            "%.0f s; last log lines:\n%s" % (timeout, processes.log_tail(log_path)))
                time.sleep(0.1)
        finally:
            zk.stop()
            zk.close()
        return {"pid": proc.pid, "log": log_path}

    # -- status / down -----------------------------------------------------------------------------------------
    def info(self, state=None):
        state = state if state is not None else self.read_state()
        if not state:
            return {"running": False, "dir": self.dir}
        out = {"running": self.is_running(state), "dir": self.dir,
               "zookeeper_connect": state.get("zookeeper", {}).get("connect"),
               "bootstrap_servers": state.get("broker", {}).get("bootstrap"),
               "processes": {}}
        for name, pid in self._pids(state):
            out["processes"][name] = {"pid": pid, "alive": processes.is_alive(pid), "log": state[name].get("log")}
        return out

    def down(self):
        """Stop every recorded process; return the names stopped. Leaves no process behind or raises."""
        state = self.read_state()
        if not state:
            return []
        stopped = []
        for name, pid in self._pids(state):
            if processes.stop(pid):
                stopped.append(name)
        left = [name for name, pid in self._pids(state) if processes.is_alive(pid)]
        if left:
            raise LocalClusterError("processes still running after stop: %s" % ", ".join(left))
        os.remove(self.state_path)
        return stopped


def _package_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
