"""The metrics endpoint's HTTP server (zkconsumer/metrics_server.py: prometheus_client's WSGI application on its
threading server) on loopback: the page in both formats and gzipped; the favicon; a failing collector and a
stalled or garbled client leave the server serving; close() frees the port; HTTPS with client certificates."""
import gzip
import re
import socket
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from zkconsumer.metrics_server import MetricsServer


class _Collector:
    def __init__(self):
        self.fail = False

    def collect(self):
        if self.fail:
            raise RuntimeError("collector broke")
        g = GaugeMetricFamily("zkconsumer_max_lag", "lag", labels=["group"])
        g.add_metric(["g1"], 42.0)
        yield g
        c = CounterMetricFamily("zkconsumer_messages", "messages", labels=["group"])
        c.add_metric(["g1"], 7.0)
        yield c


@pytest.fixture
def served():
    registry, collector = CollectorRegistry(auto_describe=False), _Collector()
    registry.register(collector)
    server = MetricsServer(registry, 0, addr="127.0.0.1", timeout_s=0.5)
    yield server, registry, collector
    server.close()


def _get(server, path="/metrics", headers=None, method="GET"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (server.port, path), headers=headers or {}, method=method)
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status, dict(r.headers), r.read()


def test_the_page_is_prometheus_clients_own(served):
    server, registry, _ = served
    status, headers, body = _get(server)
    assert status == 200
    assert body == generate_latest(registry)
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert int(headers["Content-Length"]) == len(body)
    assert b'zkconsumer_max_lag{group="g1"} 42.0' in body
    assert server.scrapes == 1
    assert _get(server, "/anything?x=1")[2] == body  # any path but the favicon serves the metrics, as upstream


def test_cpu_seconds_counts_the_thread_time_spent_answering(served):
    """The server's own CPU (what serving costs the member, the bench's metrics row divides it by the process's
    CPU): a collector that burns ~30 ms of CPU per scrape shows up in it; waiting for connections does not."""
    server, registry, collector = served
    assert server.cpu_seconds == 0.0
    time.sleep(0.3)  # idle: blocked in accept()
    assert server.cpu_seconds == 0.0
    burn = []

    class Burner:
        def collect(self):
            t = time.thread_time()
            while time.thread_time() - t < 0.03:
                pass
            burn.append(1)
            return []
    registry.register(Burner())
    t0 = time.perf_counter()
    for _ in range(3):
        assert _get(server)[0] == 200
    deadline = time.monotonic() + 5  # a request thread adds its CPU after the client has the answer
    while server.cpu_seconds < 0.09 and time.monotonic() < deadline:
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    assert len(burn) == 3
    assert 0.09 <= server.cpu_seconds <= wall, (server.cpu_seconds, wall)


def test_openmetrics_when_asked_and_gzip_when_accepted(served):
    server, registry, _ = served
    _, headers, body = _get(server, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body == generate_openmetrics(registry) and body.endswith(b"# EOF\n")
    _, headers, body = _get(server, headers={"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == generate_latest(registry)


def test_favicon(served):
    server, registry, _ = served
    assert _get(server, "/favicon.ico")[2] == b""


def test_a_failing_collector_answers_500_and_the_server_goes_on(served):
    server, registry, collector = served
    collector.fail = True
    with pytest.raises(urllib.error.HTTPError) as e:
        _get(server)
    assert e.value.code == 500 and b"collector broke" in e.value.read()
    collector.fail = False
    assert _get(server)[0] == 200


def _closed_without_answer(sock):
    """Closed, or answered with an error status: never the page."""
    got = b""
    try:
        while len(got) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:  # closed with our unread bytes in its buffer: a reset, also no answer
        return True
    return got == b"" or re.search(rb"^HTTP/1\.[01] 4\d\d|Error code: 4\d\d", got) is not None


def test_stalled_and_garbled_clients_are_dropped(served):
    server, registry, _ = served
    stalled = socket.create_connection(("127.0.0.1", server.port))  # sends nothing: dropped after timeout_s
    garbled = socket.create_connection(("127.0.0.1", server.port))
    garbled.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
    t0 = time.monotonic()
    assert _get(server)[2] == generate_latest(registry)
    assert time.monotonic() - t0 < 4.0  # a thread per connection: the stalled one does not hold the scrape
    assert _closed_without_answer(garbled)
    stalled.close()
    garbled.close()
    oversized = socket.create_connection(("127.0.0.1", server.port))
    oversized.sendall(b"GET / HTTP/1.1\r\n" + b"X: " + b"y" * 70000 + b"\r\n\r\n")
    assert _closed_without_answer(oversized)
    oversized.close()
    assert _get(server)[0] == 200


def test_close_stops_the_thread_and_frees_the_port():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    with MetricsServer(registry, 0, addr="127.0.0.1") as server:
        port = server.port
        assert _get(server)[0] == 200
    assert not server._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    again = MetricsServer(registry, port, addr="127.0.0.1")  # the same port binds again at once
    try:
        assert _get(again)[0] == 200
    finally:
        again.close()
    again.close()  # twice is harmless


def test_a_port_in_use_fails_at_once():
    registry = CollectorRegistry(auto_describe=False)
    with MetricsServer(registry, 0, addr="127.0.0.1") as server:
        with pytest.raises(OSError):
            MetricsServer(registry, server.port, addr="127.0.0.1")


def test_https_with_client_certificates(tmp_path):
    """certfile/keyfile serve HTTPS; with client_cafile only a client whose certificate that CA signed gets the
    page (openssl makes the CA and the certificates)."""
    import shutil
    import ssl
    import subprocess
    from zkconsumer.metrics_server import tls_context
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed (apt-get install openssl)")

    def sh(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=tmp_path)
    sh("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
       "-subj", "/CN=test-ca")
    for name in ("server", "client"):
        sh("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr", "-subj",
           "/CN=localhost")
        sh("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
           name + ".pem", "-days", "2")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    tls = tls_context(str(tmp_path / "server.pem"), str(tmp_path / "server.key"), str(tmp_path / "ca.pem"))
    with MetricsServer(registry, 0, addr="127.0.0.1", tls=tls) as server:
        assert server.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        ctx.check_hostname = False
        with pytest.raises((ssl.SSLError, ConnectionResetError, urllib.error.URLError)):
            urllib.request.urlopen(server.url, context=ctx, timeout=5).read()  # no client certificate
        ctx.load_cert_chain(str(tmp_path / "client.pem"), str(tmp_path / "client.key"))
        assert urllib.request.urlopen(server.url, context=ctx, timeout=5).read() == generate_latest(registry)
        # a connection that never sends its TLS hello (a TCP health check, a port scan) holds no scrape: the
        # handshake is made in the connection's own thread, not where the server accepts connections
        stalled = socket.create_connection(("127.0.0.1", server.port))
        try:
            time.sleep(0.5)
            assert urllib.request.urlopen(server.url, context=ctx, timeout=30).read() == generate_latest(registry)
        finally:
            stalled.close()
