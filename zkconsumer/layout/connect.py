"""Parsing of ``zookeeper.connect`` strings: ``host:port,host:port[/chroot]``.

Kafka's ``ZKConfig`` (``zookeeper.connect``; every path the consumer builds is chroot-relative, as ZkClient sees
it).  ZooKeeper's ``ConnectStringParser`` splits off the chroot at the first ``/``, splits the hosts on ``,``
and defaults a missing port to 2181; a chroot of just ``/`` means "no chroot".

Accepted here:

* hosts: one or more comma-separated entries, surrounding whitespace ignored; each entry is ``host``, ``host:port``
  or ``[ipv6]:port`` / ``[ipv6]``; ``port`` is decimal 1..65535 (default 2181); empty entries are refused.
* chroot: starts with ``/``; no empty segments (``//``), no ``.``/``..`` segments, no trailing ``/`` (``/`` alone
  is allowed and means no chroot), none of the characters ZooKeeper forbids in paths.

Errors raise ``ConfigError("zookeeper.connect", value, allowed)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import ConfigError

__all__ = ["ZkConnect", "parse_zk_connect", "DEFAULT_ZK_PORT"]

DEFAULT_ZK_PORT = 2181
_KEY = "zookeeper.connect"
_ALLOWED = "host[:port][,host[:port]...][/chroot], e.g. zk1:2181,zk2:2181/kafka"
# hostname, IPv4 address, or zone-less name
_HOST = re.compile(r"[A-Za-z0-9._%-]+\Z")
_IPV6 = re.compile(r"\[([0-9A-Fa-f:.%A-Za-z]+)\]\Z")
_ZK_ILLEGAL_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


@dataclass(frozen=True)
class ZkConnect:
    """A parsed connect string.  ``hosts`` is normalised to ``host:port,host:port`` (explicit ports, no
    whitespace); ``chroot`` is ``None`` or an absolute path without trailing ``/``."""

    hosts: str
    chroot: Optional[str] = None

    @property
    def host_ports(self) -> Tuple[Tuple[str, int], ...]:
        """``((host, port), ...)``; IPv6 hosts are returned without brackets."""
        out = []
        for entry in self.hosts.split(","):
            host, _, port = entry.rpartition(":")
            if host.startswith("["):
                host = host[1:-1]
            out.append((host, int(port)))
        return tuple(out)

    @property
    def kazoo_hosts(self) -> str:
        """The string for ``kazoo.client.KazooClient(hosts=...)``: ``hosts`` followed by the chroot, if any."""
        return self.hosts + (self.chroot or "")

    def __str__(self) -> str:
        return self.kazoo_hosts


def _bad(value: object, detail: str) -> ConfigError:
    return ConfigError(_KEY, value, _ALLOWED, detail)


def _parse_chroot(value: str, chroot: str) -> Optional[str]:
    if chroot == "/":
        return None
    if chroot.endswith("/"):
        raise _bad(value, "chroot %r must not end with '/'" % chroot)
    segments = chroot[1:].split("/")
    for seg in segments:
        if seg == "":
            raise _bad(value, "chroot %r has an empty path segment" % chroot)
        if seg in (".", ".."):
            raise _bad(value, "chroot %r contains a relative segment %r" % (chroot, seg))
    m = _ZK_ILLEGAL_CHARS.search(chroot)
    if m:
        raise _bad(value, "chroot %r contains illegal character U+%04X" % (chroot, ord(m.group())))
    return chroot


def _parse_host(value: str, entry: str) -> str:
    entry = entry.strip()
    if not entry:
        raise _bad(value, "empty host entry")
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            raise _bad(value, "unterminated IPv6 address in %r" % entry)
        host, rest = entry[:close + 1], entry[close + 1:]
        if not _IPV6.match(host):
            raise _bad(value, "bad IPv6 address in %r" % entry)
        if rest and not rest.startswith(":"):
            raise _bad(value, "unexpected text after IPv6 address in %r" % entry)
        port_text = rest[1:] if rest else None
    else:
        host, sep, port_text = entry.partition(":")
        if not sep:
            port_text = None
        if not host:
            raise _bad(value, "empty host name in %r" % entry)
        if not _HOST.match(host):
            raise _bad(value, "bad host name %r" % host)
    if port_text is None:
        port = DEFAULT_ZK_PORT
    else:
        if not re.match(r"[0-9]{1,5}\Z", port_text):
            raise _bad(value, "port %r in %r is not a number" % (port_text, entry))
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise _bad(value, "port %d in %r is out of range 1..65535" % (port, entry))
    return "%s:%d" % (host, port)


def parse_zk_connect(s: object) -> ZkConnect:
    """Parse a ``zookeeper.connect`` value (see module docstring) into a :class:`ZkConnect`.

    >>> parse_zk_connect("zk1:2181,zk2/kafka")
    ZkConnect(hosts='zk1:2181,zk2:2181', chroot='/kafka')
    """
    if not isinstance(s, str):
        raise _bad(s, "must be a string")
    text = s.strip()
    if not text:
        raise _bad(s, "must not be empty")
    slash = text.find("/")
    if slash >= 0:
        host_part, chroot = text[:slash], _parse_chroot(s, text[slash:])
    else:
        host_part, chroot = text, None
    if not host_part.strip():
        raise _bad(s, "no ZooKeeper hosts given")
    hosts = ",".join(_parse_host(s, entry) for entry in host_part.split(","))
    return ZkConnect(hosts=hosts, chroot=chroot)
