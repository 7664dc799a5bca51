"""The one place zkconsumer uses kafka-python's and kazoo's non-public (underscore) APIs.

kafka-python (3.0; checked against its 3.1 development line too) has no public call that sends a request zkconsumer
built itself to a node of its choosing, and its public group calls do not do what the Scala consumer's offset
channel does (``list_group_offsets`` raises on the first partition error, no public call re-finds the coordinator
after NOT_COORDINATOR, and none commits as a simple consumer with per-partition errors). So, through a
``KafkaAdminClient`` used as a connection manager with its own IO thread:

* :func:`run` a coroutine on the client's IO thread and wait (``admin._net.run``; kafka-python 3.0 also had it as
  ``admin._manager.run``, which its 3.1 line removes) and :func:`submit` one without waiting (``_manager.call_soon``,
  only while ``_net._io_thread`` runs);
* :func:`send` a request to a node (``admin._manager.send``): FindCoordinator, OffsetCommit v2-v5
  (:mod:`zkconsumer.kafka.protocol.offset_commit`), OffsetFetch, DescribeGroups, ConsumerGroupDescribe;
* :func:`add_group_coordinator`: a connection of its own to the group's coordinator
  (``_manager.cluster.add_coordinator(..., synthesize_node_id=True)``), :func:`close_connection` drops it
  (``_manager.close(node)``);
* :class:`AdminClient`: a ``KafkaAdminClient`` whose failed ``__init__`` does not leak its IO thread (it closes
  ``_client``, ``_net`` and ``_metrics``, which kafka-python leaves running) and which closes quietly;
* :func:`close_quietly`: a client closed with what its IO thread (``_net._io_thread``, a producer's ``_sender``)
  logs meanwhile known as the close's doing (:func:`logged_while_closing`): a request in flight when its client
  closes fails, and kafka-python logs that as an error ("Metadata refresh: failed Cancelled");
* :func:`install_poll_wake`: a fetcher's ``poll`` ended at once when its assignment changes (its consumer's
  ``_net.run`` around ``_manager.wait_for``, ``_fetcher.fetch_records`` and ``_poll_once``, wrapped on the
  instance, and ``_net.call_soon_threadsafe``);
* :func:`observe_fetch_responses`: each Fetch response a fetcher's client receives, from which broker and how long
  after its request (its fetcher's ``_handle_fetch_response``, wrapped on the instance: the fetch metrics count
  requests per broker, as Scala's fetcher threads did), and :func:`fetch_leaders`: the brokers it fetches partitions
  from (``_manager.cluster.leader_for_partition``); :func:`caught_up_plan`: what a fetcher's idle watch
  (:mod:`zkconsumer.kafka.idle_watch`) asks, from the client's partition states (``_subscription.assignment``: a
  position, the last answer's high watermark), its metadata (``cluster.leader_for_partition``), its connections
  (``_manager._conns``, a plain transport's ``_sock``) and the Fetch versions its brokers answer
  (``_manager.broker_version_data``);
* :func:`wrap_header`: a request's ``_header``, so an OffsetCommit v2-v5 answer is read by zkconsumer's reader.

The record decoder (:mod:`zkconsumer.kafka.fast_records`) subclasses ``Fetcher.PartitionRecords`` and reads
``MemoryRecords._buffer`` and ``DefaultRecordBatch._buffer``/``_pos``; it reaches them through
:func:`partition_records_class`, :func:`consumer_fetcher`, :func:`records_buffer` and :func:`batch_data`, and falls back
to kafka-python's own decoder when they are missing. A fetcher's client reads its sockets in larger pieces
(:mod:`zkconsumer.kafka.socket_reads`) through :func:`plain_connections` (``_manager._build_transport`` and ``_conns``,
a transport's ``_sock``) and :func:`set_socket_reader` (``KafkaTCPTransport._sock_recv``), and keeps kafka-python's
reads when they are missing; :func:`read_response_slices_once` gives the response it is receiving
(``transport._protocol.parser._rbuffer``, a ``KafkaBytes``) a subclass whose ``read`` copies once. kazoo (2.9-2.11)
sends a request object only through ``KazooClient._call`` (what its ``TransactionRequest.commit_async`` does):
:func:`kazoo_call` sends the one-pass multi-op of :mod:`zkconsumer.zookeeper.multi`, and :func:`kazoo_observe_requests`
lets the bench and the tests count the requests a client sends. :func:`kazoo_transaction_requests` is a transaction's
request list (the ZooKeeper offset store appends requests it built itself), :func:`kazoo_bound_handshake` bounds a
connection attempt's wait for the handshake's answer (``KazooClient._connection``'s class and its ``_invoke``) and keeps
the session timeout that answer granted, and :func:`kazoo_session_timeout_ms` is that timeout (the session lease's
length). :func:`kazoo_watch_callbacks_run` waits for kazoo's watch thread (its handler's ``dispatch_callback`` and
worker threads) to run what was queued (the group reader, before it takes cached entries).

kazoo's ``ConnectionHandler`` and ``Connect`` are imported with this module (a kazoo without them fails the import);
otherwise a kafka-python or kazoo without what these functions need raises :class:`IncompatibleClientError` naming the
library, its version and the missing attribute; ``tests/kafka/test_client_internals.py`` runs every function here
against a real broker and ZooKeeper, so an upgrade that changes any of it fails that test by name.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional, Tuple

from kafka.admin import KafkaAdminClient
from kazoo.protocol.connection import ConnectionHandler
from kazoo.protocol.serialization import Connect

from ..errors import ZkConsumerError

__all__ = ["IncompatibleClientError", "AdminClient", "close_quietly", "logged_while_closing", "run", "submit", "send",
           "add_group_coordinator", "close_connection", "PollWoken", "install_poll_wake", "observe_fetch_responses", "fetch_leaders",
           "caught_up_plan", "wrap_header", "partition_records_class",
           "consumer_fetcher", "records_buffer",
           "batch_data", "plain_connections", "set_socket_reader", "socket_reader_replaced", "kazoo_supports_call",
           "kazoo_call", "kazoo_observe_requests", "kazoo_transaction_requests", "kazoo_session_timeout_ms",
           "kazoo_watch_callbacks_run", "read_response_slices_once",
           "kazoo_bound_handshake"]


class IncompatibleClientError(ZkConsumerError):
    """The installed kafka-python or kazoo lacks an internal zkconsumer relies on (names which, and the version)."""


def _library_version(name: str) -> str:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "?"


def _attr(obj: Any, name: str, what: str, library: str = "kafka-python") -> Any:
    value = getattr(obj, name, None)
    if value is None:
        raise IncompatibleClientError(
            "%s %s has no %s (%s), which zkconsumer uses: install a version setup.cfg allows"
            % (library, _library_version(library), what, type(obj).__name__ + "." + name))
    return value


def _manager(admin: Any) -> Any:
    return _attr(admin, "_manager", "connection manager on its KafkaAdminClient")


def _net(admin: Any) -> Any:
    return _attr(admin, "_net", "network loop on its KafkaAdminClient")


class AdminClient(KafkaAdminClient):
    """``KafkaAdminClient`` that does not leak its IO thread when bootstrapping fails in ``__init__``."""

    def __init__(self, **configs: Any) -> None:
        try:
            super().__init__(**configs)
        except BaseException:
            for name, method in (("_client", "close"), ("_net", "stop"), ("_metrics", "close")):
                part = getattr(self, name, None)
                try:
                    if part is not None:
                        getattr(part, method)()
                except Exception:
                    pass
            raise

    def close(self) -> None:
        _quietly(self, super().close)


_closing_lock = threading.Lock()
# the threads logging for clients being closed (each with how many closes of its clients are under way)
_closing: dict = {}


class _NotWhileClosing(logging.Filter):
    """On kafka-python's loggers: what a client's threads log while :func:`close_quietly` closes it, only where that
    logger is at debug level (the CLIs' ``--log-level debug``, an application's own choice)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG) or not logged_while_closing(record)


