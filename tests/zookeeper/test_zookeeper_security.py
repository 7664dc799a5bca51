"""ZooKeeper authentication and ACLs (``zookeeper.auth.scheme``, ``zookeeper.set.acl``) on real ZooKeeper servers.

* digest: members of the session cluster authenticate with the digest scheme (nothing to set up on the server);
* SASL DIGEST-MD5: a ZooKeeper of this module's own, started with ``SASLAuthenticationProvider`` and a ``Server``
  JAAS section (``zkconsumer.local.servers.plan_zookeeper(sasl_users=...)``), its ``/brokers`` written by the
  registry mirror (authenticated, ACLs on) from the session's Apache Kafka, so members consume for real through it.

With ACLs on, an unauthenticated client and one with other credentials can read but not change our offsets, owner
nodes, registrations and member info (NoAuthError); Kafka 1.1.1's ConsumerGroupCommand still describes the group
without credentials; wrong credentials fail at start naming the connect string and the scheme, never the password.
"""
import json
import os
import subprocess
import sys
import time

import pytest
from kazoo.exceptions import NoAuthError, NotEmptyError
from kazoo.security import Permissions

from tests.support import ROOT
from tests.support.consumer_helpers import CliConsumer, produce_tracked, wait_for_assignment
from tests.support.jvm_helpers import run_tool
from tests.support.waiting import wait_until
from zkconsumer.zookeeper import client as zkmod
from zkconsumer.core.config import ConsumerConfig
from zkconsumer.errors import ConfigError
from zkconsumer.core.layout import paths
from zkconsumer.zookeeper.auth import ZkAuth, ZkAuthError, build, digest_id, load_credentials

ALICE_PW, BOB_PW = "alice-Secr3t-pw", "bob-0ther-pw"
PROPS = {"auto.commit.interval.ms": "200"}


def creds_file(tmp_path, name, user, password, mode=0o600, as_json=False):
    path = tmp_path / name
    path.write_text(json.dumps({"username": user, "password": password}) if as_json
                    else "username=%s\npassword=%s\n" % (user, password))
    os.chmod(path, mode)
    return str(path)


class _At:
    """Duck-types conftest.Services for CliConsumer: another ZooKeeper, the same brokers."""

    def __init__(self, zookeeper_connect, bootstrap_servers):
        self.zookeeper_connect, self.bootstrap_servers = zookeeper_connect, bootstrap_servers


def zk_offsets(zk, group, topic, n):
    return {p: int(zk.get(paths.partition_offset_path(group, topic, p))[0]) for p in range(n)
            if zk.exists(paths.partition_offset_path(group, topic, p))}


def ends_of(produced):
    ends = {}
    for p, o, _ in produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


def group_nodes(zk, group, topic):
    """Every znode a running member made: offsets, owners, registrations, member info, and their parents."""
    out = [paths.group_path(group), paths.group_ids_path(group), paths.group_owners_path(group),
           paths.topic_owners_path(group, topic), paths.group_offsets_path(group),
           paths.topic_offsets_path(group, topic), paths.group_member_info_dir(group)]
    for base in (paths.group_ids_path(group), paths.topic_owners_path(group, topic),
                 paths.topic_offsets_path(group, topic), paths.group_member_info_dir(group)):
        out += [base + "/" + c for c in zk.get_children(base)]
    return out


def assert_locked(reader, group, topic, owner_ids):
    """``reader`` (unauthenticated or other credentials) reads every node of the group but changes none."""
    nodes = group_nodes(reader, group, topic)
    assert any("/offsets/" in n for n in nodes) and any("/owners/%s/" % topic in n for n in nodes)
    assert any(n.startswith(paths.group_ids_path(group) + "/") for n in nodes)
    assert any(n.startswith(paths.group_member_info_dir(group) + "/") for n in nodes)
    for node in nodes:
        data, _ = reader.get(node)  # world-readable
        acls, _ = reader.get_acls(node)  # ZooKeeper shows others' digests as user:x
        assert {(a.id.scheme, a.id.id): a.perms for a in acls} == dict(
            [((s, i.split(":")[0] + ":x" if s == "digest" else i), Permissions.ALL) for s, i in owner_ids]
            + [(("world", "anyone"), Permissions.READ)]), node
        with pytest.raises(NoAuthError):
            reader.set(node, b"0")
        # deleting needs the parent's DELETE right; /consumers/G's parent is /consumers, open, and G is not empty
        with pytest.raises(NotEmptyError if node == paths.group_path(group) else NoAuthError):
            reader.delete(node, recursive=False)
        with pytest.raises(NoAuthError):
            reader.create(node + "/intruder", b"")
    # the legacy root itself stays open, as Kafka keeps it (every group writes under it)
    assert any(a.id.id == "anyone" and a.perms == Permissions.ALL for a in reader.get_acls("/consumers")[0])


