"""Process records: the servers a tool of ours started, described in ``DIR/state.json``, so that another process
(a CLI call, a test) can find, stop and restart them.

Shared by the embedded Kafka cluster (:class:`zkconsumer.local.LocalCluster`) and the Spark standalone cluster
(:class:`zkconsumer.spark.standalone.StandaloneCluster`). A state is ``{"processes": {name: record}, "order":
[names in start order], ...}``; a record holds at least ``argv``/``log`` and, once started, ``pid`` (the leader of
its own process group).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import Any, Callable, Dict, List, Optional

from ..errors import LocalClusterError
from . import processes


class ProcessRecords:
    """The state file of one directory and the processes it records."""

    #: what the processes are, for messages ("the local cluster", "Spark daemons")
    what = "processes"
    #: seconds a process gets to stop after SIGTERM before SIGKILL
    stop_timeout = 10.0

    def __init__(self, directory: str):
        self.dir = os.path.abspath(directory)
        self.state_path = os.path.join(self.dir, "state.json")

    # -- the state file ----------------------------------------------------------------------------------------
    def read_state(self) -> Optional[Dict[str, Any]]:
        try:
            with open(self.state_path) as f:
                state: Dict[str, Any] = json.load(f)
                return state
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise LocalClusterError("state file %s is corrupt (%s); remove it after checking for stray processes"
                                    % (self.state_path, e))

    def _write_state(self, state: Dict[str, Any]) -> None:
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=2, sort_keys=True)
        os.replace(tmp, self.state_path)

    @staticmethod
    def process_names(state: Dict[str, Any]) -> List[str]:
        """Start order (stop in reverse)."""
        return list(state.get("order", []))

    def _pids(self, state: Dict[str, Any]) -> List[tuple]:
        """``[(name, pid)]`` of the started processes, in stop order."""
        procs = state.get("processes", {})
        return [(n, procs[n]["pid"]) for n in reversed(self.process_names(state)) if procs.get(n, {}).get("pid")]

    def is_running(self, state: Optional[Dict[str, Any]] = None) -> bool:
        """Every recorded process was started and is alive."""
        state = state if state is not None else self.read_state()
        if not state:
            return False
        pids = self._pids(state)
        return len(pids) == len(self.process_names(state)) and all(processes.is_alive(pid) for _, pid in pids)

    # -- one process at a time ---------------------------------------------------------------------------------
    def record(self, name: str) -> Dict[str, Any]:
        state = self.read_state() or {}
        try:
            rec: Dict[str, Any] = state["processes"][name]
            return rec
        except KeyError:
            raise LocalClusterError("%s in %s has no process %r (has: %s)"
                                    % (self.what, self.dir, name, ", ".join(self.process_names(state)))) from None

    def stop(self, name: str, kill: bool = False) -> None:
        """Stop one process (SIGTERM, or SIGKILL with kill=True); ``start(name)`` brings it back on the same ports."""
        pid = self.record(name).get("pid")
        if pid and processes.is_alive(pid):
            if kill:
                os.killpg(pid, signal.SIGKILL)
            processes.stop(pid, timeout=30.0)

    def signal(self, name: str, sig: int) -> None:
        os.killpg(self.record(name)["pid"], sig)

    # -- down --------------------------------------------------------------------------------------------------
    def _strays(self, pid: int) -> List[int]:
        """Processes outside *pid*'s process group that must not outlive it (none by default)."""
        return []

    def down(self) -> List[str]:
        """Stop every recorded process (reverse start order); return the names stopped. Leaves no process
        behind or raises."""
        state = self.read_state()
        if not state:
            return []
        stopped = []
        for name, pid in self._pids(state):
            if not processes.is_alive(pid):
                continue
            try:
                # a frozen process cannot stop
                os.killpg(pid, signal.SIGCONT)
            except OSError:
                pass
            strays = self._strays(pid)
            if processes.stop(pid, timeout=self.stop_timeout):
                stopped.append(name)
            for p in strays:
                if processes.is_alive(p):
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
        left = [name for name, pid in self._pids(state) if processes.is_alive(pid)]
        if left:
            raise LocalClusterError("%s: still running after stop: %s" % (self.what, ", ".join(left)))
        os.remove(self.state_path)
        return stopped


def wait_until_ready(rec: Dict[str, Any], proc: "subprocess.Popen[bytes]", timeout: float, what: str,
                     check: Callable[[], bool], interval: float = 0.1) -> None:
    """Poll *check* until it returns true; fail with the log's last lines when the process exits first or
    *timeout* passes. An exception from *check* means "not ready yet" (connection refused, half-written page)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:
            pass
        if proc.poll() is not None:
            raise LocalClusterError("%s exited with code %s during start-up; last log lines:\n%s"
                                    % (what, proc.returncode, processes.log_tail(rec["log"], 25)))
        if time.monotonic() > deadline:
            raise LocalClusterError("%s was not ready within %.0f s; last log lines:\n%s"
                                    % (what, timeout, processes.log_tail(rec["log"], 25)))
        time.sleep(interval)
