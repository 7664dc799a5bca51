"""The ZooKeeper layout shared with the Scala old consumer and the brokers (Kafka's ``kafka.utils.ZkUtils``).

* :mod:`.names` - validation of group ids, topics, consumer ids, partitions, broker ids (no unsafe path ever).
* :mod:`.paths` - builders for every znode path, and ``parse_offset_path`` for ExportZkOffsets lines.
* :mod:`.connect` - ``zookeeper.connect`` parsing (hosts + chroot).
* :mod:`.codecs` - encode/decode of every znode's data (implemented in :mod:`.brokers` and :mod:`.consumers`).

Pure functions only; nothing here talks to ZooKeeper.
"""

from .codecs import *  # noqa: F401,F403
from .codecs import __all__ as _codecs_all
# "x as x": an explicit re-export for type checkers (they cannot read the computed __all__ below)
from .connect import DEFAULT_ZK_PORT as DEFAULT_ZK_PORT, ZkConnect as ZkConnect, parse_zk_connect as parse_zk_connect
from .names import (is_legal_name as is_legal_name, validate_broker_id as validate_broker_id,
                    validate_consumer_id as validate_consumer_id, validate_group as validate_group,
                    validate_partition as validate_partition, validate_topic as validate_topic)
from .paths import *  # noqa: F401,F403
from .paths import __all__ as _paths_all

__all__ = list(_codecs_all) + list(_paths_all) + [
    "DEFAULT_ZK_PORT", "ZkConnect", "parse_zk_connect",
    "is_legal_name", "validate_broker_id", "validate_consumer_id", "validate_group", "validate_partition",
    "validate_topic",
]
