"""Packaging and layering: each folder of ``zkconsumer/`` imports only the layers below it (the pure core nothing
but the standard library; the engine never the tools, the surfaces or the migration layer); the ``migrate/`` folder
installs as ``zkconsumer_migrate`` (a top-level ``migrate`` is sqlalchemy-migrate's), beside a package that already
has that name; setup.cfg lists every package of the tree."""
import ast
import configparser
import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT

_ADAPTERS = {"zookeeper", "kafka"}
_BELOW_THE_ENGINE = {"core"} | _ADAPTERS | {"offsets"}
#: the folders of zkconsumer/, bottom up, and the folders each may import besides itself (every layer may import
#: zkconsumer.errors, the package's own ``__init__`` and the C extensions ``zkconsumer._*``)
LAYERS = {
    "core": set(),
    "zookeeper": {"core"},
    "kafka": {"core"},
    "offsets": {"core"} | _ADAPTERS,
    "consumer": _BELOW_THE_ENGINE,
    "tools": _BELOW_THE_ENGINE | {"consumer"},
    "metrics": _BELOW_THE_ENGINE | {"consumer"},
    "local": _BELOW_THE_ENGINE,
    "cli": _BELOW_THE_ENGINE | {"consumer", "tools", "metrics", "local"},
    "spark": _BELOW_THE_ENGINE | {"consumer", "tools", "metrics", "local", "cli"},
}
#: kazoo's private request queue (the one-pass multi-op) is reached through kafka-python's adapter module, the one
#: place both libraries' non-public APIs are used
ALSO_ALLOWED = {"zookeeper": {"zkconsumer.kafka.internals"}}
#: what the pure core may import from outside the standard library: Java regexes, and PKCS12 key stores (optional)
CORE_THIRD_PARTY = {"regex", "cryptography"}


def _module_of(path):
    rel = os.path.relpath(path, ROOT)[:-len(".py")].split(os.sep)
    return rel[:-1] if rel[-1] == "__init__" else rel