# -- the credentials file and the keys (no server) ----------------------------------------------------------------
def test_credentials_file_formats_and_mode(tmp_path):
    assert load_credentials(creds_file(tmp_path, "p", "alice", ALICE_PW)) == ("alice", ALICE_PW)
    assert load_credentials(creds_file(tmp_path, "j", "alice", ALICE_PW, as_json=True)) == ("alice", ALICE_PW)
    loose = creds_file(tmp_path, "w", "alice", ALICE_PW, mode=0o644)
    with pytest.raises(ConfigError) as e:
        load_credentials(loose)
    assert "chmod 600" in str(e.value) and ALICE_PW not in str(e.value)
    (tmp_path / "bad").write_text("user=alice\npassword=%s\n" % ALICE_PW)
    os.chmod(tmp_path / "bad", 0o600)
    with pytest.raises(ConfigError) as e:
        load_credentials(str(tmp_path / "bad"))
    assert "username" in str(e.value) and ALICE_PW not in str(e.value)
    (tmp_path / "deep").write_text('{"password": "%s", "x": %s' % (ALICE_PW, "[" * 100_000))  # json's scanner recurses
    os.chmod(tmp_path / "deep", 0o600)
    with pytest.raises(ConfigError, match="not valid JSON") as e:
        load_credentials(str(tmp_path / "deep"))
    assert ALICE_PW not in str(e.value)
    auth = build("sasl", creds_file(tmp_path, "s", "alice", ALICE_PW), set_acl=True)
    assert (auth.scheme, auth.username, auth.set_acl) == ("sasl", "alice", True)
    assert ALICE_PW not in repr(auth) and ALICE_PW not in auth.describe()
    assert auth.kazoo_kwargs()["sasl_options"] == {"mechanism": "DIGEST-MD5", "username": "alice",
                                                   "password": ALICE_PW}
    assert digest_id("alice", ALICE_PW).startswith("alice:")


def test_auth_keys_are_validated():
    base = {"group.id": "g", "zookeeper.connect": "zk:2181"}
    for bad, key in (({"zookeeper.set.acl": "true"}, "zookeeper.set.acl"),
                     ({"zookeeper.auth.scheme": "digest"}, "zookeeper.auth.credentials.file"),
                     ({"zookeeper.auth.credentials.file": "/x"}, "zookeeper.auth.scheme"),
                     ({"zookeeper.auth.scheme": "kerberos"}, "zookeeper.auth.scheme"),
                     ({"zookeeper.sasl.mechanism": "PLAIN"}, "zookeeper.sasl.mechanism")):
        with pytest.raises(ConfigError) as e:
            ConsumerConfig.from_properties(base, bad)
        assert e.value.key == key, bad
    c = ConsumerConfig.from_properties(base, {"zookeeper.auth.scheme": "sasl", "zookeeper.set.acl": "true",
                                              "zookeeper.auth.credentials.file": "/etc/zk.creds"})
    assert (c.zookeeper_auth_scheme, c.zookeeper_set_acl, c.zookeeper_auth_credentials_file) == \
        ("sasl", True, "/etc/zk.creds")


