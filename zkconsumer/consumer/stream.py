"""Streams: what the application iterates (the old ``KafkaStream`` / ``ConsumerIterator``).

Fetcher threads put :class:`Chunk` objects — a batch of records of one partition, tagged with the generation it was
fetched under and carrying the partition's :class:`~.partition_info.PartitionTopicInfo` — on a bounded per-stream
queue (``queued.max.message.chunks``). Iterating a stream yields records one by one and records the partition's
consumed position (the next offset, as Kafka 1.1.1 ``ConsumerIterator.next`` does) on that object when the record
is handed out. A chunk whose records are a :class:`~.partition_info.ResetTo` marks a reset in queue order: the
stream records its offset as the consumed position when it gets there (Kafka 1.1.1
``PartitionTopicInfo.resetConsumeOffset``).

The invariant: a stream never hands out a record of a chunk from an older generation. Every rebalance, session
suspension or loss bumps the connector's generation before ownership changes, so records fetched for a partition
this consumer may no longer own are dropped instead of delivered.
"""
import queue
import time
from collections import namedtuple

from ..errors import ConsumerTimeoutError
from .lease import NoLease
from .partition_info import ResetTo

# part: the partition's PartitionTopicInfo (None for a fetcher's error); nbytes: keys + values, for metrics
Chunk = namedtuple("Chunk", "generation part records nbytes", defaults=(0,))

SHUTDOWN = object()  # sentinel put on every queue by shutdown(): iteration ends


class Generation:
    """The current delivery generation, shared by the connector, fetchers and streams (a plain int cell)."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class PyHandOut:
    """The per-record hand-out in Python: what :class:`KafkaStream` inherits when the C one (``zkconsumer._stream``,
    the same steps) is not built. Reads the fields :class:`KafkaStream` keeps."""

    def __next__(self):
        while True:
            if self._clock() >= self._lease.deadline:  # the session may have expired (a pause): ask ZooKeeper first
                self._wait_lease()
            self._inflight = True
            try:  # the flag always comes down, even if an exception lands in the hand-out (no wedged fence)
                i = self._index
                if i < self._count and self._chunk_gen == self._generation.value and not self._closing:
                    rec = self._records[i]
                    self._part.consumed = rec.offset + 1
                    self._index = i + 1
                    return rec
            finally:
                self._inflight = False
            if not self._load_chunk():
                raise StopIteration


try:
    from .._stream import HandOut
    HAND_OUT = "c"
except ImportError:  # no C compiler at install time
    HandOut = PyHandOut  # type: ignore[misc,assignment]
    HAND_OUT = "python"


class _Stream:
    """Everything of a stream but the per-record hand-out (see :class:`KafkaStream`)."""

    def __init__(self, chunk_queue, generation, timeout_ms=-1, name="stream", lease=None):
        self.queue = chunk_queue
        self._generation = generation
        self._timeout = None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000.0
        self.name = name
        self._records = ()
        self._count = 0                     # len(self._records)
        self._index = 0
        self._chunk_gen = -1
        self._lease = lease if lease is not None else NoLease()
        self._clock = self._lease.clock  # the lease's (injectable) clock
        self._part = None                   # the PartitionTopicInfo of the chunk being handed out
        self.messages = 0                   # records in the chunks taken (metrics: MessagesPerSec, per chunk)
        self.bytes = 0                      # their keys + values (BytesPerSec)
        self.by_topic = {}                  # topic -> [messages, bytes] (the Scala per-topic ConsumerTopicMetrics)
        self._ended = False
        self._closing = False
        self._inflight = False

    def __iter__(self):
        return self

    def _wait_lease(self):
        """Block until the lease is renewed, or the stream closes or its chunk's generation ends."""
        self._lease.wait_fresh(lambda: self._closing or self._chunk_gen != self._generation.value)

    def _load_chunk(self):
        """Block for the next chunk of the current generation; False when the stream has ended. Raises
        ConsumerTimeoutError after consumer.timeout.ms."""
        self._records = ()
        self._count = 0
        self._index = 0
        while True:
            if self._ended or self._closing:
                self._ended = True
                return False
            chunk = self._take()
            if chunk is SHUTDOWN:
                self._ended = True
                return False
            if chunk is _TIMEOUT:
                raise ConsumerTimeoutError("no message within consumer.timeout.ms=%d on %s"
                                           % (int(self._timeout * 1000), self.name))
            records = chunk.records
            if type(records) is ResetTo:  # in order behind what was fetched before the reset
                _record_reset(chunk.part, records)
                continue
            if chunk.generation != self._generation.value:
                continue  # fetched before a rebalance: the partition may belong to someone else now
            if isinstance(records, Exception):  # the fetcher's failure persists: tell the application
                raise records
            part = self._part = chunk.part
            self._chunk_gen = chunk.generation
            self._index = 0
            self._records = records
            n = self._count = len(records)
            self.messages += n
            self.bytes += chunk.nbytes
            counts = self.by_topic.setdefault(part.tp[0], [0, 0])
            counts[0] += n
            counts[1] += chunk.nbytes
            return True

    def give_back(self, rec):
        """Undo the hand-out of ``rec``, the record this stream handed out last, when the application will not
        process it (e.g. a message limit reached): the partition's consumed position goes back to ``rec.offset``,
        so no commit counts it, and the stream hands it out again if iterated further."""
        part = self._part
        if part is None or part.tp != (rec.topic, rec.partition) or self._index < 1 \
                or self._records[self._index - 1] is not rec or part.consumed != rec.offset + 1:
            raise ValueError("only the record %s handed out last can be given back" % self.name)
        self._index -= 1
        part.consumed = rec.offset

    def close(self):
        """End iteration promptly (signal-safe: never blocks). Records already handed out stay consumed."""
        self._closing = True
        try:
            self.queue.put_nowait(SHUTDOWN)
        except queue.Full:
            pass  # _take notices _closing within a second

    def fence(self):
        """Barrier: after this returns, no record fetched under an older generation is handed out (the caller has
        bumped the generation first). A stream is iterated by one thread at a time (as the Scala iterator): with two,
        one thread's flag could hide the other's hand-out."""
        while self._inflight:
            time.sleep(0.0001)

    def _take(self):
        """The next chunk, _TIMEOUT, or SHUTDOWN."""
        q = self.queue
        if self._timeout is None:
            while True:
                try:
                    return q.get(timeout=1.0)
                except queue.Empty:
                    if self._closing:
                        return SHUTDOWN
        deadline = time.monotonic() + self._timeout
        while True:
            if self._closing:
                return SHUTDOWN
            try:  # a queued chunk is taken even when consumer.timeout.ms is 0
                return q.get(timeout=max(0.0, min(deadline - time.monotonic(), 1.0)))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return _TIMEOUT

    def clear(self):
        """Drop every queued chunk (as Kafka 1.1.1 ``ZKRebalancerListener.clearFetcherQueues`` does in a rebalance).
        A reset marker dropped here is recorded all the same: the records behind it are dropped too, and the next
        fetch starts from the reset point instead of resetting again."""
        dropped = 0
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return dropped
            if item is SHUTDOWN:
                self.queue.put(SHUTDOWN)
                return dropped
            if type(item.records) is ResetTo:
                _record_reset(item.part, item.records)
            dropped += 1


