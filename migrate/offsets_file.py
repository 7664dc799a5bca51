"""The offsets files zkmigrate reads and writes: the ExportZkOffsets / ImportZkOffsets format (Kafka 1.1.1
``kafka.tools.ExportZkOffsets`` / ``ImportZkOffsets``), one ``/consumers/G/offsets/T/P:offset`` line per partition;
:func:`read_offsets_file` also reads kafka-consumer-groups' reset-plan CSV (:mod:`.offsets_csv`), told apart by
the first line (an offsets path starts with ``/``).

Parsing validates **every** line before the caller writes anything: the path must pass
:func:`zkconsumer.layout.parse_offset_path` (no path injection: exactly ``/consumers/<group>/offsets/<topic>/<p>``
with legal names), the offset must be a canonical non-negative decimal, and a partition may appear only once.
Unlike ImportZkOffsets, an empty line does not end the file (blank lines and ``#`` comments are skipped).
"""
from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Optional, Tuple, Union

from zkconsumer.errors import ZkConsumerError, ZnodeFormatError
from zkconsumer.layout import parse_offset_path, partition_offset_path

from .offsets_csv import parse_csv

__all__ = ["OffsetsFileError", "format_offsets", "parse_offsets", "read_offsets_file", "read_bytes"]

_OFFSET = re.compile(r"(0|[1-9][0-9]{0,18})\Z")


class OffsetsFileError(ZkConsumerError, ValueError):
    """A line of an offsets file is malformed; names the file, line number and value."""


def format_offsets(group: str, offsets: Dict[Tuple[str, int], int]) -> List[str]:
    """Lines (without newline) sorted by topic and partition."""
    return ["%s:%d" % (partition_offset_path(group, t, p), off) for (t, p), off in sorted(offsets.items())]


def parse_offsets(lines: Iterable[str], source: str = "<input>") -> Dict[str, Dict[Tuple[str, int], int]]:
    """``{group: {(topic, partition): offset}}``; raises :class:`OffsetsFileError` on the first bad line (after
    reading none of the later ones into any store: nothing is written by this function)."""
    out: Dict[str, Dict[Tuple[str, int], int]] = {}
    seen = {}
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        path, sep, value = line.rpartition(":")
        if not sep:
            raise OffsetsFileError("%s line %d: %r is not of the form /consumers/<group>/offsets/<topic>/"
                                   "<partition>:<offset>" % (source, n, line))
        try:
            group, topic, partition = parse_offset_path(path)
        except ZnodeFormatError as e:
            raise OffsetsFileError("%s line %d: bad path %r: %s" % (source, n, path, e.reason)) from e
        if not _OFFSET.match(value) or int(value) > 2 ** 63 - 1:
            raise OffsetsFileError("%s line %d: bad offset %r for %s (a non-negative decimal integer)"
                                   % (source, n, value, path))
        if path in seen:
            raise OffsetsFileError("%s line %d: %s appears twice (first on line %d)" % (source, n, path, seen[path]))
        seen[path] = n
        out.setdefault(group, {})[(topic, partition)] = int(value)
    return out


def read_bytes(path: str, error: type = OffsetsFileError) -> bytes:
    """The bytes of the file at *path*; *error* (an :class:`OffsetsFileError`) naming it when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise error("%s: cannot read: %s" % (path, e.strerror or e)) from None


def read_offsets_file(path: Union[str, "os.PathLike[str]"],
                      group: Optional[str] = None) -> Dict[str, Dict[Tuple[str, int], int]]:
    """Read and parse an offsets file (UTF-8): ExportZkOffsets lines, or kafka-consumer-groups' reset-plan CSV
    (*group* names the group of a three-column one); :class:`OffsetsFileError` naming the file and line when it is
    neither (bytes that are not UTF-8 included), before anything is written anywhere."""
    name = os.fspath(path)
    data = read_bytes(name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise OffsetsFileError("%s line %d: not UTF-8 text (byte %r at offset %d): not an offsets file"
                               % (name, line, data[e.start:e.start + 1], e.start)) from None
    lines = text.splitlines()
    first = next((line for line in lines if line.strip() and not line.lstrip().startswith("#")), "/")
    if first.lstrip().startswith("/"):
        return parse_offsets(lines, name)
    try:
        return parse_csv(lines, name, group)
    except ValueError as e:
        raise OffsetsFileError(str(e)) from None
