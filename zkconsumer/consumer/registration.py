"""Consumer registration: the ephemeral ``/consumers/[g]/ids/[consumerId]`` node (Kafka 1.1.1
``ZookeeperConsumerConnector.registerConsumerInZK``).

Created with its data in one step (never create-then-set). On NodeExists the node's ephemeral owner is compared
with our own session (Kafka 1.1.1 ``ZKCheckedEphemeral``, KAFKA-1387): our own node from a retried create counts
as success; a node of another session — normally our own previous session that has not expired yet, or another
process using the same explicit ``consumer.id`` — is waited for, bounded, and then reported as an error (Kafka
0.8.2's ``createEphemeralPathExpectConflictHandleZKBug`` waited for it without a bound).

Beside it, the member's info node (``/consumers/[g]/zkconsumer/members/[consumerId]``: host, client id, offset
storage); :func:`live_members` and :func:`member_infos` read every member's of a group (the join guards, the tools
and zkmigrate).
"""
import logging
import threading
import time
from typing import Dict, List, Optional

from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError

from ..errors import RegistrationConflictError, ZnodeFormatError
from ..core.layout import codecs, paths, validate_group
from ..core.layout.member_info import MemberInfo, decode_member_info

log = logging.getLogger(__name__)


def register(zk, group, consumer_id, registration, wait_timeout, info: Optional[MemberInfo] = None,
             made: Optional[List[bool]] = None) -> int:
    """Create the registration node; return the id of the ZooKeeper session it belongs to (the client's own
    ``client_id`` may name another one by then, or none while kazoo is disconnected). Raises
    RegistrationConflictError if another session keeps it for longer than wait_timeout.

    With *info*, the member info node is created with it in one multi-op: listed without one, a member counts as a
    JVM member and turns every member's leave grace off (:func:`~.leave_grace.read_ghosts`), and made before it,
    it would stand for whichever session holds the registration meanwhile (a JVM member with the same id). When
    the info node cannot come with it (an earlier session's is still there, or no right to create it or its
    directories) the registration is created alone: *made* (a list) gets True when the info node came with it, else
    False, and the caller publishes it (:func:`publish_member_info`)."""
    from ..core.layout.member_info import encode_member_info
    path = paths.consumer_registration_path(group, consumer_id)
    data = codecs.encode_consumer_registration(registration)
    info_data = encode_member_info(info) if info is not None else None
    deadline = time.monotonic() + wait_timeout
    while True:
        before = zk.client_id
        try:
            both = info_data is not None and _create_with_info(zk, group, consumer_id, path, data, info_data)
            if not both:
                zk.create(path, data, ephemeral=True, makepath=True)
            session = _same_session(before, zk.client_id)
            if session is None:
                # the session changed, or the connection dropped, around the create: the node tells whose it is
                stat = zk.exists(path)
                if stat is None:
                    # gone with the session that created it
                    continue
                session = stat.ephemeralOwner
            if made is not None:
                made.append(both)
            log.info("registered consumer %s in %s (session 0x%x)", consumer_id, path, session)
            return session
        except NodeExistsError:
            pass
        except NoAuthError:
            # a failed start, as for a duplicate consumer.id; retried after a session expiry
            raise RegistrationConflictError(
                "ZooKeeper refused to create %s (no CREATE right on %s): 'zkmigrate cutover --execute' fences a "
                "group it handed to broker-coordinated consumers this way, and 'zkmigrate rollback --execute' lifts "
                "it; otherwise the group belongs to another ZooKeeper identity" % (path, paths.group_ids_path(group))
            ) from None
        try:
            ours, stat = _kept_if_ours(zk, path, data)
        except NoNodeError:
            continue
        if ours:
            if made is not None:
                # a create retried after its answer was lost: the info node came with it, or was not asked for
                info_stat = zk.exists(paths.member_info_path(group, consumer_id)) if info_data is not None else None
                made.append(info_stat is not None and info_stat.ephemeralOwner == stat.ephemeralOwner)
            log.info("registration %s already belongs to this session", path)
            return stat.ephemeralOwner
        if info_data is not None:
            # an info node of ours (left from before a registration deleted out of band) must not stand for the
            # session that holds the id now
            withdraw_member_info(zk, group, consumer_id)
        log.info("registration %s is held by session 0x%x (an earlier session of ours not yet expired, or a "
                 "duplicate consumer.id); waiting up to %.1f s for it to go", path, stat.ephemeralOwner,
                 max(0.0, deadline - time.monotonic()))
        _wait_gone(zk, path, stat, deadline, consumer_id)


