"""The tests' one bounded wait: every wait in the suite has a deadline, and says what it waited for when it ends; and
the end of a child process, bounded the same way."""
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Optional, Union


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


def outcome_within(call: Callable[[], Any], timeout: float) -> list:
    """Run ``call()`` on a daemon thread for at most *timeout* seconds: ``[its result or the exception it raised]``,
    or ``[]`` when it still runs (a request that waits for ever)."""
    outcome: list = []

    def run():
        try:
            outcome.append(call())
        except Exception as e:
            outcome.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return outcome if not t.is_alive() else []


def end_process(proc: subprocess.Popen, timeout: float = 30.0,
                ask: Optional[Callable[[subprocess.Popen], Any]] = None) -> Optional[int]:
    """Unless *proc* has ended: ask it to end (SIGTERM, or ``ask(proc)``), wait at most *timeout* seconds, then
    SIGKILL it and wait 10 s more (TimeoutExpired if even that does not end it). Returns its exit code."""
    if proc.poll() is None:
        (ask or (lambda p: p.send_signal(signal.SIGTERM)))(proc)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def wait_for_coordinator(store: Any, tp: Any, timeout: float = 60.0) -> None:
    """Wait until a Kafka offset store (``zkconsumer.offsets.kafka.KafkaOffsetStore``) reads *tp*'s offset: its
    group's coordinator is found and loaded."""
    from zkconsumer.errors import OffsetStoreError

    def fetch_works() -> bool:
        try:
            store.fetch([tp])
            return True
        except OffsetStoreError:
            return False
    wait_until(fetch_works, timeout, interval=0.5, message="the group's coordinator")