def _imports(path, relative=True):
    """The absolute names a file imports (relative imports resolved, or skipped if not ``relative``; ``from pkg import
    mod`` gives ``pkg.mod``)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    here = _module_of(path)
    package = here if path.endswith("__init__.py") else here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and (relative or not node.level):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + (node.module.split(".") if node.module else []))
            folder = os.path.join(ROOT, *module.split("."))
            for alias in node.names:
                if os.path.isfile(folder + os.sep + alias.name + ".py") or os.path.isdir(folder + os.sep + alias.name):
                    yield module + "." + alias.name
                else:
                    yield module


def _py_files(folder):
    for d, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


def test_the_top_of_the_package_holds_no_loose_modules():
    """Every module lives in the folder of its layer; the top keeps the public API, ``python -m zkconsumer`` and the
    exception tree."""
    top = sorted(f for f in os.listdir(os.path.join(ROOT, "zkconsumer")) if f.endswith(".py"))
    assert top == ["__init__.py", "__main__.py", "errors.py"], top
    folders = sorted(d for d in os.listdir(os.path.join(ROOT, "zkconsumer"))
                     if os.path.isfile(os.path.join(ROOT, "zkconsumer", d, "__init__.py")))
    assert folders == sorted(LAYERS), "a folder without a layer (add it to LAYERS): %s" % folders


def _layer_offenders(layer):
    allowed = LAYERS[layer] | {layer}
    for path in _py_files(os.path.join("zkconsumer", layer)):
        for m in _imports(path):
            parts = m.split(".")
            if parts[0] in ("migrate", "zkconsumer_migrate"):
                yield os.path.relpath(path, ROOT), m
            elif parts[0] != "zkconsumer":
                if layer == "core" and parts[0] not in sys.stdlib_module_names and parts[0] not in CORE_THIRD_PARTY:
                    yield os.path.relpath(path, ROOT), m
            elif len(parts) > 1 and parts[1] not in allowed and parts[1] != "errors" and \
                    not parts[1].startswith("_") and m not in ALSO_ALLOWED.get(layer, ()):
                yield os.path.relpath(path, ROOT), m


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_the_layers_below_it(layer):
    offenders = sorted(set(_layer_offenders(layer)))
    assert not offenders, "zkconsumer/%s/ may import %s (and itself), not: %s" % (
        layer, sorted(LAYERS[layer]) or "nothing of zkconsumer but errors", offenders)


def test_no_import_climbs_from_the_package_into_migration():
    offenders = [(os.path.relpath(p, ROOT), m) for p in _py_files("zkconsumer") for m in _imports(p)
                 if m.split(".")[0] in ("migrate", "zkconsumer_migrate")]
    assert not offenders, "zkconsumer imports the migration layer: %s" % offenders


def test_the_engine_meets_its_parts_at_seams_not_probes():
    """The engine's parts meet at declared interfaces (consumer.member.Member, consumer.fetcher.Fetchers,
    offsets.OffsetStore): nothing in consumer/ or offsets/ asks an object with getattr/hasattr what it is. The
    offset stores read two fields of kafka-python's objects that not every class or version has (an error class's
    ``errno``, a response's ``error_code``): those are the only ones."""
    from zkconsumer.consumer.connector import ZookeeperConsumerConnector
    from zkconsumer.consumer.fetcher import FetcherManager, Fetchers, NoFetchers
    from zkconsumer.consumer.member import Member
    from zkconsumer.offsets import OffsetStore, ZooKeeperOffsetStore
    from zkconsumer.offsets.dual import DualOffsetStore
    from zkconsumer.offsets.kafka import KafkaOffsetStore
    from zkconsumer.spark.member import GroupMember
    for member in (ZookeeperConsumerConnector, GroupMember):
        assert issubclass(member, Member) and not member.__abstractmethods__, member
    assert issubclass(FetcherManager, Fetchers) and not NoFetchers.__abstractmethods__
    for store in (ZooKeeperOffsetStore, KafkaOffsetStore, DualOffsetStore):
        assert issubclass(store, OffsetStore) and not store.__abstractmethods__, store
    probes = []
    for folder in ("consumer", "offsets"):
        for p in _py_files(os.path.join("zkconsumer", folder)):
            for node in ast.walk(ast.parse(open(p, encoding="utf-8").read())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                        node.func.id in ("getattr", "hasattr"):
                    attr = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
                    if not (folder == "offsets" and node.func.id == "getattr" and attr in ("errno", "error_code")):
                        probes.append((os.path.relpath(p, ROOT), node.lineno, node.func.id, attr))
    assert not probes, probes


def test_the_metrics_read_the_member_through_its_snapshot():
    """metrics/ reads a member through one typed view (consumer.member_metrics: the connector's
    ``metrics_snapshot()``): no getattr/hasattr, no private attribute of anything but its own objects (``self``, or a
    name bound to it), and the Prometheus collector reads nothing of the member but ``metrics_snapshot``."""
    offenders = []
    for p in _py_files(os.path.join("zkconsumer", "metrics")):
        tree = ast.parse(open(p, encoding="utf-8").read())
        own = {"self"} | {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                          and isinstance(node.value, ast.Name) and node.value.id == "self"
                          for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            where = (os.path.relpath(p, ROOT), getattr(node, "lineno", None))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr",
                                                                                                  "hasattr"):
                offenders.append(where + (node.func.id,))
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in own):
                offenders.append(where + (node.attr,))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "connector" and node.attr != "metrics_snapshot":
                offenders.append(where + ("connector." + node.attr,))
    assert not offenders, offenders


