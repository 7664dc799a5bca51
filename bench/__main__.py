"""``python -m bench [--quick] [--only consume,rebalance,churn,fleet,scale,commit,exporter,spark,spark-cluster]``.

zkconsumer's measured targets.

Every figure is a ratio to a baseline measured in the same run, on the same data, on loopback. Prints a Markdown
table and writes bench/results.json (a list of {metric, value, unit, baseline, ratio, goal, ...}).
"""
import argparse
import os
import sys
import tempfile
import time

from . import churn, commit, common, consume, exporter, fleet, rebalance, report, scale

# The default order runs last the suites that leave the shared cluster busy after they end: scale (300 sessions
# stopping and expiring) and commit (~400k offset records for the broker's log cleaner). After them, fleet's
# --parallel 8 verify of 100 groups took 11-45 s instead of 6 s.
SUITES = {"consume": consume, "rebalance": rebalance, "churn": churn, "fleet": fleet, "scale": scale,
          "commit": commit, "exporter": exporter}


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m bench", description="zkconsumer's benchmarks, each judged by its goal in bench/goals.py against "
        "baselines measured in the same run (tuned peers, the Java consumer as the limit); starts its own cluster "
        "on loopback unless $ZK_CONNECT and $KAFKA_BOOTSTRAP are both set. Exits 1 when a goal is not met.")
    ap.add_argument("--quick", action="store_true",
                    help="smaller runs (~28 min on a 2-core VM: 1,695 s measured, of which scale ~7 min and "
                         "dual commits 60 s apart ~11 min)")
    ap.add_argument("--only", default="consume,rebalance,churn,fleet,scale,commit,exporter,spark,spark-cluster",
                    help="comma-separated suites [default: all]")
    ap.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results.json"),
                    help="where the rows go [default: bench/results.json, the committed figures README's table is "
                         "made from: give another path for a partial run]")
    ap.add_argument("--readme", action="store_true",
                    help="also rewrite README.md's headline table and docs/contributors.md's full table (between "
                         "their bench:begin/bench:end markers)")
    args = ap.parse_args(argv)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SUITES and s not in ("spark", "spark-cluster")]
    if unknown:
        ap.error("unknown suite(s) %s; choose from %s" % (", ".join(unknown),
                                                           ", ".join(list(SUITES) + ["spark", "spark-cluster"])))
    import logging
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # clients still retrying after the cluster stops
    def log(msg):
        print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)
    results, time_goes = [], []
    t0 = time.time()
    broker = "?"
    with tempfile.TemporaryDirectory(prefix="zkconsumer-bench-") as tmp:
        cluster = common.Cluster(tmp)
        broker = cluster.broker
        try:
            for name in wanted:
                log("running %s" % name)
                try:
                    if name in ("spark", "spark-cluster"):
                        from . import spark as module
                        run = module.run if name == "spark" else module.run_cluster
                    else:
                        module = SUITES[name]
                        run = module.run
                    results.extend(run(cluster, quick=args.quick, log=log))
                    text = getattr(module, "TIME_GOES", None)  # a str, or {suite: str} (spark, spark-cluster)
                    text = text.get(name) if isinstance(text, dict) else text
                    if text:
                        time_goes.append((name, text))
                except Exception as e:  # one suite failing must not hide the others' figures
                    log("%s FAILED: %r" % (name, e))
                    results.append(common.Result(name + " (failed)", float("nan"), "-", None, None, "-", False,
                                                 "error: %r" % (e,)))
        finally:
            cluster.close()
    command = "python -m bench" + (" --quick" if args.quick else "") + (
        " --only " + args.only if args.only != ap.get_default("only") else "")
    info = dict(common.machine(), broker=broker, command=command)
    print(report.markdown(results, info, command))
    report.write_json(args.output, results, info, time_goes)
    if args.readme:
        report.update_readme(report.README, report.readme_section(results, info, command))
        report.update_readme(report.CONTRIBUTORS, report.full_section(results, info, command, time_goes))
        log("rewrote the tables in %s and %s" % (report.README, report.CONTRIBUTORS))
    log("done in %.0f s; wrote %s" % (time.time() - t0, args.output))
    return 0 if all(r.met is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
