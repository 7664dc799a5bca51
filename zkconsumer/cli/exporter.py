"""``zkconsumer exporter``: a long-running Prometheus endpoint with the committed-offset lag of ZooKeeper-coordinated
groups (:mod:`zkconsumer.tools.lag_exporter`)."""
import logging
import re
import signal
import sys
import threading

import click

from ..zookeeper import client as zkmod
from ..tools.lag_exporter import LagCache, LagCollector, store_of
from .common import (EXIT_CODES_HELP, EXIT_UNAVAILABLE, bootstrap_option, connect_zookeeper, emit_json, json_option, kafka_security,
                     resolve_bootstrap, resolve_zookeeper, zookeeper_read_option)

log = logging.getLogger(__name__)


def _selector(groups, all_groups, matching):
    given = sum([bool(groups), all_groups, matching is not None])
    if given != 1:
        raise click.UsageError("give one of --group (repeatable), --all-groups or --groups-matching REGEX")
    if matching is not None:
        try:
            rx = re.compile(matching)
        except re.error as e:
            raise click.BadParameter("%r is not a regular expression: %s" % (matching, e),
                                     param_hint="--groups-matching")
        return lambda g: rx.fullmatch(g) is not None
    if all_groups:
        return lambda g: True
    wanted = set(groups)
    return lambda g: g in wanted


@click.command(epilog=EXIT_CODES_HELP)
@zookeeper_read_option
@bootstrap_option
@click.option("--group", "groups", multiple=True, metavar="GROUP", help="Export this group (repeatable).")
@click.option("--all-groups", is_flag=True, help="Every group under /consumers (new ones as they appear).")
@click.option("--groups-matching", "matching", metavar="REGEX", default=None,
              help="Every group under /consumers whose whole name matches REGEX (new ones as they appear).")
@click.option("--port", type=click.IntRange(0, 65535), default=9309, show_default=True,
              help="Serve the metrics on this port at /metrics (0: a free port; the address is printed).")
@click.option("--host", "addr", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="The address to bind: loopback unless told otherwise (0.0.0.0 for a Prometheus server on "
                   "another machine; use --tls-cert/--tls-key and --tls-client-ca there).")
@click.option("--interval", type=click.FloatRange(1, 3600), default=30.0, show_default=True,
              help="Seconds between Kafka reads (log ends, Kafka offsets, broker-side groups); ZooKeeper offsets "
                   "are watched and always current.")
@click.option("--expiry-interval", type=click.FloatRange(0, None), default=600.0, show_default=True,
              help="Seconds between reads of when the Kafka offsets of stopped groups in the Kafka phase expire "
                   "(0: never).")
@click.option("--cluster-name", default=None, metavar="NAME",
              help="The cluster_name label of every series [default: the ZooKeeper connect string].")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Serve HTTPS with this PEM certificate (with --tls-key).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), default=None, help="Its private key (PEM).")
@click.option("--tls-client-ca", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Only clients with a certificate this CA signed may scrape (mutual TLS).")
@click.option("--once", is_flag=True,
              help="Fill the cache, read Kafka once, print the page (or with --json the groups) and exit.")
@json_option
def exporter(zookeeper, bootstrap, groups, all_groups, matching, port, addr, interval, expiry_interval,
             cluster_name, tls_cert, tls_key, tls_client_ca, once, as_json):
    """Serve the committed-offset lag of ZooKeeper-coordinated groups to Prometheus (kafka-lag-exporter's metric
    names: kafka_consumergroup_group_lag and friends), read from the store each group's migration phase says it
    uses (ZooKeeper, the greater of both while dual, Kafka), from a cache kept current by ZooKeeper watches.

    Read-only: it writes nothing to ZooKeeper or Kafka. SIGTERM and SIGINT stop it.
    """
    select = _selector(groups, all_groups, matching)
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("give --tls-cert and --tls-key together")
    if tls_client_ca and not tls_cert:
        raise click.UsageError("--tls-client-ca needs --tls-cert and --tls-key")
    zookeeper = resolve_zookeeper(zookeeper)
    zk = connect_zookeeper(zookeeper, long_lived=True)
    cache = None
    try:
        bs = resolve_bootstrap(bootstrap, zk=zk)
        cache = LagCache(zk, select, bs, security=kafka_security(), interval_s=interval,
                         expiry_interval_s=expiry_interval).start(refresh_loop=not once)
        collector = LagCollector(cache, cluster_name or zookeeper)
        if once:
            cache.wait_idle()
            cache.refresh()
            _print_once(cache, collector, as_json)
            if cache.last_refresh_error:
                click.echo("zkconsumer exporter: Kafka could not be read: %s" % cache.last_refresh_error, err=True)
                sys.exit(EXIT_UNAVAILABLE)
            return
        from ..metrics.member import new_registry
        from ..metrics.server import MetricsServer, tls_context
        registry = new_registry("--port", str(port))
        registry.register(collector)
        tls = tls_context(tls_cert, tls_key, tls_client_ca) if tls_cert else None
        server = MetricsServer(registry, port, addr=addr, tls=tls)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        click.echo("zkconsumer exporter: serving group lag at %s (ZooKeeper %s, Kafka read every %.0f s)"
                   % (server.url, zookeeper, interval), err=True)
        try:
            stop.wait()
        finally:
            server.close()
    finally:
        if cache is not None:
            cache.close()
        zkmod.close(zk)


def _print_once(cache, collector, as_json):
    if as_json:
        with cache.lock:
            out = {name: {"store": store_of(g.phase, [m[0] for m in g.modes.values()]), "phase": g.phase,
                          "members": len(g.members), "split_brain": g.split_brain,
                          "zookeeper_offsets": {"%s:%d" % tp: o for tp, o in sorted(g.zk_offsets.items())},
                          "kafka_offsets": {"%s:%d" % tp: o for tp, o in sorted(g.kafka_offsets.items())}}
                   for name, g in sorted(cache.groups.items())}
        emit_json({"groups": out, "refresh_error": cache.last_refresh_error})
        return
    from prometheus_client import CollectorRegistry, generate_latest
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    click.echo(generate_latest(registry).decode(), nl=False)
