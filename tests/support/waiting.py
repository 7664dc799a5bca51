"""The tests' one bounded wait: every wait in the suite has a deadline, and says what it waited for when it ends."""
import time
from typing import Any, Callable, Union


def wait_until(predicate: Callable[[], Any], timeout: float, message: Union[str, Callable[[], Any]] = "condition",
               interval: float = 0.1) -> Any:
    """Call ``predicate()`` every *interval* seconds until it returns a truthy value, and return that value; after
    *timeout* seconds raise AssertionError naming *message* (a string, or a callable whose result is shown, for
    details known only at the end) and the predicate's last value."""
    deadline = time.monotonic() + timeout
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            what = message() if callable(message) else message
            raise AssertionError("timed out after %.1f s waiting for %s (last value: %r)" % (timeout, what, last))
        time.sleep(interval)
