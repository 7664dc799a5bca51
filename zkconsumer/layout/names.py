"""Validation of the names that become znode path components.

Kafka's ``ZkUtils`` builds every path by plain string concatenation (e.g.
``ZKGroupDirs.consumerGroupDir = consumerDir + "/" + group``), so an unchecked name such as ``../brokers`` or ``a/b``
would silently address another node.  Every path builder in :mod:`zkconsumer.layout.paths` calls these functions
first, and any name read off ZooKeeper (a child name, an owner value) must pass through them before it is used to
build a path.

Rules
-----
* **group ids and topics** (:func:`validate_group`, :func:`validate_topic`): Kafka's legal topic characters
  ``[a-zA-Z0-9._-]``, length 1..249, and not ``.`` or ``..``.  (The Scala old consumer itself never validated group
  ids; we deliberately refuse the rest because they cannot be made safe and portable.)
* **consumer ids** (:func:`validate_consumer_id`): the Scala form is ``<group>_<hostname>-<millis>-<uuid8>`` (Kafka
  1.1.1 ``ZookeeperConsumerConnector.consumerIdString``) or ``<group>_<consumer.id>``, and the hostname part is
  whatever ``InetAddress.getHostName`` returned, so the alphabet cannot be restricted to Kafka's.  A consumer id is
  accepted when it is a single legal ZooKeeper path component: 1..1024 characters; not ``.`` or ``..``; no ``/``;
  none of the characters ZooKeeper's ``PathUtils.validatePath`` rejects (NUL, U+0001-U+001F, U+007F-U+009F,
  U+D800-U+F8FF, U+FFF0-U+FFFF, which also excludes lone surrogates).  Everything else (``:``, spaces, non-ASCII
  letters, further ``_``/``-``) is allowed.
* **partitions** (:func:`validate_partition`): a non-negative Java ``Int`` (0..2147483647).  ``int`` values are
  taken as is (``bool`` is refused); strings must be canonical ASCII decimal (``"0"``, ``"17"``; not ``"01"``,
  ``"+1"``, ``" 1"``), because the Scala side writes ``partition.toString`` and a non-canonical spelling would
  name a different znode.
* **broker ids** (:func:`validate_broker_id`): same rules as partitions.
"""

from __future__ import annotations

import re

from ..errors import InvalidNameError

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_CONSUMER_ID_LENGTH",
    "MAX_INT32",
    "validate_group",
    "validate_topic",
    "validate_consumer_id",
    "validate_partition",
    "validate_broker_id",
    "is_legal_name",
]

#: Kafka's maximum topic (and, here, group) name length.
MAX_NAME_LENGTH = 249
#: Upper bound for a consumer id (group 249 + "_" + a 253-char hostname + suffixes fits easily).
MAX_CONSUMER_ID_LENGTH = 1024
#: Java ``Int.MaxValue``: partitions and broker ids are Scala ``Int``.
MAX_INT32 = 2 ** 31 - 1

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+\Z")
# ZooKeeper PathUtils.validatePath: characters that may never appear in a path.
_ZK_ILLEGAL_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff/]")
_CANONICAL_DECIMAL = re.compile(r"(0|[1-9][0-9]*)\Z")


def _validate_kafka_name(kind: str, name: object) -> str:
    if not isinstance(name, str):
        raise InvalidNameError(kind, name, "must be a string, not %s" % type(name).__name__)
    if not name:
        raise InvalidNameError(kind, name, "must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(kind, name, "is %d characters long (maximum %d)" % (len(name), MAX_NAME_LENGTH))
    if name in (".", ".."):
        raise InvalidNameError(kind, name, "'.' and '..' are reserved path components")
    if not _LEGAL_NAME.match(name):
        bad = sorted({c for c in name if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise InvalidNameError(kind, name, "contains illegal character(s) %s" % ", ".join(repr(c) for c in bad))
    return name


def is_legal_name(name: object) -> bool:
    """True if *name* is a legal Kafka group id / topic name (see module docstring)."""
    try:
        _validate_kafka_name("name", name)
    except InvalidNameError:
        return False
    return True


def validate_group(name: object) -> str:
    """Return *name* if it is a legal group id (``[a-zA-Z0-9._-]``, 1..249, not ``.``/``..``), else raise
    :class:`~zkconsumer.errors.InvalidNameError`."""
    return _validate_kafka_name("group id", name)


def validate_topic(name: object) -> str:
    """Return *name* if it is a legal topic name (``[a-zA-Z0-9._-]``, 1..249, not ``.``/``..``), else raise
    :class:`~zkconsumer.errors.InvalidNameError`."""
    return _validate_kafka_name("topic", name)


def validate_consumer_id(name: object) -> str:
    """Return *name* if it is usable as the consumer-id path component ``/consumers/[g]/ids/[id]``.

    Allowed: any 1..1024-character string that is not ``.``/``..`` and contains no ``/`` and none of the
    characters ZooKeeper forbids in paths (NUL, C0/C1 controls, U+D800-U+F8FF, U+FFF0-U+FFFF).  Hostnames may
    contain characters outside Kafka's name alphabet, so this is deliberately wider than :func:`validate_group`.
    Raises :class:`~zkconsumer.errors.InvalidNameError` otherwise.
    """
    kind = "consumer id"
    if not isinstance(name, str):
        raise InvalidNameError(kind, name, "must be a string, not %s" % type(name).__name__)
    if not name:
        raise InvalidNameError(kind, name, "must not be empty")
    if len(name) > MAX_CONSUMER_ID_LENGTH:
        raise InvalidNameError(kind, name, "is %d characters long (maximum %d)"
                               % (len(name), MAX_CONSUMER_ID_LENGTH))
    if name in (".", ".."):
        raise InvalidNameError(kind, name, "'.' and '..' are reserved path components")
    m = _ZK_ILLEGAL_CHARS.search(name)
    if m:
        what = "'/'" if m.group() == "/" else "character U+%04X" % ord(m.group())
        raise InvalidNameError(kind, name, "contains %s, which is not allowed in a znode name" % what)
    return name


def _validate_int32(kind: str, value: object) -> int:
    if isinstance(value, bool):
        raise InvalidNameError(kind, value, "must be a non-negative integer, not a bool")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        if not _CANONICAL_DECIMAL.match(value):
            raise InvalidNameError(kind, value, "must be a canonical non-negative decimal integer")
        # (int() of > 4300 digits raises ValueError)
        n = int(value) if len(value) <= 10 else MAX_INT32 + 1
    else:
        raise InvalidNameError(kind, value, "must be a non-negative integer, not %s" % type(value).__name__)
    if n < 0:
        raise InvalidNameError(kind, value, "must not be negative")
    if n > MAX_INT32:
        raise InvalidNameError(kind, value, "exceeds the Java Int maximum %d" % MAX_INT32)
    return n


def validate_partition(p: object) -> int:
    """Return partition *p* as an ``int`` (0..2**31-1).  Accepts an ``int`` or a canonical decimal ``str``
    (``"3"``; not ``"03"``, ``"-1"``, ``"+3"``); raises :class:`~zkconsumer.errors.InvalidNameError` otherwise."""
    return _validate_int32("partition", p)


def validate_broker_id(broker_id: object) -> int:
    """Return broker id as an ``int`` (0..2**31-1), same accepted inputs as :func:`validate_partition`."""
    return _validate_int32("broker id", broker_id)
