"""Running one zkmigrate command over many groups: selection (``--group``, ``--all-groups``,
``--groups-matching``), bounded concurrency, one report.

Each group is handled by a function ``fn(group) -> (result dict, exit code)`` on a pool of ``parallel`` threads
(the kazoo client is shared: it is thread-safe; every group opens its own Kafka connection). A group whose function
raises is reported with its error and the exit code of that error's kind (a connection to ZooKeeper or Kafka lost
half-way: 3); the others go on. The run's exit code is the worst one (3 could not check > 1 failed > 0).
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from zkconsumer.errors import ZkConsumerError

__all__ = ["select_groups", "run_groups", "worst_exit", "unavailable_error"]

Result = Tuple[dict, int]


def select_groups(all_names: Callable[[], List[str]], groups: Sequence[str], all_groups: bool,
                  matching: Optional[str]) -> List[str]:
    """The named groups in order, else every group (``all_names()``, read lazily) or those whose whole name matches
    *matching* (a Python regular expression)."""
    if matching is not None:
        rx = re.compile(matching)
        return [g for g in all_names() if rx.fullmatch(g)]
    if all_groups:
        return list(all_names())
    return list(dict.fromkeys(groups))


def worst_exit(codes) -> int:
    codes = list(codes)
    for code in (3, 2, 1):
        if code in codes:
            return code
    return 0


def unavailable_error(e: BaseException) -> bool:
    """An error of a lost or refused connection to ZooKeeper (kazoo) or Kafka (kafka-python, sockets): the group
    could not be checked (exit 3), like a :class:`~zkconsumer.errors.ClusterUnavailableError`."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError, NodeNotReadyError
    from zkconsumer.zookeeper.client import lost_connection_errors
    return isinstance(e, lost_connection_errors() + (KafkaConnectionError, KafkaTimeoutError, NodeNotReadyError,
                                                     ConnectionError, TimeoutError))


def run_groups(groups: Sequence[str], fn: Callable[[str], Result], parallel: int = 4,
               error_exit: Callable[[BaseException], int] = lambda e: 1,
               progress: Optional[Callable[[str, int], None]] = None) -> Dict[str, Result]:
    """``{group: (result, exit code)}`` in the order of *groups*."""
    def one(g):
        try:
            return fn(g)
        except ZkConsumerError as e:
            return {"group": g, "ok": False, "error": str(e), "error_type": type(e).__name__}, error_exit(e)
        except Exception as e:
            if not unavailable_error(e):
                raise
            return {"group": g, "ok": False, "error": "connection lost: %s: %s" % (type(e).__name__, e),
                    "error_type": type(e).__name__}, 3
    out: Dict[str, Result] = {}
    if parallel <= 1 or len(groups) <= 1:
        for g in groups:
            out[g] = one(g)
            if progress:
                progress(g, out[g][1])
        return out
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="zkmigrate") as pool:
        futures = {g: pool.submit(one, g) for g in groups}
        for g in groups:
            out[g] = futures[g].result()
            if progress:
                progress(g, out[g][1])
    return {g: out[g] for g in groups}
