"""Starting and stopping the local cluster's server processes, each in its own process group."""
import errno
import os
import signal
import socket
import subprocess
import time

from ..errors import LocalClusterError


def free_port(host="127.0.0.1"):
    """A free TCP port on loopback (the OS picks it; a tiny race is possible and is reported by the server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def spawn(argv, log_path, cwd=None, env=None):
    """Start argv detached (new session) with stdout/stderr to log_path; return the Popen."""
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env, start_new_session=True, close_fds=True)
    finally:
        log.close()


def is_alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    # a zombie child of this process counts as dead
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def stop(pid, timeout=10.0):
    """SIGTERM the process group of pid, then SIGKILL what is left after timeout. True if it was running."""
    if not is_alive(pid):
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not is_alive(pid):
                return True
            time.sleep(0.05)
    if is_alive(pid):
        raise LocalClusterError("process %d did not stop after SIGKILL" % pid)
    return True


def wait_for_port(host, port, proc, timeout, name, log_path):
    """Wait until host:port accepts connections; fail early with the log tail if proc exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LocalClusterError("%s exited with code %s during start-up; last log lines:\n%s"
                                    % (name, proc.returncode, log_tail(log_path)))
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise LocalClusterError("%s did not listen on %s:%d within %.0f s; last log lines:\n%s"
                            % (name, host, port, timeout, log_tail(log_path)))


def log_tail(path, lines=15):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return "(no log at %s)" % path
