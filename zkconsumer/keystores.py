"""Java key and trust stores, as Kafka's Java client takes them (``ssl.truststore.*``, ``ssl.keystore.*``,
``ssl.key.password``), read into PEM for the Python clients, and the :class:`ssl.SSLContext` they make.

* ``JKS`` (Kafka's default store type) is read here, with the standard library only. The file
  (``sun.security.provider.JavaKeyStore``): magic ``0xFEEDFEED``, version 1 or 2, entries (tag 1: a private key and
  its certificate chain; tag 2: a trusted certificate), then a SHA-1 digest of the UTF-16 store password, the words
  ``Mighty Aphrodite`` and everything before it. A private key is protected as ``sun.security.provider.KeyProtector``
  does it: an EncryptedPrivateKeyInfo whose data is a 20-byte salt, the PKCS#8 key XORed with a keystream of
  chained SHA-1 digests of the UTF-16 key password (starting from the salt), and a SHA-1 of password and key.
* ``PKCS12`` is read with the ``cryptography`` package (``pip install 'zkconsumer[keystores]'``): its bags are
  encrypted (PBES2/AES from Java 12's keytool on, older 3DES/RC2), which the standard library cannot undo.
* ``PEM``: a truststore is a file of certificates; a keystore one file holding the private key (encrypted with
  ``ssl.key.password``, or not) and its certificate chain.

A wrong password is a :class:`~zkconsumer.errors.ConfigError` naming the password's key (never its value).
Python's :mod:`ssl` loads a client certificate only from files: :func:`ssl_context` writes the decrypted key for
the moment of loading to a file only this user can read, in a private temporary directory, and removes both.
"""
from __future__ import annotations

import base64
import hashlib
import os
import ssl
import struct
import tempfile
import threading
from typing import Dict, List, Optional, Tuple

from .errors import ConfigError

__all__ = ["STORE_TYPES", "read_truststore", "read_keystore", "ssl_context"]

STORE_TYPES = ("JKS", "PKCS12", "PEM")
_JKS_MAGIC, _JCEKS_MAGIC = 0xFEEDFEED, 0xCECECECE
_KEY_PROTECTOR_OID = "1.3.6.1.4.1.42.2.17.1.1"
_HIDDEN = "[hidden]"


def _pem(label: str, der: bytes) -> str:
    body = base64.encodebytes(der).decode("ascii").replace("\n", "")
    return "-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, "\n".join(body[i:i + 64] for i in
                                                                               range(0, len(body), 64)), label)


class _Reader:
    def __init__(self, data: bytes, key: str, path: str):
        self.data, self.pos, self.key, self.path = data, 0, key, path

    def bad(self, why: str) -> ConfigError:
        return ConfigError(self.key, self.path, "a JKS store (as keytool writes it)", why)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.bad("the file ends inside an entry")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def utf(self) -> str:
        return self.take(self.u16()).decode("utf-8", "replace")

    def blob(self) -> bytes:
        return self.take(self.u32())


def _der(data: bytes, pos: int = 0) -> Tuple[int, bytes, int]:
    """One DER element at ``pos``: (tag, contents, position after it)."""
    tag, n = data[pos], data[pos + 1]
    pos += 2
    if n & 0x80:
        width = n & 0x7F
        n = int.from_bytes(data[pos:pos + width], "big")
        pos += width
    if pos + n > len(data):
        raise ValueError("DER element runs past the data")
    return tag, data[pos:pos + n], pos + n


