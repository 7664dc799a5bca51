"""kazoo's threading handler with a ``select`` that costs one ``poll(2)`` call.

kazoo's connection thread calls its handler's ``select`` before every read of a reply, before every write of a
request and in its main loop: three or four times per ZooKeeper round trip. kazoo 2.x answers each call with a new
``selectors.DefaultSelector`` (``epoll_create``, an ``epoll_ctl`` per socket, ``epoll_wait``, ``close``, and the
``selectors`` module's Python objects around them). With many sessions in one process (300 members in the scale
bench) that was most of the process's CPU during a rebalance. :class:`PollHandler` answers the same calls with one
``select.poll`` object, which makes no system call until ``poll`` itself, and keeps kazoo's contract: the ready
objects come back as the caller passed them, an error or hang-up on a socket counts as readable (kazoo then reads
and sees the closed connection), and the same checks of the timeout.
"""
from __future__ import annotations

import select as _select
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kazoo.handlers.threading import SequentialThreadingHandler

__all__ = ["PollHandler", "poll_select"]

_POLLIN = _select.POLLIN | _select.POLLPRI
_POLLOUT = _select.POLLOUT
_TROUBLE = _select.POLLERR | _select.POLLHUP | _select.POLLNVAL


def _fd(fileobj: Any) -> int:
    if isinstance(fileobj, int):
        fd = fileobj
    else:
        try:
            fd = int(fileobj.fileno())
        except (AttributeError, TypeError, ValueError) as e:
            raise ValueError("Invalid file object: %r" % (fileobj,)) from e
    if fd < 0:
        raise ValueError("Invalid file descriptor: %d" % fd)
    return fd


def poll_select(rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
                timeout: Optional[float] = None) -> Tuple[List[Any], List[Any], List[Any]]:
    """``select.select``'s contract (what kazoo's ``selector_select`` offers) on one ``poll`` call: the ready
    objects of *rlist* and *wlist*, as passed; *xlist* is never reported, like kazoo's."""
    if timeout is not None:
        if not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    masks: Dict[int, int] = {}
    readers: Dict[int, List[Any]] = {}
    writers: Dict[int, List[Any]] = {}
    for fileobj in rlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | _POLLIN
        readers.setdefault(fd, []).append(fileobj)
    for fileobj in wlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | _POLLOUT
        writers.setdefault(fd, []).append(fileobj)
    poller = _select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = poller.poll(None if timeout is None else timeout * 1000.0)
    rready: List[Any] = []
    wready: List[Any] = []
    for fd, events in ready:
        if events & _select.POLLNVAL:
            # a closed descriptor, as kazoo's selector reports it
            raise ValueError("Invalid event mask or fd")
        if events & (_POLLIN | _TROUBLE) and fd in readers:
            rready.extend(readers[fd])
        elif events & (_POLLOUT | _TROUBLE) and fd in writers:
            wready.extend(writers[fd])
    return rready, wready, []


class PollHandler(SequentialThreadingHandler):
    """kazoo's :class:`~kazoo.handlers.threading.SequentialThreadingHandler` with :func:`poll_select`; with
    *connect_timeout_s*, a TCP connect waits at most that long (kazoo asks for the whole session timeout: see
    :mod:`zkconsumer.zookeeper.attempts`)."""

    name = "zkconsumer_poll_threading_handler"

    def __init__(self, connect_timeout_s: Optional[float] = None) -> None:
        super().__init__()
        self.connect_timeout_s = connect_timeout_s

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        bound = self.connect_timeout_s
        if bound is not None and kwargs.get("timeout") is not None:
            kwargs["timeout"] = min(kwargs["timeout"], bound)
        return super().create_connection(*args, **kwargs)

    def select(self, *args: Any, **kwargs: Any) -> Tuple[List[Any], List[Any], List[Any]]:
        return poll_select(*args, **kwargs)