_NOT_WHILE_CLOSING = _NotWhileClosing()


def _on_kafka_loggers() -> None:
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if (name == "kafka" or name.startswith("kafka.")) and isinstance(logger, logging.Logger) \
                and _NOT_WHILE_CLOSING not in logger.filters:
            logger.addFilter(_NOT_WHILE_CLOSING)


def _quietly(client: Any, close: Callable[[], Any]) -> Any:
    try:
        _on_kafka_loggers()
    except Exception:  # noqa: BLE001 — the close happens whatever becomes of its log lines
        pass
    # the calling thread too: kafka-python closes the connections on it ("Abort", "Connection lost")
    threads = [threading.current_thread()]
    for thread in (getattr(getattr(client, "_net", None), "_io_thread", None), getattr(client, "_sender", None)):
        if isinstance(thread, threading.Thread) and thread.is_alive():
            threads.append(thread)
    with _closing_lock:
        for thread in threads:
            _closing[thread] = _closing.get(thread, 0) + 1
    try:
        return close()
    finally:
        with _closing_lock:
            for thread in threads:
                _closing[thread] -= 1
                if not _closing[thread]:
                    del _closing[thread]


def close_quietly(client: Any, *args: Any, **kwargs: Any) -> None:
    """``client.close(*args, **kwargs)`` for a kafka-python client (consumer, producer, admin), with what its IO
    thread and the calling thread log until it returns left out unless kafka-python's logger is at debug level (a
    filter on kafka-python's loggers, :func:`logged_while_closing`, in the CLIs, in Spark's executors and in
    applications alike): requests in flight fail when their client closes, and kafka-python logs each as an error
    ("Metadata refresh: failed Cancelled", "Connection lost: KafkaConnectionError"), though nothing went wrong."""
    _quietly(client, lambda: client.close(*args, **kwargs))


