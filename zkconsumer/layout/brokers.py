"""Codecs for the broker-written znodes: registrations, topic assignments, partition state, controller.

``/brokers/ids/[id]`` (registration versions 1-5), ``/brokers/topics/[t]``, ``.../partitions/[p]/state``,
``/controller`` and ``/controller_epoch``, as Kafka's brokers write them (0.8.2 ``ZkUtils.registerBrokerInZk``
and ``ZkUtils.leaderAndIsrZkData``; 1.1.1 ``kafka.zk.ZkData``: ``BrokerIdZNode``, ``TopicZNode``,
``TopicPartitionStateZNode``, ``ControllerZNode``, ``ControllerEpochZNode``).  Decoders take
``(data: bytes, path: str)``, accept fields in any order, keep unknown fields in ``extra`` and raise
:class:`~zkconsumer.errors.ZnodeFormatError` (naming the path) on empty/non-UTF-8/non-JSON data, wrong JSON types,
missing required fields and wrong field types.  Encoders return UTF-8 bytes in the field order real brokers write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ZnodeFormatError
from ._json import MAX_INT32, Fields, dumps, load_json_object, to_text

__all__ = [
    "Endpoint", "parse_endpoint", "BrokerRegistration", "decode_broker_registration", "encode_broker_registration",
    "TopicAssignment", "decode_topic_assignment", "encode_topic_assignment",
    "PartitionState", "decode_partition_state", "encode_partition_state",
    "ControllerInfo", "decode_controller", "encode_controller", "decode_controller_epoch",
    "encode_controller_epoch",
]

# kafka.cluster.EndPoint.uriParseExp (0.10.x-1.x)
_ENDPOINT_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)\Z")
# at most 10 digits: int() of a longer digit string may raise ValueError (Python's 4300-digit limit)
_PARTITION_KEY_RE = re.compile(r"(0|[1-9][0-9]{0,9})\Z")


# ---- /brokers/ids/[id] ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Endpoint:
    """One ``"endpoints"`` entry, ``LISTENER://host:port``; ``security_protocol`` resolved through
    ``listener_security_protocol_map`` when present (v4+), else equal to the listener name (v2/v3)."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % (self.listener_name, host, self.port)


def parse_endpoint(text: str, protocol_map: Optional[Dict[str, str]] = None) -> Endpoint:
    """Parse ``"PLAINTEXT://host:9092"`` like ``EndPoint.createEndPoint``; raises ``ValueError``."""
    m = _ENDPOINT_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError("unable to parse endpoint %r (expected LISTENER://host:port)" % (text,))
    listener, host, port = m.group(1), m.group(2), int(m.group(3))
    if protocol_map is not None:
        if listener not in protocol_map:
            raise ValueError("listener %r of endpoint %r is not in listener_security_protocol_map"
                             % (listener, text))
        protocol = protocol_map[listener]
    else:
        protocol = listener
    return Endpoint(listener, host, port, protocol)


