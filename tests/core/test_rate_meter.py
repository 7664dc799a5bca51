"""RateMeter: the one-minute moving average rate behind MinFetchRate, Yammer's ticked every 5 s (pure; the clock
is passed in)."""
import math

from hypothesis import given, settings, strategies as st

from zkconsumer.core.rate_meter import TICK_S, RateMeter


def _steady(meter, per_s, start, end, step=0.1):
    """Mark per_s events a second from start to end (step apart); returns end."""
    t = start
    while t < end - 1e-9:
        meter.mark(t, int(round(per_s * step)))
        t += step
    return end


def test_zero_until_the_first_tick_then_the_first_ticks_rate():
    m = RateMeter(0.0)
    _steady(m, 10, 0.0, 4.9)
    assert m.rate(4.99) == 0.0
    assert math.isclose(m.rate(5.0), 49 / TICK_S)


def test_a_stopped_count_falls_as_scalas_one_minute_rate_however_it_is_read():
    """10/s for an hour, then nothing: a minute later 10/e, under 1/s ~140 s later (a minute x ln 10), whether the
    meter was read every second, every 15 s or never before (an average since the start would read ~9.8/s)."""
    for every in (1.0, 15.0, None):
        m = RateMeter(0.0)
        t = 0.0
        while t < 3600:
            t = _steady(m, 10, t, t + (every or 3600))
            m.rate(t) if every else None
        assert math.isclose(m.rate(3660.0), 10 / math.e, rel_tol=0.01), every
        assert m.rate(3600 + 60 * math.log(10) + TICK_S) < 1.0


def test_a_day_then_ten_silent_minutes_read_once_reads_near_zero():
    m = RateMeter(0.0)
    _steady(m, 10, 0.0, 86400.0, step=1.0)
    assert m.rate(86400 + 600.0) < 0.01


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(0, 400), st.integers(0, 50)), max_size=60),
       st.lists(st.floats(0, 400), max_size=20))
def test_reading_does_not_change_the_rate(marks, reads):
    """The same events give the same rate whenever and however often the meter is read in between."""
    events = sorted(marks)
    read_often, read_once = RateMeter(0.0), RateMeter(0.0)
    pending = sorted(reads)
    for at, n in events:
        while pending and pending[0] <= at:
            read_often.rate(pending.pop(0))
        read_often.mark(at, n)
        read_once.mark(at, n)
    assert math.isclose(read_often.rate(500.0), read_once.rate(500.0), rel_tol=1e-9, abs_tol=1e-12)
    rates = [n / TICK_S for _, n in events] or [0.0]
    assert 0.0 <= read_once.rate(500.0) <= sum(rates) + 1e-9