def logged_while_closing(record: Any) -> bool:
    """Whether *record* (a ``logging.LogRecord``, asked on the thread that logged it, as logging's filters are) is
    kafka-python's, logged by a client's IO thread (or the thread closing it) while :func:`close_quietly` closes that
    client. Threads are matched as objects, not by ident: a thread started meanwhile may get the ident of one that
    ended."""
    if record.name.split(".")[0] != "kafka":
        return False
    with _closing_lock:
        return threading.current_thread() in _closing


def run(admin: Any, coro: Callable[..., Any], *args: Any) -> Any:
    """Run ``coro(*args)`` on *admin*'s IO thread and return its result (or raise its error)."""
    return _attr(_net(admin), "run", "blocking run of a coroutine on its network loop")(coro, *args)


def submit(admin: Any, coro: Callable[..., Any], *args: Any) -> Optional[Any]:
    """Start ``coro(*args)`` on *admin*'s IO thread without waiting: a kafka-python future (``add_both``,
    ``exception``, ``value``), or None when no IO thread runs (the caller then runs it with :func:`run`)."""
    thread = getattr(_net(admin), "_io_thread", None)
    if thread is None or not thread.is_alive():
        return None
    return _attr(_manager(admin), "call_soon", "call_soon on its connection manager")(coro, *args)


def send(admin: Any, request: Any, node_id: Any = None, request_timeout_ms: Optional[int] = None) -> Any:
    """Send *request* to *node_id* (any broker when None): an awaitable of the answer, for a coroutine given to
    :func:`run` or :func:`submit`; it fails after *request_timeout_ms* (default: the client's
    ``request_timeout_ms``)."""
    send_ = _attr(_manager(admin), "send", "send on its connection manager")
    if request_timeout_ms is None:
        return send_(request, node_id=node_id)
    return send_(request, node_id=node_id, request_timeout_ms=request_timeout_ms)


