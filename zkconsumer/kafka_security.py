"""Kafka client security: ``security.protocol``, SASL (PLAIN, SCRAM) and TLS settings for every Kafka client.

The old consumer only spoke PLAINTEXT; zkconsumer also speaks SSL, SASL_PLAINTEXT and SASL_SSL with the keys the
Java client uses (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.endpoint.identification.algorithm``) plus PEM-file keys kafka-python can use instead of Java keystores
(``ssl.cafile``, ``ssl.certfile``, ``ssl.keyfile``, ``ssl.password.file``) and ``sasl.credentials.file``; the Java
client's stores are taken too (``ssl.truststore.location``/``.password``/``.type``, ``ssl.keystore.location``/
``.password``/``.type``, ``ssl.key.password``; JKS, PKCS12 or PEM, read by :mod:`zkconsumer.keystores` in the process
that makes the client, which then gets an ``ssl_context``).

:class:`KafkaSecurity` is the validated value; :meth:`KafkaSecurity.client_kwargs` is the one place that turns it
into kafka-python keyword arguments, and every Kafka client zkconsumer makes (fetchers, offset manager, admin and
metadata clients, the registry mirror, zkmigrate, the Spark source) gets them from there.  Secrets (passwords)
never appear in ``repr``, in :meth:`KafkaSecurity.describe` or in error messages.  Stdlib only (pure core): it
reads the credential files it is given and nothing else (the stores: :mod:`zkconsumer.keystores`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:
    import ssl

from .errors import ConfigError

__all__ = ["KafkaSecurity", "PROTOCOLS", "MECHANISMS", "SECURITY_KEYS", "SECRET_KEYS", "parse_jaas_config",
           "redact"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_KEYS = ("sasl.mechanism", "sasl.jaas.config", "sasl.credentials.file")
STORE_KEYS = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type", "ssl.keystore.location",
              "ssl.keystore.password", "ssl.keystore.type", "ssl.key.password")
SSL_KEYS = ("ssl.cafile", "ssl.certfile", "ssl.keyfile", "ssl.password.file",
            "ssl.endpoint.identification.algorithm") + STORE_KEYS
SECURITY_KEYS = ("security.protocol",) + SASL_KEYS + SSL_KEYS
#: keys whose value is (or holds) a secret: never printed, never accepted on a command line
SECRET_KEYS = ("sasl.jaas.config", "ssl.truststore.password", "ssl.keystore.password", "ssl.key.password")
REDACTED = "[hidden]"

# Kafka's PlainLoginModule and ScramLoginModule (org.apache.kafka.common.security.{plain,scram})
_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# JAAS: ``LoginModuleClass Flag name=value name="quoted value" ... ;``
_JAAS_HEAD = re.compile(r"\s*([A-Za-z_$][\w$.]*)\s+(required|requisite|sufficient|optional)\b", re.I)
_JAAS_OPTION = re.compile(r"\s*([\w.-]+)\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^\s;\"]+))")


def redact(key: str, value: object) -> object:
    """The value to show in messages: secret keys' values are replaced by ``[hidden]``."""
    return REDACTED if key in SECRET_KEYS and value is not None else value


def parse_jaas_config(text: str) -> Tuple[str, Dict[str, str]]:
    """``(login module class, options)`` of one ``sasl.jaas.config`` entry; ConfigError (value hidden) if malformed."""
    def bad(why: str) -> ConfigError:
        return ConfigError("sasl.jaas.config", REDACTED,
                           'one JAAS entry: <LoginModule class> required username="..." password="...";', why)
    m = _JAAS_HEAD.match(text)
    if not m:
        raise bad("it does not start with a login module class and a control flag")
    module, pos, options = m.group(1), m.end(), {}
    while True:
        o = _JAAS_OPTION.match(text, pos)
        if not o:
            break
        value = o.group(2) if o.group(2) is not None else o.group(3)
        options[o.group(1)] = re.sub(r"\\(.)", r"\1", value) if o.group(2) is not None else value
        pos = o.end()
    if not re.fullmatch(r"\s*;\s*", text[pos:]):
        raise bad("expected name=value options and one ';' at the end")
    return module, options


