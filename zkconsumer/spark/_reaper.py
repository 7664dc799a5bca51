"""Reaper of a dead Spark group member:
``python -m zkconsumer.spark._reaper ZK GROUP CONSUMER_ID DRIVER_PID SESSION_TIMEOUT_MS``.

Started by :class:`~zkconsumer.spark.member.GroupMember` with a pipe as stdin that only the member's process holds,
the pid of the process that started the member's process: the driver's JVM (Spark starts the streaming source's
Python process from it), and the member's ``zookeeper.session.timeout.ms``. The pipe closes when the member's
process ends: Spark ends it with SIGTERM when the query stops (the source leaves the group itself first when it can,
:mod:`.leave`), or it is killed. Then:

* **the driver is gone too** (killed, a lost node: no code of the application runs any more): the reaper deletes the
  member's registration ``/consumers/[g]/ids/[id]`` and every owner node whose value is one of the member's thread
  ids (``<id>-<n>``), so the group rebalances at once instead of after ``zookeeper.session.timeout.ms``;
* **the driver lives** (the query stopped; the application goes on): the application releases the member, after
  committing the query's last batch (:func:`~zkconsumer.spark.finish_query`, or the query listener); releasing here
  would let another member claim the partitions and replay that batch. The reaper waits until the member's nodes are
  gone (released by the application, or ended with the member's ZooKeeper session) and releases them itself only if
  the driver dies first.

Only nodes of the member's own ZooKeeper session are deleted (a later member under the same ``consumer.id`` keeps
its own). After a clean shutdown it finds nothing to delete.

The reaper always ends on its own once the pipe closed, and says on stderr (the member's process's: the driver's
log) what it did, or what it left and why. Its connection and every ZooKeeper request wait at most
:data:`CALL_S` (a ZooKeeper that vanished, or accepts connections and never answers, leaves a request of a kazoo
client queued until a reconnection that never comes), and all of it ends by a total deadline: the member's process
is gone, so its session ends within its timeout and its nodes with it (waited for twice that, at least twice
ZooKeeper's default minimum session timeout), plus :data:`RELEASE_S` to connect and release. A watchdog ends the
process :data:`GRACE_S` after that deadline whatever it is doing.
"""
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

log = logging.getLogger("zkconsumer.spark.reaper")

POLL_S = 0.5
#: the reaper's own ZooKeeper session timeout
OWN_SESSION_MS = 6000
#: the longest the connection or one ZooKeeper request may wait (a whole session timeout of the reaper's own)
CALL_S = OWN_SESSION_MS / 1000.0
#: ZooKeeper's default minimum session timeout (two ticks of 2 s): the member's may have been raised to it
MIN_SESSION_S = 4.0
#: to connect and release, beyond the wait for the member's nodes to go
RELEASE_S = 30.0
#: after the deadline, until the watchdog ends the process
GRACE_S = 5.0


class GaveUp(Exception):
    """A ZooKeeper request did not get its answer in time."""


