"""Packaging and layering: the engine never imports the migration layer; the ``migrate/`` folder installs as
``zkconsumer_migrate`` (a top-level ``migrate`` is sqlalchemy-migrate's), beside a package that already has that name;
setup.cfg lists every package of the tree."""
import ast
import configparser
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _imports(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def _py_files(folder):
    for d, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


def test_no_import_climbs_from_the_engine_into_migration():
    offenders = [(os.path.relpath(p, ROOT), m) for p in _py_files("zkconsumer") for m in _imports(p)
                 if m.split(".")[0] in ("migrate", "zkconsumer_migrate")]
    assert not offenders, "the engine imports the migration layer: %s" % offenders


def test_migration_code_imports_itself_relatively():
    """Inside migrate/ a sibling is imported as ``from .x`` (the folder installs under another name)."""
    offenders = [(os.path.relpath(p, ROOT), m) for p in _py_files("migrate") for m in _imports(p)
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
    # its private API is used (zkconsumer/client_internals.py): a minor line is allowed once tests pass with it
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
    code = ("import migrate, zkconsumer_migrate.cli, zkconsumer.offsets.kafka, zkconsumer.broker_group;"
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
    # the ConsumerGroupDescribe schemas are package data too (zkconsumer.broker_group, imported above, reads them)
    assert (target / "zkconsumer" / "protocol" / "ConsumerGroupDescribeResponse.json").exists()


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
            "import kafka, kazoo.client, click, puresasl, zkconsumer.zk, zkconsumer.keystores\n"
            "from kafka import KafkaConsumer, KafkaAdminClient\n"
            "assert all('.zip' in m.__file__ for m in (kafka, kazoo, click, puresasl, zkconsumer))\n" % path)
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
