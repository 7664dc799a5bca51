"""spark-submit in the deploy mode docs/spark.md says Spark refuses: cluster deploy mode of a Python application on a
Spark standalone master (the refusal comes before any connection, so no cluster is needed)."""
import os
import subprocess

import pytest

from tests.support import ROOT
from zkconsumer.local.processes import free_port

pytestmark = [pytest.mark.spark, pytest.mark.live]  # spark-submit runs Java


def test_standalone_cluster_deploy_mode_of_the_job_is_refused(tmp_path):
    """The documented command, with the zip built as the docs build it: spark-submit exits non-zero with Spark's
    message, the one docs/spark.md quotes."""
    from zkconsumer.spark.standalone import job_script, package_zip, submit_argv
    zip_path = package_zip(str(tmp_path / "zkconsumer.zip"))
    argv = submit_argv("spark://127.0.0.1:%d" % free_port(), job_script(),
                       ["--zookeeper", "127.0.0.1:2181", "--group", "orders-etl", "--topic", "orders",
                        "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck")],
                       py_files=[zip_path])
    argv[1:1] = ["--deploy-mode", "cluster"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                          env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"), stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    refusal = "Cluster deploy mode is currently not supported for python applications on standalone clusters."
    assert proc.returncode != 0 and refusal in out, (proc.returncode, out)
    with open(os.path.join(ROOT, "docs", "spark.md")) as f:
        assert refusal in " ".join(f.read().split())                   # what the docs quote
