"""Running a zkmigrate command round after round (``zkmigrate refresh --every``): a keep-alive outlives outages.

A keep-alive exists for the days nobody watches the group, so a ZooKeeper or Kafka outage must cost it a round,
never its life. Each round runs the command once over the selected groups (:func:`repeat` calls ``one_round()``,
which returns the round's exit code). A round that raises (ZooKeeper unreachable, no broker registered, a
connection lost half-way) or ends with a non-zero exit code is logged as one warning naming the cause, and the next
round starts ``every`` seconds after this one started (at once when the round took longer). The first round that
passes after failures logs that the keep-alive recovered. Bad input in the first round (exit 2, nothing changed)
ends it: that does not fix itself.

SIGTERM or SIGINT stops the keep-alive after the round in progress (between rounds at once); a second signal stops it
at once, as without the handler. Its exit code is the last round's (0 when that round passed; 1 or 3, the worst
group's, when it failed), so a supervisor that stops it sees whether the keep-alive was doing its job at the end.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable, Optional

import click

from zkconsumer.cli.common import EXIT_USAGE, exit_code_for

from .fleet import unavailable_error
from .render import verdict

__all__ = ["repeat"]

log = logging.getLogger("zkmigrate.keepalive")


def _run(one_round: Callable[[], int]) -> "tuple[int, Optional[str]]":
    """(exit code, the error text when the round raised)."""
    from zkconsumer.errors import ZkConsumerError
    try:
        return one_round(), None
    except SystemExit as e:
        return (e.code if isinstance(e.code, int) else 1), None
    except click.UsageError as e:
        return EXIT_USAGE, e.format_message()
    except ZkConsumerError as e:
        return exit_code_for(e), str(e)
    except Exception as e:
        if unavailable_error(e):
            return 3, "%s: %s" % (type(e).__name__, e)
        log.debug("round failed", exc_info=True)
        return 1, "unexpected %s: %s" % (type(e).__name__, e)


def repeat(one_round: Callable[[], int], every: float, what: str = "refresh",
           stop: Optional[threading.Event] = None, clock: Callable[[], float] = time.monotonic,
           max_rounds: Optional[int] = None, handle_signals: bool = True) -> int:
    """Run ``one_round()`` every *every* seconds until *stop* is set (by SIGTERM/SIGINT when *handle_signals*) or
    *max_rounds* rounds ran; returns the exit code of the last round that ran (0 when none ran; 2 on bad input in
    the first round)."""
    stop = stop if stop is not None else threading.Event()
    previous = {}
    if handle_signals and threading.current_thread() is threading.main_thread():
        def on_signal(signum, frame):
            name = signal.Signals(signum).name
            log.warning("%s: %s stops after this round", name, what)
            stop.set()
            # a second signal: the default action
            for s, h in previous.items():
                signal.signal(s, h)
        for s in (signal.SIGTERM, signal.SIGINT):
            previous[s] = signal.signal(s, on_signal)
    n, failed, failing_since, last = 0, 0, None, 0
    try:
        while not stop.is_set() and (max_rounds is None or n < max_rounds):
            n += 1
            started = clock()
            code, error = _run(one_round)
            last = code
            if code == EXIT_USAGE and n == 1:
                if error:
                    click.echo("zkmigrate: error: %s" % error, err=True)
                return EXIT_USAGE
            if code == 0:
                if failed:
                    log.warning("%s round %d ok: recovered after %d failed round(s) since %s", what, n, failed,
                                failing_since)
                failed, failing_since = 0, None
            else:
                failed += 1
                failing_since = failing_since or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                log.warning("%s round %d failed (%s, exit %d)%s; next round in %.0f s", what, n, verdict(code), code,
                            (": %s" % error) if error else "", max(0.0, every - (clock() - started)))
            stop.wait(max(0.0, every - (clock() - started)))
        if failed:
            log.warning("%s stopped after %d failed round(s) since %s: exit %d", what, failed, failing_since, last)
        return last
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
