"""Test PKI made with ``openssl``: a CA, a broker certificate for 127.0.0.1/localhost (SAN) as PKCS#12 for the
broker's keystore, PEM files for kafka-python, and a second, unrelated CA (the "wrong CA")."""
import os
import subprocess
from dataclasses import dataclass

KEYSTORE_PASSWORD = "broker-keystore-pw"
CLIENT_KEY_PASSWORD = "client-key-pw"


@dataclass(frozen=True)
class TestPki:
    ca: str            # PEM: the CA that signed the broker's certificate
    wrong_ca: str      # PEM: a CA that signed nothing here
    keystore: str      # PKCS#12: the broker's key + certificate chain
    keystore_password: str
    truststore: str    # PKCS#12 (keytool): the CA, for the broker to check client certificates
    client_cert: str   # PEM: a client certificate signed by the CA
    client_key: str    # PEM: its private key, encrypted with CLIENT_KEY_PASSWORD


def _openssl(*args, cwd):
    out = subprocess.run(("openssl",) + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert out.returncode == 0, "openssl %s failed: %s" % (" ".join(args), out.stdout.decode(errors="replace"))


def _ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", name + ".key", "-out", name + ".pem", "-days", "3", "-subj", "/CN=zkconsumer test " + name,
             cwd=d)
    return os.path.join(d, name + ".pem")


def make_pki(directory) -> TestPki:
    d = os.path.join(str(directory), "pki")
    os.makedirs(d, exist_ok=True)
    ca, wrong = _ca(d, "ca"), _ca(d, "wrong-ca")
    with open(os.path.join(d, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "broker.key",
             "-out", "broker.csr", "-subj", "/CN=localhost", cwd=d)
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "broker.pem", "-days", "3", "-extfile", "san.cnf", cwd=d)
    _openssl("pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-certfile", "ca.pem",
             "-name", "broker", "-out", "broker.p12", "-passout", "pass:" + KEYSTORE_PASSWORD, cwd=d)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-keyout", "client.key",
             "-passout", "pass:" + CLIENT_KEY_PASSWORD, "-out", "client.csr", "-subj", "/CN=zkconsumer-client", cwd=d)
    _openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "client.pem", "-days", "3", cwd=d)
    out = subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore",
                          "trust.p12", "-storetype", "PKCS12", "-storepass", KEYSTORE_PASSWORD], cwd=d,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert out.returncode == 0, "keytool failed: %s" % out.stdout.decode(errors="replace")
    return TestPki(ca=ca, wrong_ca=wrong, keystore=os.path.join(d, "broker.p12"),
                   keystore_password=KEYSTORE_PASSWORD, truststore=os.path.join(d, "trust.p12"),
                   client_cert=os.path.join(d, "client.pem"), client_key=os.path.join(d, "client.key"))


@dataclass(frozen=True)
class JavaStores:
    """The client's PKI as a Spark (Java client) user keeps it: a JKS truststore with the CA, and the client's key
    and certificate as a PKCS12 keystore and as a JKS keystore whose key has a password of its own."""
    truststore_jks: str
    keystore_p12: str
    keystore_jks: str
    store_password: str
    key_password: str       # the JKS keystore's key password (the PKCS12 one uses store_password)


def make_java_stores(pki: TestPki, directory) -> JavaStores:
    d = os.path.join(str(directory), "java-stores")
    os.makedirs(d, exist_ok=True)
    store_pw, key_pw = "client-store-pw", "client-key-pw-2"

    def keytool(*args):
        out = subprocess.run(("keytool",) + args, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert out.returncode == 0, "keytool %s failed: %s" % (" ".join(args), out.stdout.decode(errors="replace"))
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", pki.ca, "-keystore", "trust.jks", "-storetype", "JKS",
            "-storepass", store_pw)
    _openssl("pkcs12", "-export", "-in", pki.client_cert, "-inkey", pki.client_key, "-passin",
             "pass:" + CLIENT_KEY_PASSWORD, "-certfile", pki.ca, "-name", "client", "-out", "client.p12",
             "-passout", "pass:" + store_pw, cwd=d)
    keytool("-importkeystore", "-noprompt", "-srckeystore", "client.p12", "-srcstoretype", "PKCS12", "-srcstorepass",
            store_pw, "-destkeystore", "client.jks", "-deststoretype", "JKS", "-deststorepass", store_pw,
            "-destkeypass", key_pw)
    return JavaStores(truststore_jks=os.path.join(d, "trust.jks"), keystore_p12=os.path.join(d, "client.p12"),
                      keystore_jks=os.path.join(d, "client.jks"), store_password=store_pw, key_password=key_pw)
