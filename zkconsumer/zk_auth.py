"""ZooKeeper credentials and ACLs: who a kazoo client authenticates as, and the ACL of every znode it creates.

* ``zookeeper.auth.scheme=digest`` — ZooKeeper's digest scheme (``addauth digest user:password``). The server never
  rejects a digest: a wrong password is simply another identity, which then lacks the rights the right one has
  (:func:`check_write_access` turns that into a clear error).
* ``zookeeper.auth.scheme=sasl`` — SASL DIGEST-MD5 done by kazoo with the ``pure-sasl`` package (no JAAS file on
  the client); the server must run ``SASLAuthenticationProvider`` with a ``Server`` JAAS section that knows the user.
  A wrong password fails the connection (the server drops it).
* ``zookeeper.set.acl=true`` — what Kafka's brokers do in secure mode (``ZkData.defaultAcls`` in Kafka's
  KafkaZkClient, ``ZkUtils.defaultAcls`` before 1.1): ``CREATOR_ALL_ACL`` + ``READ_ACL_UNSAFE`` on every znode we
  create, except ``/consumers`` itself, which Kafka keeps open because every group writes under it.

The password is read from a credentials file only; it is never logged, never in an error and not in ``repr``.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
import stat
from typing import Any, Dict, List, Optional, Tuple

from .errors import ConfigError, ZkConsumerError

log = logging.getLogger(__name__)

SCHEMES = ("none", "digest", "sasl")
CONSUMERS_ROOT = "/consumers"


class ZkAuthError(ZkConsumerError):
    """ZooKeeper refused our credentials, or our identity may not write where it must."""


@dataclasses.dataclass(frozen=True)
class ZkAuth:
    """How a client authenticates and which ACL its new znodes get (plain data; the password is not in repr)."""
    scheme: str = "none"
    username: str = ""
    password: str = dataclasses.field(default="", repr=False)
    mechanism: str = "DIGEST-MD5"
    set_acl: bool = False
    # the credentials file, for messages
    source: str = ""

    @property
    def enabled(self) -> bool:
        return self.scheme != "none"

    def describe(self) -> str:
        """``scheme digest as user 'alice'`` — for messages (no password)."""
        if not self.enabled:
            return "no authentication"
        what = "sasl %s" % self.mechanism if self.scheme == "sasl" else "digest"
        return "scheme %s as user %r" % (what, self.username)

    def kazoo_kwargs(self) -> Dict[str, Any]:
        """``auth_data`` / ``sasl_options`` / ``default_acl`` for ``KazooClient``."""
        kw: Dict[str, Any] = {}
        if self.scheme == "digest":
            kw["auth_data"] = [("digest", "%s:%s" % (self.username, self.password))]
        elif self.scheme == "sasl":
            kw["sasl_options"] = {"mechanism": self.mechanism, "username": self.username, "password": self.password}
        if self.set_acl:
            kw["default_acl"] = secure_acl()
        return kw

    def identity_ids(self) -> Tuple[Tuple[str, str], ...]:
        """The ``(scheme, id)`` pairs ZooKeeper gives a session authenticated with these credentials."""
        if self.scheme == "digest":
            return (("digest", digest_id(self.username, self.password)),)
        if self.scheme == "sasl":
            return (("sasl", self.username),)
        return ()


NO_AUTH = ZkAuth()


def digest_id(username: str, password: str) -> str:
    """ZooKeeper's ``DigestAuthenticationProvider.generateDigest``: ``user:base64(sha1(user:password))``."""
    raw = hashlib.sha1(("%s:%s" % (username, password)).encode("utf-8")).digest()
    return "%s:%s" % (username, base64.b64encode(raw).decode("ascii"))


def secure_acl() -> List[Any]:
    """Kafka's secure default: the creating identity has every right, everyone may read."""
    from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE
    return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


def open_acl() -> List[Any]:
    from kazoo.security import OPEN_ACL_UNSAFE
    return list(OPEN_ACL_UNSAFE)