@dataclass
class BrokerRegistration:
    """Data of ``/brokers/ids/[brokerId]``.

    ``broker_id`` is not part of the JSON; the decoder takes it from the path's last component when that is an
    integer (or from its ``broker_id`` argument).  ``host``/``port`` may be ``None``/``-1`` for v2+ brokers without
    a PLAINTEXT listener.  ``timestamp`` is kept as the string the broker wrote.  ``extra`` keeps unknown fields.
    """

    broker_id: Optional[int]
    host: Optional[str]
    port: Optional[int]
    endpoints: List[str] = field(default_factory=list)
    rack: Optional[str] = None
    listener_security_protocol_map: Optional[Dict[str, str]] = None
    jmx_port: int = -1
    timestamp: Optional[str] = None
    version: int = 4
    features: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    def parsed_endpoints(self) -> List[Endpoint]:
        """The endpoints as :class:`Endpoint` (v1: one synthesised PLAINTEXT endpoint from host/port)."""
        if self.version <= 1:
            if self.host is None or self.port is None:
                return []
            return [Endpoint("PLAINTEXT", self.host, self.port, "PLAINTEXT")]
        return [parse_endpoint(e, self.listener_security_protocol_map) for e in self.endpoints]

    def plaintext_endpoint(self) -> Optional[Tuple[str, int]]:
        """``(host, port)`` the old consumer can connect to, or ``None``.

        Uses the endpoint of the listener named ``PLAINTEXT`` (Kafka 1.1.1 ``ClientUtils.getPlaintextBrokerEndPoints``)
        when its host is non-empty and its port is valid, otherwise the top-level ``host``/``port`` (what 0.8.2
        ``Broker.createBroker`` reads).  A broker without a PLAINTEXT listener registers an empty endpoint / ``null``
        host (Kafka 0.9.0.1 ``KafkaHealthcheck.register``), and an endpoint may carry an empty host; both give
        ``None`` here.
        """
        for ep in self.parsed_endpoints():
            if ep.listener_name == "PLAINTEXT" and ep.host and 0 < ep.port <= 65535:
                return ep.host, ep.port
        if self.host and self.port is not None and 0 < self.port <= 65535:
            return self.host, self.port
        return None


    def endpoint_for(self, security_protocol: str = "PLAINTEXT") -> Optional[Tuple[str, int]]:
        """``(host, port)`` of the endpoint a client speaking *security_protocol* connects to, or ``None``:
        :meth:`plaintext_endpoint` for PLAINTEXT; otherwise the listener named like the protocol, else the first
        listener whose ``listener_security_protocol_map`` entry is that protocol (a broker may name its listeners
        freely, e.g. ``EXTERNAL:SASL_SSL``)."""
        if security_protocol == "PLAINTEXT":
            return self.plaintext_endpoint()
        usable = [ep for ep in self.parsed_endpoints()
                  if ep.security_protocol == security_protocol and ep.host and 0 < ep.port <= 65535]
        usable.sort(key=lambda ep: ep.listener_name != security_protocol)
        return (usable[0].host, usable[0].port) if usable else None


_BROKER_KNOWN = {"version", "host", "port", "endpoints", "rack", "listener_security_protocol_map", "jmx_port",
                 "timestamp", "features"}


def _broker_id_from_path(path: str) -> Optional[int]:
    last = (path or "").rstrip("/").rpartition("/")[2]
    if _PARTITION_KEY_RE.match(last) and int(last) <= MAX_INT32:
        return int(last)
    return None


def decode_broker_registration(data: bytes, path: str, broker_id: Optional[int] = None) -> BrokerRegistration:
    """Decode a broker registration, versions 1-5 (and later versions, read like v4/v5 as Scala 1.x does).

    Required: ``version`` (>= 1); v1: ``host`` (string) and ``port`` (int); v2+: ``endpoints`` (array of
    parseable ``LISTENER://host:port`` strings).  Optional: ``host``/``port`` (v2+, may be null), ``rack``
    (string or null), ``listener_security_protocol_map`` (object of strings), ``jmx_port``, ``timestamp``
    (string or number, kept as string), ``features`` (object).
    """
    obj = load_json_object(data, path, "broker registration")
    f = Fields(obj, path, data)
    version = f.int("version", lo=-MAX_INT32 - 1, hi=MAX_INT32)
    if version < 1:
        raise f.error("unsupported broker registration version %d" % version)
    host: Optional[str]
    port: Optional[int]
    if version == 1:
        host = f.str("host")
        port = f.int("port", lo=-1, hi=65535)
        endpoints: List[str] = []
    else:
        host = f.str("host", required=False, nullable=True)
        port = f.int("port", required=False, nullable=True, lo=-1, hi=65535)
        raw = f.raw("endpoints")
        if not isinstance(raw, list) or not all(isinstance(e, str) for e in raw):
            raise f.error("field 'endpoints' must be an array of strings")
        endpoints = list(raw)
    protocol_map = f.dict("listener_security_protocol_map", required=False, nullable=True)
    if protocol_map is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in protocol_map.items()):
            raise f.error("field 'listener_security_protocol_map' must map strings to strings")
        protocol_map = dict(protocol_map)
    for e in endpoints:
        try:
            parse_endpoint(e, protocol_map)
        except ValueError as exc:
            raise f.error(str(exc)) from exc
    features = f.dict("features", required=False, nullable=True)
    return BrokerRegistration(
        broker_id=broker_id if broker_id is not None else _broker_id_from_path(path),
        host=host, port=port, endpoints=endpoints,
        rack=f.str("rack", required=False, nullable=True),
        listener_security_protocol_map=protocol_map,
        jmx_port=f.int("jmx_port", required=False, default=-1, lo=-1, hi=65535),
        timestamp=f.timestamp(), version=version,
        features=dict(features) if features is not None else None,
        extra=f.extras(_BROKER_KNOWN))


