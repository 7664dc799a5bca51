"""Every goal the bench judges, in one table: the text printed in the goal column, what it compares and the
threshold. A row names its goal by key (``GOALS[key]``); its "met" column is computed here, never by a suite.

The goals of the performance issue are frozen as it words them: a goal that is missed shows "no" and stays in the
table. Changing a goal's text, threshold or what it compares is a change of its own, never one made together with a
change that makes its row pass (nor together with a change to a peer's configuration).
"""
import math
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Goal:
    text: str  # the goal column, as worded
    op: Optional[str] = None  # ">=", "<=" or "<" (None: reported, no goal)
    threshold: Optional[float] = None
    on: str = "ratio"  # which figure of the row the threshold applies to: "ratio" or "value"
    headline: bool = False  # one of README's headline rows

    def met(self, value: Optional[float], ratio: Optional[float]) -> Optional[bool]:
        """True/False against the threshold; None for a reported row or a figure that was not measured."""
        if self.op is None:
            return None
        x = ratio if self.on == "ratio" else value
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return False
        if self.op == ">=":
            return x >= self.threshold
        return x <= self.threshold if self.op == "<=" else x < self.threshold


GOALS = {
    # consume: the default engine (issue-frozen goals), then the engine's other rows
    "consume.confluent": Goal(">= 1.0x tuned confluent-kafka", ">=", 1.0, headline=True),
    "consume.pykafka": Goal(">= 1.0x pykafka with rdkafka", ">=", 1.0, headline=True),
    "consume.scala": Goal(">= 1.0x the warmed Scala consumer", ">=", 1.0, headline=True),
    "consume.java": Goal("reported against the Java KafkaConsumer (no goal until measured once)", headline=True),
    "consume.kafka-python": Goal(">= 1.0x kafka-python", ">=", 1.0),
    "consume.reported": Goal("reported"),
    "librdkafka.confluent": Goal(">= 0.8x tuned confluent-kafka", ">=", 0.8, headline=True),
    "metrics.15s": Goal(">= 0.99x unscraped", ">=", 0.99, headline=True),
    "metrics.stress": Goal("reported (100 ms stress, with its interference)"),
    "dual.spaced": Goal("<= 1.3x ZooKeeper-only for commits spaced as auto-commit spaces them (1-60 s apart, a quiet "
                        "cluster)", "<=", 1.3, headline=True),
    "dual.back-to-back": Goal("reported (back to back)"),
    "commit.zk-1000": Goal("<= 100 ms", "<=", 100.0, on="value"),
    "commit.zk-10000": Goal("<= 150 ms", "<=", 150.0, on="value"),
    "rebalance.pykafka": Goal("<= 0.5x pykafka", "<=", 0.5, headline=True),
    "rebalance.scala": Goal("<= 0.5x the Scala consumer", "<=", 0.5, headline=True),
    "rebalance.reported": Goal("reported"),
    "scale.300": Goal("<= 5 s with fetchers, auto-commit and the start-up checks on, on a three-server ZooKeeper "
                      "ensemble, where converged means every member fetching its share", "<=", 5.0, on="value", headline=True),
    "scale.100": Goal("<= 5 s, 0 failed rebalances", "<=", 5.0, on="value"),
    "churn": Goal("report the time"),
    "fleet": Goal("report the time"),
    "spark.local": Goal(">= 1.0x a baseline with the same parallelism", ">=", 1.0, headline=True),
    "spark.cluster": Goal(">= 1.0x kafka-python in the executors", ">=", 1.0),
    "exporter.scrape-reads": Goal("0 (one watch-driven cache, not a full read per scrape)", "<=", 0.0, on="value"),
    "exporter.refresh": Goal("< 30 s (the default --interval)", "<", 30.0, on="value"),
    "exporter.reported": Goal("reported (the issue sets no threshold)"),
}


def row(key, metric, value, unit, baseline=None, ratio=None, note="", met=None):
    """A bench Result judged by ``GOALS[key]``. ``met``: an extra condition the row must also meet (e.g. no failed
    rebalance), or None."""
    from .common import Result
    goal = GOALS[key]
    judged = goal.met(value, ratio)
    if judged is not None and met is False:
        judged = False
    return Result(metric, value, unit, baseline, ratio, goal.text, judged, note, key)
