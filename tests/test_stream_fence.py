"""The stream's in-flight fence cannot wedge: an exception inside the hand-out (here: the positions map raising, as
an asynchronous exception could) leaves the flag down, so the rebalancer's fence() returns at once (before, the flag
stayed up and fence() spun forever). Pure code: no services needed."""
import queue
import threading
from collections import namedtuple

import pytest

from zkconsumer.consumer.stream import Chunk, Generation, KafkaStream

R = namedtuple("R", "topic partition offset")


class FailsOnce(dict):
    def __init__(self):
        super().__init__()
        self.failed = False

    def __setitem__(self, k, v):
        if not self.failed:
            self.failed = True
            raise KeyboardInterrupt("landed inside the hand-out")
        super().__setitem__(k, v)


def test_exception_in_the_hand_out_does_not_wedge_the_fence():
    q = queue.Queue()
    q.put(Chunk(0, ("t", 0), [R("t", 0, 0), R("t", 0, 1)]))
    positions = FailsOnce()
    s = KafkaStream(q, Generation(), positions, timeout_ms=0)
    with pytest.raises(KeyboardInterrupt):
        next(s)
    done = threading.Event()
    threading.Thread(target=lambda: (s.fence(), done.set()), daemon=True).start()
    assert done.wait(2.0), "fence() wedged on an in-flight flag left up by an exception"
    assert next(s).offset == 0 and positions == {("t", 0): 1}  # nothing skipped: the stream goes on
