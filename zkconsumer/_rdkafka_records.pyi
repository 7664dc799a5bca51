# Types of the C extension zkconsumer._rdkafka_records (zkconsumer/_rdkafka_records.c).
from typing import Any, Dict, List, Optional, Sequence, Tuple

def from_messages(messages: Sequence[Any], record_cls: type, tp_cls: Any,
                  eof_code: int) -> Tuple[Dict[Any, List[Any]], Optional[Any]]: ...

def reads_fields(message: Any) -> bool: ...
