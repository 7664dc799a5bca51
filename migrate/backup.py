"""The backups zkmigrate writes before it changes a group's offsets, and reading them back for ``zkmigrate restore``.

A backup is three files with one time stamp, written before the first write (each complete on disk before its name
appears: written to ``.tmp``, fsynced, renamed):

* ``backup-<group>-zookeeper-<stamp>.txt`` and ``backup-<group>-kafka-<stamp>.txt``: each store's offsets in the
  ExportZkOffsets format (``/consumers/G/offsets/T/P:offset``), so Kafka's ImportZkOffsets and ``zkmigrate import``
  read them as they are; they list only the partitions that had an offset;
* ``backup-<group>-<stamp>.json``: the manifest, what an exact restore needs: every partition the command read, with
  each store's offset **or null when that store had none**, the time and the command::

      {"version": 1, "group": "G", "taken_at": "2026-11-23T06:50:00Z", "by": "zkmigrate cutover",
       "files": {"zookeeper": "...txt", "kafka": "...txt"},
       "partitions": [{"topic": "T", "partition": 0, "zookeeper": 12, "kafka": null}, ...],
       "written": {"kafka": [{"topic": "T", "partition": 0, "offset": 12}], "zookeeper": []}}

  ``written`` (absent in manifests of older zkmigrate versions): the offsets the command was about to write right
  after the backup, so that ``restore`` tells that command's own writes from commits made since; ``lifts_fence``
  (a rollback's backup only, when the group was fenced): the cutover fence the command lifts right after it, ``{"record":
  the phase record's fence or null, "ids_acl": whether /consumers/G/ids had lost its create right}``, which
  ``restore`` puts back; ``kafka_since`` (the partitions whose Kafka offset was below ZooKeeper's, when
  ``__consumer_offsets`` could be read): ``[{"topic", "partition", "ms"}]``, since when Kafka had held its offset
  (:func:`.stale.kafka_offset_since`), and ``zk_mtime``, when each ZooKeeper offset had last been written (not by a
  restore: the time its backup gave), both of which ``restore`` records with the offsets it puts back
  (:mod:`.restore`);

:func:`load_backup` reads a manifest, or, given one of the ``.txt`` files, its manifest when it is there, else the
pair of ``.txt`` files of a backup written before manifests existed (then only the partitions listed in either file
are known; a partition listed in one file only had no offset in the other store, as both came from one read).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from typing import Dict, Optional, Tuple

from zkconsumer.core.layout import validate_group, validate_topic

from .offsets_file import OffsetsFileError, format_offsets, read_bytes, read_offsets_file

__all__ = ["write_backup", "load_backup", "Backup", "BackupFileError", "STORES"]

TP = Tuple[str, int]
STORES = ("zookeeper", "kafka")
_TXT = re.compile(r"backup-(?P<group>.+)-(?P<store>zookeeper|kafka)-(?P<stamp>\d{8}T\d{6}-\d{3})\.txt\Z")
_MAX_OFFSET = 2 ** 63 - 1


class BackupFileError(OffsetsFileError):
    """A backup (manifest or offsets files) that cannot be read; names the file and what is wrong (exit 2)."""


@dataclasses.dataclass
class Backup:
    """One group's backup: ``partitions`` {tp: (zookeeper offset or None, kafka offset or None)}."""

    path: str
    group: str
    taken_at: Optional[str]
    by: Optional[str]
    partitions: Dict[TP, Tuple[Optional[int], Optional[int]]]
    #: False for a backup without manifest: partitions with no offset in either store are not known
    exact: bool = True
    #: ``{store: {tp: offset}}`` the command wrote right after the backup; None when the manifest does not say
    written: Optional[Dict[str, Dict[TP, int]]] = None
    #: the cutover fence the command lifted after the backup (``{"record": dict or None, "ids_acl": bool}``), or None
    lifts_fence: Optional[dict] = None
    #: ``{tp: ms}``: since when Kafka had held its offset when the backup was taken, where the command read it
    kafka_since: Dict[TP, int] = dataclasses.field(default_factory=dict)
    #: ``{tp: ms}``: when each ZooKeeper offset had last been written (by whom it was, not by a restore)
    zk_mtime: Dict[TP, int] = dataclasses.field(default_factory=dict)


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_backup(backup_dir: str, group: str, both: Dict[TP, Tuple[Optional[int], Optional[int]]],
                 by: Optional[str] = None, clock=time.time,
                 writes: Optional[Dict[str, Dict[TP, int]]] = None, lifts_fence: Optional[dict] = None,
                 kafka_since: Optional[Dict[TP, int]] = None, zk_mtime: Optional[Dict[TP, int]] = None) -> list:
    """Write the backup of *both* (``{tp: (zookeeper, kafka)}``, as read before planning), with *writes* (``{store:
    {tp: offset}}``, what the command writes next), *lifts_fence* (the fence it lifts next, if any), *kafka_since*
    (``{tp: ms}`` since when Kafka has held its offset, where the command read it) and *zk_mtime* (``{tp: ms}`` when
    each ZooKeeper offset was last written), and return its paths:
    ``[zookeeper .txt, kafka .txt, manifest .json]``."""
    os.makedirs(backup_dir, exist_ok=True)
    now = clock()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + "-%03d" % (int(now * 1000) % 1000)
    out = []
    for i, name in enumerate(STORES):
        offs = {tp: v[i] for tp, v in both.items() if v[i] is not None}
        path = os.path.join(backup_dir, "backup-%s-%s-%s.txt" % (group, name, stamp))
        _write_atomic(path, "".join(line + "\n" for line in format_offsets(group, offs)))
        out.append(path)
    manifest = {"version": 1, "group": group, "by": by,
                "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                "files": {"zookeeper": os.path.basename(out[0]), "kafka": os.path.basename(out[1])},
                "partitions": [{"topic": t, "partition": p, "zookeeper": z, "kafka": k}
                               for (t, p), (z, k) in sorted(both.items())],
                "written": {name: [{"topic": t, "partition": p, "offset": o}
                                   for (t, p), o in sorted((writes or {}).get(name, {}).items())]
                            for name in STORES}}
    if lifts_fence is not None:
        manifest["lifts_fence"] = lifts_fence
    if kafka_since:
        manifest["kafka_since"] = [{"topic": t, "partition": p, "ms": ms} for (t, p), ms in sorted(kafka_since.items())
                                   if both.get((t, p), (None, None))[1] is not None]
    if zk_mtime:
        manifest["zk_mtime"] = [{"topic": t, "partition": p, "ms": ms} for (t, p), ms in sorted(zk_mtime.items())
                                if both.get((t, p), (None, None))[0] is not None]
    path = os.path.join(backup_dir, "backup-%s-%s.json" % (group, stamp))
    _write_atomic(path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    out.append(path)
    return out


def load_backup(path: str) -> Backup:
    """The backup at *path* (a manifest ``.json``, or either ``.txt`` file of a backup); :class:`BackupFileError`
    naming the file when it is not one."""
    name = os.fspath(path)
    base = os.path.basename(name)
    m = _TXT.match(base)
    if m:
        manifest = os.path.join(os.path.dirname(name), "backup-%s-%s.json" % (m["group"], m["stamp"]))
        if os.path.exists(manifest):
            return _load_manifest(manifest)
        return _load_pair(name, m)
    if name.endswith(".txt"):
        raise BackupFileError("%s: not a zkmigrate backup file (backup-<group>-zookeeper|kafka-<time>.txt, or its "
                              "backup-<group>-<time>.json manifest); to write an offsets file into one store use "
                              "'zkmigrate import'" % name)
    return _load_manifest(name)


def _load_pair(path: str, m) -> Backup:
    files = {s: os.path.join(os.path.dirname(path), "backup-%s-%s-%s.txt" % (m["group"], s, m["stamp"]))
             for s in STORES}
    offsets = {}
    for s, f in files.items():
        if not os.path.exists(f):
            raise BackupFileError("%s: the %s half of this backup, %s, is missing: restore needs both stores' files"
                                  % (path, s, f))
        data = read_offsets_file(f)
        others = sorted(set(data) - {m["group"]})
        if others:
            raise BackupFileError("%s: holds offsets of group(s) %s, not only of %s" % (f, ", ".join(others),
                                                                                      m["group"]))
        offsets[s] = data.get(m["group"], {})
    tps = set(offsets["zookeeper"]) | set(offsets["kafka"])
    return Backup(path=path, group=validate_group(m["group"]), taken_at=None, by=None, exact=False,
                  partitions={tp: (offsets["zookeeper"].get(tp), offsets["kafka"].get(tp)) for tp in sorted(tps)})


def _load_manifest(path: str) -> Backup:
    raw = read_bytes(path, BackupFileError)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise BackupFileError("%s: not a zkmigrate backup manifest (not JSON: %s)" % (path, e)) from None
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("partitions"), list):
        raise BackupFileError("%s: not a zkmigrate backup manifest (a JSON object with \"version\": 1 and "
                              "\"partitions\")" % path)
    try:
        group = validate_group(doc.get("group"))
    except (ValueError, TypeError) as e:
        raise BackupFileError("%s: bad \"group\": %s" % (path, e)) from None
    parts: Dict[TP, Tuple[Optional[int], Optional[int]]] = {}
    for n, entry in enumerate(doc["partitions"]):
        where = "%s: partitions[%d]" % (path, n)
        topic = _topic_of(entry, where)
        p = entry.get("partition")
        if type(p) is not int or p < 0:
            raise BackupFileError("%s: partition %r is not an integer >= 0" % (where, p))
        vals = []
        for s in STORES:
            v = entry.get(s)
            if v is not None and (type(v) is not int or not 0 <= v <= _MAX_OFFSET):
                raise BackupFileError("%s: %s offset %r is neither null nor an integer from 0 to 2^63-1"
                                      % (where, s, v))
            vals.append(v)
        if (topic, p) in parts:
            raise BackupFileError("%s: %s-%d appears twice" % (where, topic, p))
        parts[(topic, p)] = (vals[0], vals[1])
    by, taken = doc.get("by"), doc.get("taken_at")
    return Backup(path=path, group=group, taken_at=taken if isinstance(taken, str) else None,
                  by=by if isinstance(by, str) else None, partitions=parts, written=_load_written(path, doc),
                  lifts_fence=_load_lifts_fence(path, doc), kafka_since=_load_times(path, doc, "kafka_since"),
                  zk_mtime=_load_times(path, doc, "zk_mtime"))


