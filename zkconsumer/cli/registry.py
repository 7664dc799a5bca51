"""``zkconsumer registry sync``: mirror brokers and topics into the legacy ZooKeeper layout."""
import logging
import signal
import threading

import click

from ..zookeeper import client as zkmod
from ..kafka.metadata import admin_client
from ..kafka import internals
from ..tools.registry_mirror import RegistryMirror
from .common import (bootstrap_option, connect_zookeeper, emit_json, json_option, kafka_security, resolve_bootstrap,
                     resolve_zookeeper, zookeeper_option)


@click.group()
def registry():
    """The legacy /brokers registry in ZooKeeper."""


@registry.command()
@zookeeper_option
@bootstrap_option
@click.option("--interval", type=click.FloatRange(0.05, 3600), default=1.0, show_default=True,
              help="Seconds between metadata reads.")
@click.option("--once", is_flag=True, help="Sync once and exit (broker registrations are ephemeral: they vanish "
                                           "when this process exits; topic nodes stay).")
@json_option
def sync(zookeeper, bootstrap, interval, once, as_json):
    """Keep /brokers/ids, /brokers/topics and partition state nodes in step with a Kafka cluster.

    Lets ZooKeeper-coordinated consumers run against clusters whose brokers do not register in ZooKeeper
    (KRaft, tansu). Broker registrations written by anyone else (a real ZooKeeper-mode broker) are never touched.
    """
    zookeeper = resolve_zookeeper(zookeeper)
    bootstrap = resolve_bootstrap(bootstrap)
    security = kafka_security()
    if not once and logging.getLogger().level > logging.INFO:
        logging.getLogger().setLevel(logging.INFO)
    zk = connect_zookeeper(zookeeper, long_lived=not once)
    admin = admin_client(bootstrap, client_id="zkconsumer-registry", security=security)
    try:
        mirror = RegistryMirror(zk, admin, security_protocol=security.protocol)
        if once:
            report = mirror.sync_once()
            if as_json:
                emit_json(report.as_dict())
            else:
                for k, v in report.as_dict().items():
                    click.echo("%-16s %s" % (k, v))
            return
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        logging.getLogger(__name__).info("mirroring %s into ZooKeeper %s every %.2f s", bootstrap, zookeeper,
                                         interval)
        mirror.run(interval, stop)
    finally:
        internals.close_quietly(admin)
        zkmod.close(zk)