def test_importing_the_core_imports_no_client_library():
    """``import zkconsumer.core.config`` (what the public ``zkconsumer.ConsumerConfig`` loads) brings in neither kazoo
    nor kafka-python: the package's ``__init__`` imports the public API when it is first used."""
    code = ("import sys, zkconsumer.core.config, zkconsumer.core.layout, zkconsumer.core.assignors\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'kazoo', 'kafka', 'click'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_the_public_api_is_at_the_top_of_the_package():
    import zkconsumer
    from zkconsumer.consumer.connector import ZookeeperConsumerConnector
    from zkconsumer.core.config import ConsumerConfig
    assert zkconsumer.ConsumerConfig is ConsumerConfig
    assert zkconsumer.ZookeeperConsumerConnector is ZookeeperConsumerConnector
    with pytest.raises(AttributeError):
        zkconsumer.NoSuchName  # noqa: B018


def test_migration_code_imports_itself_relatively():
    """Inside migrate/ a sibling is imported as ``from .x`` (the folder installs under another name)."""
    offenders = [(os.path.relpath(p, ROOT), m) for p in _py_files("migrate") for m in _imports(p, relative=False)
                 if m.split(".")[0] == "migrate"]
    assert not offenders, offenders


def _setup_cfg():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    return cfg


def test_setup_cfg_lists_every_package():
    listed = set(_setup_cfg()["options"]["packages"].split())
    on_disk = {os.path.relpath(d, ROOT).replace(os.sep, ".") for d, _, files in os.walk(os.path.join(ROOT, "zkconsumer"))
               if "__init__.py" in files}
    assert listed == on_disk | {"zkconsumer_migrate"}, (listed ^ (on_disk | {"zkconsumer_migrate"}))


def test_requirements_match_what_the_code_imports():
    opts = _setup_cfg()["options"]
    requires = [line.split("[")[0].split(">")[0].split("<")[0].strip() for line in opts["install_requires"].split("\n")
                if line.strip() and not line.strip().startswith("#")]
    assert sorted(requires) == ["click", "kafka-python", "kazoo", "pure-sasl", "regex"]  # pure-sasl: kazoo's SASL
    [kafka_python] = [x.strip() for x in opts["install_requires"].split("\n") if x.strip().startswith("kafka-python")]
    # its private API is used (zkconsumer/kafka/internals.py): a minor line is allowed once tests pass with it
    assert re.fullmatch(r"kafka-python\[[a-z0-9,]+\]>=3\.0,<3\.[0-9]+", kafka_python), kafka_python
    assert opts["python_requires"].strip() == ">=3.11"
    assert sys.version_info >= (3, 11)


def test_installs_beside_another_package_named_migrate(tmp_path):
    target = tmp_path / "site"
    (target / "migrate").mkdir(parents=True)
    (target / "migrate" / "__init__.py").write_text("OWNER = 'sqlalchemy-migrate'\n")
    run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), ROOT],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (target / "migrate" / "__init__.py").read_text() == "OWNER = 'sqlalchemy-migrate'\n"
    code = ("import migrate, zkconsumer_migrate.cli, zkconsumer.offsets.kafka, zkconsumer.kafka.broker_group;"
            "print(migrate.OWNER); print(zkconsumer_migrate.cli.__file__)")
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path), env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    owner, cli_file = out.stdout.split()
    assert owner == "sqlalchemy-migrate"
    assert cli_file.startswith(str(target / "zkconsumer_migrate")), cli_file
    assert (target / "zkconsumer" / "local" / "poms" / "kafka-3.9.xml").exists(), "the poms are package data"
    assert (target / "zkconsumer" / "local" / "poms" / "kafka-4.xml").exists(), "the poms are package data"
    # the ConsumerGroupDescribe schemas are package data too (zkconsumer.kafka.broker_group, imported above, reads
    # them)
    assert (target / "zkconsumer" / "kafka" / "protocol" / "ConsumerGroupDescribeResponse.json").exists()


@pytest.mark.spark
def test_the_py_files_zip_carries_the_pure_python_dependencies(tmp_path):
    """zkconsumer.spark.standalone.package_zip (the --py-files zip of docs/spark.md) holds zkconsumer and the
    pure-Python packages its driver and executors import: a Python that sees nothing but the zip and the standard
    library (-S: no site-packages) imports kafka-python, kazoo, click and pure-sasl from it."""
    import zipfile
    from zkconsumer.spark.standalone import ZIP_DEPENDENCIES, package_zip
    path = package_zip(str(tmp_path / "zkconsumer.zip"))
    tops = {n.split("/")[0] for n in zipfile.ZipFile(path).namelist()}
    assert tops == {"zkconsumer"} | set(ZIP_DEPENDENCIES)
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import kafka, kazoo.client, click, puresasl, zkconsumer.zookeeper.client, zkconsumer.core.keystores\n"
            "from kafka import KafkaConsumer, KafkaAdminClient\n"
            "assert all('.zip' in m.__file__ for m in (kafka, kazoo, click, puresasl, zkconsumer))\n" % path)
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