def _load_times(path: str, doc: dict, key: str) -> Dict[TP, int]:
    """The manifest's ``kafka_since`` or ``zk_mtime`` (*key*; empty when absent); BackupFileError naming what is
    wrong."""
    raw = doc.get(key, [])
    if not isinstance(raw, list):
        raise BackupFileError("%s: \"%s\" is not a list" % (path, key))
    out = {}
    for n, entry in enumerate(raw):
        where = "%s: %s[%d]" % (path, key, n)
        topic = _topic_of(entry, where)
        p, ms = entry.get("partition"), entry.get("ms")
        if type(p) is not int or p < 0 or type(ms) is not int or ms < 0:
            raise BackupFileError("%s: \"partition\" and \"ms\" must be integers >= 0" % where)
        out[(topic, p)] = ms
    return out


def _load_lifts_fence(path: str, doc: dict) -> Optional[dict]:
    """The manifest's ``lifts_fence`` (None when absent); BackupFileError naming what is wrong."""
    raw = doc.get("lifts_fence")
    if raw is None:
        return None
    if not isinstance(raw, dict) or not (raw.get("record") is None or isinstance(raw.get("record"), dict)) \
            or not isinstance(raw.get("ids_acl"), bool):
        raise BackupFileError("%s: \"lifts_fence\" is not an object with \"record\" (an object or null) and "
                              "\"ids_acl\" (true or false)" % path)
    return {"record": raw.get("record"), "ids_acl": raw["ids_acl"]}


