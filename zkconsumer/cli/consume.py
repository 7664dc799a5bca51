"""``zkconsumer consume``: run one member of a ZooKeeper-coordinated group and print what it delivers."""
import base64
import json
import logging
import signal
import sys
import threading

import click

from ..config import ConsumerConfig
from ..consumer import Blacklist, RebalanceListener, Whitelist, ZookeeperConsumerConnector
from ..errors import ConfigError, ConsumerTimeoutError
from ..properties import load_properties, parse_property_override
from .common import given_auth_options, resolve_zookeeper, zookeeper_auth_options

log = logging.getLogger(__name__)


def build_config(zookeeper, group, config_file, properties):
    """consumer.properties, then --property overrides, then --zookeeper/--group (explicit flags win)."""
    props = load_properties(config_file) if config_file else {}
    overrides = dict(parse_property_override(p) for p in properties)
    from ..kafka_security import SECRET_KEYS
    for key in SECRET_KEYS:
        if key in overrides:  # a password on the command line shows in ps and in shell histories
            raise click.BadParameter("%s holds a password: put it in the --config file (or use "
                                     "sasl.credentials.file), not on the command line" % key, param_hint="--property")
    if group:
        overrides["group.id"] = group
    if zookeeper:
        overrides["zookeeper.connect"] = zookeeper
    elif "zookeeper.connect" not in props and "zookeeper.connect" not in overrides:
        overrides["zookeeper.connect"] = resolve_zookeeper(None)
    auth = given_auth_options()  # --zookeeper-auth / --zookeeper-credentials / --zookeeper-set-acl win when given
    if auth.get("zk_credentials"):
        overrides["zookeeper.auth.credentials.file"] = auth["zk_credentials"]
        if "zookeeper.auth.scheme" not in props and "zookeeper.auth.scheme" not in overrides:
            overrides["zookeeper.auth.scheme"] = "digest"
    if auth.get("zk_auth_scheme"):
        overrides["zookeeper.auth.scheme"] = auth["zk_auth_scheme"]
    if auth.get("zk_set_acl"):
        overrides["zookeeper.set.acl"] = "true"
    return ConsumerConfig.from_properties(props, overrides)


def _text(b):
    if b is None:
        return None, None
    try:
        return b.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii"), "base64"


def format_jsonl(msg):
    key, kenc = _text(msg.key)
    value, venc = _text(msg.value)
    out = {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset, "key": key, "value": value}
    headers = getattr(msg, "headers", None)
    if headers:  # record headers (message format v2), values as text or base64 like key and value
        out["headers"] = [[k, _text(v)[0]] for k, v in headers]
    if kenc or venc:
        out["encoding"] = "base64"
        if kenc != venc:  # one is text, the other not: say which
            out["key_encoding"], out["value_encoding"] = kenc or "utf-8", venc or "utf-8"
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


class _LoggingListener(RebalanceListener):
    def __init__(self, emit_events):
        self.emit_events = emit_events

    def _emit(self, kind, partitions):
        if self.emit_events:
            parts = [[t, p] for t, p in sorted(partitions)]
            sys.stderr.write(json.dumps({"event": kind, "partitions": parts}) + "\n")
            sys.stderr.flush()

    def on_revoke(self, partitions):
        self._emit("revoke", partitions)

    def on_assign(self, partitions):
        self._emit("assign", partitions)

    def on_lost(self, partitions):
        self._emit("lost", partitions)


@click.command()
@click.option("--zookeeper", metavar="HOST:PORT[,...][/CHROOT]", default=None,
              help="ZooKeeper connect string [default: zookeeper.connect from --config, $ZK_CONNECT, or the local "
                   "cluster].")
