"""``python -m bench [--quick] [--only consume,rebalance,churn,scale,commit,fleet,spark,spark-cluster]``.

zkconsumer's measured targets.

Every figure is a ratio to a baseline measured in the same run, on the same data, on loopback. Prints a Markdown
table and writes bench/results.json (a list of {metric, value, unit, baseline, ratio, goal, ...}).
"""
import argparse
import os
import sys
import tempfile
import time

from . import churn, commit, common, consume, fleet, rebalance, scale

SUITES = {"consume": consume, "rebalance": rebalance, "churn": churn, "scale": scale, "commit": commit,
          "fleet": fleet}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs; finishes within 10 minutes on 2 cores")
    ap.add_argument("--only", default="consume,rebalance,churn,scale,commit,fleet,spark,spark-cluster",
                    help="comma-separated suites [default: all]")
    ap.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results.json"))
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
    results = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="zkconsumer-bench-") as tmp:
        cluster = common.Cluster(tmp)
        try:
            for name in wanted:
                log("running %s" % name)
                try:
                    if name in ("spark", "spark-cluster"):
                        from . import spark
                        run = spark.run if name == "spark" else spark.run_cluster
                        results.extend(run(cluster, quick=args.quick, log=log))
                    else:
                        results.extend(SUITES[name].run(cluster, quick=args.quick, log=log))
                except Exception as e:  # one suite failing must not hide the others' figures
                    log("%s FAILED: %r" % (name, e))
                    results.append(common.Result(name + " (failed)", float("nan"), "-", None, None, "-", False,
                                                 "error: %r" % (e,)))
        finally:
            cluster.close()
    info = common.machine()
    command = "python -m bench" + (" --quick" if args.quick else "") + (
        " --only " + args.only if args.only != ap.get_default("only") else "")
    print(common.markdown(results, info, command))
    common.write_json(args.output, results, info)
    log("done in %.0f s; wrote %s" % (time.time() - t0, args.output))
    return 0 if all(r.met is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