def add_group_coordinator(admin: Any, response: Any, group: str) -> Any:
    """The node id of a connection of its own to *group*'s coordinator named in a FindCoordinator (v0-v3)
    *response*; raises the broker's error class when the response carries one."""
    from kafka.protocol.metadata import CoordinatorType
    cluster = _attr(_manager(admin), "cluster", "cluster metadata on its connection manager")
    add = _attr(cluster, "add_coordinator", "add_coordinator on its cluster metadata")
    return add(response, CoordinatorType.GROUP, group, synthesize_node_id=True)


def close_connection(admin: Any, node_id: Any) -> None:
    """Close *admin*'s connection to *node_id* (the next :func:`send` to it opens a new one)."""
    _attr(_manager(admin), "close", "close on its connection manager")(node_id)


def _parameters(fn: Any) -> list:
    """The names of *fn*'s parameters; [] for anything whose signature cannot be read."""
    import inspect
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _takes(fn: Callable[..., Any], name: str) -> bool:
    return name in _parameters(fn)


class PollWoken(Exception):
    """A poll of a fetcher's KafkaConsumer ended early by its wake (:func:`install_poll_wake`), with no records."""


def install_poll_wake(consumer: Any) -> Optional[Callable[[], None]]:
    """Make *consumer*'s (a KafkaConsumer's) ``poll`` wakeable from another thread; returns ``wake()``, or None when
    this kafka-python is not built as this expects (the caller then keeps its polls short).

    kafka-python 3.0's ``poll(timeout_ms)`` goes round ``_poll_once`` until records come or the time is up; each round
    sends the fetches due and waits on the IO thread (``_net.run(_manager.wait_for, wakeup, timeout)`` in
    ``Fetcher.fetch_records``) for one to complete. ``wake()`` completes that wait's future on the IO thread
    (``_net.call_soon_threadsafe``), or has the next one not wait; the round then ends, and when it drained no
    records the poll raises :class:`PollWoken` (a round that drained records returns them: a wake never drops what
    kafka-python has handed over and moved its positions past). A round with nothing to fetch or wait for (positions
    being looked up) sleeps ``retry_backoff_ms`` in kafka-python, deaf to a wake: here it sleeps where the wake is
    heard. Through the consumer's ``_net.run``, ``_fetcher.fetch_records`` and ``_poll_once``, wrapped on the
    instance, and ``_net.call_soon_threadsafe``."""
    net: Any = getattr(consumer, "_net", None)
    manager: Any = getattr(consumer, "_manager", None)
    fetcher: Any = getattr(consumer, "_fetcher", None)
    run: Any = getattr(net, "run", None)
    poll_once: Any = getattr(consumer, "_poll_once", None)
    fetch_records: Any = getattr(fetcher, "fetch_records", None)
    wait_for: Any = getattr(manager, "wait_for", None)
    call_soon: Any = getattr(net, "call_soon_threadsafe", None)
    backoff_ms: Any = (getattr(consumer, "config", None) or {}).get("retry_backoff_ms")
    if not all(callable(f) for f in (run, poll_once, fetch_records, wait_for, call_soon)) or \
            not isinstance(backoff_ms, (int, float)) or not _takes(fetch_records, "timeout_ms"):
        return None
    lock = threading.Lock()
    woken = threading.Event()
    # polling: the ident of the thread inside poll's round (only that round's waits are ended; a position() or an
    # offsets lookup waits as usual)
    state: dict = {"requested": False, "future": None, "polling": None}

    def waking_fetch_records(max_records: Any = None, update_offsets: bool = True, timeout_ms: Any = None) -> Any:
        records, idle = fetch_records(max_records, update_offsets=update_offsets, timeout_ms=timeout_ms)
        if records or not idle or state["polling"] != threading.get_ident() or not timeout_ms:
            return records, idle
        # nothing to fetch or wait for (positions being looked up): kafka-python's _poll_once would sleep
        # min(timeout, retry_backoff_ms), deaf to a wake; this sleep hears it
        woken.wait(min(timeout_ms, backoff_ms) / 1000.0)
        return records, False

    def waking_run(coro: Any, *args: Any) -> Any:
        if coro != wait_for or not args or state["polling"] != threading.get_ident():
            return run(coro, *args)
        with lock:
            if state["requested"]:
                return None  # a wake came first: this round does not wait
            state["future"] = args[0]
        try:
            return run(coro, *args)
        finally:
            with lock:
                state["future"] = None

    def waking_poll_once(*args: Any, **kwargs: Any) -> Any:
        state["polling"] = threading.get_ident()
        try:
            records = poll_once(*args, **kwargs)
        finally:
            state["polling"] = None
        if not records:
            with lock:
                if state["requested"]:
                    state["requested"] = False
                    woken.clear()
                    raise PollWoken("woken")
        return records

    def wake() -> None:
        with lock:
            state["requested"] = True
            woken.set()
            future = state["future"]
        if future is not None:
            def complete() -> None:
                if not future.is_done:
                    future.success(None)
            try:
                call_soon(complete)
            except Exception:  # the client is closing: its poll ends anyway
                pass

    net.run = waking_run
    fetcher.fetch_records = waking_fetch_records
    consumer._poll_once = waking_poll_once
    return wake


