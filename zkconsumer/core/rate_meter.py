"""A one-minute rate of events, as the Scala consumer's meters gave it (pure: the clock is passed in).

Kafka 1.1.1's ``MinFetchRate`` gauge (``AbstractFetcherManager``) is the smallest ``requestRate.oneMinuteRate`` of
its fetcher threads: a Yammer ``Meter``, whose one-minute rate is an exponentially weighted moving average ticked
every 5 s (weight ``1 - exp(-5 / 60)``), from 0 until its first tick and from the first 5 s's rate then. A fetcher
that stops fetching shows a rate falling towards 0 within minutes (10/s reads 10/e after a minute), where an average
since the start would hardly move after a day of fetching.

:class:`RateMeter` is that meter without a ticking thread: events are marked where they happen (:meth:`RateMeter.mark`)
and the 5 s ticks due are applied before each mark and each reading (:meth:`RateMeter.rate`), silent ticks included,
so the rate is the same whenever and however often it is read.
"""
from __future__ import annotations

import math
import threading

__all__ = ["RateMeter", "TICK_S", "TIME_CONSTANT_S"]

#: the moving average's time constant (Yammer's one-minute rate)
TIME_CONSTANT_S = 60.0
#: how often the average takes in the events marked since its last tick (Yammer's 5 s)
TICK_S = 5.0
_ALPHA = 1.0 - math.exp(-TICK_S / TIME_CONSTANT_S)


class RateMeter:
    """The one-minute moving average rate (events per second) of the events marked since *now*. Safe to mark from
    one thread and read from others."""

    def __init__(self, now: float):
        self._tick_at = now + TICK_S  # when the next tick is due
        self._uncounted = 0
        self._rate = 0.0
        self._started = False
        self._lock = threading.Lock()

    def mark(self, now: float, n: int = 1) -> None:
        """*n* events happened at *now*."""
        with self._lock:
            self._tick(now)
            self._uncounted += n

    def rate(self, now: float) -> float:
        """The rate at *now* (0 until the first 5 s have passed)."""
        with self._lock:
            self._tick(now)
            return self._rate

    def _tick(self, now: float) -> None:
        if now < self._tick_at:
            return
        ticks = int((now - self._tick_at) // TICK_S) + 1
        self._tick_at += ticks * TICK_S
        instant = self._uncounted / TICK_S
        self._uncounted = 0
        if self._started:
            self._rate += _ALPHA * (instant - self._rate)
        else:
            self._rate, self._started = instant, True
        if ticks > 1:  # the ticks after it took in nothing
            self._rate *= (1.0 - _ALPHA) ** (ticks - 1)