def _oid(contents: bytes) -> str:
    first = contents[0]
    parts, v = [first // 40, first % 40], 0
    for b in contents[1:]:
        v = (v << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(v)
            v = 0
    return ".".join(str(p) for p in parts)


def _unprotect_jks_key(epki: bytes, password: str, key: str, path: str) -> bytes:
    """The PKCS#8 key inside a JKS private-key entry (``KeyProtector.recover``)."""
    try:
        tag, seq, _ = _der(epki)
        tag_alg, alg, pos = _der(seq)
        _, oid, _ = _der(alg)
        _, protected, _ = _der(seq, pos)
    except (ValueError, IndexError):
        raise ConfigError(key, path, "a JKS store (as keytool writes it)", "a private key entry is not an "
                          "EncryptedPrivateKeyInfo") from None
    if _oid(oid) != _KEY_PROTECTOR_OID:
        raise ConfigError(key, path, "a JKS store (as keytool writes it)", "a private key protected with %s, not "
                          "the JKS key protector" % _oid(oid))
    if len(protected) < 40:
        raise ConfigError(key, path, "a JKS store (as keytool writes it)", "a protected key too short")
    pw = password.encode("utf-16-be")
    salt, enc, check = protected[:20], protected[20:-20], protected[-20:]
    stream, digest = bytearray(), salt
    while len(stream) < len(enc):
        digest = hashlib.sha1(pw + digest).digest()
        stream.extend(digest)
    plain = bytes(a ^ b for a, b in zip(enc, stream))
    if hashlib.sha1(pw + plain).digest() != check:
        raise ConfigError("ssl.key.password", _HIDDEN, "the password of the private key in %s" % path,
                          "it does not unlock the key")
    return plain


def _read_jks(data: bytes, password: Optional[str], key_password: Optional[str], key: str, pw_key: str,
              path: str, want_keys: bool = True) -> Tuple[List[str], List[Tuple[str, List[str]]]]:
    """(trusted certificates as PEM, [(private key PEM or "", its chain as PEM)]) of a JKS store. Without a
    password the integrity digest is not checked (as Java); private keys are decrypted only ``want_keys``."""
    r = _Reader(data, key, path)
    magic = r.u32()
    if magic == _JCEKS_MAGIC:
        raise ConfigError(key, path, "a JKS or PKCS12 store", "it is a JCEKS store; convert it with keytool "
                          "-importkeystore -deststoretype PKCS12")
    if magic != _JKS_MAGIC:
        raise r.bad("no JKS magic number")
    version = r.u32()
    if version not in (1, 2):
        raise r.bad("JKS version %d" % version)
    trusted: List[str] = []
    keys: List[Tuple[str, List[str]]] = []
    for _ in range(r.u32()):
        tag = r.u32()
        r.utf()
        # alias, creation date
        r.take(8)
        if tag == 1:
            protected = r.blob()
            chain = []
            for _ in range(r.u32()):
                if version == 2:
                    # certificate type: X.509
                    r.utf()
                chain.append(_pem("CERTIFICATE", r.blob()))
            if not want_keys:
                keys.append(("", chain))
                continue
            if password is None and key_password is None:
                raise ConfigError(pw_key, None, "the store's password (its private key is read with it, or with "
                                  "ssl.key.password)")
            der = _unprotect_jks_key(protected, key_password if key_password is not None else str(password), key,
                                     path)
            keys.append((_pem("PRIVATE KEY", der), chain))
        elif tag == 2:
            if version == 2:
                r.utf()
            trusted.append(_pem("CERTIFICATE", r.blob()))
        else:
            raise r.bad("an entry of kind %d (JKS has 1 and 2)" % tag)
    body, digest = data[:r.pos], r.take(20)
    if r.pos != len(data):
        raise r.bad("bytes after the integrity digest")
    if password is not None:
        mine = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite" + body).digest()
        if mine != digest:
            raise ConfigError(pw_key, _HIDDEN, "the password of %s" % path, "the store's integrity check fails "
                              "with it: wrong password, or the file was changed")
    return trusted, keys


def _read_pkcs12(data: bytes, password: Optional[str], key: str, pw_key: str,
                 path: str) -> Tuple[List[str], Optional[str], Optional[str]]:
    """(certificates as PEM, private key PEM or None, its certificate PEM or None) of a PKCS12 store."""
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12
    except ImportError:
        raise ConfigError(key, path, "a JKS or PEM store, or PKCS12 with the 'cryptography' package installed "
                          "(pip install 'zkconsumer[keystores]')") from None
    try:
        p12 = pkcs12.load_pkcs12(data, password.encode("utf-8") if password is not None else None)
    except ValueError as e:
        wrong = "password" in str(e).lower() or "mac" in str(e).lower() or password is not None
        if wrong:
            raise ConfigError(pw_key, _HIDDEN if password is not None else None, "the password of %s" % path,
                              "it does not open the store (or the file is not PKCS12)") from None
        raise ConfigError(key, path, "a PKCS12 store", str(e)[:200]) from None
    certs = [_pem("CERTIFICATE", c.certificate.public_bytes(Encoding.DER)) for c in p12.additional_certs]
    key_pem = cert_pem = None
    if p12.key is not None:
        key_pem = p12.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode("ascii")
    if p12.cert is not None:
        cert_pem = _pem("CERTIFICATE", p12.cert.certificate.public_bytes(Encoding.DER))
    return certs, key_pem, cert_pem


def _load(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(key, path, "the path of a readable store file", e.__class__.__name__) from None


def _pem_certificates(text: str, key: str, path: str) -> str:
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError(key, path, "a PEM file of certificates (type PEM)", "no -----BEGIN CERTIFICATE----- in it")
    return text


def read_truststore(path: str, store_type: str, password: Optional[str]) -> str:
    """The trusted certificates of ``ssl.truststore.location`` as PEM text (every certificate of the store)."""
    key, pw_key = "ssl.truststore.location", "ssl.truststore.password"
    data = _load(path, key)
    if store_type == "PEM":
        return _pem_certificates(data.decode("utf-8", "replace"), key, path)
    if store_type == "JKS":
        trusted, keys = _read_jks(data, password, None, key, pw_key, path, want_keys=False)
        certs = trusted + [c for _, chain in keys for c in chain]
    else:
        extra, _key_pem, cert = _read_pkcs12(data, password, key, pw_key, path)
        certs = extra + ([cert] if cert else [])
    if not certs:
        raise ConfigError(key, path, "a truststore with at least one certificate", "it has none")
    return "".join(certs)


def read_keystore(path: str, store_type: str, password: Optional[str],
                  key_password: Optional[str]) -> Tuple[str, str]:
    """(private key PEM, unencrypted; its certificate chain as PEM) of ``ssl.keystore.location`` (JKS or PKCS12;
    the store's one private key entry)."""
    key, pw_key = "ssl.keystore.location", "ssl.keystore.password"
    data = _load(path, key)
    if store_type == "JKS":
        _trusted, keys = _read_jks(data, password, key_password, key, pw_key, path)
        if len(keys) != 1:
            raise ConfigError(key, path, "a keystore with one private key entry", "it has %d" % len(keys))
        return keys[0][0], "".join(keys[0][1])
    extra, key_pem, cert = _read_pkcs12(data, password, key, pw_key, path)
    if key_pem is None or cert is None:
        raise ConfigError(key, path, "a keystore with a private key and its certificate", "it has no private key")
    return key_pem, cert + "".join(extra)


_CONTEXTS: Dict[Tuple[object, ...], ssl.SSLContext] = {}
_LOCK = threading.Lock()


def ssl_context(ca_pem: Optional[str], cafile: Optional[str], key_pem: Optional[str], chain_pem: Optional[str],
                certfile: Optional[str], keyfile: Optional[str], key_password: Optional[str],
                check_hostname: bool) -> ssl.SSLContext:
    """A client :class:`ssl.SSLContext` as kafka-python builds one (TLS, certificates required), trusting ``ca_pem``
    (or ``cafile``; else the system's CAs), presenting ``key_pem`` + ``chain_pem`` (or the PEM ``certfile`` and
    ``keyfile``, unlocked with ``key_password``). One context per distinct input in a process."""
    ident = (ca_pem, cafile, hashlib.sha256((key_pem or "").encode()).hexdigest(), chain_pem, certfile, keyfile,
             hashlib.sha256((key_password or "").encode()).hexdigest(), check_hostname)
    with _LOCK:
        ctx = _CONTEXTS.get(ident)
        if ctx is not None:
            return ctx
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
        if ca_pem:
            ctx.load_verify_locations(cadata=ca_pem)
        elif cafile:
            ctx.load_verify_locations(cafile=cafile)
        else:
            ctx.load_default_certs()
        if key_pem and chain_pem:
            # mode 0700
            with tempfile.TemporaryDirectory(prefix="zkconsumer-tls-") as d:
                kpath, cpath = os.path.join(d, "key.pem"), os.path.join(d, "chain.pem")
                fd = os.open(kpath, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(key_pem)
                with open(cpath, "w") as f:
                    f.write(chain_pem)
                ctx.load_cert_chain(cpath, kpath)
        elif certfile:
            ctx.load_cert_chain(certfile, keyfile, password=key_password)
        _CONTEXTS[ident] = ctx
        return ctx