def encode_broker_registration(reg: BrokerRegistration) -> bytes:
    """Encode like a real broker of ``reg.version``.  v4 (the default), e.g.::

        {"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h:9092"],
         "jmx_port":-1,"host":"h","timestamp":"1420070400000","port":9092,"version":4}

    v1 is ``{"jmx_port":-1,"timestamp":"...","host":"h","version":1,"port":9092}`` (0.8.2 ``registerBrokerInZk``);
    v2/v3 add ``endpoints`` (and ``rack``); v5 adds ``features``.  For v2+ with no endpoints given, one PLAINTEXT
    endpoint is derived from host/port; a v4+ registration without a protocol map gets identity mappings.  Unknown
    fields kept in ``extra`` are written after the known ones.
    """
    v = reg.version
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError("unsupported broker registration version %r" % (v,))
    ts = reg.timestamp if reg.timestamp is not None else ""
    ts = str(ts)
    if v == 1:
        if not reg.host or reg.port is None:
            raise ValueError("a version 1 broker registration needs host and port")
        out: Dict[str, Any] = {"jmx_port": reg.jmx_port, "timestamp": ts, "host": reg.host, "version": 1,
                               "port": reg.port}
    else:
        endpoints = list(reg.endpoints)
        if not endpoints:
            if not reg.host or reg.port is None:
                raise ValueError("a broker registration needs endpoints or host and port")
            endpoints = [str(Endpoint("PLAINTEXT", reg.host, reg.port, "PLAINTEXT"))]
        for e in endpoints:
            parse_endpoint(e, reg.listener_security_protocol_map if v >= 4 else None)
        port = reg.port if reg.port is not None else -1
        if v <= 3:
            out = {"jmx_port": reg.jmx_port, "timestamp": ts, "endpoints": endpoints}
            if v == 3 and reg.rack is not None:
                out["rack"] = reg.rack
            out.update({"host": reg.host, "version": v, "port": port})
        else:
            pmap = reg.listener_security_protocol_map
            if pmap is None:
                pmap = {parse_endpoint(e).listener_name: parse_endpoint(e).listener_name for e in endpoints}
            out = {}
            if v >= 5:
                out["features"] = reg.features if reg.features is not None else {}
            out.update({"listener_security_protocol_map": pmap, "endpoints": endpoints})
            if reg.rack is not None:
                out["rack"] = reg.rack
            out.update({"jmx_port": reg.jmx_port, "host": reg.host, "timestamp": ts, "port": port, "version": v})
    for k, val in reg.extra.items():
        out.setdefault(k, val)
    return dumps(out)


# ---- /brokers/topics/[t] --------------------------------------------------------------------------------------------

@dataclass
class TopicAssignment:
    """``/brokers/topics/[topic]``: partition -> replica broker ids (int keys).  ``adding``/``removing`` are the
    v2 ``adding_replicas``/``removing_replicas`` maps (empty for v1)."""

    version: int
    partitions: Dict[int, List[int]]
    adding: Dict[int, List[int]] = field(default_factory=dict)
    removing: Dict[int, List[int]] = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)

    def partition_ids(self) -> List[int]:
        """Partition ids ascending, as ``ZkUtils.getPartitionsForTopics`` returns them."""
        return sorted(self.partitions)


def _partition_map(f: Fields, key: str, required: bool) -> Dict[int, List[int]]:
    raw = f.dict(key, required=required, default=None, nullable=not required)
    if raw is None:
        return {}
    out: Dict[int, List[int]] = {}
    for k, v in raw.items():
        if not _PARTITION_KEY_RE.match(k) or int(k) > MAX_INT32:
            raise f.error("field %r has a key %r that is not a partition id" % (key, k))
        out[int(k)] = f.check_int_list(v, "replicas of partition %s in %r" % (k, key), lo=0)
    return out


