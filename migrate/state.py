"""What zkmigrate remembers: the phase each group is in (in ZooKeeper, beside the group) and where backups go.

The phase record is a persistent node of our own, ``/consumers/[g]/zkconsumer/migration`` (JSON), written by
``verify`` when it passes (unless ``--no-record``), by ``cutover --execute`` when the group is ready, by
``rollback --execute`` when it lifts the fence and by ``restore --execute`` when it wrote or deleted Kafka offsets
(phase ``restore``) or restored a rollback's backup (the fence that rollback lifted, with the phase ``cutover``, or
``restore`` when Kafka offsets changed), and shown by ``status``::

    {"version": 1, "phase": "kafka", "to": null, "since": "2026-11-23T06:50:00Z", "by": "zkmigrate verify",
     "fence": {"since": "2026-11-23T06:40:00Z", "by": "zkmigrate cutover", "ids_acl": [...]},
     "history": [...the previous records, newest first, at most 20...]}

``fence`` is the cutover fence: set by ``cutover --execute`` (and put back by ``restore --execute`` of the backup of a
rollback that lifted it), carried over by every later record (a passing verify
changes the phase, never the fence) and removed only by a ``rollback --execute`` that left nothing behind.
ZooKeeper members refuse to join a fenced group (``cutover.fence``); ``ids_acl`` is the ACL ``/consumers/[g]/ids``
had before cutover took its create right away (:mod:`.fence`), which the rollback puts back. A record of an older
zkmigrate with ``"phase": "cutover"`` and no ``fence`` counts as fenced.

Backups go to ``--backup-dir``, else ``$ZKMIGRATE_STATE_DIR/backups``, else ``~/.zkconsumer/migrate/backups``
(never the current directory).
"""
from __future__ import annotations

import calendar
import json
import os
import time
from typing import Dict, Iterable, NamedTuple, Optional, Tuple

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zkconsumer.core.layout import paths

__all__ = ["migration_path", "read_phase", "record_phase", "fence_of", "kafka_only_since", "default_backup_dir",
           "epoch_ms", "restored_since", "restored_nodes", "add_restored_nodes",
           "restored_kafka", "RestoredKafka", "restored_view", "rolled_back_since", "STATE_ENV",
           "KEEP"]

STATE_ENV = "ZKMIGRATE_STATE_DIR"
HISTORY = 20
#: record_phase(fence=KEEP): the previous record's fence is carried over
KEEP = object()
#: phases in which the members read and commit Kafka only (ZooKeeper's offsets are frozen)
KAFKA_ONLY = ("kafka", "cutover")


def migration_path(group: str) -> str:
    return paths.group_migration_path(group)


def default_backup_dir() -> str:
    base = os.environ.get(STATE_ENV) or os.path.join(os.path.expanduser("~"), ".zkconsumer", "migrate")
    return os.path.join(base, "backups")


def read_phase(zk, group: str) -> Optional[dict]:
    """The recorded phase of *group*, or None (never recorded, or unreadable: then ``{"error": ...}``)."""
    try:
        data, _ = zk.get(migration_path(group))
    except NoNodeError:
        return None
    try:
        obj = _decode(data)
        if "phase" not in obj:
            raise ValueError("not a phase record")
        return obj
    except ValueError as e:
        return {"error": "unreadable phase record %s: %s" % (migration_path(group), e)}


