"""Leave grace: a member that restarts costs the others no rebalance (``rebalance.leave.grace.ms``).

A member with an explicit ``consumer.id`` and ``rebalance.leave.grace.ms`` > 0 that shuts down gracefully leaves a
persistent marker, ``/consumers/[g]/zkconsumer/leaving/[consumer id]`` (JSON: its registration and the grace),
written before its registration and owner nodes are deleted. Until ``grace`` after the marker was created (its
ZooKeeper ``ctime``), every member computes the assignment as if the leaver were still registered (a "ghost"): its
partitions stay unowned, nobody else's assignment changes, so the others do not stop, release or claim anything.
When it comes back under the same consumer id it registers, takes its partitions (their owner nodes are free) and
deletes its marker: one reassignment for the bounce, its own. If it does not come back in time, the first member to
notice deletes the expired marker and the group rebalances as usual (each member schedules that check for the
marker's expiry).

The rule is decided from ZooKeeper alone, so every member agrees: ghosts count only while every live member is a
zkconsumer member (has a member info node). A zkconsumer member writes its info node with its registration (one
multi-op, with the info node's directories when they are missing; after it only when that cannot be: an earlier
session's node still there, no permission under a shared ``/consumers``) and deletes it after, so it is not listed
without one. JVM members know nothing of ghosts: with one of them in the group, markers are ignored (the legacy
behaviour). Expiry compares the marker's ``ctime`` (the ZooKeeper server's clock) with the member's wall clock:
members' clocks must be within a fraction of the grace of ZooKeeper's.

The cost: a leaver's partitions are not consumed until it is back or the grace has passed.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Dict, List, Optional, Tuple

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..errors import ZnodeFormatError
from ..core.layout import codecs, paths
from ..core.layout._json import MAX_INT64, load_json_object

log = logging.getLogger(__name__)
# (path, mzxid) of malformed markers already logged
_reported: set = set()

__all__ = ["announce_leave", "withdraw_leave", "read_ghosts", "encode_marker", "decode_marker"]


def encode_marker(registration: codecs.ConsumerRegistration, grace_ms: int) -> bytes:
    reg = json.loads(codecs.encode_consumer_registration(registration).decode("utf-8"))
    return json.dumps({"version": 1, "grace_ms": int(grace_ms), "registration": reg}, sort_keys=True).encode()


def decode_marker(data: bytes, path: str) -> Tuple[codecs.ConsumerRegistration, int]:
    """``(registration, grace_ms)``; :class:`~zkconsumer.errors.ZnodeFormatError` naming *path* when the marker is
    not one (any bytes may be there: it is written by another process)."""
    obj = load_json_object(data, path, "leave marker")
    grace = obj.get("grace_ms")
    if not isinstance(grace, int) or isinstance(grace, bool) or not 0 <= grace <= MAX_INT64:
        raise ZnodeFormatError(path, "not a leave marker: 'grace_ms' must be a non-negative integer, got %r"
                               % (grace,), data)
    reg = obj.get("registration")
    if not isinstance(reg, dict):
        raise ZnodeFormatError(path, "not a leave marker: 'registration' must be a JSON object, got %r" % (reg,),
                               data)
    return codecs.decode_consumer_registration(json.dumps(reg).encode(), path), grace


def announce_leave(zk, group: str, consumer_id: str, registration, grace_ms: int) -> None:
    """Write our marker (before the registration goes). Best effort: without it the group simply rebalances."""
    path = paths.group_leaving_dir(group) + "/" + consumer_id
    data = encode_marker(registration, grace_ms)
    try:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:
            # an old marker of ours: a fresh ctime starts a fresh grace
            zk.delete(path)
            zk.create(path, data, makepath=True)
        log.info("announced a restart of %s within %d ms (rebalance.leave.grace.ms)", consumer_id, grace_ms)
    except Exception as e:
        log.warning("could not announce the restart of %s (%r): the group rebalances now", consumer_id, e)


def withdraw_leave(zk, group: str, consumer_id: str) -> None:
    """Delete our marker once we are registered again (best effort)."""
    try:
        zk.delete(paths.group_leaving_dir(group) + "/" + consumer_id)
    except NoNodeError:
        pass
    except Exception as e:
        log.warning("could not delete the leave marker of %s: %r", consumer_id, e)


def read_ghosts(zk, group: str, live_ids, watch=None, now_ms: Optional[float] = None, names_async=None,
                reads: Optional[List[int]] = None) -> Tuple[Dict[str, codecs.ConsumerRegistration], Optional[float]]:
    """``({consumer id: registration} of the members in their leave grace, earliest expiry in epoch ms)``.

    Empty unless every live member has a member info node (all zkconsumer members). Expired markers are deleted.
    ``names_async``: the leave markers' ``get_children_async`` (with *watch*) already sent by the caller with its
    other reads, to save a round trip. ``reads``, a one-element list, is increased by the reads made here (not
    counting *names_async*)."""
    counted = reads if reads is not None else [0]
    base = paths.group_leaving_dir(group)
    try:
        if names_async is not None:
            names = names_async.get()
        else:
            counted[0] += 1
            names = zk.get_children(base, watch=watch)
    except NoNodeError:
        return {}, None
    if not names:
        return {}, None
    try:
        counted[0] += 1
        infos = set(zk.get_children(paths.group_member_info_dir(group), watch=watch))
    except NoNodeError:
        infos = set()
    if not set(live_ids) <= infos:
        # a JVM (or older) member is live: it cannot honour ghosts, so nobody does
        return {}, None
    now = time.time() * 1000.0 if now_ms is None else now_ms
    ghosts, earliest = {}, None
    for name in names:
        if name in live_ids:
            # back already; it deletes its marker itself
            continue
        path = base + "/" + name
        try:
            counted[0] += 1
            data, stat = zk.get(path)
        except NoNodeError:
            continue
        try:
            reg, grace = decode_marker(data, path)
        except ZnodeFormatError as e:
            # once per version, not at every rebalance attempt
            if (path, stat.mzxid) not in _reported:
                if len(_reported) > 1000:
                    _reported.clear()
                _reported.add((path, stat.mzxid))
                log.warning("%s (ignored)", e)
            continue
        expires = stat.ctime + grace
        if expires <= now:
            try:
                zk.delete(path, version=stat.version)
                log.info("leave grace of %s expired: its partitions go to the others", name)
            except (NoNodeError, BadVersionError):
                pass
            continue
        ghosts[name] = reg
        earliest = expires if earliest is None else min(earliest, expires)
    return ghosts, earliest
