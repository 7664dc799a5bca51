"""ZooKeeper adapter: one place that builds kazoo clients from a ``zookeeper.connect`` string.

The chroot suffix (``host:port,host:port/chroot``) is handled by kazoo; the string is validated first
(``zookeeper.connect``, see :mod:`zkconsumer.layout.connect`), so a malformed one fails before any connection is
tried.
"""
import logging

from .errors import ClusterUnavailableError
from .zk_auth import NO_AUTH, ZkAuthError, prepare

log = logging.getLogger(__name__)


def make_client(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=None, read_only=False, auth=None):
    """An unstarted KazooClient for a validated connect string; ``auth`` (a :class:`~zkconsumer.zk_auth.ZkAuth`)
    adds the credentials and, with ``set_acl``, the secure default ACL of every znode it creates. Its handler is
    :class:`~zkconsumer.zk_handler.PollHandler` (kazoo's threading handler, one ``poll`` per wait)."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry
    from .layout.connect import parse_zk_connect
    from .zk_handler import PollHandler
    parsed = parse_zk_connect(zookeeper_connect)
    return KazooClient(hosts=parsed.kazoo_hosts, timeout=session_timeout_ms / 1000.0, handler=PollHandler(),
                       connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                       command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0),
                       read_only=read_only, **(auth or NO_AUTH).kazoo_kwargs())


def connect(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=None, auth=None):
    """A started KazooClient, or ClusterUnavailableError naming the connect string, or ZkAuthError (naming the
    connect string and the scheme, never the password) when ZooKeeper refused the credentials."""
    from kazoo.exceptions import AuthFailedError
    from kazoo.handlers.threading import KazooTimeoutError
    auth = auth or NO_AUTH
    client = make_client(zookeeper_connect, session_timeout_ms, auth=auth)
    timeout = (connection_timeout_ms or session_timeout_ms) / 1000.0
    try:
        client.start(timeout=timeout)
        if auth.enabled:
            # kazoo reports CONNECTED before SASL is done: the first request fails if it failed
            client.exists("/")
    except KazooTimeoutError as e:
        close(client)
        raise ClusterUnavailableError("cannot connect to ZooKeeper at %s within %.1f s"
                                      % (zookeeper_connect, timeout)) from e
    except AuthFailedError:
        close(client)
        raise ZkAuthError("ZooKeeper at %s refused the credentials (%s, from %s)"
                          % (zookeeper_connect, auth.describe(), auth.source or "the credentials file")) from None
    if client.chroot:
        client.ensure_path("/")
    prepare(client, auth)
    return client


def close(client):
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
    from .layout import codecs, paths
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