def _decode(data: bytes) -> dict:
    """The record as a JSON object; ValueError for anything else (another process may have written anything)."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def fence_of(rec: Optional[dict]) -> Optional[dict]:
    """The cutover fence of a phase record (``{"since", "by", ["ids_acl"]}``), or None when the group is not fenced."""
    if not isinstance(rec, dict):
        return None
    fence = rec.get("fence")
    if isinstance(fence, dict):
        return fence
    # written before the fence had a field of its own
    if rec.get("phase") == "cutover" and "fence" not in rec:
        return {"since": rec.get("since"), "by": rec.get("by")}
    return None


def epoch_ms(stamp) -> Optional[int]:
    try:
        return int(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) * 1000)
    except (TypeError, ValueError):
        return None


def kafka_only_since(rec: Optional[dict]) -> Optional[int]:
    """Since when (epoch ms) the record says the group has kept every offset in Kafka without a break: the oldest
    ``since`` of the newest run of ``kafka`` and ``cutover`` records (a passing ``verify --phase kafka`` and a
    ready cutover both found a Kafka offset for every partition then), or None when the latest record is another
    phase. A partition whose ZooKeeper offset was written before then had a Kafka offset then; if Kafka has none
    now, the broker removed it (expired, or its topic was deleted).

    While the group is fenced, a ``verify`` of another phase recorded since the fence does not end the run: verify
    changes no offset, and no ZooKeeper member can have joined the fenced group to commit elsewhere (a routine
    fleet ``verify --phase zookeeper`` passes on a stopped cut-over group). A ``restore`` (which deletes Kafka
    offsets) and a ``rollback`` (which lifts the fence) do end it."""
    if not isinstance(rec, dict) or "error" in rec:
        return None
    history = rec.get("history") if isinstance(rec.get("history"), list) else []
    fence = fence_of(rec)
    fenced_from = epoch_ms(fence.get("since")) if fence is not None else None
    since = None
    for r in [rec] + [h for h in history if isinstance(h, dict)]:
        if r.get("phase") not in KAFKA_ONLY:
            stamp = epoch_ms(r.get("since"))
            if fenced_from is not None and r.get("by") == "zkmigrate verify" and stamp is not None \
                    and stamp >= fenced_from:
                continue
            break
        since = epoch_ms(r.get("since")) or since
    # the stamp is to the second and written after the check read the stores: the end of that second (a ZooKeeper
    # offset written in the same second as a fast verify was read by it)
    return since + 999 if since is not None else None


def restored_since(rec: Optional[dict]) -> Optional[int]:
    """When (epoch ms) the group's offsets were last put back by ``zkmigrate restore``, if nothing but verifies
    (which change no offset) was recorded since; else None."""
    if not isinstance(rec, dict) or "error" in rec:
        return None
    history = rec.get("history") if isinstance(rec.get("history"), list) else []
    for r in [rec] + [h for h in history if isinstance(h, dict)]:
        if r.get("by") == "zkmigrate verify":
            continue
        return epoch_ms(r.get("since")) if r.get("phase") == "restore" else None
    return None


def rolled_back_since(rec: Optional[dict]) -> Optional[int]:
    """When (epoch ms, to the second) ``zkmigrate rollback`` last recorded the phase ``rollback``, if that rollback
    lifted the fence of a group a ``zkmigrate cutover`` had cut over before it, else None."""
    if not isinstance(rec, dict) or "error" in rec:
        return None
    history = rec.get("history") if isinstance(rec.get("history"), list) else []
    records = [rec] + [h for h in history if isinstance(h, dict)]
    for i, r in enumerate(records):
        if r.get("phase") == "rollback" and r.get("by") == "zkmigrate rollback":
            # one that lifted the fence of a group cut over before it
            if r.get("lifted") is True and any(o.get("phase") == "cutover" and o.get("by") == "zkmigrate cutover"
                                               for o in records[i + 1:]):
                return epoch_ms(r.get("since"))
            return None
    return None


def _restored_doc(zk, group: str) -> Tuple[dict, object]:
    """The restored node's JSON object and stat (``{}``, None when absent or unreadable)."""
    try:
        data, stat = zk.get(paths.group_restored_path(group))
    except NoNodeError:
        return {}, None
    try:
        doc = _decode(data)
    except ValueError:
        doc = {}
    return (doc if isinstance(doc, dict) else {}), stat


def restored_nodes(zk, group: str) -> Dict[Tuple[str, int], int]:
    """``{(topic, partition): mzxid}``: the ZooKeeper offset nodes ``zkmigrate restore`` wrote (any restore, however
    long ago) and the transaction of each write; a node written since has another mzxid. Empty when none (or the
    node is unreadable)."""
    return {tp: z for tp, (z, _) in _zk_written(_restored_doc(zk, group)[0]).items()}


