"""The HTTP endpoint a Prometheus server scrapes: one thread, one connection at a time, ``Connection: close``.

prometheus_client's own ``start_http_server`` runs wsgiref with a thread per request: in a member consuming ~1M
messages/s on 2 cores a scrape cost the member's process ~1.3 ms of CPU, of which rendering the page was ~0.2 ms
and the rest the server (a new thread, header parsing through the email package, a WSGI environ copied from
``os.environ``). This server parses the request line and the two headers the exposition needs (``Accept``: the
text or OpenMetrics format; ``Accept-Encoding``: gzip, which Prometheus asks for) and answers with
prometheus_client's own encoders, so the page is the library's, byte for byte.

Any path serves the metrics except ``/favicon.ico`` (as prometheus_client does); ``GET`` and ``HEAD`` only. A client
that sends no complete request within ``timeout_s`` is dropped: with one thread, a stalled connection delays the
next scrape by at most that long. A failing collector answers 500 with the error, and the server goes on.
"""
from __future__ import annotations

import gzip
import logging
import socket
import threading
import time
from typing import Any, Dict, Optional, Tuple

__all__ = ["MetricsServer"]

log = logging.getLogger(__name__)

_MAX_REQUEST = 16 * 1024  # request line and headers; a scrape sends ~200 bytes


class MetricsServer:
    """Serve *registry* on *addr*:*port* (0: a free port, see :attr:`port`) from a daemon thread until
    :meth:`close`.

    :param registry: a ``prometheus_client.CollectorRegistry``.
    :param timeout_s: how long a connection may take to send its request and take the answer.
    """

    def __init__(self, registry: Any, port: int, addr: str = "127.0.0.1", timeout_s: float = 5.0) -> None:
        from prometheus_client.exposition import choose_encoder
        self.registry = registry
        self.timeout_s = timeout_s
        self._choose_encoder = choose_encoder
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((addr, port))
            self._listener.listen(16)
        except OSError:
            self._listener.close()
            raise
        self.addr, self.port = addr, self._listener.getsockname()[1]
        self._closed = threading.Event()
        self.scrapes = 0
        #: CPU seconds this server's thread spent answering connections (collecting and encoding the metrics
        #: included): what serving scrapes costs the process, read with the process's CPU time to get its share
        self.cpu_seconds = 0.0
        self._thread = threading.Thread(target=self._serve, name="zkconsumer-metrics-%d" % self.port, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port (waits for the connection being answered, if any)."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread's accept()
        except OSError:
            pass
        self._thread.join(self.timeout_s + 5.0)
        self._listener.close()

    def __enter__(self) -> "MetricsServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue  # e.g. ECONNABORTED: the client gave up before we took it
            began = time.thread_time()
            with conn:
                conn.settimeout(self.timeout_s)
                try:
                    self._answer(conn)
                except (OSError, ValueError) as e:  # a client that left, or sent nonsense or nothing in time
                    log.debug("metrics endpoint: dropped a connection: %r", e)
            self.cpu_seconds += time.thread_time() - began

    def _answer(self, conn: socket.socket) -> None:
        request = _read_request(conn)
        if request is None:
            return
        method, path, headers = request
        if method not in ("GET", "HEAD"):
            conn.sendall(_response(405, b"only GET and HEAD\n", {"Allow": "GET, HEAD"}))
            return
        if path.split("?", 1)[0] == "/favicon.ico":
            conn.sendall(_response(200, b"", {"Content-Type": "text/plain"}))
            return
        encoder, content_type = self._choose_encoder(headers.get("accept", ""))
        try:
            body = encoder(self.registry)
        except Exception as e:  # noqa: BLE001  (a collector failed: say so, keep serving)
            log.warning("metrics endpoint: collecting failed: %r", e)
            conn.sendall(_response(500, ("collecting the metrics failed: %r\n" % (e,)).encode(),
                                   {"Content-Type": "text/plain; charset=utf-8"}))
            return
        extra = {"Content-Type": content_type}
        if "gzip" in headers.get("accept-encoding", ""):
            body = gzip.compress(body, compresslevel=6)
            extra["Content-Encoding"] = "gzip"
        self.scrapes += 1
        conn.sendall(_response(200, body, extra, head_only=method == "HEAD"))


def _read_request(conn: socket.socket) -> Optional[Tuple[str, str, Dict[str, str]]]:
    """``(method, path, {lower-case header name: value})``, or None when the client closed without a request."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            if not data:
                return None
            raise ValueError("the request ended before its headers did")
        data += chunk
        if len(data) > _MAX_REQUEST:
            raise ValueError("request headers longer than %d bytes" % _MAX_REQUEST)
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    parts = head[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError("not an HTTP request line: %r" % head[0][:100])
    headers = {}
    for line in head[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


_REASONS = {200: "OK", 405: "Method Not Allowed", 500: "Internal Server Error"}


def _response(status: int, body: bytes, headers: Dict[str, str], head_only: bool = False) -> bytes:
    lines = ["HTTP/1.1 %d %s" % (status, _REASONS[status]), "Content-Length: %d" % len(body), "Connection: close"]
    lines += ["%s: %s" % kv for kv in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)
