"""Secured listeners for the embedded Apache Kafka broker (ZooKeeper mode): SSL, SASL_PLAINTEXT and SASL_SSL.

:class:`BrokerSecurity` says which listeners to open besides PLAINTEXT (which stays, for the brokers among
themselves and for the launcher's own readiness checks) and with what: a PKCS#12 keystore for the TLS listeners,
PLAIN users (in the broker's JAAS entry) and SCRAM users (credentials written to ZooKeeper's ``/config/users``
before the broker starts, as ``kafka-configs --zookeeper --alter --add-config 'SCRAM-SHA-256=[...]'`` does).
Every SASL listener enables PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. The keystore itself is made by the caller
(``keytool``/``openssl``; the tests make theirs in ``tests/tls_support.py``).
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import os
from typing import Any, Dict, Optional, Tuple

__all__ = ["BrokerSecurity", "LISTENERS", "scram_credential", "write_scram_users"]

LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SCRAM = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
# Kafka's minimum for SCRAM
SCRAM_ITERATIONS = 4096


@dataclasses.dataclass(frozen=True)
class BrokerSecurity:
    """What the broker's extra listeners offer. ``listeners`` is a subset of :data:`LISTENERS`."""

    listeners: Tuple[str, ...] = LISTENERS
    # PKCS#12 with the broker's key and certificate (TLS listeners)
    keystore: Optional[str] = None
    keystore_password: str = dataclasses.field(default="", repr=False)
    # PKCS#12 with the CA of client certificates (client_auth)
    truststore: Optional[str] = None
    truststore_password: str = dataclasses.field(default="", repr=False)
    # none | requested | required: of the SSL listener (SASL_SSL: none)
    client_auth: str = "none"
    plain_users: Dict[str, str] = dataclasses.field(default_factory=dict, repr=False)
    scram_users: Dict[str, str] = dataclasses.field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        from ..errors import LocalClusterError
        bad = [name for name in self.listeners if name not in LISTENERS]
        if bad or not self.listeners:
            raise LocalClusterError("secure listeners must be among %s (got %s)" % (", ".join(LISTENERS),
                                                                                   ", ".join(self.listeners)))
        if any(name.endswith("SSL") for name in self.listeners) and not self.keystore:
            raise LocalClusterError("an SSL or SASL_SSL listener needs a keystore (PKCS#12)")
        if self.client_auth not in ("none", "requested", "required"):
            raise LocalClusterError("client_auth must be none, requested or required (got %r)" % self.client_auth)

    def broker_properties(self, ports: Dict[str, int], host: str) -> Dict[str, Any]:
        """server.properties entries for ``ports`` ({listener: port}); PLAINTEXT is the caller's."""
        props: Dict[str, Any] = {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                              "SASL_SSL:SASL_SSL",
            "inter.broker.listener.name": "PLAINTEXT",
        }
        if self.keystore:
            props.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": self.keystore,
                          "ssl.keystore.password": self.keystore_password,
                          "ssl.key.password": self.keystore_password, "ssl.client.auth": "none",
                          "listener.name.ssl.ssl.client.auth": self.client_auth,
                          "ssl.endpoint.identification.algorithm": "https"})
            if self.truststore:
                props.update({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": self.truststore,
                              "ssl.truststore.password": self.truststore_password})
        plain = "org.apache.kafka.common.security.plain.PlainLoginModule required %s;" % " ".join(
            'user_%s="%s"' % (u, p) for u, p in sorted(self.plain_users.items()))
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        for name in self.listeners:
            if name.startswith("SASL_"):
                prefix = "listener.name.%s." % name.lower()
                props[prefix + "sasl.enabled.mechanisms"] = ",".join(MECHANISMS)
                props[prefix + "plain.sasl.jaas.config"] = plain
                for mech in _SCRAM:
                    props[prefix + mech.lower() + ".sasl.jaas.config"] = scram
        props["sasl.enabled.mechanisms"] = ",".join(MECHANISMS)
        return props


def scram_credential(mechanism: str, password: str, salt: Optional[bytes] = None,
                     iterations: int = SCRAM_ITERATIONS) -> str:
    """The broker's stored form of a SCRAM credential (RFC 5802; Kafka's ScramCredentialUtils):
    ``salt=..,stored_key=..,server_key=..,iterations=N`` (base64)."""
    digest = _SCRAM[mechanism]
    salt = salt if salt is not None else os.urandom(24)
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = digest(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return "salt=%s,stored_key=%s,server_key=%s,iterations=%d" % (b64(salt), b64(stored_key), b64(server_key),
                                                                  iterations)


def write_scram_users(zk: Any, users: Dict[str, str]) -> None:
    """Create or replace SCRAM-SHA-256 and -512 credentials of ``users`` ({name: password}) in ZooKeeper
    (``/config/users/NAME`` plus a change notification, so a running broker picks them up too)."""
    for user, password in users.items():
        data = json.dumps({"version": 1, "config": {m: scram_credential(m, password) for m in _SCRAM}}).encode()
        path = "/config/users/%s" % user
        if zk.exists(path):
            zk.set(path, data)
        else:
            zk.create(path, data, makepath=True)
        zk.ensure_path("/config/changes")
        zk.create("/config/changes/config_change_", json.dumps(
            {"version": 2, "entity_path": "users/%s" % user}).encode(), sequence=True)
