"""How the test session picks its services (pure), and the docker path's clear failure without an engine."""
import os
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.service_selection import Choice, SelectionError, choose, docker_engine_answers


def test_default_is_the_embedded_apache_kafka():
    assert choose({}) == Choice("kafka")
    assert choose({"ZKCONSUMER_TEST_BROKER": ""}) == Choice("kafka")


@pytest.mark.parametrize("kind", ["kafka", "tansu", "docker"])
def test_broker_choices(kind):
    assert choose({"ZKCONSUMER_TEST_BROKER": kind}) == Choice(kind)


def test_external_services_win_over_the_broker_choice():
    env = {"ZK_CONNECT": "zk:2181", "KAFKA_BOOTSTRAP": "k:9092", "ZKCONSUMER_TEST_BROKER": "docker"}
    assert choose(env) == Choice("external", "zk:2181", "k:9092")


@pytest.mark.parametrize("env,match", [
    ({"ZK_CONNECT": "zk:2181"}, "only ZK_CONNECT is set"),
    ({"KAFKA_BOOTSTRAP": "k:9092"}, "only KAFKA_BOOTSTRAP is set"),
    ({"ZKCONSUMER_TEST_BROKER": "redpanda"}, "ZKCONSUMER_TEST_BROKER=redpanda: choose one of kafka, tansu, docker"),
])
def test_bad_environments_are_clear_errors(env, match):
    with pytest.raises(SelectionError, match=match):
        choose(env)


def test_docker_without_an_engine_fails_the_session_with_a_clear_message(tmp_path):
    """This machine has the docker client but no engine: the docker path must fail, loudly, never skip."""
    why = docker_engine_answers(timeout=2)
    if why is None:  # an engine answers here: the docker path would really run; nothing to check in this test
        assert choose({"ZKCONSUMER_TEST_BROKER": "docker"}).kind == "docker"
        return
    test = tmp_path / "test_uses_services.py"
    test.write_text("def test_x(services):\n    pass\n")
    env = dict(os.environ, ZKCONSUMER_TEST_BROKER="docker", PYTHONPATH=ROOT)
    env.pop("ZK_CONNECT", None)
    env.pop("KAFKA_BOOTSTRAP", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "-c", os.devnull, "--confcutdir", str(tmp_path), "-p", "tests.conftest", str(test)],
                       capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert p.returncode != 0, p.stdout
    assert "needs a Docker engine, and none answers" in p.stdout, p.stdout + p.stderr
    assert "skipped" not in p.stdout.splitlines()[-1]
