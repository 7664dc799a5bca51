"""A TCP relay on loopback in front of one ZooKeeper server, for tests that need the network between a client and
its server to misbehave while both stay real: ``hold()`` keeps the server's answers in the relay (requests still
reach the server, so the session lives) until ``release()``; ``blackhole()`` also cuts the connections (a server
that accepts connections and never answers); ``sever_after(marker)`` lets the next multi-op whose
request contains *marker* reach the server, holds its answer and then cuts the connection, so the client sees
ConnectionLoss for a multi-op the server applied (the client reconnects through the relay, same session);
``sever_after(marker, op=None)`` does so for the next request of any kind; ``mute()`` cuts the connections and
leaves the next ones accepted and never answered, their requests never reaching the server (a server that accepted a
connection while it was starting), until ``unmute()`` lets later ones through again."""
import select
import socket
import struct
import threading
import time

_MULTI = 14  # ZooKeeper's OpCode.multi


def zk_target(services):
    """(host, port) of the first ZooKeeper server of *services*."""
    host, _, port = services.zookeeper_connect.split(",")[0].split("/")[0].rpartition(":")
    return host, int(port)


def _has_request_with(data, marker, op):
    """Whether a client->server chunk holds a request of opcode *op* (any when None) containing *marker* (frames:
    length, xid, type)."""
    i = 0
    while i + 12 <= len(data):
        (length,) = struct.unpack(">i", data[i:i + 4])
        frame = data[i + 4:i + 4 + length]
        if len(frame) >= 8 and op in (None, struct.unpack(">i", frame[4:8])[0]) and marker in frame:
            return True
        if length <= 0:
            return False
        i += 4 + length
    return False


class Relay(threading.Thread):
    def __init__(self, target):
        super().__init__(daemon=True)
        self.target = target
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.held = threading.Event()
        self.stopped = False
        self.pairs = []
        self.muted = False
        self.silent = []                   # connections accepted while muted: never read, never answered
        self._cut = threading.Event()      # mute(): the relay's thread cuts the connections it serves
        self._marker = None
        self._op = _MULTI
        self.fired = threading.Event()     # the multi-op with the marker reached the server
        self.severed = threading.Event()   # and the connection was cut afterwards

    @property
    def connect(self):
        return "127.0.0.1:%d" % self.port

    def run(self):
        while not self.stopped:
            if self._cut.is_set():
                for client, server in list(self.pairs):
                    self._drop(client, server)
                self._cut.clear()
            socks = [self.listener] + [s for pair in self.pairs for s in pair]
            try:
                readable, _, _ = select.select(socks, [], [], 0.02)
            except (OSError, ValueError):
                continue
            for s in readable:
                if s is self.listener:
                    try:
                        client, _ = self.listener.accept()
                    except OSError:  # closed (close()), or a connection reset before it was accepted
                        if self.stopped:
                            return
                        continue
                    if self.muted:
                        self.silent.append(client)
                        continue
                    self.pairs.append((client, socket.create_connection(self.target)))
                    continue
                for client, server in list(self.pairs):
                    if s is server and self.held.is_set():
                        continue  # the answer waits in the server's socket
                    if s in (client, server):
                        other = server if s is client else client
                        try:
                            data = s.recv(65536)
                        except OSError:
                            data = b""
                        if not data:
                            self._drop(client, server)
                            continue
                        try:
                            other.sendall(data)
                        except OSError:  # the other end closed meanwhile
                            self._drop(client, server)
                            continue
                        if s is client and self._marker is not None and _has_request_with(data, self._marker, self._op):
                            self._marker = None
                            self.held.set()
                            self.fired.set()

    def _drop(self, client, server):
        try:
            self.pairs.remove((client, server))
        except ValueError:  # dropped meanwhile by the other thread (blackhole(), sever())
            pass
        client.close()
        server.close()

    def hold(self):
        self.held.set()

    def release(self):
        self.held.clear()

    def blackhole(self):
        """Cut every connection and hold the answers on the new ones until :meth:`release`: a ZooKeeper that
        accepts connections and never answers (the client sees its connection drop, and cannot reconnect)."""
        self.held.set()
        for client, server in list(self.pairs):
            self._drop(client, server)

    def mute(self):
        """Cut every connection; the next ones are accepted and left silent (see the module's docstring)."""
        self.muted = True
        self._cut.set()

    def unmute(self):
        """New connections reach the server again; the silent ones stay silent."""
        self.muted = False

    def sever_after(self, marker, op=_MULTI):
        """Arm: the next multi-op request (of opcode *op*; any request when None) containing *marker* is
        forwarded, then every answer is held until :meth:`sever` (call it after ``fired`` is set)."""
        self.fired.clear()
        self.severed.clear()
        self._op = op
        self._marker = marker

    def sever(self, settle=0.3):
        """Cut every connection (the held answers are dropped with them) and let new ones through."""
        time.sleep(settle)  # the server has applied what it read before the connection goes
        for client, server in list(self.pairs):
            self._drop(client, server)
        self.held.clear()
        self.severed.set()

    def close(self):
        self.stopped = True
        self.listener.close()
        for a, b in self.pairs:
            a.close()
            b.close()
        for s in self.silent:
            s.close()
