"""``zkconsumer consume``: run one member of a ZooKeeper-coordinated group and print what it delivers; or, with
``--from-group``, read a group's stream from its committed offsets without joining it."""
import json
import logging
import random
import signal
import sys
import threading

import click

from ..config import ConsumerConfig
from ..consumer import Blacklist, RebalanceListener, Whitelist, ZookeeperConsumerConnector
from ..errors import ConsumerTimeoutError, ZkConsumerError
from ..properties import load_properties, parse_property_override
from .common import given_auth_options, resolve_zookeeper, zookeeper_auth_options
from .message_format import FORMATTER_KEYS, TextFormatter, format_jsonl

log = logging.getLogger(__name__)


def throwaway_group(taken=lambda group: False, rng=random) -> str:
    """A group id as Kafka's console consumer makes one (``console-consumer-NNNNN``) that ``taken(group)`` does not
    say exists: the throwaway group is joined and deleted at exit, so it must never be a group someone has."""
    for _ in range(100):
        group = "console-consumer-%d" % rng.randrange(100000)
        if not taken(group):
            return group
    raise ZkConsumerError("found no free throwaway group name console-consumer-NNNNN in 100 tries: give --group")


def unused_throwaway_group(config, rng=random) -> str:
    """*config*'s throwaway group id when no group of that name exists in its ZooKeeper, else another free one."""
    from .. import groups as lib
    from .. import zk as zkmod
    from .. import zk_auth
    zk = zkmod.connect(config.zookeeper_connect, auth=zk_auth.from_config(config))
    try:
        if not lib.group_exists(zk, config.group_id):
            return config.group_id
        return throwaway_group(lambda group: lib.group_exists(zk, group), rng)
    finally:
        zkmod.close(zk)


def split_properties(properties, consumer_properties):
    """``--property`` values are the formatter's options, as in kafka-console-consumer; a consumer key given there
    (as earlier releases took it) still reaches the consumer, with a warning. Returns (formatter {key: value},
    consumer overrides [KEY=VALUE])."""
    formatter, consumer = {}, list(consumer_properties)
    for p in properties:
        key, value = parse_property_override(p)
        if key in FORMATTER_KEYS:
            formatter[key] = value
        else:
            log.warning("--property %s: not a formatter option (%s); passed to the consumer as --consumer-property "
                        "%s=... (kafka-console-consumer's --property sets only the formatter)", key,
                        ", ".join(FORMATTER_KEYS), key)
            consumer.append(p)
    return formatter, consumer


def build_config(zookeeper, group, config_file, properties, throwaway_name=None):
    """consumer.properties, then --consumer-property overrides, then --zookeeper/--group (explicit flags win).
    Returns ``(config, throwaway)``: without a group id anywhere the group is a throwaway one (*throwaway_name*,
    else :func:`throwaway_group`) that commits nothing unless auto.commit.enable is set."""
    props = load_properties(config_file) if config_file else {}
    overrides = dict(parse_property_override(p) for p in properties)
    from ..kafka_security import SECRET_KEYS
    for key in SECRET_KEYS:
        # a password on the command line shows in ps and in shell histories
        if key in overrides:
            raise click.BadParameter("%s holds a password: put it in the --config file (or use "
                                     "sasl.credentials.file), not on the command line" % key,
                                     param_hint="--consumer-property")
    # a group given as '' (on the command line or in a file) is a bad name to refuse, not a missing one
    throwaway = group is None and "group.id" not in props and "group.id" not in overrides
    if throwaway:
        group = throwaway_name or throwaway_group()
        overrides.setdefault("auto.commit.enable", "false")
    if group is not None:
        overrides["group.id"] = group
    if zookeeper:
        overrides["zookeeper.connect"] = zookeeper
    elif "zookeeper.connect" not in props and "zookeeper.connect" not in overrides:
        overrides["zookeeper.connect"] = resolve_zookeeper(None)
    # --zookeeper-auth / --zookeeper-credentials / --zookeeper-set-acl win when given
    auth = given_auth_options()
    if auth.get("zk_credentials"):
        overrides["zookeeper.auth.credentials.file"] = auth["zk_credentials"]
        if "zookeeper.auth.scheme" not in props and "zookeeper.auth.scheme" not in overrides:
            overrides["zookeeper.auth.scheme"] = "digest"
    if auth.get("zk_auth_scheme"):
        overrides["zookeeper.auth.scheme"] = auth["zk_auth_scheme"]
    if auth.get("zk_set_acl"):
        overrides["zookeeper.set.acl"] = "true"
    return ConsumerConfig.from_properties(props, overrides), throwaway