def decode_topic_assignment(data: bytes, path: str) -> TopicAssignment:
    """Decode ``{"version":1,"partitions":{"0":[1,2]}}`` (v1) or v2 with ``adding_replicas``/``removing_replicas``.

    ``partitions`` is required here (Scala treats its absence as "no partitions"; such a node is corrupt);
    a missing ``version`` defaults to 1 because Scala never reads it.
    """
    obj = load_json_object(data, path, "topic partition assignment")
    f = Fields(obj, path, data)
    return TopicAssignment(
        version=f.int("version", required=False, default=1, lo=0, hi=MAX_INT32),
        partitions=_partition_map(f, "partitions", True),
        adding=_partition_map(f, "adding_replicas", False),
        removing=_partition_map(f, "removing_replicas", False),
        extra=f.extras({"version", "partitions", "adding_replicas", "removing_replicas"}))


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    """``{"version":1,"partitions":{"0":[1,2],...}}`` (keys ascending); v2 adds ``adding_replicas`` and
    ``removing_replicas``."""
    def m(d: Dict[int, List[int]]) -> Dict[str, List[int]]:
        return {str(p): [int(r) for r in d[p]] for p in sorted(d)}
    out: Dict[str, Any] = {"version": assignment.version, "partitions": m(assignment.partitions)}
    if assignment.version >= 2:
        out["adding_replicas"] = m(assignment.adding)
        out["removing_replicas"] = m(assignment.removing)
    return dumps(out)


# ---- /brokers/topics/[t]/partitions/[p]/state ------------------------------------------------------------------

@dataclass
class PartitionState:
    """``{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}``; ``leader`` -1 = none."""

    leader: int
    leader_epoch: int
    isr: List[int]
    controller_epoch: int
    version: int = 1
    extra: Dict[str, Any] = field(default_factory=dict)


def decode_partition_state(data: bytes, path: str) -> PartitionState:
    """Decode partition state; ``leader``, ``leader_epoch``, ``isr``, ``controller_epoch`` are required."""
    obj = load_json_object(data, path, "partition state")
    f = Fields(obj, path, data)
    lo32 = -MAX_INT32 - 1
    return PartitionState(
        leader=f.int("leader", lo=lo32, hi=MAX_INT32), leader_epoch=f.int("leader_epoch", lo=lo32, hi=MAX_INT32),
        isr=f.int_list("isr", lo=0), controller_epoch=f.int("controller_epoch", lo=lo32, hi=MAX_INT32),
        version=f.int("version", required=False, default=1, lo=lo32, hi=MAX_INT32),
        extra=f.extras({"leader", "leader_epoch", "isr", "controller_epoch", "version"}))


def encode_partition_state(state: PartitionState) -> bytes:
    """Encode with the fields in the order of the example above (readers accept any order)."""
    out: Dict[str, Any] = {"controller_epoch": state.controller_epoch, "leader": state.leader,
                           "version": state.version, "leader_epoch": state.leader_epoch, "isr": list(state.isr)}
    out.update(state.extra)
    return dumps(out)


# ---- /controller, /controller_epoch ---------------------------------------------------------------------------------

@dataclass
class ControllerInfo:
    """``/controller``: ``{"version":1,"brokerid":1,"timestamp":"..."}``."""

    broker_id: int
    version: int = 1
    timestamp: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


def decode_controller(data: bytes, path: str) -> ControllerInfo:
    """Decode ``/controller``; ``brokerid`` is required."""
    obj = load_json_object(data, path, "controller registration")
    f = Fields(obj, path, data)
    return ControllerInfo(broker_id=f.int("brokerid", lo=0, hi=MAX_INT32),
                          version=f.int("version", required=False, default=1, lo=0, hi=MAX_INT32),
                          timestamp=f.timestamp(), extra=f.extras({"brokerid", "version", "timestamp"}))


def encode_controller(info: ControllerInfo) -> bytes:
    """``{"version":1,"brokerid":N,"timestamp":"<ms>"}``."""
    return dumps({"version": info.version, "brokerid": info.broker_id,
                  "timestamp": "" if info.timestamp is None else str(info.timestamp)})


def decode_controller_epoch(data: bytes, path: str) -> int:
    """``/controller_epoch``: the epoch as a plain decimal string."""
    text = to_text(data, path).strip()
    if not re.match(r"[0-9]{1,10}\Z", text) or int(text) > MAX_INT32:
        raise ZnodeFormatError(path, "controller epoch must be a non-negative integer", data)
    return int(text)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(int(epoch)).encode("ascii")
