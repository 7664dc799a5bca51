"""Consumer registration: the ephemeral ``/consumers/[g]/ids/[consumerId]`` node (Kafka 1.1.1
``ZookeeperConsumerConnector.registerConsumerInZK``).

Created with its data in one step (never create-then-set). On NodeExists the node's ephemeral owner is compared
with our own session (Kafka 1.1.1 ``ZKCheckedEphemeral``, KAFKA-1387): our own node from a retried create counts
as success; a node of another session — normally our own previous session that has not expired yet, or another
process using the same explicit ``consumer.id`` — is waited for, bounded, and then reported as an error (Kafka
0.8.2's ``createEphemeralPathExpectConflictHandleZKBug`` waited for it without a bound).
"""
import logging
import threading
import time

from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError

from ..errors import RegistrationConflictError
from ..layout import codecs, paths

log = logging.getLogger(__name__)


def register(zk, group, consumer_id, registration, wait_timeout):
    """Create the registration node; return its path. Raises RegistrationConflictError if another session keeps
    it for longer than wait_timeout."""
    path = paths.consumer_registration_path(group, consumer_id)
    data = codecs.encode_consumer_registration(registration)
    deadline = time.monotonic() + wait_timeout
    while True:
        try:
            zk.create(path, data, ephemeral=True, makepath=True)
            log.info("registered consumer %s in %s", consumer_id, path)
            return path
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
            current, stat = zk.get(path)
        except NoNodeError:
            continue
        if stat.ephemeralOwner == zk.client_id[0]:
            if current != data:
                zk.set(path, data, version=stat.version)
            log.info("registration %s already belongs to this session", path)
            return path
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RegistrationConflictError(
                "consumer id %s is already registered at %s by another live ZooKeeper session (0x%x); is another "
                "process running with the same consumer.id?" % (consumer_id, path, stat.ephemeralOwner))
        log.info("registration %s is held by session 0x%x (an earlier session of ours not yet expired, or a "
                 "duplicate consumer.id); waiting up to %.1f s for it to go", path, stat.ephemeralOwner, remaining)
        gone = threading.Event()
        if zk.exists(path, watch=lambda event: gone.set()) is None:
            continue
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
    """Create (or update) our member info node beside the registration: ephemeral, so it goes with the session.
    Best effort: a member that cannot write it still consumes (tools then show it as unknown)."""
    from ..layout.member_info import encode_member_info
    path = paths.member_info_path(group, consumer_id)
    data = encode_member_info(info)
    try:
        try:
            zk.create(path, data, ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            pass
        current, stat = zk.get(path)
        if stat.ephemeralOwner != zk.client_id[0]:
            # an earlier session of ours (same consumer.id), not yet expired
            zk.delete(path, version=stat.version)
            zk.create(path, data, ephemeral=True, makepath=True)
        elif current != data:
            zk.set(path, data, version=stat.version)
    except Exception as e:
        # e.g. no permission under a shared /consumers
        log.warning("could not publish member info %s: %r (tools will show this member as unknown)", path, e)


def withdraw_member_info(zk, group, consumer_id) -> None:
    """Delete our member info node if it is ours (best effort at shutdown)."""
    path = paths.member_info_path(group, consumer_id)
    try:
        _, stat = zk.get(path)
        if zk.client_id and stat.ephemeralOwner == zk.client_id[0]:
            zk.delete(path, version=stat.version)
    except Exception:
        pass