def _create_with_info(zk, group, consumer_id, path, data, info_data) -> bool:
    """Create the member info node and the registration at *path* in one multi-op, with the info node's directories
    when they are missing (made only if the registration is: never in a group whose member list refuses it): True
    when both were made; False when the info node could not be (an earlier session's is there, no right to create
    it or its directories: nothing was made); the registration's own error (NodeExistsError, NoAuthError, ...) is
    raised. The member list's directory is made again when missing (a tool removes it when empty)."""
    info_dir = paths.group_member_info_dir(group)
    info_path = info_dir + "/" + consumer_id
    dirs: List[str] = []
    ids_made = False
    for _ in range(4):
        tx = zk.transaction()
        for d in dirs:
            tx.create(d, b"")
        tx.create(info_path, info_data, ephemeral=True)
        tx.create(path, data, ephemeral=True)
        failure = _first_failure(tx.commit())
        if failure is None:
            return True
        k, error = failure
        if k == len(dirs) + 1:
            if isinstance(error, NoNodeError) and not ids_made:
                zk.ensure_path(paths.group_ids_path(group))
                ids_made = True
                continue
            raise error
        if isinstance(error, NoNodeError) and k == len(dirs) or isinstance(error, NodeExistsError) and k < len(dirs):
            # the info node's directories: those missing now go first in the next multi-op (another member may
            # have made one meanwhile)
            dirs = [d for d in (info_dir.rsplit("/", 1)[0], info_dir) if zk.exists(d) is None]
            if dirs:
                continue
        # the info node could not be made: the registration is made alone and the node published after
        log.debug("member info %s not created with the registration: %r", info_path, error)
        return False
    return False


def _wait_gone(zk, path, stat, deadline, consumer_id) -> None:
    """Return once the registration at *path* (*stat*: another session's) is gone or ours; RegistrationConflictError
    when another session still holds it at *deadline*."""
    gone = threading.Event()
    # one watcher for every check of this wait (kazoo keeps each distinct callable)
    watcher = lambda event: gone.set()  # noqa: E731
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RegistrationConflictError(
                "consumer id %s is already registered at %s by another live ZooKeeper session (0x%x); is another "
                "process running with the same consumer.id?" % (consumer_id, path, stat.ephemeralOwner))
        gone.clear()
        current = zk.exists(path, watch=watcher)
        cid = zk.client_id
        if current is None or (cid is not None and current.ephemeralOwner == cid[0]):
            return
        stat = current
        gone.wait(min(remaining, 1.0))


def deregister(zk, group, consumer_id):
    """Delete our registration node if it is ours (best effort at shutdown)."""
    path = paths.consumer_registration_path(group, consumer_id)
    try:
        _, stat = zk.get(path)
        if stat.ephemeralOwner == zk.client_id[0]:
            zk.delete(path, version=stat.version)
    except NoNodeError:
        pass


def deregister_first(zk, group, consumer_id) -> bool:
    """At the start of a shutdown: delete our registration now when every other live member is a zkconsumer member
    (it publishes member info), so they rebalance while we stop and commit, waiting for our owner nodes with a
    watch. With a JVM member in the group nothing is deleted yet (False): it would find our owner nodes still
    there and back off ``rebalance.backoff.ms``, so registration and owner nodes go together at the end."""
    ids = zk.get_children_async(paths.group_ids_path(group))
    infos = zk.get_children_async(paths.group_member_info_dir(group))
    try:
        others = set(ids.get()) - {consumer_id}
        published = set(infos.get())
    except NoNodeError:
        return False
    if others - published:
        return False
    deregister(zk, group, consumer_id)
    return True


