"""What README.md's first screen says runs: its size, the two commands it names exist, and the "point it at your
cluster" commands and Python snippet work against the session's ZooKeeper + Apache Kafka (the cluster address, group
and topic substituted; consume bounded by --max-messages)."""
import json
import os
import re
import shlex
import subprocess
import sys

from consumer_helpers import produce_tracked

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, "README.md")).read()


def _block(after, lang):
    start = README.index(after)
    m = re.compile(r"```%s\n(.*?)```" % lang, re.S).search(README, start)
    return m.group(1)


def test_first_screen():
    lines = README.split("\n## Performance\n")[0].splitlines()  # the first screen; the bench table follows it
    assert len(lines) <= 60
    assert lines[0].startswith("1. `bash .ci/demo`") and lines[1].startswith("2. `bash .ci/run`")
    for script in ("demo", "run", "bootstrap"):
        assert os.access(os.path.join(ROOT, ".ci", script), os.X_OK) or os.path.exists(os.path.join(ROOT, ".ci",
                                                                                                      script))
    for link in re.findall(r"\]\(([^)#]+)\)", README):
        assert os.path.exists(os.path.join(ROOT, link)), link
    assert "§" not in README
    for path in re.findall(r"`(tests/[\w/]+\.py)`", README):  # the guarantees name the tests that show them
        assert os.path.exists(os.path.join(ROOT, path)), path


def test_point_it_at_your_cluster(services, unique, zk):
    t = services.create_topic(unique("readme"), 2)
    produce_tracked(services.bootstrap_servers, t, 6, partitions=2)
    g = unique("readme-g")
    for p in (0, 1):  # the production group: committed offsets at the start of the topic
        zk.create("/consumers/%s/offsets/%s/%d" % (g, t, p), b"0", makepath=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    bindir = os.path.dirname(sys.executable)
    ran = []
    for line in _block("## Point it at your cluster", "sh").splitlines():
        cmd = line.split("#")[0].strip()
        if not cmd or cmd.startswith("pip install"):
            continue
        cmd = cmd.replace("zk1:2181/kafka", services.zookeeper_connect).replace("orders-app", g)
        argv = shlex.split(cmd.replace(" orders", " " + t) if " consume " in cmd else cmd)
        if argv[1] == "consume":
            argv += ["--max-messages", "6", "--from-beginning"]
        if argv[1] == "exporter":
            argv += ["--once"]  # it serves until stopped: one page here
        argv[0] = os.path.join(bindir, argv[0])
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, (cmd, p.stdout, p.stderr[-2000:])
        ran.append((argv[1], p.stdout, argv))
    assert [r[0] for r in ran] == ["consume", "consume", "groups", "status", "plan", "exporter", "consume"]
    for i in (0, 1, 6):
        assert len(ran[i][1].splitlines()) == 6 and all(json.loads(x)["topic"] == t for x in ran[i][1].splitlines())
    assert "--group" not in ran[0][2] and "--from-group" in ran[1][2] and "--group" in ran[6][2]
    assert g in ran[2][1] and "CURRENT-OFFSET" in ran[2][1]
    assert 'kafka_consumergroup_group_lag{' in ran[5][1] and g in ran[5][1]


def test_python_snippet(services, unique):
    t = services.create_topic(unique("readme-py"), 1)
    produce_tracked(services.bootstrap_servers, t, 1, partitions=1)
    code = _block("In Python:", "python")
    code = code.replace("zk1:2181/kafka", services.zookeeper_connect).replace('"orders"', repr(t))
    code = code.replace('"orders-app"', repr(unique("readme-py-g")))

    class Done(Exception):
        pass
    got = []

    def handle(msg):
        got.append(msg)
        raise Done()
    import zkconsumer.config
    real = zkconsumer.config.ConsumerConfig.from_properties

    def with_smallest(props, *a, **kw):  # the snippet's group is new: start at the earliest message
        return real(dict(props, **{"auto.offset.reset": "smallest"}), *a, **kw)
    try:
        zkconsumer.config.ConsumerConfig.from_properties = with_smallest
        try:
            exec(compile(code, "README.md", "exec"), {"handle": handle})
        except Done:
            pass
    finally:
        zkconsumer.config.ConsumerConfig.from_properties = real
    assert len(got) == 1 and got[0].topic == t
