"""ZooKeeper adapter: one place that builds kazoo clients from a ``zookeeper.connect`` string.

The chroot suffix (``host:port,host:port/chroot``) is handled by kazoo; the string is validated first
(``zookeeper.connect``, see :mod:`zkconsumer.core.layout.connect`), so a malformed one fails before any connection is
tried.
"""
import contextlib
import logging
import threading
from typing import Optional

from ..errors import ClusterUnavailableError
from .auth import NO_AUTH, ZkAuthError, prepare

log = logging.getLogger(__name__)


def make_client(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=None, read_only=False, auth=None):
    """An unstarted KazooClient for a validated connect string; ``auth`` (a :class:`~zkconsumer.zookeeper.auth.ZkAuth`)
    adds the credentials and, with ``set_acl``, the secure default ACL of every znode it creates. Its handler is
    :class:`~zkconsumer.zookeeper.handler.PollHandler` (kazoo's threading handler, one ``poll`` per wait), and each
    connection attempt waits at most a third of the session timeout (:mod:`zkconsumer.zookeeper.attempts`)."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry
    from ..core.layout.connect import parse_zk_connect
    from ..kafka.internals import kazoo_bound_handshake
    from .attempts import attempt_timeout_s
    from .handler import PollHandler
    parsed = parse_zk_connect(zookeeper_connect)
    attempt_s = attempt_timeout_s(session_timeout_ms)
    client = KazooClient(hosts=parsed.kazoo_hosts, timeout=session_timeout_ms / 1000.0,
                         handler=PollHandler(connect_timeout_s=attempt_s),
                         connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                         command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0),
                         read_only=read_only, **(auth or NO_AUTH).kazoo_kwargs())
    kazoo_bound_handshake(client, attempt_s)
    return client


_GIVE_UP = "_zkconsumer_give_up"


def lost_connection_errors() -> tuple:
    """kazoo's errors of a ZooKeeper connection lost, closed (a give-up), expired or timed out."""
    from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError
    return ConnectionLoss, ConnectionClosedError, SessionExpiredError, OperationTimeoutError, KazooTimeoutError


#: how long a one-shot use of ZooKeeper (a command, a Spark batch's plan or commit, an application's release of a
#: Spark member) waits for a lost connection to come back before its requests fail (``connect(give_up_after_ms=)``)
ONE_SHOT_GIVE_UP_MS = 30_000


class _GiveUp:
    """Closes *client*'s session when its connection stays lost for *after_s* seconds.

    kazoo queues a request made while the connection is lost and waits for the next connection without a bound, as
    Kafka 1.1.1's tools wait in ``ZkClient.retryUntilConnected``: a command whose ZooKeeper vanished mid-run waited
    for ever. Closing the client fails every queued and later request (ConnectionLoss, then ConnectionClosedError),
    which the command reports as ZooKeeper being unavailable. A connection back within *after_s* keeps the session.

    Each loss (SUSPENDED, or LOST: a session that expired while disconnected, after which kazoo connects anew without
    another state event) has a waiter and an event of its own, which only the next connection sets."""

    def __init__(self, client, after_s: float, zookeeper_connect: str):
        self.client, self.after_s, self.where = client, after_s, zookeeper_connect
        self.back = threading.Event()
        self.back.set()
        self.closing = False
        # close() stops the client under this lock too: kazoo's stop() returns at once when another thread is still
        # stopping it, and its close() then fails ("Cannot close connection until it is stopped")
        self.lock = threading.Lock()
        setattr(client, _GIVE_UP, self)
        client.add_listener(self._on_state)

    def _on_state(self, state) -> None:
        from kazoo.protocol.states import KazooState
        if state == KazooState.CONNECTED:
            self.back.set()
        elif not self.closing and self.back.is_set():
            back = self.back = threading.Event()
            # kazoo calls listeners on its connection thread, which must not block
            threading.Thread(target=self._wait, args=(back,), name="zookeeper-give-up", daemon=True).start()

    def _wait(self, back: threading.Event) -> None:
        if back.wait(self.after_s) or self.closing or self.client.connected:
            return
        log.warning("ZooKeeper at %s unreachable for %.0f s: closing this session, its requests fail",
                    self.where, self.after_s)
        self.stop()

    def switch_off(self) -> None:
        """No more giving up: the client is being stopped (by :meth:`stop` or :func:`close`)."""
        self.closing = True
        self.back.set()

    def stop(self) -> None:
        self.switch_off()
        try:
            with self.lock:
                self.client.stop()
        except Exception:
            log.debug("stopping the unreachable ZooKeeper session failed", exc_info=True)