def publish_member_info(zk, group, consumer_id, info) -> None:
    """Create (or update) our member info node beside the registration, when :func:`register` could not make it
    with the registration: ephemeral, so it goes with the session.

    A node of another session (an earlier session of ours not yet expired) is replaced in one multi-op (deleted and
    created together: the registration beside it is never listed without one: a member listed without one counts
    as a JVM member, which turns every member's leave grace off). Best effort: a member that cannot write it still
    consumes (tools then show it as unknown; logged as a warning)."""
    from kazoo.exceptions import BadVersionError
    from ..core.layout.member_info import encode_member_info
    path = paths.member_info_path(group, consumer_id)
    data = encode_member_info(info)
    try:
        # a few turns: the node may come or go between the reads and the writes
        for _ in range(3):
            try:
                zk.create(path, data, ephemeral=True, makepath=True)
                return
            except NodeExistsError:
                pass
            try:
                ours, stat = _kept_if_ours(zk, path, data)
            except NoNodeError:
                continue
            if ours:
                return
            tx = zk.transaction()
            tx.delete(path, version=stat.version)
            tx.create(path, data, ephemeral=True)
            failure = _first_failure(tx.commit())
            if failure is None:
                return
            if not isinstance(failure[1], (NoNodeError, BadVersionError, NodeExistsError)):
                raise failure[1]
        raise RuntimeError("it kept changing under us")
    except Exception as e:
        # e.g. no permission under a shared /consumers
        log.warning("could not publish member info %s: %r (tools will show this member as unknown)", path, e)


def _kept_if_ours(zk, path, data):
    """``(ours, stat)`` of the ephemeral node at *path*: when it is this session's, its data is made *data* (set
    only if it differs). NoNodeError when it is gone."""
    current, stat = zk.get(path)
    cid = zk.client_id
    if cid is None or stat.ephemeralOwner != cid[0]:
        return False, stat
    if current != data:
        zk.set(path, data, version=stat.version)
    return True, stat


def _first_failure(results):
    """``(index, error)`` of the operation that failed a multi-op (the others say they were rolled back with it, or
    not run), None when none failed."""
    from kazoo.exceptions import RolledBackError, RuntimeInconsistency
    errors = [(k, r) for k, r in enumerate(results) if isinstance(r, Exception)]
    if not errors:
        return None
    failed = [(k, r) for k, r in errors if not isinstance(r, (RolledBackError, RuntimeInconsistency))]
    return (failed or errors)[0]


def _same_session(before, after) -> Optional[int]:
    """The session a node created between two reads of ``client_id`` belongs to, when both name the same one."""
    if before is None or after is None or before[0] != after[0]:
        return None
    return before[0]


def withdraw_member_info(zk, group, consumer_id) -> None:
    """Delete our member info node if it is ours (best effort at shutdown)."""
    path = paths.member_info_path(group, consumer_id)
    try:
        _, stat = zk.get(path)
        if zk.client_id and stat.ephemeralOwner == zk.client_id[0]:
            zk.delete(path, version=stat.version)
    except Exception:
        pass


def live_members(zk, group, quiet: bool = False) -> Dict[str, Optional[codecs.ConsumerRegistration]]:
    """``{consumer_id: registration or None (unreadable)}`` for the children of ``/consumers/G/ids`` (a malformed
    registration is logged as a warning, at debug level when *quiet*)."""
    ids_path = paths.group_ids_path(validate_group(group))
    try:
        children = zk.get_children(ids_path)
    except NoNodeError:
        return {}
    pending = {cid: zk.get_async(ids_path + "/" + cid) for cid in children}
    out: Dict[str, Optional[codecs.ConsumerRegistration]] = {}
    for cid, res in pending.items():
        try:
            data, _ = res.get()
        except NoNodeError:
            continue
        try:
            out[cid] = codecs.decode_consumer_registration(data, ids_path + "/" + cid)
        except ZnodeFormatError as e:
            log.log(logging.DEBUG if quiet else logging.WARNING, "member %s has a malformed registration: %s", cid, e)
            out[cid] = None
    return dict(sorted(out.items()))


def member_infos(zk, group) -> Dict[str, MemberInfo]:
    """``{consumer_id: MemberInfo}`` of the zkconsumer members that published one (malformed nodes are logged)."""
    base = paths.group_member_info_dir(group)
    try:
        children = zk.get_children(base)
    except NoNodeError:
        return {}
    pending = {cid: zk.get_async(base + "/" + cid) for cid in children}
    out = {}
    for cid, res in pending.items():
        try:
            data, _ = res.get()
            out[cid] = decode_member_info(data, base + "/" + cid)
        except NoNodeError:
            continue
        except ZnodeFormatError as e:
            log.warning("%s", e)
    return out
