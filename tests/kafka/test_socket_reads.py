"""zkconsumer.kafka.socket_reads: a fetcher's kafka-python client reads its sockets in pieces of up to 256 KiB
(instead of 4 KiB) and gets the same bytes, the same end-of-connection error, and the same records from a real
broker; other clients are left alone."""
import select
import socket
import threading

import pytest
from kafka.errors import KafkaConnectionError

from zkconsumer.kafka import internals
from zkconsumer.kafka import socket_reads


def _pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    return a, b


def test_reads_return_every_byte_in_order_across_many_reads():
    ours, theirs = _pair()
    data = bytes(range(256)) * (3 * socket_reads.READ_SIZE // 256 + 17)  # > 3 reads' worth
    sender = threading.Thread(target=theirs.sendall, args=(data,), daemon=True)
    sender.start()
    transport = "transport"
    got = b""
    try:
        while len(got) < len(data):
            select.select([ours], [], [], 5.0)
            chunk, err = socket_reads._sock_recv(transport, ours)
            assert err is None
            got += chunk
        assert got == data
    finally:
        sender.join(5)
        ours.close()
        theirs.close()


def test_a_closed_peer_is_a_connection_error_as_in_kafka_python():
    ours, theirs = _pair()
    theirs.sendall(b"last words")
    theirs.close()
    try:
        data, err = socket_reads._sock_recv("transport", ours)
        if err is None:  # the short read came first: the next read finds the end
            assert data == b"last words"
            data, err = socket_reads._sock_recv("transport", ours)
        assert isinstance(err, KafkaConnectionError) and "disconnected" in str(err)
    finally:
        ours.close()


def test_a_buffer_that_copies_once_reads_what_kafka_pythons_reads():
    from kafka.protocol.frame import KafkaBytes
    cls = internals._slice_once_class()
    assert cls is not None and issubclass(cls, KafkaBytes)
    data = bytes(range(200))
    for at in (0, 1, 57, 199, 200, 250):
        for n in (None, 0, 1, 3, 143, 199, 200, 400, -1, -5):
            ours, stock = cls(len(data)), KafkaBytes(len(data))
            for buf in (ours, stock):
                buf.write(data)
                buf.seek(at)
            assert (ours.read(n), ours.tell()) == (stock.read(n), stock.tell()), (at, n)
            assert (ours.read(7), ours.tell()) == (stock.read(7), stock.tell()), (at, n)


def test_a_fetcher_client_reads_large_responses_whole_and_other_clients_keep_stock_reads(services, unique,
                                                                                       monkeypatch):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    topic = services.create_topic(unique("socket-reads"), 2)
    n = 6000  # ~1.2 MiB of values: responses span many 256 KiB reads
    producer = KafkaProducer(bootstrap_servers=services.bootstrap_servers, linger_ms=20, acks=1,
                             enable_idempotence=False, batch_size=65536)
    try:
        for i in range(n):
            producer.send(topic, value=b"%06d" % i * 33, partition=i % 2)
        producer.flush(30)
    finally:
        producer.close()

    real, buffers = internals.read_response_slices_once, []

    def seeing(transport):
        real(transport)
        buffers.append(type(transport._protocol.parser._rbuffer).__name__)
    monkeypatch.setattr(internals, "read_response_slices_once", seeing)

    def read(install):
        c = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, group_id=None, enable_auto_commit=False,
                          max_partition_fetch_bytes=4 * 1024 * 1024)
        try:
            if install:
                assert socket_reads.install(c)
            tps = [KTP(topic, p) for p in range(2)]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            out = []
            for _ in range(200):
                for recs in c.poll(timeout_ms=500).values():
                    out.extend((r.partition, r.offset, r.value) for r in recs)
                if len(out) >= n:
                    break
            patched = []
            internals.plain_connections(c, lambda transport, sock: patched.append(
                internals.socket_reader_replaced(transport)))
            return sorted(out), patched
        finally:
            c.close()

    plain, untouched = read(False)
    ours, patched = read(True)
    assert len(plain) == n and ours == plain
    assert patched and all(patched) and not any(untouched)
    # responses spanning several reads were decoded from buffers that copy once
    assert "SliceOnce" in buffers, buffers


def test_a_reset_peer_is_one_error_line_without_a_traceback(caplog):
    import logging
    import struct
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    ours = socket.create_connection(server.getsockname())
    theirs, _ = server.accept()
    # a broker killed with unread data: its end resets the connection
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    ours.sendall(b"unread")
    theirs.close()
    ours.setblocking(False)
    try:
        select.select([ours], [], [], 5.0)
        with caplog.at_level(logging.ERROR, logger=socket_reads.__name__):
            data, err = socket_reads._sock_recv("transport", ours)
        assert isinstance(err, KafkaConnectionError) and "reset" in str(err).lower(), err
        assert [r.exc_info for r in caplog.records] == [None] and "ConnectionResetError" in caplog.text
    finally:
        ours.close()
        server.close()


@pytest.mark.parametrize("when", ["closed", "shut down"])
def test_a_read_after_the_client_closed_its_connection_logs_no_error(services, caplog, when):
    """kafka-python closes a client's connections in the thread that calls ``close()`` while its IO thread may be
    about to read one: that read finds the socket closed (EBADF), or, between the close's ``shutdown`` and its
    ``close`` of the socket, at its end (no bytes). It ends the read like any failed read, without an ERROR line or
    a traceback in an application's log (a member stopped by SIGTERM printed one)."""
    import logging
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=services.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        c.topics()  # connected
        conns = []
        internals.plain_connections(c, lambda transport, sock: conns.append((transport, sock)))
        assert conns
        transport, sock = conns[0]
        transport.close()
        ended, peer = _pair()
        peer.close()  # what a read between the close's shutdown and its close of the socket finds: no bytes
        with caplog.at_level(logging.DEBUG, logger=socket_reads.__name__):
            data, err = socket_reads._sock_recv(transport, sock if when == "closed" else ended)
        ended.close()
        assert data == b"" and isinstance(err, KafkaConnectionError), (data, err)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert "closed" in caplog.text
    finally:
        c.close()


def test_a_failed_read_on_an_open_connection_is_still_an_error_with_its_traceback(caplog):
    """Only a read on a transport kafka-python already closed is quiet: a socket that fails under an open one (here
    closed behind its back: EBADF) is an ERROR with the traceback, as in kafka-python."""
    import logging

    class Open:
        def is_closing(self):
            return False

    ours, theirs = _pair()
    ours.close()
    try:
        with caplog.at_level(logging.ERROR, logger=socket_reads.__name__):
            data, err = socket_reads._sock_recv(Open(), ours)
        assert data == b"" and isinstance(err, KafkaConnectionError), (data, err)
        assert [r.levelno for r in caplog.records] == [logging.ERROR] and caplog.records[0].exc_info, caplog.text
    finally:
        theirs.close()
