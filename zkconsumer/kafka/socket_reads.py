"""Larger socket reads for a fetcher's own kafka-python client.

kafka-python's IO thread reads a plain TCP connection 4 KiB at a time (``KafkaTCPTransport._sock_recv``: one
``recv(4096)`` call, one bytes object, until the socket would block), so a 1 MiB fetch response costs ~256 system
calls and as many trips through the interpreter: about half of that thread's CPU on the fetch path. :func:`install`
gives the connections of one ``KafkaConsumer`` — a fetcher's, never the application's or another client's — reads of
up to :data:`READ_SIZE` bytes: the same bytes, in the same order, handed to the same protocol code, with the same
errors (a closed socket, a failed read); only their number changes. Before each read, a response under way (its
first bytes came with an earlier read) gets a buffer whose reads copy once where kafka-python's copy twice (a
bytearray slice, then bytes of it; kafka-python 3.0 reads a response's whole body so): what the response is
decoded from is the same. TLS connections
(``KafkaSSLTransport``) keep the stock reads. Where this kafka-python does not have the internals it relies on,
nothing is changed.
"""
import functools
import logging

log = logging.getLogger(__name__)

__all__ = ["READ_SIZE", "install"]

#: the most one read takes (a loopback socket holds a few hundred KiB when the reader is behind)
READ_SIZE = 256 * 1024


def install(consumer):
    """Give *consumer*'s plain TCP connections, present and future, reads of up to READ_SIZE bytes; True when
    installed, False (consumer untouched) where this kafka-python does not look like the one it was written for."""
    from .internals import plain_connections, set_socket_reader
    return plain_connections(consumer, lambda transport, sock: set_socket_reader(
        transport, functools.partial(_sock_recv, transport, sock)))


def _sock_recv(transport, sock):
    """``KafkaTCPTransport._sock_recv`` with reads of up to READ_SIZE bytes: (the bytes read, an error or None)."""
    from kafka.errors import KafkaConnectionError
    from .internals import read_response_slices_once
    read_response_slices_once(transport)
    recvd = []
    err = None
    while True:
        try:
            data = sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            break
        except ConnectionError as e:
            # a broker that went away (reset, refused, broken pipe) is an expected event: one line, no traceback
            log.error("%s: Error receiving network data closing socket: %r", transport, e)
            err = KafkaConnectionError(e)
            break
        except BaseException as e:
            if isinstance(e, OSError) and _closed(transport):
                # closed by the client (its close() runs in the caller's thread) while this read was due: no error
                log.debug("%s: read after the transport was closed: %r", transport, e)
            else:
                log.exception("%s: Error receiving network data closing socket", transport)
            err = KafkaConnectionError(e)
            break
        if not data:  # the peer closed the connection, or the client did (between its shutdown and close)
            if not _closed(transport):
                log.error("%s: socket disconnected", transport)
            else:
                log.debug("%s: read after the transport was closed: socket disconnected", transport)
            err = KafkaConnectionError("socket disconnected")
            break
        recvd.append(data)
        if len(data) < READ_SIZE:  # the socket is drained for now: the event loop reads again when more arrives
            break
    return b"".join(recvd) if len(recvd) != 1 else recvd[0], err


def _closed(transport):
    """Whether kafka-python closed *transport* (``is_closing()``); False for anything without that method."""
    is_closing = getattr(transport, "is_closing", None)
    try:
        return bool(is_closing()) if callable(is_closing) else False
    except Exception:
        return False
