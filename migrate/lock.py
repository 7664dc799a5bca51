"""One operator at a time per group: the lock every writing zkmigrate command holds while it reads, decides and
writes a group's offsets.

Without it two operators' writes are blind after their reads: a ``refresh`` that read an offset before a
concurrent ``reset-offsets`` wrote it commits the old value back and undoes the reset. The lock is kazoo's Lock
recipe at ``/consumers/G/zkconsumer/lock`` (an ephemeral sequential child per contender, the lowest one holds it),
so it goes with its holder's ZooKeeper session: a holder killed with ``kill -9`` releases it when its session
expires. Each child's data names its holder (JSON: command, host, pid, user, since), so a refusal says who holds the
lock and since when, and whether that process still runs when it ran on this host.

By default a command refuses at once (:class:`GroupLockedError`, the group's exit code 1, nothing read or
written); ``--lock-wait SECONDS`` waits for the holder first. Before each write the holder checks that its lock
node is still there under its own session (:meth:`GroupLock.check`): after a session expiry another operator may
hold the lock, and the write is refused.

A group that did not exist before (``/consumers/G`` absent) is not left behind by its lock: the empty nodes the
lock created are removed again on release.
"""
from __future__ import annotations

import getpass
import json
import logging
import os
import socket
import time
from typing import Callable, Optional

import click
from kazoo.exceptions import LockTimeout, NoNodeError, NotEmptyError

from zkconsumer.errors import GroupConflictError
from zkconsumer.core.layout import paths, validate_group
from zkconsumer.local.processes import is_alive

__all__ = ["GroupLock", "GroupLockedError", "lock_wait_option", "holder_text"]


log = logging.getLogger(__name__)


class GroupLockedError(GroupConflictError):
    """Another zkmigrate command holds the group's lock (or this one lost it)."""


lock_wait_option = click.option(
    "--lock-wait", type=click.FloatRange(0, 86400), default=0.0, show_default=True, metavar="SECONDS",
    help="When another zkmigrate command holds a group's lock (/consumers/G/zkconsumer/lock), wait up to this long "
         "for it instead of refusing the group at once.")


def holder_text(data: str) -> str:
    """'zkmigrate COMMAND on HOST (pid N, user U) since T' from a contender's data (best effort for foreign data)."""
    try:
        h = json.loads(data)
        if not isinstance(h, dict):
            raise ValueError
    except ValueError:
        return "an unknown holder (%r)" % data[:80]
    text = "'zkmigrate %s' on %s (pid %s, user %s) since %s" % (h.get("command"), h.get("host"), h.get("pid"),
                                                                  h.get("user"), h.get("since"))
    if h.get("host") == socket.gethostname() and isinstance(h.get("pid"), int) and not is_alive(h["pid"]):
        text += (" - that process is no longer running on this host: its lock goes when its ZooKeeper session "
                 "expires (seconds)")
    return text


class GroupLock:
    """The lock of *group* for *command* (a context manager). ``wait`` seconds to wait for another holder (0:
    refuse at once)."""

    def __init__(self, zk, group: str, command: str, wait: float = 0.0, clock: Callable[[], float] = time.time):
        self.zk = zk
        self.group = validate_group(group)
        self.command = command
        self.wait = wait
        self.path = paths.group_lock_path(self.group)
        self.identity = {"command": command, "host": socket.gethostname(), "pid": os.getpid(),
                         "user": _user(), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))}
        self._lock = None
        self._session: Optional[int] = None
        self._group_existed = True

    def acquire(self) -> "GroupLock":
        self._group_existed = self.zk.exists(paths.group_path(self.group)) is not None
        data = json.dumps(self.identity, sort_keys=True)
        for attempt in range(3):
            lock = self.zk.Lock(self.path, data)
            try:
                got = lock.acquire(blocking=self.wait > 0, timeout=self.wait if self.wait > 0 else None)
            except LockTimeout:
                got = False
            except NoNodeError:
                # the lock's parent was removed meanwhile (a group that did not exist): again
                if attempt == 2:
                    raise
                continue
            if got:
                self._lock = lock
                self._session = self.zk.client_id[0] if self.zk.client_id else None
                return self
            raise GroupLockedError(self._refusal(lock))
        raise AssertionError("unreachable")

    def _refusal(self, lock) -> str:
        try:
            holders = lock.contenders()
        except NoNodeError:
            holders = []
        who = holder_text(holders[0]) if holders else "another zkmigrate command (it has just finished)"
        waited = (" after waiting %.0f s" % self.wait) if self.wait > 0 else ""
        return ("group %s is locked by %s%s: another operator is changing its offsets. Run 'zkmigrate %s' again "
                "when that is done, or give --lock-wait SECONDS to wait for it (lock: %s)"
                % (self.group, who, waited, self.command, self.path))

    def check(self) -> None:
        """Raise :class:`GroupLockedError` unless this lock is still held under the session that took it."""
        if self._lock is None or self._lock.node is None:
            raise GroupLockedError("group %s: 'zkmigrate %s' does not hold the group's lock; nothing written"
                                   % (self.group, self.command))
        node = self.path + "/" + self._lock.node
        try:
            stat = self.zk.exists(node)
        except Exception as e:
            raise GroupLockedError("group %s: cannot confirm the group's lock %s (%s); nothing written"
                                   % (self.group, node, e)) from e
        if stat is None or stat.ephemeralOwner != self._session:
            raise GroupLockedError("group %s: the group's lock was lost (ZooKeeper session expired); another "
                                   "operator may hold it now, so nothing more is written: run 'zkmigrate %s' again"
                                   % (self.group, self.command))

    def release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            lock.release()
        finally:
            if not self._group_existed:
                self._remove_empty()

    def _remove_empty(self) -> None:
        """Remove the lock node and its parents up to ``/consumers/G`` while they are empty (a command on a group
        that did not exist must not make one appear in the group listings)."""
        node = self.path
        stop = paths.consumers_path()
        while node != stop:
            try:
                self.zk.delete(node)
            except (NotEmptyError, NoNodeError):
                return
            except Exception:
                # best effort: an empty node left behind is harmless
                return
            node = node.rsplit("/", 1)[0]

    def __enter__(self) -> "GroupLock":
        return self.acquire()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except Exception as e:
            # the command's own error is the one to report (a lost connection fails the release too); the lock node
            # goes with the session
            log.warning("group %s: could not release the lock %s after the command failed: %r", self.group,
                        self.path, e)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return str(os.getuid())
