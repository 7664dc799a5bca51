"""Reaper of a dead Spark group member: ``python -m zkconsumer.spark._reaper ZK GROUP CONSUMER_ID DRIVER_PID``.

Started by :class:`~zkconsumer.spark.member.GroupMember` with a pipe as stdin that only the member's process holds,
and the pid of the process that started the member's process: the driver's JVM (Spark starts the streaming
source's Python process from it). The pipe closes when the member's process ends: Spark ends it with SIGTERM when
the query stops (the source leaves the group itself first when it can, :mod:`.leave`), or it is killed. Then:

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
"""
import os
import sys
import time

POLL_S = 0.5


def release_member(zookeeper_connect, group, consumer_id, auth=None, session=None):
    """Delete the registration and owner nodes of ``consumer_id`` (a dead member); with ``session``, only nodes
    created by that ZooKeeper session. Returns what was deleted. ``auth``: the member's
    :class:`~zkconsumer.zookeeper.auth.ZkAuth` (with ACLs on, only its identity may delete them)."""
    from ..zookeeper import client as zkmod
    zk = zkmod.connect(zookeeper_connect, auth=auth)
    try:
        return _release(zk, group, consumer_id, session)
    finally:
        zkmod.close(zk)


def _release(zk, group, consumer_id, session=None):
    from kazoo.exceptions import NoNodeError
    from ..core.layout import paths
    deleted = []

    def delete(path, stat):
        if session is not None and stat.ephemeralOwner != session:
            return
        try:
            zk.delete(path, version=stat.version)
            deleted.append(path)
        except NoNodeError:
            pass

    reg = paths.consumer_registration_path(group, consumer_id)
    st = zk.exists(reg)
    if st is not None:
        delete(reg, st)
    owners = paths.group_owners_path(group)
    try:
        topics = zk.get_children(owners)
    except NoNodeError:
        topics = []
    prefix = (consumer_id + "-").encode()
    for t in topics:
        base = owners + "/" + t
        try:
            parts = zk.get_children(base)
        except NoNodeError:
            continue
        reads = {p: zk.get_async(base + "/" + p) for p in parts}
        for p, res in reads.items():
            try:
                data, stat = res.get()
            except NoNodeError:
                continue
            if data.startswith(prefix) and data[len(prefix):].isdigit():
                delete(base + "/" + p, stat)
    return deleted


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


def main(argv):
    """``ZK GROUP CONSUMER_ID DRIVER_PID [SCHEME CREDENTIALS_FILE MECHANISM SET_ACL]`` (a file path, never a
    password). DRIVER_PID 0: release as soon as the member's process is gone."""
    zk_connect, group, consumer_id, driver = argv[1], argv[2], argv[3], int(argv[4])
    driver_started = _start_time(driver) if driver > 0 else None
    auth = None
    if len(argv) >= 9:
        from ..zookeeper.auth import build
        auth = build(argv[5], argv[6] or None, argv[7], argv[8] == "true")
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except Exception:
        pass
    from ..zookeeper import client as zkmod
    from ..core.layout import paths
    try:
        zk = zkmod.connect(zk_connect, auth=auth)
    except Exception:
        return 1
    try:
        reg = paths.consumer_registration_path(group, consumer_id)
        st = zk.exists(reg)
        session = st.ephemeralOwner if st is not None else None
        while driver_started is not None and _start_time(driver) == driver_started:
            st = zk.exists(reg)
            if st is None or st.ephemeralOwner != session:
                # released by the application, or gone with the member's session
                return 0
            time.sleep(POLL_S)
        _release(zk, group, consumer_id, session)
    except Exception:
        return 1
    finally:
        zkmod.close(zk)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
