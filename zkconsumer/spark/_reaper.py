"""Reaper of a dead Spark group member: ``python -m zkconsumer.spark._reaper ZK GROUP CONSUMER_ID``.

Started by :class:`~zkconsumer.spark.member.GroupMember` with a pipe as stdin that only the member's process
holds. Spark ends the streaming source's Python process with SIGKILL (``stop()`` is not called), which closes the
pipe: the reaper then deletes the member's registration ``/consumers/[g]/ids/[id]`` and every owner node whose
value is one of the member's thread ids (``<id>-<n>``), so the group rebalances at once instead of after
``zookeeper.session.timeout.ms``. After a clean shutdown it finds nothing to delete.

The query listener (:mod:`.listener`) releases the member when a query stops, in the application's own process; the
reaper is kept for what the listener cannot see: a killed driver (no Python code of the application runs), a query
that stopped before its member was reported, applications that did not install the listener.
"""
import sys


def release_member(zookeeper_connect, group, consumer_id, auth=None):
    """Delete the registration and owner nodes of ``consumer_id`` (a dead member). Returns what was deleted.
    ``auth``: the member's :class:`~zkconsumer.zk_auth.ZkAuth` (with ACLs on, only its identity may delete them)."""
    from kazoo.exceptions import NoNodeError
    from .. import zk as zkmod
    from ..layout import paths
    deleted = []
    zk = zkmod.connect(zookeeper_connect, auth=auth)
    try:
        reg = paths.consumer_registration_path(group, consumer_id)
        try:
            zk.delete(reg)
            deleted.append(reg)
        except NoNodeError:
            pass
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
                    data, _ = res.get()
                except NoNodeError:
                    continue
                if data.startswith(prefix) and data[len(prefix):].isdigit():
                    try:
                        zk.delete(base + "/" + p)
                        deleted.append(base + "/" + p)
                    except NoNodeError:
                        pass
    finally:
        zkmod.close(zk)
    return deleted


def main(argv):
    """``ZK GROUP CONSUMER_ID [SCHEME CREDENTIALS_FILE MECHANISM SET_ACL]`` (a file path, never a password)."""
    zk_connect, group, consumer_id = argv[1:4]
    auth = None
    if len(argv) >= 8:
        from ..zk_auth import build
        auth = build(argv[4], argv[5] or None, argv[6], argv[7] == "true")
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except Exception:
        pass
    try:
        release_member(zk_connect, group, consumer_id, auth)
    except Exception:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