def _read_properties_file(key: str, path: str) -> Dict[str, str]:
    from .properties import load_properties
    try:
        return dict(load_properties(path))
    except (OSError, ValueError) as e:
        raise ConfigError(key, path, "a readable .properties file", str(e).replace(path, "the file")) from None


def _read_secret_file(key: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeError) as e:
        raise ConfigError(key, path, "a readable UTF-8 file holding the password", e.__class__.__name__) from None
    return text.rstrip("\r\n")


def _check_file(key: str, path: str) -> str:
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ConfigError(key, path, "the path of a readable file")
    return path


@dataclasses.dataclass(frozen=True)
class KafkaSecurity:
    """Validated client security settings (build with :meth:`from_properties`)."""

    protocol: str = "PLAINTEXT"
    # set for SASL_* only
    mechanism: Optional[str] = None
    username: Optional[str] = None
    password: Optional[str] = dataclasses.field(default=None, repr=False)
    cafile: Optional[str] = None
    certfile: Optional[str] = None
    keyfile: Optional[str] = None
    key_password: Optional[str] = dataclasses.field(default=None, repr=False)
    check_hostname: bool = True
    # ssl.truststore.location of type JKS or PKCS12 (PEM goes to cafile)
    truststore: Optional[str] = None
    truststore_type: str = "JKS"
    truststore_password: Optional[str] = dataclasses.field(default=None, repr=False)
    # ssl.keystore.location of type JKS or PKCS12 (PEM: certfile/keyfile)
    keystore: Optional[str] = None
    keystore_type: str = "JKS"
    keystore_password: Optional[str] = dataclasses.field(default=None, repr=False)

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "KafkaSecurity":
        """Validate the security keys of ``props`` (other keys are ignored); ConfigError names key, value (secrets
        hidden) and what is allowed."""
        def get(key: str) -> Optional[str]:
            v = props.get(key)
            return None if v is None or not str(v).strip() else str(v).strip()

        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ConfigError("security.protocol", props.get("security.protocol"), " or ".join(PROTOCOLS))
        sasl = protocol.startswith("SASL_")
        ssl = protocol in ("SSL", "SASL_SSL")
        for key in SASL_KEYS if not sasl else ():
            if get(key) is not None:
                raise ConfigError(key, redact(key, props.get(key)), "unset unless security.protocol is SASL_PLAINTEXT "
                                  "or SASL_SSL", "security.protocol is %s" % protocol)
        for key in SSL_KEYS if not ssl else ():
            # ssl.endpoint.identification.algorithm may be "" on purpose
            if props.get(key) is not None:
                raise ConfigError(key, props.get(key), "unset unless security.protocol is SSL or SASL_SSL",
                                  "security.protocol is %s" % protocol)
        kw: Dict[str, Any] = {"protocol": protocol}
        if sasl:
            mechanism = (get("sasl.mechanism") or "PLAIN").upper()
            if mechanism not in MECHANISMS:
                raise ConfigError("sasl.mechanism", props.get("sasl.mechanism"), " or ".join(MECHANISMS),
                                  "GSSAPI and OAUTHBEARER are not supported")
            kw["mechanism"] = mechanism
            kw["username"], kw["password"] = cls._credentials(props, mechanism)
        if ssl:
            for key, attr in (("ssl.cafile", "cafile"), ("ssl.certfile", "certfile"), ("ssl.keyfile", "keyfile")):
                if get(key) is not None:
                    kw[attr] = _check_file(key, os.path.abspath(os.path.expanduser(get(key) or "")))
            if kw.get("keyfile") and not kw.get("certfile"):
                raise ConfigError("ssl.keyfile", kw["keyfile"], "set together with ssl.certfile (the client certificate)")
            kw.update(cls._stores(props, kw))
            if get("ssl.password.file") is not None:
                if not kw.get("keyfile") and not kw.get("certfile"):
                    raise ConfigError("ssl.password.file", get("ssl.password.file"),
                                      "set only with ssl.certfile/ssl.keyfile (it unlocks the client's private key)")
                if props.get("ssl.key.password"):
                    raise ConfigError("ssl.password.file", get("ssl.password.file"), "one of ssl.password.file and "
                                      "ssl.key.password", "both are set")
                kw["key_password"] = _read_secret_file("ssl.password.file", get("ssl.password.file") or "")
            algo = props.get("ssl.endpoint.identification.algorithm")
            algo = "https" if algo is None else algo.strip().lower()
            if algo not in ("https", ""):
                raise ConfigError("ssl.endpoint.identification.algorithm", props.get(
                    "ssl.endpoint.identification.algorithm"), "https (check the broker's host name) or empty (do not)")
            kw["check_hostname"] = algo == "https"
        return cls(**kw)

    @staticmethod
    def _stores(props: Mapping[str, str], files: Mapping[str, Any]) -> Dict[str, Any]:
        """The Java client's ``ssl.truststore.*`` / ``ssl.keystore.*`` / ``ssl.key.password`` (types JKS, the
        default as in Kafka, PKCS12 or PEM). A PEM store is the same as ``ssl.cafile`` / ``ssl.certfile`` +
        ``ssl.keyfile``; a JKS or PKCS12 one is opened here once, so a wrong path or password fails now, naming the
        key (its value hidden for passwords)."""
        from . import keystores

        def get(key: str) -> Optional[str]:
            v = props.get(key)
            return None if v is None or not str(v).strip() else str(v).strip()

        def secret(key: str) -> Optional[str]:
            v = props.get(key)
            return None if v is None or v == "" else str(v)

        def store_type(key: str) -> str:
            t = (get(key) or "JKS").upper()
            if t not in keystores.STORE_TYPES:
                raise ConfigError(key, props.get(key), " or ".join(keystores.STORE_TYPES))
            return t
        out: Dict[str, Any] = {}
        key_password = secret("ssl.key.password")
        for store, pem_attr in (("truststore", "cafile"), ("keystore", "certfile")):
            location_key = "ssl.%s.location" % store
            location = get(location_key)
            if location is None:
                for k in ("ssl.%s.password" % store, "ssl.%s.type" % store):
                    if get(k) is not None:
                        raise ConfigError(k, redact(k, props.get(k)), "set only with %s" % location_key)
                continue
            path = _check_file(location_key, os.path.abspath(os.path.expanduser(location)))
            kind, password = store_type("ssl.%s.type" % store), secret("ssl.%s.password" % store)
            if files.get(pem_attr):
                raise ConfigError(location_key, location, "one of ssl.%s and %s" % (pem_attr, location_key),
                                  "both are set")
            if store == "truststore":
                keystores.read_truststore(path, kind, password)
                out.update({"cafile": path} if kind == "PEM" else
                           {"truststore": path, "truststore_type": kind, "truststore_password": password})
            elif kind == "PEM":
                # Kafka's PEM keystore: the private key and its certificate chain in one file
                out.update(certfile=path, keyfile=path)
            else:
                keystores.read_keystore(path, kind, password, key_password)
                out.update(keystore=path, keystore_type=kind, keystore_password=password)
        if key_password is not None and not (out.get("certfile") or out.get("keystore") or files.get("certfile")):
            raise ConfigError("ssl.key.password", REDACTED, "set only with ssl.keystore.location or "
                              "ssl.certfile/ssl.keyfile (it unlocks the client's private key)")
        if key_password is not None:
            out["key_password"] = key_password
        return out

    @staticmethod
    def _credentials(props: Mapping[str, str], mechanism: str) -> Tuple[str, str]:
        jaas, path = props.get("sasl.jaas.config"), props.get("sasl.credentials.file")
        jaas = jaas if jaas and jaas.strip() else None
        path = path.strip() if path and path.strip() else None
        if (jaas is None) == (path is None):
            raise ConfigError("sasl.credentials.file" if path else "sasl.jaas.config",
                              path if path else redact("sasl.jaas.config", jaas),
                              "exactly one of sasl.jaas.config and sasl.credentials.file for security.protocol "
                              "SASL_PLAINTEXT or SASL_SSL", "both are set" if jaas else "neither is set")
        if jaas is not None:
            module, options = parse_jaas_config(jaas)
            if module != _MODULES[mechanism]:
                raise ConfigError("sasl.jaas.config", REDACTED, "a %s entry for sasl.mechanism=%s"
                                  % (_MODULES[mechanism], mechanism), "it names %s" % module)
            where, user, password = "sasl.jaas.config", options.get("username"), options.get("password")
        else:
            assert path is not None
            creds = _read_properties_file("sasl.credentials.file", path)
            where, user, password = "sasl.credentials.file", creds.get("username"), creds.get("password")
        if not user or password is None or password == "":
            raise ConfigError(where, REDACTED if where == "sasl.jaas.config" else path,
                              "credentials with a non-empty username and password",
                              "the %s is missing" % ("username" if not user else "password"))
        return user, password

    def client_kwargs(self) -> Dict[str, Any]:
        """kafka-python keyword arguments (``KafkaConsumer``, ``KafkaProducer``, ``KafkaAdminClient``,
        ``KafkaClient``) for these settings: nothing but ``security_protocol`` for PLAINTEXT."""
        kw: Dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_sasl:
            kw.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                      sasl_plain_password=self.password)
        if self.uses_ssl and (self.truststore or self.keystore):
            kw.update(ssl_check_hostname=self.check_hostname, ssl_context=self.ssl_context())
        elif self.uses_ssl:
            kw.update(ssl_check_hostname=self.check_hostname, ssl_cafile=self.cafile, ssl_certfile=self.certfile,
                      ssl_keyfile=self.keyfile, ssl_password=self.key_password)
        return kw

    def _store_pems(self) -> Tuple[Optional[str], Optional[str], Optional[str]]:
        """(trusted certificates, private key, certificate chain) as PEM text from the JKS/PKCS12 stores."""
        from . import keystores
        ca = keystores.read_truststore(self.truststore, self.truststore_type, self.truststore_password) \
            if self.truststore else None
        key = chain = None
        if self.keystore:
            key, chain = keystores.read_keystore(self.keystore, self.keystore_type, self.keystore_password,
                                                 self.key_password)
        return ca, key, chain

    def ssl_context(self) -> "ssl.SSLContext":
        """The :class:`ssl.SSLContext` of these settings (for JKS/PKCS12 stores, read from their files here)."""
        from . import keystores
        ca, key, chain = self._store_pems()
        return keystores.ssl_context(ca, self.cafile, key, chain, self.certfile, self.keyfile, self.key_password,
                                     self.check_hostname)

    def librdkafka_settings(self) -> Dict[str, Any]:
        """The same settings for librdkafka (``fetch.engine=librdkafka``), by its property names."""
        conf: Dict[str, Any] = {"security.protocol": self.protocol.lower()}
        if self.uses_sasl:
            conf.update({"sasl.mechanisms": self.mechanism, "sasl.username": self.username,
                         "sasl.password": self.password})
        if self.uses_ssl:
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else "none"
            ca, key, chain = self._store_pems()
            for k, value in (("ssl.ca.location", self.cafile), ("ssl.certificate.location", self.certfile),
                             ("ssl.key.location", self.keyfile), ("ssl.key.password", self.key_password),
                             ("ssl.ca.pem", ca), ("ssl.certificate.pem", chain), ("ssl.key.pem", key)):
                if value and not (k == "ssl.key.password" and key):
                    conf[k] = value
        return conf

    def describe(self) -> str:
        """One line naming the protocol, mechanism and user (never the password), for error messages and logs."""
        parts = ["security.protocol=%s" % self.protocol]
        if self.uses_sasl:
            parts.append("sasl.mechanism=%s" % self.mechanism)
            parts.append("user %r" % self.username)
        if self.uses_ssl:
            parts.append("CA %s" % (self.cafile or ("%s truststore %s" % (self.truststore_type, self.truststore)
                                                    if self.truststore else "(system default)")))
            if self.certfile or self.keystore:
                parts.append("client certificate %s" % (self.certfile or "in %s keystore %s" % (self.keystore_type,
                                                                                                self.keystore)))
            if not self.check_hostname:
                parts.append("host name not checked")
        return ", ".join(parts)


PLAINTEXT = KafkaSecurity()


def of(config: object) -> KafkaSecurity:
    """The :class:`KafkaSecurity` of a ConsumerConfig (or anything with a ``kafka_security`` attribute); PLAINTEXT
    for None."""
    sec = getattr(config, "kafka_security", None)
    return sec if isinstance(sec, KafkaSecurity) else PLAINTEXT
