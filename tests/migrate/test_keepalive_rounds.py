"""The keep-alive's rounds (``migrate.keepalive.repeat``) without a cluster: a round that raises the error of a lost
connection is a failed round (exit 3, logged), never the end of the keep-alive."""
import logging

import pytest
from kafka.errors import KafkaConnectionError, NodeNotReadyError
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss

from migrate.fleet import unavailable_error
from migrate.keepalive import repeat


@pytest.mark.parametrize("error", [ConnectionLoss(), ConnectionClosedError("Connection has been closed"),
                                   KafkaConnectionError("111 ECONNREFUSED"), NodeNotReadyError("controller"),
                                   TimeoutError()])
def test_a_round_that_loses_its_connection_is_a_failed_round(error, caplog):
    rounds = []

    def one_round():
        rounds.append(1)
        raise error
    with caplog.at_level(logging.WARNING, logger="zkmigrate.keepalive"):
        assert repeat(one_round, every=0.01, max_rounds=2, handle_signals=False) == 3
    assert len(rounds) == 2
    assert "round 2 failed (could not check, exit 3): %s" % type(error).__name__ in caplog.text


def test_other_errors_are_not_outages():
    assert unavailable_error(ConnectionLoss()) and not unavailable_error(ValueError("x"))
