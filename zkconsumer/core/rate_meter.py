"""A one-minute rate of a growing count, as the Scala consumer's meters gave it (pure: the clock is passed in).

Kafka 1.1.1's ``MinFetchRate`` gauge (``AbstractFetcherManager``) is the smallest ``requestRate.oneMinuteRate`` of
its fetcher threads: a Yammer ``Meter``, an exponentially weighted moving average with a 60 s time constant. A
fetcher that stops fetching shows a rate falling towards 0 within minutes, where an average since the start would
hardly move after a day of fetching. :class:`RateMeter` keeps that average of a counter someone else increments: it
reads the counter when asked (:meth:`RateMeter.rate`), weighing the rate since the last reading by
``1 - exp(-elapsed / 60 s)``, so readings at any interval (a scrape every 15 s, or one an hour later) give the
same decay per second as Yammer's 5 s ticks.
"""
from __future__ import annotations

import math
import threading
from typing import Optional

__all__ = ["RateMeter", "TIME_CONSTANT_S", "MIN_INTERVAL_S"]

#: the moving average's time constant (Yammer's one-minute rate)
TIME_CONSTANT_S = 60.0
#: readings closer together than this reuse the last rate (an instant rate over a few milliseconds is noise)
MIN_INTERVAL_S = 1.0


class RateMeter:
    """The one-minute moving average rate (per second) of a count that only grows, from *count* at *now*.

    :meth:`rate` is None until :data:`MIN_INTERVAL_S` has passed since the meter was made; the first rate is the
    average since then. Safe to read from several threads."""

    def __init__(self, count: float, now: float):
        self._count, self._at = count, now
        self._rate: Optional[float] = None
        self._lock = threading.Lock()

    def rate(self, count: float, now: float) -> Optional[float]:
        """The rate after reading *count* at *now* (seconds on the same clock as the meter was made with)."""
        with self._lock:
            elapsed = now - self._at
            if elapsed < MIN_INTERVAL_S:
                return self._rate
            instant = max(0.0, count - self._count) / elapsed
            if self._rate is None:
                self._rate = instant
            else:
                self._rate += (1.0 - math.exp(-elapsed / TIME_CONSTANT_S)) * (instant - self._rate)
            self._count, self._at = count, now
            return self._rate