def observe_fetch_responses(consumer: Any, on_response: Callable[[Any, float], None]) -> bool:
    """Call ``on_response(node_id, seconds)`` for each Fetch response *consumer*'s (a KafkaConsumer's) fetcher
    receives from broker *node_id*, *seconds* after its request was sent, on kafka-python's IO thread before the
    response is handled (an exception from *on_response* is logged, never in the response's way); True when
    installed, False (nothing changed) where this kafka-python lacks ``Fetcher._handle_fetch_response(node_id,
    fetch_offsets, send_time, response)`` (the callback each request is sent with, looked up on the fetcher at each
    send; ``send_time`` from ``time.monotonic()``). A failed request (its errback) is not reported."""
    import logging
    import time
    fetcher: Any = getattr(consumer, "_fetcher", None)
    handle: Any = getattr(fetcher, "_handle_fetch_response", None)
    if _parameters(handle) != ["node_id", "fetch_offsets", "send_time", "response"]:
        return False

    def observed(node_id: Any, fetch_offsets: Any, send_time: float, response: Any) -> Any:
        try:
            on_response(node_id, time.monotonic() - send_time)
        except Exception:  # a metric must never cost a response
            logging.getLogger(__name__).exception("observing a fetch response failed")
        return handle(node_id, fetch_offsets, send_time, response)

    fetcher._handle_fetch_response = observed
    return True


def fetch_leaders(consumer: Any, partitions: Any) -> Optional[set]:
    """The brokers (node ids) *consumer* (a KafkaConsumer) fetches *partitions* (TopicPartitions) from: their leaders
    in its metadata (``_manager.cluster.leader_for_partition``), partitions without a known leader left out; None
    where this kafka-python lacks that. (kafka-python fetches from a preferred read replica when a broker names one,
    which needs ``client_rack``: zkconsumer sets none, so its fetches go to the leaders.)"""
    cluster: Any = getattr(getattr(consumer, "_manager", None), "cluster", None)
    leader_for: Any = getattr(cluster, "leader_for_partition", None)
    if not callable(leader_for):
        return None
    out = set()
    for tp in partitions:
        leader = leader_for(tp)
        if leader is not None and leader != -1:
            out.add(leader)
    return out


