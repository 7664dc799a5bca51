"""The stream's in-flight fence cannot wedge: an exception inside the hand-out (here: recording the consumed position
raising, as an asynchronous exception could) leaves the flag down, so the rebalancer's fence() returns at once
(before, the flag stayed up and fence() spun forever). Pure code: no services needed."""
import queue
import threading
from collections import namedtuple

import pytest

from zkconsumer.consumer.partition_info import PartitionTopicInfo
from zkconsumer.consumer import stream as stream_module
from zkconsumer.consumer.stream import Chunk, Generation, KafkaStream, PyKafkaStream

R = namedtuple("R", "topic partition offset")


class FailsOnce(PartitionTopicInfo):
    """Recording the consumed position raises the first time."""

    __slots__ = ("failed",)

    def __setattr__(self, name, value):
        if name == "consumed" and value is not None and not getattr(self, "failed", True):
            object.__setattr__(self, "failed", True)
            raise KeyboardInterrupt("landed inside the hand-out")
        object.__setattr__(self, name, value)


@pytest.mark.parametrize("stream_class", [PyKafkaStream] + ([KafkaStream] if stream_module.HAND_OUT == "c" else []))
def test_exception_in_the_hand_out_does_not_wedge_the_fence(stream_class):
    q = queue.Queue()
    part = FailsOnce(("t", 0), "c-0")
    part.failed = False
    q.put(Chunk(0, part, [R("t", 0, 0), R("t", 0, 1)]))
    s = stream_class(q, Generation(), timeout_ms=0)
    with pytest.raises(KeyboardInterrupt):
        next(s)
    done = threading.Event()
    threading.Thread(target=lambda: (s.fence(), done.set()), daemon=True).start()
    assert done.wait(2.0), "fence() wedged on an in-flight flag left up by an exception"
    assert next(s).offset == 0 and part.consumed == 1  # nothing skipped: the stream goes on
