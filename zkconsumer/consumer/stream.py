"""Streams: what the application iterates (the old ``KafkaStream`` / ``ConsumerIterator``).

Fetcher threads put :class:`Chunk` objects — a batch of records of one partition, tagged with the generation it was
fetched under — on a bounded per-stream queue (``queued.max.message.chunks``). Iterating a stream yields records
one by one and records each partition's consumed position (the next offset, reference §2.8, §4.1) when the
record is handed out.

The invariant: a stream never hands out a record of a chunk from an older generation. Every rebalance, session
suspension or loss bumps the connector's generation before ownership changes, so records fetched for a partition
this consumer may no longer own are dropped instead of delivered.
"""
import queue
import time
from collections import namedtuple

from ..errors import ConsumerTimeoutError

Chunk = namedtuple("Chunk", "generation tp records")

SHUTDOWN = object()  # sentinel put on every queue by shutdown(): iteration ends


class Generation:
    """The current delivery generation, shared by the connector, fetchers and streams (a plain int cell)."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class KafkaStream:
    """An iterable of records (kafka-python ``ConsumerRecord``: topic, partition, offset, timestamp, key, value...).

    ``next()`` raises :class:`ConsumerTimeoutError` when nothing arrives within ``consumer.timeout.ms``
    (-1 blocks forever); iteration can continue afterwards, as with the Scala iterator. Iteration ends after
    ``shutdown()``.

    Fencing: the generation check, the position update and the hand-out of one record happen under the stream's
    lock; :meth:`fence` (called by the rebalancer right after it bumps the generation) takes that lock once, so
    when it returns no record of an older generation can be handed out any more.
    """

    def __init__(self, chunk_queue, generation, positions, timeout_ms=-1, name="stream"):
        import threading
        self.queue = chunk_queue
        self._generation = generation
        self._positions = positions
        self._timeout = None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000.0
        self.name = name
        self._lock = threading.Lock()
        self._records = ()
        self._index = 0
        self._chunk_gen = -1
        self._tp = None
        self._ended = False
        self._closing = False

    def __iter__(self):
        return self

    def __next__(self):
        lock = self._lock
        while True:
            with lock:
                if self._closing:
                    self._ended = True
                i = self._index
                records = self._records
                if not self._ended and i < len(records) and self._chunk_gen == self._generation.value:
                    rec = records[i]
                    self._index = i + 1
                    self._positions[self._tp] = rec.offset + 1
                    return rec
                self._records = ()
                if self._ended:
                    raise StopIteration
            chunk = self._take()
            if chunk is SHUTDOWN:
                with lock:
                    self._ended = True
                raise StopIteration
            if chunk is _TIMEOUT:
                raise ConsumerTimeoutError("no message within consumer.timeout.ms=%d on %s"
                                           % (int(self._timeout * 1000), self.name))
            if chunk.generation != self._generation.value:
                continue  # fetched before a rebalance: the partition may belong to someone else now
            with lock:
                self._records = chunk.records
                self._index = 0
                self._chunk_gen = chunk.generation
                self._tp = chunk.tp

    def close(self):
        """End iteration promptly (signal-safe: never blocks). Records already handed out stay consumed."""
        self._closing = True
        try:
            self.queue.put_nowait(SHUTDOWN)
        except queue.Full:
            pass  # _take notices _closing within a second

    def fence(self):
        """Barrier: after this returns, no record fetched under an older generation is handed out."""
        with self._lock:
            if self._chunk_gen != self._generation.value:
                self._records = ()

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
            remaining = deadline - time.monotonic()
            if self._closing:
                return SHUTDOWN
            if remaining <= 0:
                return _TIMEOUT
            try:
                return q.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue

    def clear(self):
        """Drop every queued chunk (rebalance step: clear the queues, reference §3.6 step 3)."""
        dropped = 0
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return dropped
            if item is SHUTDOWN:
                self.queue.put(SHUTDOWN)
                return dropped
            dropped += 1


_TIMEOUT = object()
