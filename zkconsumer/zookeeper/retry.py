"""ZooKeeper calls that outlast a lost connection, as every call of the Scala consumer does (Kafka 1.1.1's
``ZkUtils`` calls go through zkclient's ``ZkClient.retryUntilConnected``, which waits for the connection to come back
and calls again).

A connection to one server of an ensemble drops now and then while the session lives on: a server too loaded to
answer a ping in time, a follower that lost its leader for a moment and closed its clients' connections. kazoo
fails the calls in flight with ConnectionLoss and reconnects to a server, under the same session when it comes back
within the session timeout. A call that may be made twice (a read, a check) is then simply made again.
"""
import logging
import time
from typing import Any, Callable, TypeVar

from ..errors import ClusterUnavailableError

__all__ = ["retry_until_connected"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def retry_until_connected(zk: Any, call: Callable[[], T], timeout_ms: int, what: str,
                          clock: Callable[[], float] = time.monotonic,
                          sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``; after a ConnectionLoss, an OperationTimeoutError or a SessionExpiredError (kazoo's client then
    reconnects, under a new session after an expiry), ``call()`` again once *zk* is connected again; when it is not
    connected again within *timeout_ms* (``zookeeper.connection.timeout.ms``) of a failure, ClusterUnavailableError
    naming *what*. Only for calls that hold nothing of the session (the checks before a member registers). A client
    that was closed (ConnectionClosedError: stopped on purpose, e.g. the member shut down during its start) never
    connects again: its error is raised at once."""
    from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError
    while True:
        try:
            return call()
        except ConnectionClosedError:
            raise
        except (ConnectionLoss, OperationTimeoutError, SessionExpiredError) as e:
            now = clock()
            deadline = now + timeout_ms / 1000.0
            pause = 0.05
            log.warning("%s: the connection to ZooKeeper was lost (%s); again once it is back (for up to %d ms, "
                        "zookeeper.connection.timeout.ms)", what, type(e).__name__, timeout_ms)
            while True:
                if now >= deadline:
                    raise ClusterUnavailableError(
                        "%s: the connection to ZooKeeper was lost and not back in time to finish within %d ms "
                        "(zookeeper.connection.timeout.ms): %s" % (what, timeout_ms, type(e).__name__)) from e
                sleep(min(pause, deadline - now))
                pause = min(2 * pause, 1.0)
                now = clock()
                if zk.connected:
                    break