def _entries(doc: dict, key: str, parse) -> Dict[Tuple[str, int], tuple]:
    """``{(topic, partition): parse(rest)}`` of the list *key* of the restored node's *doc* (``[topic, partition,
    ...rest]`` each); an entry that does not parse is skipped."""
    raw = doc.get(key) or []
    out = {}
    for item in raw if isinstance(raw, list) else []:
        try:
            out[(str(item[0]), int(item[1]))] = parse(*item[2:])
        except (TypeError, ValueError, IndexError, KeyError):
            continue
    return out


def _opt(v) -> Optional[int]:
    return None if v is None else int(v)


def _zk_written(doc: dict) -> Dict[Tuple[str, int], Tuple[int, Optional[int]]]:
    # [t, p, mzxid] or [t, p, mzxid, backup's ms]
    return _entries(doc, "zk_written", lambda z, m=None, *_: (int(z), _opt(m)))


class RestoredKafka(NamedTuple):
    """A Kafka offset ``zkmigrate restore`` committed: the offset, the broker's time of that commit (read back from
    ``__consumer_offsets``; None when it could not be) and since when Kafka had held that offset when the backup was
    taken (the backup's ``kafka_since``; None when it does not say)."""
    offset: int
    committed_ms: Optional[int]
    since_ms: Optional[int]


def restored_kafka(zk, group: str) -> Dict[Tuple[str, int], RestoredKafka]:
    """``{(topic, partition): RestoredKafka}``: the Kafka offsets the latest restore of each partition committed.
    Empty when none (or the node is unreadable)."""
    return _kafka_written(_restored_doc(zk, group)[0])


def _kafka_written(doc: dict) -> Dict[Tuple[str, int], RestoredKafka]:
    return _entries(doc, "kafka_written", lambda off, at, since: RestoredKafka(int(off), _opt(at), _opt(since)))


def add_restored_nodes(zk, group: str, written: Dict[Tuple[str, int], int],
                       current: Optional[Dict[Tuple[str, int], int]] = None,
                       kafka: Optional[Dict[Tuple[str, int], RestoredKafka]] = None,
                       mtimes: Optional[Dict[Tuple[str, int], int]] = None,
                       pending: Optional[Dict[Tuple[str, int], Tuple[int, Optional[int], Optional[int]]]] = None,
                       drop_pending: Iterable[Tuple[str, int]] = ()) -> None:
    """Add *written* (``{tp: mzxid}``, the nodes a restore just wrote; *mtimes*: ``{tp: ms}`` when the backup says
    each offset put back had last been written) to :func:`restored_nodes`, keeping the earlier entries whose node
    *current* (``{tp: mzxid}`` now; None: all of them) still shows the same write, and ending their pending entries; *kafka* (the Kafka
    offsets it committed) replaces the entries of those partitions in :func:`restored_kafka`; *drop_pending*: the
    partitions whose pending entries end (settled: written, or not); *pending* (``{tp:
    (offset, mzxid before, backup's ms or None)}``, what a restore is ABOUT to write) is recorded first
    (:func:`restored_view`), so that a restore stopped before it records its writes leaves them known."""
    path = paths.group_restored_path(group)
    for _ in range(5):
        doc, stat = _restored_doc(zk, group)
        keep = {tp: zm for tp, zm in _zk_written(doc).items() if current is None or current.get(tp) == zm[0]}
        keep.update({tp: (z, (mtimes or {}).get(tp)) for tp, z in written.items()})
        ks = {tp: tuple(v) for tp, v in _kafka_written(doc).items()}
        ks.update({tp: tuple(v) for tp, v in (kafka or {}).items()})
        dropped = set(drop_pending) | set(written)
        pend = {tp: v for tp, v in _zk_pending(doc).items() if tp not in dropped}
        pend.update(pending or {})
        body = json.dumps({"version": 1, "zk_written": [[t, p, z] + ([] if m is None else [m])
                                                        for (t, p), (z, m) in sorted(keep.items())],
                           "kafka_written": [[t, p] + list(v) for (t, p), v in sorted(ks.items())],
                           "zk_pending": [[t, p] + list(v) for (t, p), v in sorted(pend.items())]},
                          sort_keys=True).encode("utf-8")
        try:
            if stat is None:
                zk.create(path, body, makepath=True)
            else:
                zk.set(path, body, version=stat.version)
            return
        except (NodeExistsError, BadVersionError):
            continue
    raise RuntimeError("could not record the offsets restored of group %s at %s (concurrent writers)" % (group, path))


