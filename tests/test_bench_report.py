"""The bench's report (pure): the README section between its markers is replaced, nothing else is touched."""
import pytest

from bench import report
from bench.common import Result

INFO = {"python": "3.11.7", "cpu": "AMD EPYC", "cpus": 2, "memory_gb": 23.5, "commit": "abc1234",
        "date": "2026-11-23 16:00 UTC", "broker": "Apache Kafka 3.9.2 (ZooKeeper mode), 1 broker"}
ROWS = [Result("consume messages/s vs pykafka", 480000.0, "msg/s", 8000.0, 60.0, ">= 1.0x pykafka", True, "n"),
        Result("rebalance latency ms vs the Scala consumer", 300.0, "ms", 1400.0, 0.214, "<= 0.5x", True),
        Result("consume vs pykafka (not measured)", float("nan"), "msg/s", None, None, ">= 1.0x", None, "why")]


def test_readme_section_replaced_between_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\nbefore\n%s\nold table\n%s\nafter\n" % (report.BEGIN, report.END))
    section = report.readme_section(ROWS, INFO, "python -m bench --quick", [("consume", "decoding, in C")])
    report.update_readme(str(readme), section)
    text = readme.read_text()
    assert text.startswith("# x\nbefore\n" + report.BEGIN) and text.endswith(report.END + "\nafter\n")
    assert "old table" not in text
    assert "Apache Kafka 3.9.2 (ZooKeeper mode)" in text and "commit abc1234" in text and "AMD EPYC" in text
    assert "| consume messages/s vs pykafka | 480,000 | msg/s | 8,000 | 60 | >= 1.0x pykafka | yes |" in text
    assert "| consume vs pykafka (not measured) | - | msg/s | - | - | >= 1.0x | - |" in text
    assert "* **consume**: decoding, in C" in text
    report.update_readme(str(readme), section)  # idempotent
    assert readme.read_text() == text


def test_time_goes_lines_are_rewritten_without_touching_the_figures(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n* **consume**: outside, kept\n")
    with pytest.raises(ValueError):
        report.refresh_time_goes(str(readme), {"consume": "new"})
    section = report.readme_section(ROWS, INFO, "python -m bench --quick", [("consume", "old"), ("scale", "old")])
    readme.write_text("# x\n* **consume**: outside, kept\n" + section + "\nafter\n")
    before = readme.read_text()
    assert report.refresh_time_goes(str(readme), {"consume": "new text", "commit": "not listed"}) == ["consume"]
    after = readme.read_text()
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
    assert "- consume messages/s vs pykafka: n" in text and "- consume vs pykafka (not measured): why" in text


def test_the_committed_figures_are_one_run_with_every_peer():
    """bench/results.json and README's table are one `python -m bench --readme` run: one commit and date, the
    peers and suites the performance issue names, and the README lists every row of the JSON."""
    import json
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "bench", "results.json")) as f:
        rows = json.load(f)
    assert len({(r["machine"]["commit"], r["machine"]["date"]) for r in rows}) == 1
    names = " ".join(r["metric"] for r in rows)
    for word in ("pykafka", "scala", "confluent", "scale", "dual", "rebalance", "spark", "churn", "commit"):
        assert word in names, word
    with open(os.path.join(root, "README.md")) as f:
        readme = f.read()
    section = readme[readme.index(report.BEGIN):readme.index(report.END)]
    assert "commit %s" % rows[0]["machine"]["commit"] in section
    for r in rows:
        assert "| %s |" % r["metric"] in section, r["metric"]
