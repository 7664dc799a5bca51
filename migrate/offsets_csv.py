"""The reset-plan CSV of ``kafka-consumer-groups --reset-offsets --export`` / ``--from-file`` (Kafka 3.9
``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``: ``exportOffsetsToCsv`` and ``parseResetPlan``,
their records in ``CsvUtils``).

One line per partition, no header: ``topic,partition,offset`` when the command named exactly one ``--group``,
else ``group,topic,partition,offset``. Reading follows ``parseResetPlan``: with one group given, a file of three
columns is that group's; any other file must name the group on every line. Unlike Kafka's reader, every line is
validated before anything is used (legal group and topic names, a partition and an offset that are non-negative
decimals, one column count for the whole file, each partition once), and a mistake names the file, the line and
the value; blank lines and ``#`` comments are skipped.
"""
from __future__ import annotations

import csv
import io
import re
from typing import Dict, Iterable, List, Optional, Tuple

from zkconsumer.errors import InvalidNameError
from zkconsumer.layout import validate_group, validate_partition, validate_topic

__all__ = ["format_csv", "parse_csv"]

TP = Tuple[str, int]
_OFFSET = re.compile(r"(0|[1-9][0-9]{0,18})\Z")


def format_csv(offsets: Dict[str, Dict[TP, int]], with_group: bool) -> List[str]:
    """Lines (without newline) sorted by group, topic and partition; *with_group* adds the group column (Kafka
    leaves it out when one ``--group`` was given)."""
    out = []
    for group in sorted(offsets):
        for (topic, partition), offset in sorted(offsets[group].items()):
            out.append("%s%s,%d,%d" % (group + "," if with_group else "", topic, partition, offset))
    return out


def parse_csv(lines: Iterable[str], source: str, group: Optional[str] = None) -> Dict[str, Dict[TP, int]]:
    """``{group: {(topic, partition): offset}}`` of a reset-plan CSV; *group* is the one ``--group`` given (needed
    for, and only used by, a three-column file). Raises ``ValueError`` (the caller's error class wraps it) naming
    *source* and the line."""
    out: Dict[str, Dict[TP, int]] = {}
    seen: Dict[Tuple[str, str, int], int] = {}
    width = None
    for n, raw in enumerate(lines, 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            fields = [f.strip() for f in next(csv.reader(io.StringIO(raw)))]
        except csv.Error as e:
            raise ValueError("%s line %d: %r is not CSV: %s" % (source, n, raw.strip(), e)) from None
        if width is None:
            width = len(fields)
            if width == 3 and group is None:
                raise ValueError("%s line %d: %r has no group column (topic,partition,offset: kafka-consumer-groups' "
                                 "export of one group): give the group with --group" % (source, n, raw.strip()))
            if width not in (3, 4):
                raise ValueError("%s line %d: %r is not a reset-plan CSV line (topic,partition,offset or "
                                 "group,topic,partition,offset)" % (source, n, raw.strip()))
        elif len(fields) != width:
            raise ValueError("%s line %d: %r has %d columns, the lines before it %d" % (source, n, raw.strip(),
                                                                                         len(fields), width))
        g, topic, partition, offset = ([group] + fields) if width == 3 else fields
        try:
            g = validate_group(g)
            topic = validate_topic(topic)
            p = validate_partition(partition)
        except InvalidNameError as e:
            raise ValueError("%s line %d: %s" % (source, n, e)) from None
        if not _OFFSET.match(offset) or int(offset) > 2 ** 63 - 1:
            raise ValueError("%s line %d: bad offset %r for %s-%d of group %s (a non-negative decimal integer)"
                             % (source, n, offset, topic, p, g))
        if (g, topic, p) in seen:
            raise ValueError("%s line %d: %s-%d of group %s appears twice (first on line %d)"
                             % (source, n, topic, p, g, seen[(g, topic, p)]))
        seen[(g, topic, p)] = n
        out.setdefault(g, {})[(topic, p)] = int(offset)
    return out
