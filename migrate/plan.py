"""``zkmigrate plan``: the rolling procedure of the Kafka documentation's "Migrating offsets from ZooKeeper to
Kafka", with exact properties and the commands to run (each one runs as printed), after reading what the group's
members run now (or saying that it could not).

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


def _rejoin_cmd(group, zookeeper):
    argv = ["zkconsumer", "groups", "verify", "--group", group] + (["--zookeeper", zookeeper] if zookeeper else [])
    return " ".join(shlex.quote(a) for a in argv)


def read_group(zk, group) -> dict:
    """What the plan's first step checks, read from ZooKeeper: the live members, where each says it commits
    (``zookeeper``, ``dual``, ``kafka``; ``unknown`` for members that publish nothing, JVM members) and the
    recorded phase."""
    from zkconsumer.consumer.registration import live_members, member_infos
    from .state import read_phase
    members = live_members(zk, group, quiet=True)
    infos = member_infos(zk, group)
    modes: dict = {}
    for cid in members:
        mode = infos[cid].mode if cid in infos else "unknown"
        modes[mode] = modes.get(mode, 0) + 1
    phase = read_phase(zk, group)
    return {"read": True, "members": len(members), "modes": modes,
            "recorded_phase": phase.get("phase") if isinstance(phase, dict) else None}


def make_plan(group, to, zookeeper=None, bootstrap=None, observed=None) -> dict:
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
    steps = [{"step": 0, "title": "check the starting point", "properties": _props(start), "verify": before,
              "observed": observed or {"read": False}}]
    for i, (phase, props, nxt, why) in enumerate(phases, 1):
        steps.append({"step": i, "phase": phase, "title": "set %s in every member's consumer config"
                      % ", ".join(_props(props)), "properties": _props(props), "why": why,
                      "action": "rolling bounce: restart the members one at a time, waiting for each to rejoin "
                                "('%s' exits 0) before the next" % _rejoin_cmd(group, zookeeper),
                      "verify": _verify_cmd(group, phase, nxt, zookeeper, bootstrap)})
    back = ["zkmigrate", "plan", "--group", group, "--to", "zookeeper" if to == "kafka" else "kafka"]
    back += ["--zookeeper", zookeeper] if zookeeper else []
    return {"group": group, "to": to, "steps": steps, "rollback": " ".join(shlex.quote(a) for a in back)}


def _observed_line(obs) -> str:
    if not obs.get("read"):
        return "  members now: not read (%s); the plan assumes they run with the properties above" % (
            obs.get("error") or "ZooKeeper was not asked")
    if not obs["members"]:
        how = "no live member"
    else:
        how = "%d live member(s): %s" % (obs["members"], ", ".join(
            "%d %s" % (n, mode) for mode, n in sorted(obs["modes"].items())))
    return "  members now (read from ZooKeeper): %s; recorded phase: %s" % (how, obs.get("recorded_phase") or "none")


def render(plan) -> str:
    lines = ["Migration plan for group %s: offsets to %s" % (plan["group"], plan["to"]), ""]
    for s in plan["steps"]:
        lines.append("Step %d: %s" % (s["step"], s["title"]))
        if s["step"] == 0:
            lines.append("  members should run with: %s" % " ".join(s["properties"]))
            lines.append(_observed_line(s["observed"]))
        else:
            lines.append("  properties: %s" % " ".join(s["properties"]))
            lines.append("  (%s)" % s["why"])
            lines.append("  then: %s" % s["action"])
        lines.append("  verify: %s" % s["verify"])
        lines.append("")
    lines.append("To go back later: %s" % plan["rollback"])
    return "\n".join(lines)