def caught_up_plan(consumer: Any, partitions: Any) -> Optional[dict]:
    """``{leader node id: (socket address, [(topic, partition, position), ...])}`` when every one of *partitions*
    (TopicPartitions) of *consumer* (a KafkaConsumer) is fetchable at a position equal to the high watermark its last
    Fetch answer gave, its leader is known, the client's connection to that leader is up and plain TCP (the address
    is that connection's peer: no name lookup, no proxy), and the brokers answer Fetch v4; None otherwise (and where
    this kafka-python lacks any of it)."""
    try:
        from kafka.net.transport import KafkaTCPTransport
        from kafka.protocol.consumer import FetchRequest
        manager: Any = consumer._manager
        if consumer.config.get("proxy_url") or consumer.config.get("socks5_proxy") or \
                manager.broker_version_data is None or \
                manager.broker_version_data.api_version(FetchRequest, max_version=4) != 4:
            return None
        cluster: Any = manager.cluster
        states: Any = consumer._subscription.assignment
        plan: dict = {}
        for tp in partitions:
            state = states.get(tp)
            if state is None or not state.is_fetchable() or state.highwater is None:
                return None
            offset = state.position.offset
            if offset != state.highwater:
                return None
            leader = cluster.leader_for_partition(tp)
            if leader not in plan:
                conn = manager._conns.get(leader) if leader is not None and leader != -1 else None
                transport: Any = getattr(conn, "transport", None) if conn is not None and conn.connected else None
                if type(transport) is not KafkaTCPTransport:
                    return None
                plan[leader] = (transport._sock.getpeername(), [])
            plan[leader][1].append((tp.topic, tp.partition, offset))
        return plan or None
    except Exception:  # a kafka-python without these internals, or a broker without Fetch v4: no watch
        return None


def wrap_header(request: Any, wrap: Callable[[Any], Any]) -> None:
    """Replace the header kafka-python attached to *request* (``with_header``) by ``wrap(header)``."""
    request._header = wrap(_attr(request, "_header", "header on its requests"))


def partition_records_class() -> Optional[type]:
    """kafka-python's ``Fetcher.PartitionRecords`` (the decoder of a fetched partition), or None."""
    from kafka.consumer.fetcher import Fetcher
    cls = getattr(Fetcher, "PartitionRecords", None)
    return cls if isinstance(cls, type) else None


def consumer_fetcher(consumer: Any) -> Optional[Any]:
    """A ``KafkaConsumer``'s fetcher (whose ``PartitionRecords`` the fast decoder replaces), or None."""
    return getattr(consumer, "_fetcher", None)


def records_buffer(records: Any) -> Optional[Any]:
    """The bytes of a fetched ``MemoryRecords``, or None."""
    return getattr(records, "_buffer", None)


def batch_data(batch: Any) -> Tuple[Any, int]:
    """A decompressed ``DefaultRecordBatch``'s records bytes and where its first record starts."""
    return _attr(batch, "_buffer", "records buffer on its record batches"), batch._pos


def plain_connections(consumer: Any, on_transport: Callable[[Any, Any], None]) -> bool:
    """Call ``on_transport(transport, sock)`` for each plain TCP connection (``KafkaTCPTransport``, not TLS) of a
    ``KafkaConsumer``, now and whenever its connection manager builds one (``_manager._build_transport``, its
    ``_conns``); False (nothing done) where this kafka-python lacks them."""
    import inspect
    try:
        from kafka.net.transport import KafkaTCPTransport
    except ImportError:
        return False
    manager: Any = getattr(consumer, "_manager", None)
    build = getattr(manager, "_build_transport", None)
    conns = getattr(manager, "_conns", None)
    if not (inspect.iscoroutinefunction(build) and isinstance(conns, dict) and _reads_through(KafkaTCPTransport)):
        return False

    def plain(transport: Any) -> None:
        sock = getattr(transport, "_sock", None)
        if type(transport) is KafkaTCPTransport and sock is not None:
            on_transport(transport, sock)

    async def _build_transport(node: Any, timeout_at: Any = None) -> Any:
        transport = await build(node, timeout_at=timeout_at)
        plain(transport)
        return transport
    manager._build_transport = _build_transport
    for conn in list(conns.values()):
        plain(getattr(conn, "transport", None))
    return True


def _reads_through(transport_class: type) -> bool:
    """True when the transport reads its socket in ``_sock_recv`` (what :func:`set_socket_reader` replaces)."""
    import inspect
    read = getattr(transport_class, "_read_from_sock", None)
    if read is None or not callable(getattr(transport_class, "_sock_recv", None)):
        return False
    try:
        return "_sock_recv" in inspect.getsource(read)
    except (OSError, TypeError):
        return False


