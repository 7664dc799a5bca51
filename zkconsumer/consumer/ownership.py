"""Owner znodes ``/consumers/[g]/owners/[t]/[p]``: ephemeral, data = the consumer thread id (Kafka 1.1.1
``ZKRebalancerListener.reflectPartitionOwnershipDecision``, ``ConsumerThreadId.toString``).

Claims and releases are each one ZooKeeper multi-op (chunked for very large groups), so a claim is atomic: when
any partition is still owned by someone else the whole claim fails and nothing has to be rolled back — where Scala
created nodes one by one and deleted its partial successes. The conflicting partitions are reported so the
rebalancer can wait for exactly those nodes to go instead of sleeping blindly.
"""
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError, RuntimeInconsistency

from ..core.layout import codecs, paths
from ..core.layout.names import is_legal_name

log = logging.getLogger(__name__)

# ops per transaction: stays far below ZooKeeper's 1 MB request limit
MAX_OPS = 1000


def _chunks(items, n=MAX_OPS):
    items = list(items)
    for i in range(0, len(items), n):
        yield items[i:i + n]


def ensure_owner_dirs(zk, group, topics):
    for t in sorted(set(topics)):
        zk.ensure_path(paths.topic_owners_path(group, t))


def claim(zk, group, decision, dirs_made=None):
    """Create owner nodes for {(topic, partition): thread_id}. Returns the set of conflicting (t, p) (empty = all
    claimed). On conflict nothing of this call remains claimed (earlier committed chunks are released again).

    ``dirs_made``: None, or a set of the topics whose ``/owners/[t]`` a previous claim of the caller made or found,
    kept by the caller across claims: those are not made again (``ensure_path`` costs a round trip before the
    multi-op). A directory removed since (a tool's cleanup of an unowned topic) fails the multi-op with NoNode: the
    chunk's directories are made again and the chunk tried once more; removed yet again, the directory is made
    again and the partition whose create failed is reported as a conflict (the caller tries again)."""
    if not decision:
        return set()
    topics = {t for t, _ in decision}
    if dirs_made is None:
        ensure_owner_dirs(zk, group, topics)
    else:
        ensure_owner_dirs(zk, group, topics - dirs_made)
        dirs_made.update(topics)
    done = []
    conflicts = set()
    for chunk in _chunks(sorted(decision.items())):
        results = _create_owner_nodes(zk, group, chunk)
        if any(isinstance(r, NoNodeError) for r in results):
            # an owner directory removed since it was made: made again, the chunk tried once more
            ensure_owner_dirs(zk, group, {t for (t, _), _ in chunk})
            results = _create_owner_nodes(zk, group, chunk)
        failed = [(tp, r) for (tp, _), r in zip(chunk, results) if isinstance(r, Exception)]
        if not failed:
            done.extend(tp for tp, _ in chunk)
            continue
        for (t, p), err in failed:
            if isinstance(err, (RolledBackError, RuntimeInconsistency)):
                continue
            if isinstance(err, NodeExistsError):
                if _owned_by(zk, group, t, p, decision[(t, p)]):
                    # ours already (a retried create in the same session): Scala's "this is ok" case
                    continue
                conflicts.add((t, p))
            elif isinstance(err, NoNodeError):
                _dir_gone(zk, group, t)
                conflicts.add((t, p))
            else:
                raise err
        if not conflicts:
            # only own nodes were in the way: claim the rest of the chunk individually
            for (t, p), thread_id in chunk:
                try:
                    zk.create(paths.partition_owner_path(group, t, p), thread_id.encode(), ephemeral=True)
                except NodeExistsError:
                    if not _owned_by(zk, group, t, p, thread_id):
                        conflicts.add((t, p))
                        continue
                except NoNodeError:
                    _dir_gone(zk, group, t)
                    conflicts.add((t, p))
                    continue
                done.append((t, p))
        if conflicts:
            break
    if conflicts:
        release(zk, group, done)
        for t, p in sorted(conflicts):
            log.info("waiting for the partition ownership to be deleted: %d for topic %s", p, t)
    return conflicts


