"""A command whose ZooKeeper connection is lost mid-run (kazoo's ConnectionLoss, or ConnectionClosedError once a
one-shot client gave up) ends as "could not check": one clear line, exit 3, or the JSON error object under --json;
never a traceback."""
import json

import click
import pytest
from click.testing import CliRunner
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer.cli.common import EXIT_UNAVAILABLE, ZkCommandGroup, json_option


def _cli(error):
    @click.group(cls=ZkCommandGroup)
    def cli():
        pass

    @cli.command()
    @json_option
    def work(as_json):
        raise error
    return cli


@pytest.mark.parametrize("error", [ConnectionLoss(), ConnectionClosedError("Connection has been closed"),
                                   SessionExpiredError(), OperationTimeoutError(), KazooTimeoutError("timed out")])
def test_a_lost_zookeeper_is_exit_3_with_one_line(error):
    r = CliRunner().invoke(_cli(error), ["work"], prog_name="zkmigrate")
    assert r.exit_code == EXIT_UNAVAILABLE == 3, r.output
    assert "zkmigrate: error: lost the ZooKeeper connection mid-command (%s" % type(error).__name__ in r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(_cli(error), ["work", "--json"], prog_name="zkmigrate")
    assert r.exit_code == 3 and json.loads(r.stdout)["error_type"] == "ClusterUnavailableError", r.output
