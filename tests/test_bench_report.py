"""The bench's report and goals (pure): README's headline section and docs/contributors.md's full section are
replaced between their markers, nothing else is touched; the committed sections are what bench/results.json renders;
every goal comes from bench/goals.py and the performance issue's goals stay as it words them."""
import json
import os
import re

import pytest

from bench import common, goals, report
from bench.common import percentile, spread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INFO = {"python": "3.11.7", "cpu": "AMD EPYC", "cpus": 2, "memory_gb": 23.5, "commit": "abc1234",
        "date": "2026-11-23 16:00 UTC", "broker": "Apache Kafka 3.9.2 (ZooKeeper mode), 1 broker"}
ROWS = [goals.row("consume.confluent", "consume msg/s vs confluent-kafka, tuned", 600000.0, "msg/s", 1000000.0, 0.6,
                  "n"),
        goals.row("consume.kafka-python", "consume msg/s vs kafka-python, tuned", 600000.0, "msg/s", 150000.0, 4.0),
        goals.row("rebalance.scala", "rebalance join ms vs the Scala consumer", 300.0, "ms", 1400.0, 0.214),
        goals.row("consume.pykafka", "consume vs pykafka with rdkafka (not measured)", float("nan"), "msg/s", None,
                  None, "why")]


def test_rows_are_judged_by_the_goal_table():
    assert [r.met for r in ROWS] == [False, True, True, False]  # 0.6 < 1.0; 4.0 >= 1.0; 0.214 <= 0.5; not measured
    assert ROWS[0].goal == ">= 1.0x tuned confluent-kafka" and ROWS[0].key == "consume.confluent"
    assert goals.row("scale.300", "scale", 1.0, "s", met=False).met is False  # an extra condition not met
    assert goals.row("consume.java", "java", 5.0, "msg/s", 6.0, 0.83).met is None  # reported