def connect(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=None, auth=None,
            give_up_after_ms: Optional[int] = None):
    """A started KazooClient, or ClusterUnavailableError naming the connect string, or ZkAuthError (naming the
    connect string and the scheme, never the password) when ZooKeeper refused the credentials.

    *give_up_after_ms*: a connection lost for that long closes the session, so that every pending and later request
    fails instead of waiting for ZooKeeper to come back (one-shot commands); None waits for ever, as a member does."""
    from kazoo.exceptions import AuthFailedError
    from kazoo.handlers.threading import KazooTimeoutError
    auth = auth or NO_AUTH
    client = make_client(zookeeper_connect, session_timeout_ms, auth=auth)
    timeout = (connection_timeout_ms or session_timeout_ms) / 1000.0
    try:
        try:
            _start(client, timeout, auth.enabled, max(timeout, session_timeout_ms / 1000.0))
        except KazooTimeoutError as e:
            raise ClusterUnavailableError("cannot connect to ZooKeeper at %s within %.1f s"
                                          % (zookeeper_connect, timeout)) from e
        except AuthFailedError:
            raise ZkAuthError("ZooKeeper at %s refused the credentials (%s, from %s)"
                              % (zookeeper_connect, auth.describe(), auth.source or "the credentials file")) from None
        if client.chroot:
            client.ensure_path("/")
        prepare(client, auth)
    except BaseException:
        try:
            close(client)
        except Exception:  # noqa: BLE001 — the error of the start is the one to report
            log.debug("closing the ZooKeeper client that did not start failed", exc_info=True)
        raise
    if give_up_after_ms is not None:
        _GiveUp(client, give_up_after_ms / 1000.0, zookeeper_connect)
    return client


def _start(client, timeout: float, check_auth: bool, answer_s: float) -> None:
    """kazoo's ``KazooClient.start`` and, with *check_auth*, a first request, which fails when ZooKeeper refused the
    credentials (kazoo reports CONNECTED before SASL is done). A refusal can come before the waiting thread has
    looked (on a loaded machine): kazoo has then ended the session (AUTH_FAILED), which its ``start`` reports as
    "Connection time-out" and a later request as a closed connection; here it raises ``AuthFailedError``. A session
    that ended otherwise is not taken for a refusal (kazoo itself takes a connection dropped during SASL for one); a
    first request not answered within *answer_s* (no sooner than kazoo gives up on a silent connection itself) is a
    connection that did not come up (``KazooTimeoutError``)."""
    from kazoo.exceptions import AuthFailedError, ConnectionClosedError, ConnectionLoss
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.protocol.states import KazooState, KeeperState
    refused = threading.Event()

    def on_state(state) -> None:
        # kazoo calls its listeners with the state it has just taken (client_state) set
        if state == KazooState.LOST and client.client_state == KeeperState.AUTH_FAILED:
            refused.set()
    client.add_listener(on_state)
    try:
        client.start_async().wait(timeout=timeout)
        if client.connected and check_auth:
            try:
                client.exists_async("/").get(timeout=answer_s)
            except (ConnectionClosedError, ConnectionLoss, KazooTimeoutError):
                if not refused.wait(0.5):  # a refusal on its way
                    raise
        if refused.is_set():
            raise AuthFailedError()
        if not client.connected:
            raise KazooTimeoutError("Connection time-out")
    finally:
        client.remove_listener(on_state)


def close(client):
    give_up = getattr(client, _GIVE_UP, None)
    if give_up is not None:
        give_up.switch_off()
    with give_up.lock if give_up is not None else contextlib.nullcontext():
        try:
            client.stop()
        finally:
            client.close()


# broker registrations reported as unusable (bootstrap_from_zk)
_skipped: set = set()


def bootstrap_from_zk(zk, zookeeper_connect="", security_protocol="PLAINTEXT"):
    """``host:port,...`` of every broker registered under ``/brokers/ids`` with an endpoint of *security_protocol*
    (PLAINTEXT: how the old consumer finds brokers, Kafka 1.1.1 ``ClientUtils.getPlaintextBrokerEndPoints``; the
    others through the registration's ``listener_security_protocol_map``); ClusterUnavailableError when there is
    none."""
    from kazoo.exceptions import NoNodeError
    from ..core.layout import codecs, paths
    try:
        ids = zk.get_children(paths.broker_ids_path())
    except NoNodeError:
        ids = []
    brokers = []
    for b in sorted(ids):
        stat = None
        try:
            data, stat = zk.get(paths.broker_path(b))
            ep = codecs.decode_broker_registration(data, paths.broker_path(b)).endpoint_for(security_protocol)
        except Exception as e:
            # a malformed or vanished registration: use the others
            key = (paths.broker_path(b), getattr(stat, "mzxid", None), type(e).__name__)
            # once per version of the node, not at every fetcher start
            if key not in _skipped:
                if len(_skipped) > 1000:
                    _skipped.clear()
                _skipped.add(key)
                log.warning("skipping broker registration %s: %s", b, e)
            continue
        if ep:
            brokers.append("%s:%d" % ep)
    if not brokers:
        raise ClusterUnavailableError(
            "no brokers registered under /brokers/ids in ZooKeeper%s (no %s endpoint found; security.protocol must "
            "match a listener of the brokers); is the cluster running, or, for a ZooKeeper-less cluster, the "
            "registry mirror ('zkconsumer registry sync')? Or give the bootstrap servers explicitly"
            % ((" " + zookeeper_connect) if zookeeper_connect else "", security_protocol))
    return ",".join(brokers)