def set_socket_reader(transport: Any, read: Callable[[], Tuple[bytes, Any]]) -> None:
    """Make a ``KafkaTCPTransport`` read its socket with ``read()`` -> (bytes read, error or None), as its own
    ``_sock_recv`` does."""
    transport._sock_recv = read


_slice_once: Any = None


def _slice_once_class() -> Any:
    """kafka-python's ``KafkaBytes`` (the buffer a response is received into and decoded from) with a ``read`` that
    copies its slice once (``KafkaBytes.read`` copies it twice: a bytearray slice, then bytes of it; kafka-python
    3.0 reads a response's whole body so, a fetch response's record sets being most of it); None where this
    kafka-python's ``read`` does not answer as this one does (checked once, on a buffer of both kinds)."""
    global _slice_once
    if _slice_once is not None:
        return _slice_once or None
    try:
        from kafka.protocol.frame import KafkaBytes

        class SliceOnce(KafkaBytes):  # type: ignore[misc,valid-type]
            def read(self, nbytes: Any = None) -> bytes:
                this: Any = self
                start = this._idx
                end = len(self) if nbytes is None else min(start + nbytes, len(self))
                this._idx = end
                with memoryview(self) as view:
                    return bytes(view[start:end])

        def reads(cls: Any) -> list:
            buf = cls(10)
            buf.write(b"0123456789")
            out = []
            for at, n in ((0, 3), (3, None), (8, 5), (4, 0), (10, 1)):
                buf.seek(at)
                out.append((buf.read(n), buf.tell()))
            return out
        swapped = KafkaBytes(4)
        swapped.__class__ = SliceOnce  # what read_response_slices_once does (a layout that differs refuses it)
        ok = reads(KafkaBytes) == reads(SliceOnce) and type(swapped) is SliceOnce
        _slice_once = SliceOnce if ok else False
    except Exception:
        _slice_once = False
    return _slice_once or None


def read_response_slices_once(transport: Any) -> None:
    """Give the response *transport*'s connection is receiving (when it has one under way) a buffer whose reads copy
    once (:func:`_slice_once_class`): the same bytes. Nothing where this kafka-python lacks what it relies on."""
    cls = _slice_once_class()
    parser = getattr(getattr(transport, "_protocol", None), "parser", None)
    buf = getattr(parser, "_rbuffer", None)
    if cls is not None and type(buf) is cls.__bases__[0]:
        try:
            buf.__class__ = cls
        except TypeError:
            global _slice_once
            _slice_once = False


def socket_reader_replaced(transport: Any) -> bool:
    """True when :func:`set_socket_reader` gave *transport* a reader of its own."""
    return "_sock_recv" in vars(transport)


def kazoo_watch_callbacks_run(zk: Any, timeout: float) -> Optional[bool]:
    """Wait until kazoo's watch thread (``zk.handler``'s callback queue) has run every callback queued so far: True
    when it has, False when *timeout* passed first, None when there is nothing to wait for (no such handler, a
    stopped one, or called on that thread itself)."""
    from kazoo.protocol.states import Callback
    handler = getattr(zk, "handler", None)
    if handler is None or not hasattr(handler, "dispatch_callback") or not getattr(handler, "running", True):
        return None
    if threading.current_thread() in getattr(handler, "_workers", ()):
        return None
    done = threading.Event()
    handler.dispatch_callback(Callback("watch", done.set, ()))
    if done.wait(timeout):
        return True
    # a client stopped meanwhile drops its queue: nothing more to wait for
    return False if getattr(handler, "running", True) else None


def kazoo_supports_call(zk: Any) -> bool:
    """True when this kazoo client takes a request object through ``_call`` (how its transactions are sent)."""
    return callable(getattr(zk, "_call", None)) and callable(getattr(getattr(zk, "handler", None),
                                                                     "async_result", None))


def kazoo_call(zk: Any, request: Any) -> Any:
    """Queue *request* on kazoo's connection as ``TransactionRequest.commit_async`` does; an IAsyncResult."""
    result = zk.handler.async_result()
    _attr(zk, "_call", "request queue on its client", "kazoo")(request, result)
    return result


