# Types of the C extension zkconsumer._stream (zkconsumer/_stream.c).
from typing import Any

class HandOut:
    _records: Any
    _count: int
    _index: int
    _chunk_gen: Any
    _generation: Any
    _part: Any
    _lease: Any
    _clock: Any
    _closing: bool
    _inflight: bool
    def __iter__(self) -> "HandOut": ...
    def __next__(self) -> Any: ...