class KafkaStream(_Stream, HandOut):  # type: ignore[valid-type,misc]
    """An iterable of records (kafka-python ``ConsumerRecord``: topic, partition, offset, timestamp, key, value...).

    ``next()`` raises :class:`ConsumerTimeoutError` when nothing arrives within ``consumer.timeout.ms``
    (-1 blocks forever); iteration can continue afterwards, as with the Scala iterator. Iteration ends after
    ``shutdown()``.

    Fencing without a lock on the hot path: around the generation check, the position update and the hand-out of
    one record the stream raises its ``_inflight`` flag. :meth:`fence` — called by the rebalancer right after it
    bumps the generation — waits until the flag is down. A hand-out that checked the generation before the bump has
    then finished (and its position is recorded); every later one sees the new generation and hands nothing out.
    (Attribute stores and loads are sequentially consistent under the interpreter lock.)

    The per-record hand-out is ``zkconsumer._stream.HandOut`` (C) when built, else :class:`PyHandOut`: the same
    steps (``HAND_OUT`` says which).
    """


class PyKafkaStream(_Stream, PyHandOut):
    """A :class:`KafkaStream` with the Python hand-out whether or not the C one is built (tests run both)."""


def _record_reset(part, marker):
    """The partition's consumed position becomes the reset point of *marker* (a :class:`ResetTo`; an ended
    ownership's object: harmless), and whoever commits it is told."""
    part.consumed = marker.offset
    if part.reset_to == marker.offset:
        part.reset_to = None
    if marker.recorded is not None:
        marker.recorded(part)


_TIMEOUT = object()