def test_readme_has_the_headline_rows_and_contributors_every_row(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\nbefore\n%s\nold table\n%s\nafter\n" % (report.BEGIN, report.END))
    section = report.readme_section(ROWS, INFO, "python -m bench --quick")
    report.update_readme(str(readme), section)
    text = readme.read_text()
    assert text.startswith("# x\nbefore\n" + report.BEGIN) and text.endswith(report.END + "\nafter\n")
    assert "old table" not in text
    assert "Apache Kafka 3.9.2 (ZooKeeper mode)" in text and "commit abc1234" in text and "AMD EPYC" in text
    assert ("| consume msg/s vs confluent-kafka, tuned | 600,000 msg/s | 1,000,000 | 0.6 | >= 1.0x tuned "
            "confluent-kafka | **no** |") in text
    assert "vs kafka-python" not in text  # not a headline goal: in the full table only
    assert "| consume vs pykafka with rdkafka (not measured) | - msg/s | - | - | >= 1.0x pykafka with rdkafka | " \
           "**no** |" in text
    report.update_readme(str(readme), section)  # idempotent
    assert readme.read_text() == text
    full = report.full_section(ROWS, INFO, "python -m bench --quick", [("consume", "decoding, in C")])
    for r in ROWS:
        assert "| %s |" % r.metric in full
    assert "| consume msg/s vs kafka-python, tuned | 600,000 | msg/s | 150,000 | 4 | >= 1.0x kafka-python | yes |" \
        in full
    assert "* **consume**: decoding, in C" in full


def test_a_headline_goal_no_row_judges_stays_in_both_tables_not_met():
    """A suite that failed (its rows replaced by one "(failed)" row) or did not run: its headline goals are still
    rows of README's table and of the full table, not met."""
    failed = [common.Result("rebalance (failed)", float("nan"), "-", None, None, "-", False, "error: boom")]
    readme = report.readme_section(ROWS + failed, INFO, "python -m bench --quick")
    full = report.full_section(ROWS + failed, INFO, "python -m bench --quick", [])
    for key in ("rebalance.pykafka", "scale.300", "dual.spaced", "spark.local", "metrics.15s"):
        line = "| %s (not measured in this run) | - - | - | - | %s | **no** |" % (key, goals.GOALS[key].text)
        assert line in readme, key
        assert "| %s (not measured in this run) | - | - | - | - | %s | **no** |" % (key, goals.GOALS[key].text) \
            in full, key
    assert "| consume.java (not measured in this run) | - - | - | - | %s | - |" % goals.GOALS["consume.java"].text \
        in readme  # a reported goal: no verdict
    assert "consume.confluent (not measured" not in readme  # judged by a row of the run
    assert "| rebalance (failed) |" in full


def test_no_results_say_so():
    assert report.NOT_MEASURED in report.readme_section([], {}, "python -m bench --quick")
    assert report.NOT_MEASURED in report.full_section([], {}, "python -m bench --quick", [])


def test_results_json_round_trip(tmp_path):
    path = tmp_path / "results.json"
    report.write_json(str(path), ROWS, dict(INFO, command="python -m bench --quick"), [("consume", "in C")])
    rows, info = report.read_json(str(path))
    assert [r.metric for r in rows] == [r.metric for r in ROWS] and rows[0].key == "consume.confluent"
    readme, full = report.sections(str(path))
    assert readme == report.readme_section(ROWS, INFO, "python -m bench --quick")
    assert "* **consume**: in C" in full and "`python -m bench --quick`" in full


def test_time_goes_lines_are_rewritten_without_touching_the_figures(tmp_path):
    doc = tmp_path / "contributors.md"
    doc.write_text("# x\n* **consume**: outside, kept\n")
    with pytest.raises(ValueError):
        report.refresh_time_goes(str(doc), {"consume": "new"})
    section = report.full_section(ROWS, INFO, "python -m bench --quick", [("consume", "old"), ("scale", "old")])
    doc.write_text("# x\n* **consume**: outside, kept\n" + section + "\nafter\n")
    before = doc.read_text()
    assert report.refresh_time_goes(str(doc), {"consume": "new text", "commit": "not listed"}) == ["consume"]
    after = doc.read_text()
    assert "* **consume**: new text" in after and "* **scale**: old" in after and "not listed" not in after
    assert "* **consume**: outside, kept" in after  # outside the section: untouched
    assert after.replace("* **consume**: new text", "* **consume**: old") == before
    assert set(report.suite_texts()) >= {"consume", "rebalance", "churn", "scale", "commit", "fleet", "spark",
                                         "spark-cluster"}


def test_readme_without_markers_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(ValueError, match="bench:begin"):
        report.update_readme(str(readme), "x")
    assert readme.read_text() == "# no markers\n"


def test_markdown_names_the_broker_and_lists_notes():
    text = report.markdown(ROWS, INFO, "python -m bench")
    assert text.splitlines()[0].startswith("Command: `python -m bench` on Apache Kafka 3.9.2")
    assert "- consume msg/s vs confluent-kafka, tuned: n" in text
    assert "- consume vs pykafka with rdkafka (not measured): why" in text


def test_spread_and_percentiles():
    assert spread([3.0, 1.0, 2.0]) == "min 1 / median 2 / max 3 of 3"
    assert percentile([1, 2, 3, 4, 5], 50) == 3 and percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)
    assert percentile([7], 90) == 7


def test_the_committed_sections_are_what_results_json_renders():
    """README's headline section and docs/contributors.md's full section are one `python -m bench --readme` run:
    exactly what bench/results.json renders; a run names every peer of the performance issue and judges every row
    by the goal table as it stands."""
    readme, full = report.sections(os.path.join(ROOT, "bench", "results.json"))
    for path, section in ((report.README, readme), (report.CONTRIBUTORS, full)):
        with open(path) as f:
            text = f.read()
        assert text[text.index(report.BEGIN):text.index(report.END) + len(report.END)] == section, path
    with open(os.path.join(ROOT, "bench", "results.json")) as f:
        rows = json.load(f)
    if not rows:
        return
    assert len({(r["machine"]["commit"], r["machine"]["date"]) for r in rows}) == 1
    names = " ".join(r["metric"] for r in rows)
    for word in ("pykafka", "Scala", "confluent", "Java", "scale", "dual", "rebalance", "spark", "churn", "commit",
                 "lz4", "zstd", "headers", "every 15 s"):
        assert word in names, word
    for r in rows:
        if r["key"]:
            goal = goals.GOALS[r["key"]]
            assert r["goal"] == goal.text, r["metric"]
            assert r["met"] == goal.met(r["value"], r["ratio"]) or (r["met"] is False), r["metric"]