def delete_throwaway_group(config):
    """Delete ``/consumers/G`` of a throwaway group after its member left (Kafka's console consumer did the same
    for the group it made up); a failure is logged, never raised."""
    from .. import groups as lib
    from .. import zk as zkmod
    from .. import zk_auth
    try:
        zk = zkmod.connect(config.zookeeper_connect, auth=zk_auth.from_config(config))
    except ZkConsumerError as e:
        log.warning("could not delete the throwaway group %s: %s", config.group_id, e)
        return
    try:
        if lib.group_exists(zk, config.group_id):
            lib.delete(zk, config.group_id, execute=True)
    except ZkConsumerError as e:
        log.warning("could not delete the throwaway group %s: %s", config.group_id, e)
    finally:
        zkmod.close(zk)


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
@click.option("--group", default=None, metavar="GROUP",
              help="Join this consumer group (group.id): this member takes a share of its partitions from the "
                   "members running now and commits offsets for the group. Without it (and without group.id in "
                   "--config) a throwaway group console-consumer-NNNNN is joined, which commits nothing and is "
                   "deleted at exit.")
@click.option("--from-group", "from_group", default=None, metavar="GROUP",
              help="Read GROUP's stream from its committed offsets without joining GROUP: no registration, no "
                   "owner node, no offset written anywhere (its members do not rebalance). Reads the group's "
                   "topics, or those of --topic.")
@click.option("--no-commit", is_flag=True,
              help="Commit no offsets (auto.commit.enable=false; none at exit either). --from-group never commits.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC", help="Topic to consume (repeatable).")
@click.option("--whitelist", default=None, metavar="REGEX", help="Consume every topic matching REGEX.")
@click.option("--blacklist", default=None, metavar="REGEX", help="Consume every topic not matching REGEX.")
@click.option("--streams", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Streams (consumer threads) per topic.")
@click.option("--config", "--consumer.config", "config_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="A consumer.properties file (the Scala consumer's keys).")
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
              help="Override one consumer property (repeatable).")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="A formatter option, as in kafka-console-consumer (repeatable): print.key, print.timestamp, "
                   "print.partition, print.offset, print.headers, print.value (true/false), key.separator, "
                   "line.separator, headers.separator, null.literal. Implies --format value.")
@click.option("--from-beginning", is_flag=True,
              help="Where the group has no committed offset, start at the earliest message "
                   "(auto.offset.reset=smallest), as kafka-console-consumer does; committed offsets still win.")
@click.option("--timeout-ms", type=click.IntRange(1, None), default=None,
              help="Exit (gracefully) when no message arrived for this long (consumer.timeout.ms).")
@click.option("--max-messages", type=click.IntRange(0, None), default=None,
              help="Exit (gracefully) after this many messages.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "value"]), default=None,
              help="jsonl: one JSON object per message (topic, partition, offset, timestamp, timestamp_type, key, "
                   "value, headers); value: kafka-console-consumer's text (the value, one per line, and what the "
                   "--property options add) [default: jsonl, value with --property].")
@click.option("--events", is_flag=True, help="Also print rebalance events (assign/revoke/lost) as JSON on stderr.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics (the Scala consumer's, by name) on this port at /metrics "
                   "(0: a free port; the address is printed on stderr).")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="The address the metrics endpoint binds: loopback unless told otherwise (0.0.0.0 or a host's "
                   "address for a Prometheus server on another machine; the page has no authentication).")