def _create_owner_nodes(zk, group, chunk):
    """One multi-op creating the owner nodes of *chunk* ``[((t, p), thread id), ...]``: its results."""
    tx = zk.transaction()
    for (t, p), thread_id in chunk:
        tx.create(paths.partition_owner_path(group, t, p), thread_id.encode(), ephemeral=True)
    return tx.commit()


def _dir_gone(zk, group, topic):
    """The owner directory of *topic* was removed (again) while a claim made it: made again."""
    log.info("the owner directory of topic %s in group %s was removed while it was being claimed: made again",
             topic, group)
    ensure_owner_dirs(zk, group, [topic])


def _owned_by(zk, group, topic, partition, thread_id):
    path = paths.partition_owner_path(group, topic, partition)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return False
    return data == thread_id.encode() and bool(zk.client_id) and stat.ephemeralOwner == zk.client_id[0]


def release(zk, group, partitions):
    """Delete OUR owner nodes for the given (topic, partition)s: only nodes whose ephemeral owner is the current
    session (after a session expiry the old nodes died with it, and a node at the same path now is a successor's,
    which must never be deleted). Nodes already gone are ignored."""
    ours = owned_by_session(zk, group, partitions)
    for chunk in _chunks(sorted(ours)):
        tx = zk.transaction()
        for (t, p) in chunk:
            tx.delete(paths.partition_owner_path(group, t, p), version=ours[(t, p)])
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            # some were already gone: delete the rest one by one
            for t, p in chunk:
                try:
                    zk.delete(paths.partition_owner_path(group, t, p), version=ours[(t, p)])
                except (NoNodeError, BadVersionError):
                    pass


def owned_by_session(zk, group, partitions):
    """{(t, p): node version} of the partitions whose owner node exists and belongs to zk's current session."""
    session = zk.client_id[0] if zk.client_id else None
    out = {}
    if session is None:
        return out
    # all the reads in flight at once (one round trip, not one per partition)
    pending = [((t, p), zk.exists_async(paths.partition_owner_path(group, t, p))) for t, p in partitions]
    for tp, res in pending:
        stat = res.get()
        if stat is not None and stat.ephemeralOwner == session:
            out[tp] = stat.version
    return out


def release_and_deregister(zk, group, partitions, registration_path):
    """Leave the group: delete our owner nodes and our registration (if still there and ours) in one multi-op."""
    partitions = sorted(partitions)
    stat = zk.exists(registration_path)
    if stat is None or not zk.client_id or stat.ephemeralOwner != zk.client_id[0]:
        # the registration is not ours (any more): leave it alone
        release(zk, group, partitions)
        return
    if len(partitions) < MAX_OPS:
        ours = owned_by_session(zk, group, partitions)
        tx = zk.transaction()
        for (t, p), version in sorted(ours.items()):
            tx.delete(paths.partition_owner_path(group, t, p), version=version)
        tx.delete(registration_path)
        if not any(isinstance(r, Exception) for r in tx.commit()):
            return
    release(zk, group, partitions)
    try:
        zk.delete(registration_path)
    except NoNodeError:
        pass


def read_owners(zk, group, topics=None):
    """{(topic, partition): owner thread id string} for the given topics, or every topic under
    /consumers/[g]/owners (tools, tests, the Spark commit helper); non-numeric partition names are skipped."""
    if topics is None:
        try:
            topics = zk.get_children(paths.group_owners_path(group))
        except NoNodeError:
            return {}
        # pykafka on Python 3 writes owner nodes named b'topic': no Kafka topic can have such a name
        topics = [t for t in topics if is_legal_name(t)]
    pending = []
    for t in topics:
        base = paths.topic_owners_path(group, t)
        try:
            children = zk.get_children(base)
        except NoNodeError:
            continue
        pending.extend(((t, int(c)), zk.get_async(base + "/" + c)) for c in children if c.isdigit())
    out = {}
    for tp, res in pending:
        try:
            data, _ = res.get()
        except NoNodeError:
            continue
        out[tp] = (data or b"").decode("utf-8", "replace")
    return out


def owner_paths(group, partitions):
    return {tp: paths.partition_owner_path(group, tp[0], tp[1]) for tp in partitions}


decode_owner = codecs.decode_owner
