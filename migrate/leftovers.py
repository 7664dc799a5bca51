"""Offsets a group keeps for topics it no longer reads: topics deleted from the cluster (skipped, with a warning,
by every command that reads both stores) and ``zkmigrate forget-topic`` (delete a topic's offsets of a group).

Legacy groups keep ``/consumers/G/offsets/T`` for every topic they ever read: Kafka's tools never removed them,
and Kafka removes a deleted topic's offsets from its own offset manager only. Such a partition has no log: asking
the brokers for its log range fails, and copying it to Kafka is refused (UNKNOWN_TOPIC_OR_PARTITION). A topic
counts as gone when ``/brokers/topics/T`` does not exist (a partition as gone when the topic has fewer partitions
now), which is how the brokers list their topics in ZooKeeper mode and what ``zkconsumer registry sync``
mirrors from a KRaft cluster.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from kazoo.exceptions import BadVersionError, NoNodeError, NotEmptyError

from zkconsumer.tools import groups as zkgroups
from zkconsumer.consumer.registration import live_members
from zkconsumer.errors import GroupConflictError, ZnodeFormatError
from zkconsumer.core.layout import paths

__all__ = ["split_gone", "gone_warnings", "skipped_report", "forget_topics", "STORES"]

TP = Tuple[str, int]
STORES = ("both", "zookeeper", "kafka")


def split_gone(zk, both: Dict[TP, tuple]) -> Tuple[Dict[TP, tuple], Dict[str, List[int]]]:
    """``(the partitions whose topic exists, {gone topic: [its partitions with an offset]})``: a topic is gone when
    ``/brokers/topics/T`` does not exist, a partition when its topic has no such partition any more."""
    topics = sorted({t for t, _ in both})
    pending = {t: zk.get_async(paths.topic_path(t)) for t in topics}
    present: Dict[str, Optional[set]] = {}
    for t, res in pending.items():
        try:
            data, _ = res.get()
        except NoNodeError:
            present[t] = set()
            continue
        try:
            present[t] = set(zkgroups.decode_partition_ids(data, paths.topic_path(t)))
        except ZnodeFormatError:
            # unreadable: not ours to call gone
            present[t] = None
    live, gone = {}, {}
    for tp, v in both.items():
        parts = present.get(tp[0])
        if parts is None or tp[1] in parts:
            live[tp] = v
        else:
            gone.setdefault(tp[0], []).append(tp[1])
    return live, {t: sorted(ps) for t, ps in sorted(gone.items())}


def gone_warnings(group: str, gone: Dict[str, List[int]], exists=lambda t: False) -> List[str]:
    """One warning per gone topic, naming the way to drop its offsets."""
    out = []
    for t, ps in sorted(gone.items()):
        what = ("partition(s) %s of topic %s no longer exist" % (",".join(map(str, ps)), t)) if exists(t) else \
            ("topic %s no longer exists" % t)
        out.append("group %s: %s: the offsets kept for %d partition(s) are skipped; 'zkmigrate forget-topic --group "
                   "%s --topic %s --execute' removes them" % (group, what, len(ps), group, t))
    return out


def skipped_report(gofs, gone: Dict[str, List[int]]) -> dict:
    """The fields every command adds to its report about what it skipped: ``gone_topics`` ({topic: [partitions]}),
    ``excluded_topics`` (--exclude-topic) and ``warnings``."""
    return {"gone_topics": gone, "excluded_topics": sorted(gofs.excluded),
            "warnings": gone_warnings(gofs.group, gone, lambda t: gofs.zk.exists(paths.topic_path(t)) is not None)}


def _zk_offsets_of(zk, group: str, topic: str) -> Dict[str, Tuple[Optional[int], int, str]]:
    """``{child name: (offset or None when unreadable, znode version, path)}`` under ``/consumers/G/offsets/T``
    (partition numbers, and whatever else someone put there)."""
    base = paths.topic_offsets_path(group, topic)
    try:
        children = zk.get_children(base)
    except NoNodeError:
        return {}
    pending = {c: zk.get_async(base + "/" + c) for c in children}
    out = {}
    for c, res in pending.items():
        try:
            data, stat = res.get()
        except NoNodeError:
            continue
        try:
            off: Optional[int] = int(data.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            off = None
        out[c] = (off, stat.version, base + "/" + c)
    return out


def _readers(zk, group: str, topics: Sequence[str]) -> Dict[str, List[str]]:
    """``{topic: [live members subscribed to it or owning one of its partitions]}`` (the group still reads it)."""
    members = live_members(zk, group)
    subs = zkgroups.subscribed_topics(zk, members)
    owners = zkgroups.owners(zk, group)
    out = {}
    for t in topics:
        who = set(subs.get(t, [])) | {o for (ot, _), o in owners.items() if ot == t}
        if who:
            out[t] = sorted(who)
    return out


def forget_topics(gofs, topics: Sequence[str], store: str = "both", execute: bool = False,
                  backup_dir: Optional[str] = None) -> dict:
    """Delete *group*'s offsets of *topics* in *store* (``both``, ``zookeeper`` or ``kafka``): the ZooKeeper nodes
    ``/consumers/G/offsets/T/*`` and ``/consumers/G/offsets/T`` (in one transaction, each with the version read:
    a concurrent commit makes it fail, nothing deleted), the Kafka offsets with OffsetDelete. Refused
    (GroupConflictError, nothing changed) while a live member subscribes to or owns a partition of a topic: the
    group still reads it. A dry run unless *execute*; a backup of both stores (the topics' offsets) first."""
    from .backup import write_backup
    from .stale import since_of_lower_kafka, zk_mtimes_for_backup
    from . import state
    if store not in STORES:
        raise ValueError("forget-topic store %r (expected one of %s)" % (store, ", ".join(STORES)))
    zk, group = gofs.zk, gofs.group
    reading = _readers(zk, group, topics)
    if reading:
        t, who = sorted(reading.items())[0]
        raise GroupConflictError("refusing to forget topic %s of group %s: live member(s) %s still read it (subscribed "
                                 "or owning its partitions); the group still reads this topic" % (t, group,
                                                                                                   ", ".join(who[:3])))
    zk_offs = {t: _zk_offsets_of(zk, group, t) for t in topics}
    # both stores are read whatever is deleted: the backup is what 'zkmigrate restore' puts back exactly, and a
    # store it had no offsets of would be emptied by that undo
    held: Dict[TP, int] = {}
    if gofs.kafka_store is not None:
        parts = sorted({(t, p) for t in topics for p in zkgroups.topic_partitions(zk, t)}
                       | {(t, int(c)) for t in topics for c in zk_offs[t] if c.isdigit()})
        held = gofs.kafka_store.fetch(parts) if parts else {}
    kafka_offs = held if store in ("both", "kafka") else {}
    do_zk = store in ("both", "zookeeper")
    out = {"group": group, "store": store, "execute": execute, "topics": {}, "backup": [], "deleted": 0,
           "failed": {}}
    for t in topics:
        out["topics"][t] = {
            "zookeeper": {c: o for c, (o, _, _) in sorted(zk_offs[t].items())} if do_zk else {},
            "kafka": {str(p): o for (tt, p), o in sorted(kafka_offs.items()) if tt == t}}
    todo = sum(len(v["zookeeper"]) + len(v["kafka"]) for v in out["topics"].values())
    out["to_delete"] = todo
    if execute and todo:
        both = {(t, int(c)): (o, None) for t in topics for c, (o, _, _) in zk_offs[t].items()
                if c.isdigit() and o is not None}
        for tp, k in held.items():
            both[tp] = (both.get(tp, (None, None))[0], k)
        gofs.check_lock()
        out["backup"] = write_backup(backup_dir or state.default_backup_dir(), group, both,
                                     by="zkmigrate forget-topic",
                                     kafka_since=since_of_lower_kafka(gofs, both) if gofs.kafka_store else None,
                                     zk_mtime=zk_mtimes_for_backup(gofs, both))
        if do_zk:
            for t in topics:
                err = _delete_zk_topic(zk, group, t, zk_offs[t])
                if err:
                    out["failed"]["zookeeper:%s" % t] = err
                else:
                    out["deleted"] += len(out["topics"][t]["zookeeper"])
        if kafka_offs:
            failed = _delete_kafka(gofs, sorted(kafka_offs))
            out["failed"].update({"kafka:%s-%d" % tp: e for tp, e in failed.items()})
            out["deleted"] += len(kafka_offs) - len(failed)
    out["ok"] = not out["failed"]
    return out


def _delete_zk_topic(zk, group, topic, offs) -> Optional[str]:
    """Delete ``/consumers/G/offsets/T`` and its children in one transaction; the error text, or None."""
    if not offs:
        return None
    txn = zk.transaction()
    for _, (_, version, path) in sorted(offs.items()):
        txn.delete(path, version=version)
    txn.delete(paths.topic_offsets_path(group, topic))
    results = txn.commit()
    bad = [r for r in results if isinstance(r, Exception)]
    if not bad:
        return None
    if any(isinstance(r, (BadVersionError, NotEmptyError)) for r in bad):
        return ("%s changed while it was being deleted (a concurrent commit?): nothing deleted; run again"
                % paths.topic_offsets_path(group, topic))
    return "cannot delete %s: %r" % (paths.topic_offsets_path(group, topic), bad[0])


def _delete_kafka(gofs, parts: List[TP]) -> Dict[TP, str]:
    """OffsetDelete for *parts* (:meth:`KafkaOffsetStore.delete_offsets`); ``{tp: error}`` for those that failed."""
    return {tp: str(e) for tp, e in gofs.kafka_store.delete_offsets(parts).failed.items()}