@zookeeper_auth_options
@click.option("--group", default=None, help="Consumer group id (group.id).")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC", help="Topic to consume (repeatable).")
@click.option("--whitelist", default=None, metavar="REGEX", help="Consume every topic matching REGEX.")
@click.option("--blacklist", default=None, metavar="REGEX", help="Consume every topic not matching REGEX.")
@click.option("--streams", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Streams (consumer threads) per topic.")
@click.option("--config", "--consumer.config", "config_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="A consumer.properties file (the Scala consumer's keys).")
@click.option("--property", "--consumer-property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Override one consumer property (repeatable).")
@click.option("--from-beginning", is_flag=True,
              help="Where the group has no committed offset, start at the earliest message "
                   "(auto.offset.reset=smallest), as kafka-console-consumer does; committed offsets still win.")
@click.option("--timeout-ms", type=click.IntRange(1, None), default=None,
              help="Exit (gracefully) when no message arrived for this long (consumer.timeout.ms).")
@click.option("--max-messages", type=click.IntRange(0, None), default=None,
              help="Exit (gracefully) after this many messages.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "value"]), default="jsonl", show_default=True,
              help="jsonl: one JSON object per message; value: the raw value, one per line.")
@click.option("--events", is_flag=True, help="Also print rebalance events (assign/revoke/lost) as JSON on stderr.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics (the Scala consumer's, by name) on this port at /metrics "
                   "(0: a free port; the address is printed on stderr).")
def consume(zookeeper, group, topics, whitelist, blacklist, streams, config_file, properties, from_beginning,
            timeout_ms, max_messages, fmt, events, metrics_port):
    """Join a ZooKeeper-coordinated consumer group and print the messages this member is given.

    SIGTERM and SIGINT shut down gracefully: offsets committed, owner nodes released, exit code 0.
    """
    chosen = [x for x in (bool(topics), whitelist is not None, blacklist is not None) if x]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --topic (repeatable), --whitelist or --blacklist")
    properties = list(properties)
    if from_beginning:
        properties.append("auto.offset.reset=smallest")
    if timeout_ms is not None:
        properties.append("consumer.timeout.ms=%d" % timeout_ms)
    config = build_config(zookeeper, group, config_file, properties)
    if not config.group_id:
        raise ConfigError("group.id", None, "a group id: pass --group or set group.id in --config")
    stop = threading.Event()
    connector = ZookeeperConsumerConnector(config, listener=_LoggingListener(events))
    metrics = None
    if metrics_port is not None:
        from ..metrics import start_metrics_server
        metrics = start_metrics_server(connector, metrics_port)
        click.echo("zkconsumer: serving metrics at http://%s:%d/metrics" % (metrics.addr, metrics.port), err=True)

    def on_signal(signum, frame):
        stop.set()
        connector.shutdown_streams()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if topics:
            stream_map = connector.create_message_streams({t: streams for t in topics})
            all_streams = [s for ss in stream_map.values() for s in ss]
        else:
            flt = Whitelist(whitelist) if whitelist is not None else Blacklist(blacklist)
            all_streams = connector.create_message_streams_by_filter(flt, streams)
        _drain(connector, all_streams, fmt, max_messages, stop)
    finally:
        if metrics is not None:
            metrics.close()
        connector.shutdown()


def _drain(connector, streams, fmt, max_messages, stop):
    """Read every stream on its own thread; write to stdout from one thread, flushed per message."""
    out = sys.stdout
    lock = threading.Lock()
    count = [0]
    done = threading.Event()

    def reader(stream):
        while not stop.is_set():
            try:
                for msg in stream:
                    line = format_jsonl(msg) if fmt == "jsonl" else (msg.value or b"").decode("utf-8", "replace")
                    with lock:
                        if max_messages is not None and count[0] >= max_messages:
                            # another stream reached the limit first: this message is not written out, so it
                            # must not be committed either (at-least-once holds for what the CLI prints)
                            stream.give_back(msg)
                            done.set()
                            return
                        out.write(line + "\n")
                        out.flush()
                        count[0] += 1
                        if max_messages is not None and count[0] >= max_messages:
                            done.set()
                            return
                return  # stream ended: shutdown
            except ConsumerTimeoutError:
                done.set()
                return

    threads = [threading.Thread(target=reader, args=(s,), daemon=True) for s in streams]
    for t in threads:
        t.start()
    while not stop.is_set() and not done.is_set() and any(t.is_alive() for t in threads):
        done.wait(0.2)
    stop.set()
    connector.shutdown_streams()
    for t in threads:
        t.join(5)