def _topic_of(entry, where: str) -> str:
    """The valid topic of the manifest's object *entry* (at *where*), else BackupFileError saying what is wrong."""
    if not isinstance(entry, dict):
        raise BackupFileError("%s is not an object" % where)
    try:
        return validate_topic(entry.get("topic"))
    except (ValueError, TypeError) as e:
        raise BackupFileError("%s: bad topic: %s" % (where, e)) from None


def _load_written(path: str, doc: dict) -> Optional[Dict[str, Dict[TP, int]]]:
    """The manifest's ``written`` (None when absent: an older manifest); BackupFileError naming what is wrong."""
    if "written" not in doc:
        return None
    raw = doc["written"]
    if not isinstance(raw, dict) or set(raw) - set(STORES):
        raise BackupFileError("%s: \"written\" is not an object with the keys zookeeper and kafka" % path)
    out: Dict[str, Dict[TP, int]] = {}
    for store in STORES:
        entries = raw.get(store, [])
        if not isinstance(entries, list):
            raise BackupFileError("%s: written.%s is not a list" % (path, store))
        out[store] = {}
        for n, entry in enumerate(entries):
            where = "%s: written.%s[%d]" % (path, store, n)
            topic = _topic_of(entry, where)
            p, o = entry.get("partition"), entry.get("offset")
            if type(p) is not int or p < 0 or type(o) is not int or not 0 <= o <= _MAX_OFFSET:
                raise BackupFileError("%s: partition %r and offset %r must be integers >= 0" % (where, p, o))
            out[store][(topic, p)] = o
    return out
