"""RateMeter: the one-minute moving average rate behind MinFetchRate (pure; the clock is passed in)."""
import math

from hypothesis import given, strategies as st

from zkconsumer.core.rate_meter import TIME_CONSTANT_S, RateMeter


def test_first_reading_is_the_average_since_the_start_and_none_before_a_second():
    m = RateMeter(0, 100.0)
    assert m.rate(5, 100.5) is None
    assert m.rate(50, 105.0) == 10.0


def test_a_stopped_count_falls_as_scalas_one_minute_rate():
    """10/s for an hour, then nothing: after 60 s the rate is 10/e, and under 1/s after ~140 s (ln 10 minutes),
    however often it is read, where an average since the start would still read ~9.8/s."""
    for every in (1.0, 5.0, 15.0, 70.0):
        m = RateMeter(0, 0.0)
        count, t = 0, 0.0
        while t < 3600:
            t += every
            count = int(10 * t)
            m.rate(count, t)
        stop = t
        r = None
        while t < stop + 60 - 1e-9:
            t = min(stop + 60, t + every)
            r = m.rate(count, t)
        assert r is not None and math.isclose(r, 10 / math.e, rel_tol=0.02), (every, r)
        t = stop + 60 * math.log(10) + every
        assert m.rate(count, t) < 1.0


@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0.0, 30.0)), min_size=1, max_size=50))
def test_the_rate_stays_within_the_rates_the_count_grew_at(steps):
    """Every reading is a weighted average of the rates the count grew at so far (readings under a second apart
    leave the rate as it was and count towards the next)."""
    m = RateMeter(0, 0.0)
    count, t = 0.0, 0.0
    seen = []
    for per_s, dt in steps:
        t += dt
        count += per_s * dt
        if dt > 0:
            seen.append(per_s)
        r = m.rate(count, t)
        if r is not None:
            assert min(seen) - 1e-6 <= r <= max(seen) + 1e-6


def test_a_reading_long_after_the_last_is_the_average_over_the_gap():
    m = RateMeter(0, 0.0)
    m.rate(600, 60.0)  # 10/s
    r = m.rate(600 + 3600 * 2, 3660.0)  # then 2/s for an hour, read once
    assert math.isclose(r, 2 + 8 * math.exp(-3600 / TIME_CONSTANT_S), rel_tol=1e-9)
