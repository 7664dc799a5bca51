"""Root of the ``zkconsumer`` command."""
import click

from .common import ZkCommandGroup, hoist_log_level, setup_logging
from .consume import consume
from .exporter import exporter
from .local import local
from .registry import registry
from .tree import tree


@click.group(cls=ZkCommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
              help="Logging verbosity on stderr.")
@click.version_option(package_name="zkconsumer")
def cli(log_level):
    """Kafka's ZooKeeper-coordinated consumer groups, in Python.

    Run 'zkconsumer local up' for an embedded cluster (real ZooKeeper + broker) on loopback.
    """
    setup_logging(log_level)


cli.add_command(consume)
cli.add_command(exporter)
cli.add_command(local)
cli.add_command(registry)
cli.add_command(tree)
cli.add_command(__import__('zkconsumer.cli.groups', fromlist=['groups']).groups)


def main():
    import sys
    cli(args=hoist_log_level(sys.argv[1:]), prog_name="zkconsumer")
