"""``zkmigrate plan``: the rolling procedure of Kafka's the Kafka documentation's "Migrating offsets from ZooKeeper to Kafka", with exact properties and verify commands.

ZooKeeper -> Kafka (the documented migration):

1. ``offsets.storage=kafka`` + ``dual.commit.enabled=true``; rolling bounce; ``zkmigrate verify --phase dual
   --to kafka`` (Kafka must be >= ZooKeeper everywhere: the next phase reads Kafka only);
2. ``dual.commit.enabled=false``; rolling bounce; ``zkmigrate verify --phase kafka``.

Kafka -> ZooKeeper (rollback): dual commit **first** (members that read max(ZK, Kafka) and write both), so
ZooKeeper catches up before anyone reads it alone; then ``offsets.storage=zookeeper``.  Going straight from
Kafka-only to ZooKeeper storage would resume from stale ZooKeeper offsets (the Kafka documentation's "Migrating offsets from ZooKeeper to Kafka").
"""
from __future__ import annotations

import shlex

__all__ = ["make_plan"]


def _verify_cmd(group, phase, to, zookeeper, bootstrap):
    argv = ["zkmigrate", "verify", "--group", group, "--phase", phase]
    if to:
        argv += ["--to", to]
    if zookeeper:
        argv += ["--zookeeper", zookeeper]
    if bootstrap:
        argv += ["--bootstrap-server", bootstrap]
    return " ".join(shlex.quote(a) for a in argv)


def _props(d):
    return ["%s=%s" % kv for kv in d.items()]


def make_plan(group, to, zookeeper=None, bootstrap=None) -> dict:
    if to == "kafka":
        start = {"offsets.storage": "zookeeper"}
        phases = [
            ("dual", {"offsets.storage": "kafka", "dual.commit.enabled": "true"}, "kafka",
             "every member commits to both Kafka and ZooKeeper, and resumes from max(ZooKeeper, Kafka)"),
            ("kafka", {"offsets.storage": "kafka", "dual.commit.enabled": "false"}, None,
             "members commit to Kafka only; ZooKeeper offsets are frozen (kept for a rollback)"),
        ]
        before = _verify_cmd(group, "zookeeper", None, zookeeper, bootstrap)
    else:
        start = {"offsets.storage": "kafka", "dual.commit.enabled": "false"}
        phases = [
            ("dual", {"offsets.storage": "kafka", "dual.commit.enabled": "true"}, "zookeeper",
             "dual commit first: ZooKeeper catches up with Kafka before anyone reads it alone"),
            ("zookeeper", {"offsets.storage": "zookeeper", "dual.commit.enabled": "false"}, None,
             "members commit to ZooKeeper only (dual.commit.enabled has no effect with ZooKeeper storage)"),
        ]
        before = _verify_cmd(group, "kafka", None, zookeeper, bootstrap)
    steps = [{"step": 0, "title": "check the starting point", "properties": _props(start), "verify": before}]
    for i, (phase, props, nxt, why) in enumerate(phases, 1):
        steps.append({"step": i, "phase": phase, "title": "set %s in every member's consumer config"
                      % ", ".join(_props(props)), "properties": _props(props), "why": why,
                      "action": "rolling bounce: restart the members one at a time, waiting for each to rejoin "
                                "('zkconsumer groups verify %s' exits 0) before the next" % group,
                      "verify": _verify_cmd(group, phase, nxt, zookeeper, bootstrap)})
    return {"group": group, "to": to, "steps": steps,
            "rollback": ("zkmigrate plan --group %s --to zookeeper" % group) if to == "kafka"
            else ("zkmigrate plan --group %s --to kafka" % group)}


def render(plan) -> str:
    lines = ["Migration plan for group %s: offsets to %s" % (plan["group"], plan["to"]), ""]
    for s in plan["steps"]:
        lines.append("Step %d: %s" % (s["step"], s["title"]))
        if s["step"] == 0:
            lines.append("  members currently run with: %s" % " ".join(s["properties"]))
        else:
            lines.append("  properties: %s" % " ".join(s["properties"]))
            lines.append("  (%s)" % s["why"])
            lines.append("  then: %s" % s["action"])
        lines.append("  verify: %s" % s["verify"])
        lines.append("")
    lines.append("To go back later: %s" % plan["rollback"])
    return "\n".join(lines)
