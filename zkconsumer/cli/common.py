"""Shared CLI plumbing: error reporting, logging, JSON output and where ZooKeeper / the brokers are."""
import json
import logging
import os
import sys

import click

from ..errors import ZkConsumerError
from ..local import LocalCluster

ZK_ENV = "ZK_CONNECT"
KAFKA_ENV = "KAFKA_BOOTSTRAP"


class ZkCommandGroup(click.Group):
    """A click group that turns every ZkConsumerError into one clear line on stderr and exit code 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ZkConsumerError as e:
            click.echo("%s: error: %s" % (ctx.find_root().info_name or "zkconsumer", e), err=True)
            sys.exit(1)


def setup_logging(level):
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLogger().level))
    # kafka-python logs its own connection errors (with tracebacks) while our code reports the same condition in
    # one line; show its logs only when asked for (--log-level info or debug)
    root = logging.getLogger().level
    logging.getLogger("kafka").setLevel(logging.CRITICAL if root >= logging.WARNING else max(logging.ERROR, root))


def emit_json(obj):
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=str))


def local_dir_option(f):
    return click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
                        help="State directory of the local cluster [default: $ZKCONSUMER_LOCAL_DIR or "
                             "~/.zkconsumer/local].")(f)


def _resolve(value, env, info_key, what, flag, directory):
    if value:
        return value
    if os.environ.get(env):
        return os.environ[env]
    info = LocalCluster(directory).info()
    if info.get("running"):
        return info[info_key]
    raise click.UsageError("no %s given: pass %s, set $%s, or start the local cluster with 'zkconsumer local up'"
                           % (what, flag, env))


def resolve_zookeeper(value, directory=None):
    """--zookeeper, else $ZK_CONNECT, else the running local cluster's ZooKeeper."""
    return _resolve(value, ZK_ENV, "zookeeper_connect", "ZooKeeper", "--zookeeper HOST:PORT[/chroot]", directory)


def resolve_bootstrap(value, directory=None, zk=None):
    """--bootstrap-server, else $KAFKA_BOOTSTRAP, else the brokers registered in ZooKeeper (``zk``, the ZooKeeper
    the command works on: the legacy tools needed only --zookeeper), else the running local cluster's broker."""
    if not value and not os.environ.get(KAFKA_ENV) and zk is not None:
        from .. import zk as zkmod
        try:
            return zkmod.bootstrap_from_zk(zk)
        except ZkConsumerError:
            pass  # no broker registered there: fall through to the local cluster / the error
    return _resolve(value, KAFKA_ENV, "bootstrap_servers", "Kafka broker", "--bootstrap-server HOST:PORT", directory)


zookeeper_option = click.option("--zookeeper", "zookeeper", metavar="HOST:PORT[,...][/CHROOT]", default=None,
                                help="ZooKeeper connect string [default: $ZK_CONNECT or the local cluster].")
bootstrap_option = click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT", default=None,
                                help="Kafka bootstrap servers [default: $KAFKA_BOOTSTRAP, else the brokers "
                                     "registered in ZooKeeper, else the local cluster].")
json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
