"""``zkconsumer tree [PATH]``: print a ZooKeeper subtree with each node's data (read-only)."""
import click

from ..zookeeper import client as zkmod
from .common import connect_zookeeper, emit_json, json_option, resolve_zookeeper, zookeeper_read_option


def _walk(zk, path, depth, max_depth, out):
    data, stat = zk.get(path)
    out.append({"path": path, "data": data.decode("utf-8", "replace") if data else "",
                "ephemeral": bool(stat.ephemeralOwner), "depth": depth})
    if max_depth is not None and depth >= max_depth:
        return
    for child in sorted(zk.get_children(path)):
        _walk(zk, (path.rstrip("/") + "/" + child), depth + 1, max_depth, out)


@click.command()
@click.argument("path", default="/")
@zookeeper_read_option
@click.option("--depth", type=click.IntRange(0, None), default=None, help="Stop this many levels below PATH.")
@json_option
def tree(path, zookeeper, depth, as_json):
    """Print the ZooKeeper subtree at PATH with node data (ephemeral nodes marked with *)."""
    zk = connect_zookeeper(resolve_zookeeper(zookeeper))
    try:
        if not zk.exists(path):
            raise click.BadParameter("no znode at %s" % path, param_hint="PATH")
        out = []
        _walk(zk, path, 0, depth, out)
    finally:
        zkmod.close(zk)
    if as_json:
        emit_json(out)
        return
    for node in out:
        name = node["path"] if node["depth"] == 0 else node["path"].rsplit("/", 1)[1]
        line = "%s%s%s" % ("  " * node["depth"], name, "*" if node["ephemeral"] else "")
        if node["data"]:
            line += "  " + node["data"]
        click.echo(line)