def test_every_goal_a_suite_names_is_in_the_table():
    keys = set()
    for name in os.listdir(os.path.join(ROOT, "bench")):
        if name.endswith(".py"):
            with open(os.path.join(ROOT, "bench", name)) as f:
                keys |= set(re.findall(r'goals\.row\(\s*"([a-z0-9.-]+)"', f.read()))
    assert keys and keys <= set(goals.GOALS), keys - set(goals.GOALS)


def test_the_issue_goals_are_frozen_as_worded():
    """The performance issue's goals, word for word: changing one is a change of its own (see bench/goals.py)."""
    frozen = {
        "consume.confluent": (">= 1.0x tuned confluent-kafka", ">=", 1.0),
        "consume.pykafka": (">= 1.0x pykafka with rdkafka", ">=", 1.0),
        "consume.scala": (">= 1.0x the warmed Scala consumer", ">=", 1.0),
        "consume.java": ("reported against the Java KafkaConsumer (no goal until measured once)", None, None),
        "librdkafka.confluent": (">= 0.8x tuned confluent-kafka", ">=", 0.8),
        "metrics.15s": (">= 0.99x unscraped", ">=", 0.99),
        "dual.spaced": ("<= 1.3x ZooKeeper-only for commits spaced as auto-commit spaces them (1-60 s apart, a quiet "
                        "cluster)", "<=", 1.3),
        "rebalance.pykafka": ("<= 0.5x pykafka", "<=", 0.5),
        "rebalance.scala": ("<= 0.5x the Scala consumer", "<=", 0.5),
        "scale.300": ("<= 5 s with fetchers, auto-commit and the start-up checks on, on a three-server ZooKeeper "
                      "ensemble, where converged means every member fetching its share", "<=", 5.0),
        "spark.local": (">= 1.0x a baseline with the same parallelism", ">=", 1.0),
    }
    for key, (text, op, threshold) in frozen.items():
        g = goals.GOALS[key]
        assert (g.text, g.op, g.threshold) == (text, op, threshold), key
    assert goals.GOALS["scale.300"].on == "value"


def test_the_issue_sample_sizes_are_kept():
    """What the performance issue fixes besides the goals: >= 5 samples of every consume client (after a discarded
    warm-up round), >= 15 joins and 15 leaves per rebalance peer, 300 members x 3,000 partitions for scale."""
    from bench import consume, rebalance, scale
    assert consume.ROUNDS >= 5
    assert rebalance.EVENTS >= 15
    assert (300, 3000, "scale.300") in scale.GROUPS


def test_consume_rounds_rotate_and_keep_blocks_together():
    from bench.consume import Client, _order
    clients = [Client("zk", "", None, block="zk"), Client("ck", "", None), Client("java", "", None),
               Client("zk-m15", "", None, block="zk"), Client("kp", "", None)]
    firsts = set()
    for r in range(6):
        keys = [c.key for c in _order(clients, r)]
        assert sorted(keys) == sorted(c.key for c in clients)  # every client once a round
        assert abs(keys.index("zk") - keys.index("zk-m15")) == 1  # back to back
        firsts.add(keys[0])
    assert len(firsts) == 4  # the first client rotates over the 4 blocks


def test_a_read_is_checked():
    from bench.consume import ReadCheckFailed, check_read
    check_read("c", 6, 6, [3, 3], [3, 3], 0)
    for args, why in (((5, 6, [3, 2], [3, 3], 0), "read 5 records"),
                      ((6, 6, [3, 3], [3, 3], 1), "out of sequence"),
                      ((6, 6, [4, 2], [3, 3], 0), "last offsets")):
        with pytest.raises(ReadCheckFailed, match=why):
            check_read("c", *args)
