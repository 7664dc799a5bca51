# Types of the C extension zkconsumer._records (zkconsumer/_records.c).
from typing import Any, List, Optional, Sequence, Tuple, Union

def decode_records(buf: Union[bytes, bytearray, memoryview], pos: int, end: int, count: int, base_offset: int,
                   first_timestamp: int, max_timestamp: int, log_append_time: Any, topic: str, partition: int,
                   leader_epoch: int, record_cls: type) -> Tuple[List[Any], List[int], Optional[Tuple[str, str]]]: ...
def payload_bytes(records: Sequence[Any]) -> int: ...
def columns(records: Sequence[Any], min_offset: int, offsets: List[int], timestamps: List[int], types: List[int],
            keys: List[Optional[bytes]], values: List[Optional[bytes]],
            headers: Optional[List[Any]]) -> Tuple[int, Optional[int]]: ...