def consume(zookeeper, group, from_group, no_commit, topics, whitelist, blacklist, streams, config_file,
            consumer_properties, properties, from_beginning, timeout_ms, max_messages, fmt, events, metrics_port,
            metrics_host):
    """Print the messages of TOPIC as a member of a ZooKeeper-coordinated group (a throwaway one unless --group),
    or read a group's stream without joining it (--from-group).

    With --group this process JOINS the group: it takes partitions from the members running now and commits
    offsets that they resume from. To look at a production group's stream, use --from-group GROUP instead.

    SIGTERM and SIGINT shut down gracefully: offsets committed, owner nodes released, exit code 0.
    """
    formatter_props, consumer_props = split_properties(properties, consumer_properties)
    if formatter_props and fmt == "jsonl":
        raise click.UsageError("--property %s is a formatter option of --format value (jsonl prints every field)"
                               % sorted(formatter_props)[0])
    render = format_jsonl if (fmt or ("value" if formatter_props else "jsonl")) == "jsonl" else None
    if render is None:
        text = TextFormatter.from_properties(formatter_props)
        render = text.format
    else:
        render = _with_newline(render)
    if from_group is not None:
        if group is not None:
            raise click.UsageError("give --group (join it) or --from-group (read it without joining), not both")
        if whitelist is not None or blacklist is not None:
            raise click.UsageError("--from-group reads the group's topics, or those of --topic (no --whitelist or "
                                   "--blacklist)")
        return _peek(zookeeper, from_group, topics, config_file, consumer_props, from_beginning, timeout_ms,
                     max_messages, render)
    chosen = [x for x in (bool(topics), whitelist is not None, blacklist is not None) if x]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --topic (repeatable), --whitelist or --blacklist")
    if from_beginning:
        consumer_props.append("auto.offset.reset=smallest")
    if timeout_ms is not None:
        consumer_props.append("consumer.timeout.ms=%d" % timeout_ms)
    if no_commit:
        consumer_props.append("auto.commit.enable=false")
    config, throwaway = build_config(zookeeper, group, config_file, consumer_props)
    if throwaway:
        name = unused_throwaway_group(config)
        if name != config.group_id:
            config, _ = build_config(zookeeper, group, config_file, consumer_props, throwaway_name=name)
        click.echo("zkconsumer: joined the throwaway group %s (no --group given): it commits nothing and is deleted "
                   "at exit; --group GROUP joins GROUP, --from-group GROUP reads it without joining"
                   % config.group_id, err=True)
    stop = threading.Event()
    connector = ZookeeperConsumerConnector(config, listener=_LoggingListener(events))
    metrics = None
    if metrics_port is not None:
        from ..metrics import start_metrics_server
        metrics = start_metrics_server(connector, metrics_port, addr=metrics_host)
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
        _drain(connector, all_streams, render, max_messages, stop)
    finally:
        if metrics is not None:
            metrics.close()
        connector.shutdown()
        if throwaway:
            delete_throwaway_group(config)


def _with_newline(render):
    return lambda msg: render(msg) + "\n"


def _peek(zookeeper, group, topics, config_file, consumer_props, from_beginning, timeout_ms, max_messages, render):
    """--from-group: the group's committed offsets, then its partitions read from there; nothing written."""
    from .. import zk as zkmod
    from .. import zk_auth
    from ..group_peek import peek_records, start_offsets
    from ..layout import validate_group
    try:
        group = validate_group(group)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--from-group")
    if from_beginning:
        consumer_props.append("auto.offset.reset=smallest")
    # the group's name makes the config valid; nothing registers under it
    config, _ = build_config(zookeeper, group, config_file, consumer_props)
    zk = zkmod.connect(config.zookeeper_connect, auth=zk_auth.from_config(config))
    try:
        from ..groups import require_group
        require_group(zk, group)
        bootstrap = zkmod.bootstrap_from_zk(zk, config.zookeeper_connect, config.security_protocol)
        offsets, source = start_offsets(zk, group, bootstrap, topics, security=config.kafka_security)
    finally:
        zkmod.close(zk)
    committed = sum(1 for v in offsets.values() if v is not None)
    click.echo("zkconsumer: reading %d partition(s) of group %s from its committed offsets (%s; %d without one "
               "start at auto.offset.reset=%s) without joining it: nothing is committed"
               % (len(offsets), group, source, len(offsets) - committed, config.auto_offset_reset), err=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    out = sys.stdout
    count = 0
    if max_messages == 0:
        return
    for msg in peek_records(bootstrap, offsets, config.auto_offset_reset, config.kafka_security,
                            timeout_ms if timeout_ms is not None else -1, stop):
        out.write(render(msg))
        out.flush()
        count += 1
        if max_messages is not None and count >= max_messages:
            return


def _drain(connector, streams, render, max_messages, stop):
    """Read every stream on its own thread; write to stdout from one thread, flushed per message."""
    out = sys.stdout
    lock = threading.Lock()
    count = [0]
    done = threading.Event()

    def reader(stream):
        while not stop.is_set():
            try:
                for msg in stream:
                    line = render(msg)
                    with lock:
                        if max_messages is not None and count[0] >= max_messages:
                            # another stream reached the limit first: this message is not written out, so it
                            # must not be committed either (at-least-once holds for what the CLI prints)
                            stream.give_back(msg)
                            done.set()
                            return
                        out.write(line)
                        out.flush()
                        count[0] += 1
                        if max_messages is not None and count[0] >= max_messages:
                            done.set()
                            return
                # stream ended: shutdown
                return
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
