"""The ZooKeeper side of the cutover fence: ``/consumers/[g]/ids`` without the right to create children.

Every member of the group registers by creating an ephemeral child of ``/consumers/[g]/ids`` (Kafka 1.1.1
``ZookeeperConsumerConnector.registerConsumerInZK``; zkconsumer's own registration likewise). ZooKeeper checks the
parent's ACL for that create (the ``CREATE`` permission), whoever the client is and whatever it was told: so a
group whose ``ids`` node grants ``CREATE`` to nobody cannot be joined by any member, a JVM (Scala) one included.
The Scala consumer then fails in ``createMessageStreams`` with ``NoAuthException`` and consumes nothing.

:func:`fenced_acl` removes ``CREATE`` from every entry of the node's ACL and keeps everything else, ``ADMIN``
included: whoever could change the ACL before still can (no identity is locked out, and nothing else under the
group changes), so this is a fence against members that come back, not an access control. :func:`lifted_acl`
puts the saved ACL back, or, without one, gives ``CREATE`` back to every entry holding ``ADMIN`` (those
identities could have granted it to themselves anyway).
"""
from __future__ import annotations

from typing import Any, List, Optional

from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError

from zkconsumer.errors import GroupConflictError
from zkconsumer.layout import paths

__all__ = ["acl_to_json", "acl_from_json", "fenced_acl", "lifted_acl", "is_fenced", "fenced_ids_node", "set_fence",
           "lift_fence", "FenceError"]


class FenceError(GroupConflictError):
    """ZooKeeper refused to change the ACL of the group's ``ids`` node (this identity lacks ADMIN on it)."""


def _perms():
    from kazoo.security import Permissions
    return Permissions


def acl_to_json(acls) -> List[dict]:
    return [{"perms": int(a.perms), "scheme": a.id.scheme, "id": a.id.id} for a in acls]


def acl_from_json(items) -> List[Any]:
    from kazoo.security import ACL, Id
    return [ACL(int(a["perms"]), Id(str(a["scheme"]), str(a["id"]))) for a in items]


def fenced_acl(acls) -> List[Any]:
    """*acls* with the CREATE permission taken from every entry (an entry left with no permission is dropped)."""
    from kazoo.security import ACL
    create = _perms().CREATE
    out = [ACL(a.perms & ~create, a.id) for a in acls]
    return [a for a in out if a.perms] or [ACL(_perms().READ, out[0].id if out else _world())]


def _world():
    from kazoo.security import Id
    return Id("world", "anyone")


def lifted_acl(current, saved: Optional[list]) -> List[Any]:
    """The ACL to restore: *saved* (as :func:`acl_to_json` wrote it) when there is one, else *current* with CREATE
    given back to every entry holding ADMIN."""
    from kazoo.security import ACL
    if saved:
        return acl_from_json(saved)
    p = _perms()
    return [ACL(a.perms | p.CREATE, a.id) if a.perms & p.ADMIN else a for a in current]


def is_fenced(acls) -> bool:
    """No entry grants CREATE."""
    return not any(a.perms & _perms().CREATE for a in acls)


def fenced_ids_node(zk, group: str) -> Optional[str]:
    """The path of the group's ``ids`` node when it grants nobody CREATE, else None."""
    path = paths.group_ids_path(group)
    try:
        return path if is_fenced(zk.get_acls(path)[0]) else None
    except NoNodeError:
        return None


def set_fence(zk, group: str) -> dict:
    """Take the CREATE right off ``/consumers/[g]/ids`` (created fenced when the group has no such node). Returns
    ``{"path", "ids_acl": the ACL before (JSON), "changed"}``; an ACL that is fenced already is left as it is
    (``ids_acl`` None: the saved one stays where it is). FenceError when ZooKeeper refuses."""
    path = paths.group_ids_path(group)
    for _ in range(5):
        try:
            acls, stat = zk.get_acls(path)
        except NoNodeError:
            from zkconsumer.zk_auth import open_acl
            before = getattr(zk, "default_acl", None) or open_acl()
            try:
                zk.ensure_path(paths.group_path(group))
                zk.create(path, b"", acl=fenced_acl(before))
            except NodeExistsError:
                continue
            except NoAuthError:
                raise FenceError(_refused(group, path, "create", _SET_HINT)) from None
            return {"path": path, "ids_acl": acl_to_json(before), "changed": True}
        if is_fenced(acls):
            return {"path": path, "ids_acl": None, "changed": False}
        try:
            zk.set_acls(path, fenced_acl(acls), version=stat.aversion)
        except BadVersionError:
            # the ACL changed meanwhile: read it again
            continue
        except NoNodeError:
            continue
        except NoAuthError:
            raise FenceError(_refused(group, path, "change the ACL of", _SET_HINT)) from None
        return {"path": path, "ids_acl": acl_to_json(acls), "changed": True}
    raise FenceError("the ACL of %s kept changing while group %s was being fenced; run again" % (path, group))


def lift_fence(zk, group: str, saved: Optional[list]) -> dict:
    """Give the CREATE right back on ``/consumers/[g]/ids`` (:func:`lifted_acl`). Returns ``{"path", "acl",
    "changed"}``; FenceError when ZooKeeper refuses."""
    path = paths.group_ids_path(group)
    for _ in range(5):
        try:
            acls, stat = zk.get_acls(path)
        except NoNodeError:
            return {"path": path, "acl": None, "changed": False}
        if not is_fenced(acls):
            return {"path": path, "acl": acl_to_json(acls), "changed": False}
        new = lifted_acl(acls, saved)
        try:
            zk.set_acls(path, new, version=stat.aversion)
        except BadVersionError:
            continue
        except NoAuthError:
            raise FenceError(_refused(group, path, "change the ACL of", _LIFT_HINT)) from None
        return {"path": path, "acl": acl_to_json(new), "changed": True}
    raise FenceError("the ACL of %s kept changing while the fence of group %s was being lifted; run again"
                     % (path, group))


_SET_HINT = ("or pass --no-acl-fence to fence zkconsumer members only (JVM members would not be kept out)")
_LIFT_HINT = "or ask a ZooKeeper administrator to give CREATE back on it (setAcl)"


def _refused(group, path, what, hint) -> str:
    return ("group %s: ZooKeeper refused to %s %s (this identity has no ADMIN right on it): run again with the "
            "credentials of the identity that created the group (--zookeeper-credentials), %s" % (group, what, path,
                                                                                                 hint))