def _zk_pending(doc: dict) -> Dict[Tuple[str, int], Tuple[int, Optional[int], Optional[int]]]:
    return _entries(doc, "zk_pending", lambda off, before, ms: (int(off), _opt(before), _opt(ms)))


def restored_view(zk, group: str, current: Dict[Tuple[str, int], Tuple[Optional[int], Optional[int]]]) \
        -> Tuple[Dict[Tuple[str, int], int], Dict[Tuple[str, int], Tuple[int, int]]]:
    """The ZooKeeper offset nodes as a restore wrote them, given *current* (``{tp: (offset, mzxid)}`` now): ``({tp:
    mzxid}, {tp: (mzxid, backup's ms)})`` (:func:`restored_nodes` and the times of those whose backup gave one), with the writes a
    restore was about to make and never recorded (stopped, or a write reported failed that ZooKeeper applied): a node
    holding the offset it was to write, written after it was read (an mzxid above the one read then)."""
    doc = _restored_doc(zk, group)[0]
    written = {tp: zm for tp, zm in _zk_written(doc).items()}
    for tp, (off, before, ms) in _zk_pending(doc).items():
        value, mzxid = current.get(tp, (None, None))
        if value == off and mzxid is not None and (before is None or mzxid > before):
            written[tp] = (mzxid, ms)
    return ({tp: z for tp, (z, _) in written.items()},
            {tp: (z, m) for tp, (z, m) in written.items() if m is not None})


def record_phase(zk, group: str, phase: str, by: str, to: Optional[str] = None, clock=time.time,
                 fence=KEEP, lifted: bool = False) -> dict:
    """Record that *group* is in *phase* (unchanged phase, direction and fence: the record is kept as it is). The
    previous record's fence is kept (*fence* = :data:`KEEP`), set (a dict) or lifted (None); *lifted*: the command
    lifted a cutover fence (kept in the history: :func:`rolled_back_since`)."""
    path = migration_path(group)
    for _ in range(5):
        try:
            data, stat = zk.get(path)
            try:
                prev = _decode(data)
            except ValueError:
                prev = {}
        except NoNodeError:
            prev, stat = {}, None
        new_fence = fence_of(prev) if fence is KEEP else fence
        if prev.get("phase") == phase and prev.get("to") == to and new_fence == fence_of(prev) and not lifted:
            return prev
        history = ([{k: prev[k] for k in ("phase", "to", "since", "by", "lifted") if k in prev}]
                   if prev.get("phase") else [])
        old = prev.get("history")
        history += (old if isinstance(old, list) else [])[:HISTORY - 1]
        rec = {"version": 1, "phase": phase, "to": to, "by": by,
               "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock())), "history": history}
        if new_fence is not None:
            rec["fence"] = new_fence
        if lifted:
            rec["lifted"] = True
        body = json.dumps(rec, sort_keys=True).encode("utf-8")
        try:
            if stat is None:
                zk.create(path, body, makepath=True)
            else:
                zk.set(path, body, version=stat.version)
            return rec
        except (NodeExistsError, BadVersionError):
            # another zkmigrate wrote meanwhile: read again
            continue
    raise RuntimeError("could not record the phase of group %s at %s (concurrent writers)" % (group, path))