class Calls:
    """The ZooKeeper requests of the reaper: ``calls("exists", path)`` is ``zk.exists(path)``, each waiting at most
    ``call_s`` for its answer and all of them ending by ``deadline`` (monotonic seconds), else :class:`GaveUp`. A
    dropped connection or an expired session of the reaper's own is retried while time is left (kazoo reconnects
    meanwhile). Without
    ``call_s`` and ``deadline`` (the application's :func:`release_member`): kazoo's own calls, which fail once the
    client gave up on a connection lost for ``ONE_SHOT_GIVE_UP_MS``."""

    def __init__(self, zk: Any, call_s: Optional[float] = None, deadline: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.zk = zk
        self.call_s = call_s
        self.deadline = deadline
        self.clock = clock

    @property
    def bounded(self) -> bool:
        return self.call_s is not None or self.deadline is not None

    def _left(self) -> float:
        left = self.call_s if self.call_s is not None else float("inf")
        if self.deadline is not None:
            left = min(left, self.deadline - self.clock())
        if left <= 0:
            raise GaveUp("the reaper's time is up")
        return left

    def wait(self, result: Any) -> Any:
        """The value of a kazoo ``*_async`` request's *result*."""
        if not self.bounded:
            return result.get()
        left = self._left()
        try:
            return result.get(timeout=left)
        except self.zk.handler.timeout_exception:
            raise GaveUp("no answer from ZooKeeper within %.1f s" % left) from None

    def once(self, method: str, *args: Any) -> Any:
        """``zk.<method>(*args)``, bounded, not retried: a dropped connection raises (the request may have been
        applied and its answer lost)."""
        if not self.bounded:
            return getattr(self.zk, method)(*args)
        return self.wait(getattr(self.zk, method + "_async")(*args))

    def __call__(self, method: str, *args: Any) -> Any:
        from kazoo.exceptions import ConnectionLoss, SessionExpiredError
        while True:
            try:
                return self.once(method, *args)
            except (ConnectionLoss, SessionExpiredError):
                if not self.bounded:
                    raise
                self._left()
                time.sleep(0.1)


def release_member(zookeeper_connect: str, group: str, consumer_id: str, auth: Any = None,
                   session: Optional[int] = None) -> List[str]:
    """Delete the registration and owner nodes of ``consumer_id`` (a dead member); with ``session``, only nodes
    created by that ZooKeeper session. Returns what was deleted. ``auth``: the member's
    :class:`~zkconsumer.zookeeper.auth.ZkAuth` (with ACLs on, only its identity may delete them)."""
    from ..zookeeper import client as zkmod
    zk = zkmod.connect(zookeeper_connect, auth=auth, give_up_after_ms=zkmod.ONE_SHOT_GIVE_UP_MS)
    try:
        deleted: List[str] = []
        _release(Calls(zk), group, consumer_id, session, deleted)
        return deleted
    finally:
        zkmod.close(zk)


def _release(calls: Calls, group: str, consumer_id: str, session: Optional[int], deleted: List[str]) -> None:
    """Delete the member's nodes (see :func:`release_member`), appending each deleted path to ``deleted`` as it
    goes (what was deleted before a request failed is known)."""
    from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError
    from ..core.layout import paths

    def delete(path, stat):
        if session is not None and stat.ephemeralOwner != session:
            return
        while True:
            try:
                calls.once("delete", path, stat.version)
                deleted.append(path)
            except NoNodeError:
                pass
            except (ConnectionLoss, SessionExpiredError):
                # the delete may have been applied and its answer lost: the path may hold another member's node by
                # now (a new owner node has version 0 too), so it is deleted again only if it is still the node read
                now = calls("exists", path)
                if now is not None and now.czxid == stat.czxid:
                    continue
            return

    reg = paths.consumer_registration_path(group, consumer_id)
    st = calls("exists", reg)
    if st is not None:
        delete(reg, st)
    owners = paths.group_owners_path(group)
    try:
        topics = calls("get_children", owners)
    except NoNodeError:
        topics = []
    prefix = (consumer_id + "-").encode()
    for t in topics:
        base = owners + "/" + t
        try:
            parts = calls("get_children", base)
        except NoNodeError:
            continue
        reads = {p: calls.zk.get_async(base + "/" + p) for p in parts}
        for p, res in reads.items():
            try:
                try:
                    data, stat = calls.wait(res)
                except (ConnectionLoss, SessionExpiredError):
                    data, stat = calls("get", base + "/" + p)  # a read changes nothing: asked again
            except NoNodeError:
                continue
            if data.startswith(prefix) and data[len(prefix):].isdigit():
                delete(base + "/" + p, stat)


def _start_time(pid):
    """The start time of process ``pid`` (to tell it from a later process with the same pid), or None if there is
    no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read().decode("utf-8", "replace")
        return stat[stat.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass
        return "alive"


def _left_behind(deleted: List[str], session: Optional[int]) -> str:
    what = "deleted %s; " % ", ".join(deleted) if deleted else "deleted nothing; "
    return what + ("its remaining nodes go when its ZooKeeper session 0x%x expires" % session if session
                   else "its remaining nodes go when its ZooKeeper session expires")


def reap(zk_connect: str, group: str, consumer_id: str, driver: int, driver_started: Any, member_session_s: float,
         auth: Any = None, clock: Callable[[], float] = time.monotonic) -> int:
    """What the reaper does once the member's process is gone (its pipe closed): 0 when it released the member or
    found nothing to release (or left the nodes to the living driver), 1 when it gave up."""
    from ..core.layout import paths
    from ..zookeeper import client as zkmod
    who = "member %s of group %s" % (consumer_id, group)
    start = clock()
    wait_s = 2 * max(member_session_s, MIN_SESSION_S)
    deadline = start + wait_s + RELEASE_S
    deleted: List[str] = []
    # the member's session, once read
    state: Dict[str, Optional[int]] = {"session": None}

    def watchdog():
        log.error("%s: still running %.0f s after its process ended (ZooKeeper at %s stuck?); exiting: %s", who,
                  clock() - start, zk_connect, _left_behind(list(deleted), state["session"]))
        logging.shutdown()
        os._exit(1)
    timer = threading.Timer(deadline + GRACE_S - clock(), watchdog)
    timer.daemon = True
    timer.start()
    try:
        zk = zkmod.connect(zk_connect, session_timeout_ms=OWN_SESSION_MS,
                           connection_timeout_ms=int(min(CALL_S, deadline - clock()) * 1000), auth=auth)
    except Exception as e:
        log.warning("%s: cannot connect to ZooKeeper (%s); exiting: %s", who, e, _left_behind(deleted, None))
        return 1
    calls = Calls(zk, CALL_S, deadline, clock)
    gave_up = True
    try:
        reg = paths.consumer_registration_path(group, consumer_id)
        st = calls("exists", reg)
        session = state["session"] = st.ephemeralOwner if st is not None else None
        while driver_started is not None and _start_time(driver) == driver_started:
            st = calls("exists", reg)
            if st is None or st.ephemeralOwner != session:
                log.info("%s: its nodes are gone (released by the application, or with its ZooKeeper session)", who)
                gave_up = False
                return 0
            if clock() - start >= wait_s:
                log.warning("%s: its registration %s is still held by session 0x%x %.0f s after its process ended, "
                            "and the driver (pid %d) lives: left to the application or to that session's expiry",
                            who, reg, session, clock() - start, driver)
                gave_up = False
                return 0
            time.sleep(POLL_S)
        _release(calls, group, consumer_id, session, deleted)
        log.info("%s: %s; released %s", who, "the driver is gone" if driver_started is not None
                 else "its process is gone", ", ".join(deleted) if deleted else "nothing (nothing of it was left)")
        gave_up = False
        return 0
    except Exception as e:
        log.warning("%s: gave up (%s: %s); exiting: %s", who, type(e).__name__, e,
                    _left_behind(deleted, state["session"]))
        return 1
    finally:
        if gave_up:
            # kazoo's stop() waits for its connection thread, which may be waiting for an answer: not for long
            closer = threading.Thread(target=zkmod.close, args=(zk,), daemon=True)
            closer.start()
            closer.join(1.0)
        else:
            zkmod.close(zk)
        timer.cancel()


def main(argv):
    """``ZK GROUP CONSUMER_ID DRIVER_PID SESSION_TIMEOUT_MS [SCHEME CREDENTIALS_FILE MECHANISM SET_ACL]`` (a file
    path, never a password). DRIVER_PID 0: release as soon as the member's process is gone."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s zkconsumer reaper[%(process)d] %(levelname)s %(message)s")
    # kazoo's reconnection attempts: what came of them is the reaper's own line
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    if len(argv) not in (6, 10):
        sys.stderr.write("usage: python -m zkconsumer.spark._reaper ZK GROUP CONSUMER_ID DRIVER_PID SESSION_TIMEOUT_MS "
                         "[SCHEME CREDENTIALS_FILE MECHANISM SET_ACL] (started by a Spark member, not by hand)\n")
        return 2
    zk_connect, group, consumer_id, driver = argv[1], argv[2], argv[3], int(argv[4])
    member_session_s = int(argv[5]) / 1000.0
    driver_started = _start_time(driver) if driver > 0 else None
    auth = None
    if len(argv) >= 10:
        from ..zookeeper.auth import build
        auth = build(argv[6], argv[7] or None, argv[8], argv[9] == "true")
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except Exception:
        pass
    return reap(zk_connect, group, consumer_id, driver, driver_started, member_session_s, auth)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