def kazoo_observe_requests(zk: Any, observe: Callable[[Any], None]) -> None:
    """Call ``observe(request)`` for every request *zk* sends from now on (kazoo hands each one, synchronous or
    not, to ``_call``): how the bench and the tests count a client's ZooKeeper reads and writes."""
    call = _attr(zk, "_call", "request queue on its client", "kazoo")

    def observed(request: Any, async_object: Any) -> Any:
        observe(request)
        return call(request, async_object)
    zk._call = observed


def kazoo_transaction_requests(txn: Any) -> Optional[list]:
    """The request list of a new kazoo transaction (``TransactionRequest.operations``), where whole requests can be
    appended; None when this kazoo keeps its transactions differently (then the caller uses its methods)."""
    ops = getattr(txn, "operations", None)
    return ops if isinstance(ops, list) and not ops and not getattr(txn, "committed", False) else None


#: where :func:`kazoo_bound_handshake`'s connection keeps the session timeout the server granted
_GRANTED = "_zkconsumer_granted_ms"


def kazoo_session_timeout_ms(zk: Any) -> Optional[float]:
    """The session timeout the server granted, in ms, once a session is established on a client prepared with
    :func:`kazoo_bound_handshake` (every client :func:`zkconsumer.zookeeper.client.make_client` builds); else the
    one asked for (``KazooClient._session_timeout``: kazoo keeps no other); None when there is neither."""
    granted = getattr(zk, _GRANTED, None)
    if isinstance(granted, int) and granted > 0:
        return granted
    asked = getattr(zk, "_session_timeout", None)
    return asked if isinstance(asked, (int, float)) and asked > 0 else None


def kazoo_bound_handshake(zk: Any, timeout_s: float) -> None:
    """Make *zk* (an unstarted KazooClient) wait at most *timeout_s* for the answer to a handshake that reconnects a
    session (the ConnectRequest; kazoo's ``ConnectionHandler._connect`` gives it the session timeout divided by the
    number of servers; a handshake for a new session keeps that: it has no session to lose, and a server slow to
    answer would otherwise be left a new orphan session at every abandoned attempt), and keep the session timeout the
    server granted in that answer for :func:`kazoo_session_timeout_ms`.
    kazoo builds its ``ConnectionHandler`` in ``KazooClient.__init__`` and takes no other: the instance's class
    becomes a subclass whose ``_invoke`` (kazoo's writer of the handshake) does both."""
    connection = _attr(zk, "_connection", "connection handler on its client", "kazoo")
    if type(connection) is not ConnectionHandler or not callable(getattr(connection, "_invoke", None)):
        raise IncompatibleClientError("kazoo %s: KazooClient._connection is a %s, not the ConnectionHandler with the "
                                      "_invoke zkconsumer uses: install a version setup.cfg allows"
                                      % (_library_version("kazoo"), type(connection).__name__))
    connection.__class__ = _BoundedHandshake
    connection._zkconsumer_handshake_s = timeout_s


class _BoundedHandshake(ConnectionHandler):  # type: ignore[misc]
    """kazoo's ConnectionHandler whose handshake for a session it reconnects waits at most
    ``_zkconsumer_handshake_s``, and which keeps the session timeout granted (:func:`kazoo_bound_handshake`)."""

    _zkconsumer_handshake_s: float

    def _invoke(self, timeout: float, request: Any, xid: Any = None) -> Any:
        if not isinstance(request, Connect):
            return super()._invoke(timeout, request, xid)
        if getattr(request, "session_id", 0):  # a session to keep: a hung attempt must not use it up
            timeout = min(timeout, self._zkconsumer_handshake_s)
        result = super()._invoke(timeout, request, xid)
        answer = result[0] if isinstance(result, tuple) and result else None
        granted = getattr(answer, "time_out", None)
        if isinstance(granted, int) and granted > 0:
            setattr(self.client, _GRANTED, granted)
        return result
