"""bench/cpu.py, CPU per record per thread: the documented command, run small against the suite's cluster."""
import json
import os
import subprocess
import sys

from tests.support import ROOT


def test_cpu_per_record_reads_each_client_and_reports_its_threads(services, tmp_path):
    out = tmp_path / "cpu.json"
    env = dict(os.environ, ZK_CONNECT=services.zookeeper_connect, KAFKA_BOOTSTRAP=services.bootstrap_servers)
    proc = subprocess.run([sys.executable, "-m", "bench.cpu", "--records", "20000", "--rounds", "2", "--clients",
                           "zk,ck", "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "uncompressed 100 B, 20000 records, median of 2 rounds" in proc.stdout
    result = json.loads(out.read_text())["uncompressed 100 B"]
    zk, ck = result["zk"], result["ck"]
    assert len(zk["samples"]) == len(ck["samples"]) == 2  # every read passed bench.consume's read check
    for client in (zk, ck):
        m = client["median"]
        assert m["process_us"] > 0 and m["rate"] > 0 and "consuming (main)" in m["threads_us"]
    assert ck["median"]["threads_us"]["(C threads)"] >= 0
