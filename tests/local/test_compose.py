"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none on these machines): the file parses,
every image is pinned, the broker is Apache Kafka 3.9 in ZooKeeper mode, the consumer image is built once from the
Dockerfile, ZooKeeper and the broker are published for a consumer on the host, and the address the broker registers
in /brokers/ids is one the host and the in-network consumer can both reach. With a Docker client that has the
compose plugin, ``docker compose config`` must accept the file too."""
import os
import re
import shutil
import subprocess

import yaml

from tests.support import ROOT


def _compose():
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        return yaml.safe_load(f)


def test_compose_file_shape():
    services = _compose()["services"]
    assert set(services) == {"zookeeper", "kafka", "topics", "producer", "consumer"}
    for name, svc in services.items():
        if "image" in svc:
            assert re.search(r":\d+(\.\d+)*$", svc["image"]) or svc["image"] == "zkconsumer:local", (name, svc["image"])
    kafka = services["kafka"]
    assert kafka["image"].startswith("confluentinc/cp-kafka:7.9."), "Confluent 7.9 = Apache Kafka 3.9 (ZooKeeper mode)"
    env = kafka["environment"]
    assert env["KAFKA_ZOOKEEPER_CONNECT"] == "zookeeper:2181" and "KAFKA_PROCESS_ROLES" not in env
    assert "2181:2181" in services["zookeeper"]["ports"] and "9092:9092" in kafka["ports"]
    advertised = env["KAFKA_ADVERTISED_LISTENERS"]
    assert advertised.startswith("PLAINTEXT://localhost:9092"), "legacy consumers read the PLAINTEXT listener"
    for name in ("topics", "producer", "consumer"):  # they reach localhost:9092 inside the broker's namespace
        assert services[name]["network_mode"] == "service:kafka", name
    consumer = services["consumer"]
    assert consumer["build"] == "." and "--zookeeper" in consumer["command"]
    assert consumer["command"][consumer["command"].index("--group") + 1] == "demo"


def test_dockerfile_installs_the_package_once():
    text = open(os.path.join(ROOT, "Dockerfile")).read()
    assert re.search(r"^FROM python:3\.1[1-9]", text, re.M)
    assert "pip install" in text and 'ENTRYPOINT ["zkconsumer"]' in text
    for folder in ("zkconsumer", "migrate"):
        assert "COPY %s " % folder in text
    ignored = open(os.path.join(ROOT, ".dockerignore")).read().split()
    assert ".venv" in ignored and ".git" in ignored


def test_docker_compose_config_accepts_the_file():
    docker = shutil.which("docker")
    has_compose = docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    if not has_compose:  # the shape test above is the check on machines without the compose plugin
        assert _compose()["services"]
        return
    run = subprocess.run([docker, "compose", "-f", os.path.join(ROOT, "docker-compose.yml"), "config", "-q"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stderr