# -- the credentials file ----------------------------------------------------------------------------------------
def load_credentials(path: str, key: str = "zookeeper.auth.credentials.file") -> Tuple[str, str]:
    """``(username, password)`` from ``path``: ``username=``/``password=`` properties or a JSON object.

    Refused (ConfigError naming the key and the file, never its content) when it is missing, world-readable, or
    lacks either field; a group-readable file is only warned about."""
    try:
        st = os.stat(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(key, path, "a readable file with username and password", e.strerror) from None
    if st.st_mode & stat.S_IROTH:
        raise ConfigError(key, path, "a file others cannot read",
                          "mode %s: run chmod 600 %s" % (oct(stat.S_IMODE(st.st_mode)), path))
    if st.st_mode & stat.S_IRGRP:
        log.warning("ZooKeeper credentials file %s is readable by its group (mode %s); chmod 600 is safer",
                    path, oct(stat.S_IMODE(st.st_mode)))
    fields: Dict[str, Any]
    if text.lstrip().startswith("{"):
        try:
            fields = json.loads(text)
        except (ValueError, RecursionError):
            # RecursionError: nested thousands deep
            raise ConfigError(key, path, "a JSON object with username and password", "not valid JSON") from None
        if not isinstance(fields, dict):
            raise ConfigError(key, path, "a JSON object with username and password")
    else:
        from .errors import PropertiesSyntaxError
        from .properties import parse_properties
        try:
            fields = dict(parse_properties(text))
        except PropertiesSyntaxError:
            # its message may quote the password's line
            raise ConfigError(key, path, "a properties file with username and password", "syntax error") from None
    user, password = fields.get("username"), fields.get("password")
    if not isinstance(user, str) or not user or not isinstance(password, str) or not password:
        raise ConfigError(key, path, "a file with a non-empty username and password",
                          "fields found: %s" % (", ".join(sorted(str(k) for k in fields)) or "none"))
    if ":" in user:
        raise ConfigError(key, path, "a username without ':'")
    return user, password


def from_config(config: Any) -> ZkAuth:
    """The ZkAuth of a validated :class:`~zkconsumer.config.ConsumerConfig` (reads the credentials file)."""
    return build(config.zookeeper_auth_scheme, config.zookeeper_auth_credentials_file,
                 config.zookeeper_sasl_mechanism, config.zookeeper_set_acl)


def build(scheme: str = "none", credentials_file: Optional[str] = None, mechanism: str = "DIGEST-MD5",
          set_acl: bool = False) -> ZkAuth:
    """Validated ZkAuth from the values of the ``zookeeper.auth.*`` keys (the CLIs' options end here too)."""
    from .config import ConsumerConfig
    props: Dict[str, str] = {"zookeeper.auth.scheme": scheme, "zookeeper.sasl.mechanism": mechanism,
                             "zookeeper.set.acl": "true" if set_acl else "false"}
    if credentials_file:
        props["zookeeper.auth.credentials.file"] = credentials_file
    cfg = ConsumerConfig.from_properties(props, require_group=False, require_zookeeper=False)
    if cfg.zookeeper_auth_scheme == "none":
        return NO_AUTH
    path = cfg.zookeeper_auth_credentials_file
    # validated: required with a scheme
    assert path is not None
    user, password = load_credentials(path)
    return ZkAuth(cfg.zookeeper_auth_scheme, user, password, cfg.zookeeper_sasl_mechanism, cfg.zookeeper_set_acl,
                  path)


# -- on a started client -----------------------------------------------------------------------------------------
def prepare(zk: Any, auth: ZkAuth) -> None:
    """With set_acl: create ``/consumers`` open (Kafka keeps the old consumers' root open: every group writes under
    it) before anything below it is created with the secure ACL."""
    if not auth.set_acl:
        return
    from kazoo.exceptions import NoAuthError, NodeExistsError
    if not zk.exists(CONSUMERS_ROOT):
        try:
            zk.create(CONSUMERS_ROOT, b"", acl=open_acl())
        except NodeExistsError:
            pass
        except NoAuthError:
            raise ZkAuthError("ZooKeeper (%s) may not create %s: the ACL of its parent (the chroot) does not let "
                              "this identity create nodes" % (auth.describe(), CONSUMERS_ROOT)) from None


def _grants_write(acls: List[Any], auth: ZkAuth) -> bool:
    from kazoo.security import Permissions
    ids = set(auth.identity_ids())
    for acl in acls:
        if not acl.perms & Permissions.WRITE:
            continue
        if (acl.id.scheme, acl.id.id) == ("world", "anyone") or (acl.id.scheme, acl.id.id) in ids:
            return True
    return False


def _shown(acls: List[Any]) -> str:
    """The identities an ACL grants write to, without digests (``digest:bob``)."""
    from kazoo.security import Permissions
    out = []
    for acl in acls:
        if acl.perms & Permissions.WRITE:
            ident = acl.id.id.split(":")[0] if acl.id.scheme == "digest" else acl.id.id
            out.append("%s:%s" % (acl.id.scheme, ident))
    return ", ".join(out) or "nobody"


def check_write_access(zk: Any, auth: ZkAuth, path: str, zookeeper_connect: str) -> None:
    """ZkAuthError when ``path`` exists and its ACL does not let our identity write (a wrong digest password is a
    different identity: ZooKeeper accepts it and refuses its writes later). Nothing to check when it is absent."""
    from kazoo.exceptions import NoNodeError
    try:
        acls, _ = zk.get_acls(path)
    except NoNodeError:
        return
    if not _grants_write(acls, auth):
        raise ZkAuthError(
            "ZooKeeper %s (%s): this identity may not write %s, whose ACL grants write to %s only; wrong "
            "credentials in %s, or the group was created by another identity (one identity per group)"
            % (zookeeper_connect, auth.describe(), path, _shown(acls), auth.source or "the credentials file"))