# -- digest, on the session's ZooKeeper ---------------------------------------------------------------------------
def test_digest_members_consume_commit_and_others_cannot_change_the_group(services, zk, unique, procs, tmp_path):
    alice = creds_file(tmp_path, "alice", "alice", ALICE_PW)
    g, t = unique("zkdigest"), services.create_topic(unique("zkdigest"), 4)
    produced = produce_tracked(services.bootstrap_servers, t, 60, partitions=4, tag="digest")
    args = ("--zookeeper-credentials", alice, "--zookeeper-set-acl")  # digest is the default with a file
    members = [CliConsumer(services, g, [t], consumer_id=n, props=PROPS, extra_args=args) for n in ("a", "b")]
    procs.extend(members)
    wait_for_assignment(zk, g, [t], 2, timeout=60)
    ends = ends_of(produced)
    wait_until(lambda: zk_offsets(zk, g, t, 4) == ends, 40, message="offsets committed through digest auth")

    alice_id = [("digest", digest_id("alice", ALICE_PW))]
    assert_locked(zk, g, t, alice_id)  # the fixture's client is unauthenticated
    mallory = zkmod.connect(services.zookeeper_connect, auth=ZkAuth("digest", "mallory", "x"))
    wrong_pw = zkmod.connect(services.zookeeper_connect, auth=ZkAuth("digest", "alice", "not-it"))
    try:
        assert_locked(mallory, g, t, alice_id)
        assert_locked(wrong_pw, g, t, alice_id)
    finally:
        zkmod.close(mallory)
        zkmod.close(wrong_pw)
    assert zk_offsets(zk, g, t, 4) == ends  # nothing changed them
    assert not [ln for m in members for ln in m.log if ALICE_PW in ln]  # the members' logs never show it

    # Kafka 1.1.1's legacy tool reads the group without credentials
    p = run_tool("kafka.admin.ConsumerGroupCommand", "--zookeeper", services.zookeeper_connect, "--describe",
                 "--group", g)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {int(c[1]): (int(c[2]), c[5]) for c in (ln.split() for ln in p.stdout.splitlines())
            if len(c) == 6 and c[0] == t}
    assert {q: o for q, (o, _) in rows.items()} == ends, p.stdout
    assert {owner for _, owner in rows.values()} == {g + "_a", g + "_b"}, p.stdout

    # a member started with the wrong password is refused at start, naming ZooKeeper and the scheme
    wrong = creds_file(tmp_path, "wrong", "alice", "Wr0ng-pass-123")
    run = subprocess.run([sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", services.zookeeper_connect,
                          "--group", g, "--topic", t, "--zookeeper-credentials", wrong, "--zookeeper-set-acl",
                          "--max-messages", "1"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 2, run.stdout + run.stderr
    assert services.zookeeper_connect in run.stderr and "digest" in run.stderr and "alice" in run.stderr
    assert "Wr0ng-pass-123" not in run.stdout + run.stderr and ALICE_PW not in run.stdout + run.stderr


# -- SASL DIGEST-MD5, on a ZooKeeper of this module's own ----------------------------------------------------------
@pytest.fixture(scope="module")
def sasl_zk(tmp_path_factory, services):
    """A ZooKeeper with SASL on (users alice and bob) whose /brokers mirror the session's Kafka."""
    from zkconsumer.kafka.metadata import admin_client
    from zkconsumer.local import processes, servers
    from zkconsumer.tools.registry_mirror import RegistryMirror
    d = str(tmp_path_factory.mktemp("sasl-zk"))
    rec = servers.plan_zookeeper(d, {"alice": ALICE_PW, "bob": BOB_PW})
    pid = servers.spawn_ready(rec, d, 60)
    creds = creds_file(tmp_path_factory.mktemp("creds"), "alice", "alice", ALICE_PW)
    mirror_zk = zkmod.connect(rec["connect"], auth=build("sasl", creds, set_acl=True))
    admin = admin_client(services.bootstrap_servers, client_id="zksec-mirror")
    mirror = RegistryMirror(mirror_zk, admin)
    try:
        mirror.sync_once()
        yield {"connect": rec["connect"], "alice": creds, "mirror": mirror, "zk": mirror_zk}
    finally:
        admin.close()
        zkmod.close(mirror_zk)
        processes.stop(pid)


def test_sasl_members_consume_commit_and_others_cannot_change_the_group(services, sasl_zk, unique, procs, tmp_path):
    connect = sasl_zk["connect"]
    t = services.create_topic(unique("zksasl"), 4)
    sasl_zk["mirror"].sync_once()
    g = unique("zksasl")
    produced = produce_tracked(services.bootstrap_servers, t, 60, partitions=4, tag="sasl")
    config = tmp_path / "consumer.properties"  # the keys, as a consumer.properties would have them
    config.write_text("zookeeper.auth.scheme=sasl\nzookeeper.auth.credentials.file=%s\nzookeeper.set.acl=true\n"
                      % sasl_zk["alice"])
    at = _At(connect, services.bootstrap_servers)
    members = [CliConsumer(at, g, [t], consumer_id=n, props=PROPS, extra_args=("--config", str(config)))
               for n in ("a", "b")]
    procs.extend(members)
    anon = zkmod.connect(connect)
    bob = zkmod.connect(connect, auth=ZkAuth("sasl", "bob", BOB_PW))
    try:
        wait_for_assignment(anon, g, [t], 2, timeout=60)
        ends = ends_of(produced)
        wait_until(lambda: zk_offsets(anon, g, t, 4) == ends, 40, message="offsets committed through SASL")
        seen = {(r["partition"], r["offset"]) for m in members for r in m.records}
        assert seen == {(p, o) for p, o, _ in produced}
        assert not [ln for m in members for ln in m.log if ALICE_PW in ln]
        assert_locked(anon, g, t, [("sasl", "alice")])
        assert_locked(bob, g, t, [("sasl", "alice")])
        # the mirror's broker registry is the mirror identity's too
        assert not any(a.perms & Permissions.WRITE and a.id.id == "anyone"
                       for a in anon.get_acls(paths.topic_path(t))[0])
        with pytest.raises(NoAuthError):
            bob.set(paths.topic_path(t), b"{}")
        assert zk_offsets(anon, g, t, 4) == ends
    finally:
        zkmod.close(anon)
        zkmod.close(bob)

    # the tools read without credentials, and with them
    for extra in ((), ("--zookeeper-auth", "sasl", "--zookeeper-credentials", sasl_zk["alice"])):
        out = subprocess.run([sys.executable, "-m", "zkconsumer", "groups", "owners", "--zookeeper", connect,
                              "--group", g, "--json"] + list(extra),
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stdout + out.stderr
        assert ALICE_PW not in out.stdout + out.stderr
        report = json.loads(out.stdout)
        assert sorted(report["members"]) == [g + "_a", g + "_b"]
        assert sorted(o["partition"] for o in report["owners"]) == [0, 1, 2, 3]


def test_sasl_wrong_password_fails_at_start_without_showing_it(sasl_zk, services, tmp_path):
    wrong = creds_file(tmp_path, "wrong", "alice", "Wr0ng-pass-456")
    with pytest.raises(ZkAuthError) as e:
        zkmod.connect(sasl_zk["connect"], auth=build("sasl", wrong))
    assert sasl_zk["connect"] in str(e.value) and "sasl" in str(e.value) and "Wr0ng-pass-456" not in str(e.value)
    run = subprocess.run([sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", sasl_zk["connect"],
                          "--group", "g-sasl-wrong", "--topic", "t", "--zookeeper-auth", "sasl",
                          "--zookeeper-credentials", wrong, "--max-messages", "1"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 2, run.stdout + run.stderr
    assert sasl_zk["connect"] in run.stderr and "sasl" in run.stderr
    assert "Wr0ng-pass-456" not in run.stdout + run.stderr
    assert len(run.stderr.strip().splitlines()) <= 3, run.stderr  # one clear line, no traceback


def test_sasl_wrong_password_refused_before_the_start_has_looked_is_an_auth_error(sasl_zk, tmp_path, monkeypatch):
    """kazoo reports CONNECTED before SASL is done: on a loaded machine ZooKeeper's refusal can end the connecting
    before the starting thread has looked, which kazoo's ``start`` reports as "Connection time-out". It is still
    the credentials, not an unreachable ZooKeeper: the thread is held back here until the refusal is in."""
    from kazoo.client import KazooClient
    from kazoo.protocol.states import KeeperState
    wrong = creds_file(tmp_path, "wrong", "alice", "Wr0ng-pass-456")
    start_async = KazooClient.start_async

    def held_back(client):
        live = start_async(client)

        class Late:
            def wait(self, timeout=None):
                got = live.wait(timeout)
                deadline = time.monotonic() + 30  # until the SASL exchange after CONNECTED has ended the session
                while client.client_state not in (KeeperState.AUTH_FAILED, KeeperState.CLOSED):
                    assert time.monotonic() < deadline, client.client_state
                    time.sleep(0.05)
                return got
        return Late()
    monkeypatch.setattr(KazooClient, "start_async", held_back)
    with pytest.raises(ZkAuthError) as e:
        zkmod.connect(sasl_zk["connect"], auth=build("sasl", wrong))
    assert sasl_zk["connect"] in str(e.value) and "Wr0ng-pass-456" not in str(e.value)


def test_another_identity_is_refused_at_start(sasl_zk, tmp_path):
    g = "g-of-alice-%s" % os.getpid()
    sasl_zk["zk"].ensure_path(paths.group_ids_path(g))  # alice's group, ACLs on
    bob = creds_file(tmp_path, "bob", "bob", BOB_PW, as_json=True)
    run = subprocess.run([sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", sasl_zk["connect"],
                          "--group", g, "--topic", "t", "--zookeeper-auth", "sasl", "--zookeeper-credentials", bob,
                          "--zookeeper-set-acl", "--max-messages", "1"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "may not write /consumers/%s" % g in run.stderr and "sasl:alice" in run.stderr, run.stderr
    assert BOB_PW not in run.stdout + run.stderr


def _commands(group, prefix=()):
    import click
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))
        else:
            yield prefix + (name,), cmd


# the commands that create no znode: --zookeeper-set-acl would have nothing to do there
READ_ONLY = {("zkconsumer", "exporter"), ("zkconsumer", "tree"), ("zkconsumer", "groups", "list"),
             ("zkconsumer", "groups", "describe"), ("zkconsumer", "groups", "owners"),
             ("zkconsumer", "groups", "verify"), ("zkmigrate", "status"), ("zkmigrate", "plan"),
             ("zkmigrate", "export")}


def test_every_command_with_zookeeper_takes_credentials_and_no_password():
    """Every command that talks to ZooKeeper takes the credentials options (never a password on the command
    line); ``--zookeeper-set-acl`` is offered exactly on the commands that create znodes."""
    from zkconsumer.cli.main import cli as zkconsumer_cli
    from zkconsumer_migrate.cli import cli as zkmigrate_cli
    seen, read_only = 0, set()
    for prog, root in (("zkconsumer", zkconsumer_cli), ("zkmigrate", zkmigrate_cli)):
        for name, cmd in _commands(root):
            flags = {o for p in cmd.params for o in getattr(p, "opts", [])}
            assert not any("password" in f for f in flags), name
            if "--zookeeper" in flags:
                seen += 1
                assert {"--zookeeper-auth", "--zookeeper-credentials"} <= flags, name
                if "--zookeeper-set-acl" not in flags:
                    read_only.add((prog,) + name)
    assert read_only == READ_ONLY
    assert seen >= 15


def test_every_zookeeper_client_of_the_surfaces_passes_credentials():
    """Every ``zk.connect(`` in the consumer, the CLIs, zkmigrate and Spark passes ``auth=`` (the embedded
    cluster's own readiness probes and the benchmarks are the exceptions: they never meet a secured group)."""
    import re
    root = ROOT
    missing, found = [], 0
    for base in ("zkconsumer", "migrate"):
        for d, _, files in os.walk(os.path.join(root, base)):
            for f in files:
                path = os.path.join(d, f)
                if not f.endswith(".py") or os.sep + "local" + os.sep in path:
                    continue
                text = open(path).read()
                for m in re.finditer(r"zkmod\.connect\(([^()]|\([^()]*\))*\)", text):
                    found += 1
                    if "auth=" not in m.group(0):
                        missing.append("%s: %s" % (os.path.relpath(path, root), m.group(0)))
    assert found >= 6 and not missing, (found, missing)


def test_spark_reaper_releases_a_dead_member_with_its_credentials(sasl_zk):
    from zkconsumer.spark._reaper import release_member
    g = "g-reaped-%s" % os.getpid()
    cid = g + "_m"
    alice = sasl_zk["zk"]
    reg, own = paths.consumer_registration_path(g, cid), paths.partition_owner_path(g, "t", 0)
    alice.create(reg, b"{}", makepath=True)
    alice.create(own, (cid + "-0").encode(), makepath=True)
    with pytest.raises(NoAuthError):  # without the member's credentials it may not
        release_member(sasl_zk["connect"], g, cid)
    run = subprocess.run([sys.executable, "-m", "zkconsumer.spark._reaper", sasl_zk["connect"], g, cid, "0", "6000",
                          "sasl", sasl_zk["alice"], "DIGEST-MD5", "true"], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert not alice.exists(reg) and not alice.exists(own)
