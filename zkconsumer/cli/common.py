"""Shared CLI plumbing: error reporting, logging, JSON output and where ZooKeeper / the brokers are."""
import json
import logging
import os
import sys

import click

from ..errors import ClusterUnavailableError, ZkConsumerError
from ..local import LocalCluster

ZK_ENV = "ZK_CONNECT"
KAFKA_ENV = "KAFKA_BOOTSTRAP"


# Exit codes of both CLIs (documented in their --help and the README):
EXIT_OK = 0
# the check ran and failed (verify), or work was left undone (skipped, failed writes)
EXIT_CHECK_FAILED = 1
# bad input: options, names, files (click's own usage errors are 2 as well)
EXIT_USAGE = 2
# could not check: ZooKeeper or Kafka unreachable, no group coordinator
EXIT_UNAVAILABLE = 3

EXIT_CODES_HELP = ("Exit codes: 0 ok; 1 a check failed or something was left undone; 2 bad input; 3 could not "
                   "check (ZooKeeper or Kafka unreachable).")


def hoist_log_level(argv):
    """``--log-level LEVEL`` (or ``--log-level=LEVEL``) given after the subcommand, moved in front of it, where
    the root command takes it: both ``zkconsumer --log-level debug consume ...`` and ``zkconsumer consume ...
    --log-level debug`` work."""
    argv, moved, out, i = list(argv), [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out += argv[i:]
            break
        if a == "--log-level" and i + 1 < len(argv):
            moved += argv[i:i + 2]
            i += 2
            continue
        if a.startswith("--log-level="):
            moved.append(a)
        else:
            out.append(a)
        i += 1
    return moved + out


def exit_code_for(error: BaseException) -> int:
    from ..zookeeper.auth import ZkAuthError
    if isinstance(error, ZkAuthError):
        # wrong credentials are bad input
        return EXIT_USAGE
    if isinstance(error, ClusterUnavailableError):
        return EXIT_UNAVAILABLE
    if isinstance(error, (ValueError, click.UsageError)):
        return EXIT_USAGE
    return EXIT_CHECK_FAILED


class ZkCommandGroup(click.Group):
    """A click group that turns every ZkConsumerError into one clear line on stderr (or, under ``--json``, a JSON
    object ``{"error": ..., "exit_code": ...}`` on stdout) and the exit code of its kind."""

    def invoke(self, ctx):
        from ..zookeeper.client import lost_connection_errors
        try:
            try:
                return super().invoke(ctx)
            except lost_connection_errors() as e:
                # ZooKeeper went away mid-command (a one-shot client gives up after ONE_SHOT_GIVE_UP_MS)
                raise ClusterUnavailableError("lost the ZooKeeper connection mid-command (%s%s): a request in flight "
                                              "may or may not have been applied" % (type(e).__name__,
                                                                                    ": %s" % e if str(e) else ""))
        except ZkConsumerError as e:
            code = exit_code_for(e)
            if ctx.meta.get("zkconsumer.json"):
                click.echo(json.dumps({"error": str(e), "error_type": type(e).__name__, "exit_code": code},
                                      indent=2, sort_keys=True))
            else:
                click.echo("%s: error: %s" % (ctx.find_root().info_name or "zkconsumer", e), err=True)
            sys.exit(code)
        except click.UsageError as e:
            if ctx.meta.get("zkconsumer.json"):
                click.echo(json.dumps({"error": e.format_message(), "error_type": "UsageError",
                                       "exit_code": EXIT_USAGE}, indent=2, sort_keys=True))
                sys.exit(EXIT_USAGE)
            raise


class _KazooReconnectFilter(logging.Filter):
    """kazoo logs a lost connection as several lines (connection dropped, each server tried, each failure); keep one
    line per outage ("lost; reconnecting") and one when it is back, the rest only at debug level."""

    def __init__(self):
        super().__init__()
        self.down = False

    def filter(self, record):
        if logging.getLogger().level <= logging.DEBUG:
            return True
        msg = record.getMessage()
        if "Connection dropped" in msg or "Connection time-out" in msg or "Failed connecting" in msg or \
                "Session has expired" in msg:
            if self.down:
                return False
            self.down = True
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = "ZooKeeper connection lost (%s); reconnecting", (msg,)
            return True
        if "connection established" in msg:
            if self.down:
                self.down = False
                record.levelno, record.levelname = logging.WARNING, "WARNING"
                record.msg, record.args = "ZooKeeper connection re-established", None
                return True
            return False
        return record.levelno >= logging.ERROR


def setup_logging(level):
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger().level
    kazoo = logging.getLogger("kazoo")
    kazoo.setLevel(logging.DEBUG if root <= logging.DEBUG else logging.INFO)
    if not any(isinstance(f, _KazooReconnectFilter) for f in kazoo.filters):
        filt = _KazooReconnectFilter()
        for name in ("kazoo", "kazoo.client", "kazoo.protocol.connection", "kazoo.handlers.threading"):
            logging.getLogger(name).addFilter(filt)
    # kafka-python's errors are shown at the default level (warning) as one line, without its tracebacks; its
    # warnings and retries only with --log-level info or debug, and what it logs about the requests a client had in
    # flight when we closed it only with --log-level debug
    logging.getLogger("kafka").setLevel(logging.ERROR if root >= logging.WARNING else root)
    if root > logging.DEBUG:
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, _NoTraceback) for f in handler.filters):
                handler.addFilter(_NoTraceback())


class _NoTraceback(logging.Filter):
    """Other libraries' tracebacks (kafka-python logs them with its errors) only at debug level."""

    def filter(self, record):
        if record.exc_info and record.name.split(".")[0] == "kafka":
            record.msg = "%s (%s)" % (record.getMessage(), record.exc_info[1] if record.exc_info[1] else "")
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def emit_json(obj):
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=str))


def local_dir_option(f):
    return click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
                        help="State directory of the local cluster [default: $ZKCONSUMER_LOCAL_DIR or "
                             "~/.zkconsumer/local].")(f)


def _resolve(value, env, info_key, what, flag, directory):
    if value:
        return value
    if os.environ.get(env):
        return os.environ[env]
    info = LocalCluster(directory).info()
    if info.get("running"):
        return info[info_key]
    raise click.UsageError("no %s given: pass %s, set $%s, or start the local cluster with 'zkconsumer local up'"
                           % (what, flag, env))


def resolve_zookeeper(value, directory=None):
    """--zookeeper, else $ZK_CONNECT, else the running local cluster's ZooKeeper."""
    return _resolve(value, ZK_ENV, "zookeeper_connect", "ZooKeeper", "--zookeeper HOST:PORT[/chroot]", directory)


def resolve_bootstrap(value, directory=None, zk=None):
    """--bootstrap-server, else $KAFKA_BOOTSTRAP, else the brokers registered in ZooKeeper (``zk``, the ZooKeeper
    the command works on: the legacy tools needed only --zookeeper; their endpoints of the --kafka-config's
    security.protocol), else the running local cluster's broker. When ZooKeeper was asked and has no broker (and
    no local cluster runs), its ClusterUnavailableError: the brokers are down, the command lacks nothing."""
    if not value and not os.environ.get(KAFKA_ENV) and zk is not None:
        from ..zookeeper import client as zkmod
        try:
            return zkmod.bootstrap_from_zk(zk, security_protocol=kafka_security().protocol)
        except ZkConsumerError:
            # no broker registered there: the local cluster's, else that error (the brokers are down, not unnamed)
            if not LocalCluster(directory).info().get("running"):
                raise
    return _resolve(value, KAFKA_ENV, "bootstrap_servers", "Kafka broker", "--bootstrap-server HOST:PORT", directory)


_bootstrap_option = click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT", default=None,
                                 help="Kafka bootstrap servers [default: $KAFKA_BOOTSTRAP, else the brokers "
                                      "registered in ZooKeeper, else the local cluster].")
_KAFKA_SECURITY = "zkconsumer.core.kafka_security"


def _load_kafka_config(ctx, param, value):
    if value:
        from ..errors import ZkConsumerError
        from ..core.kafka_security import SECURITY_KEYS, KafkaSecurity
        from ..core.properties import load_properties
        try:
            props = load_properties(value)
            ctx.meta[_KAFKA_SECURITY] = KafkaSecurity.from_properties(
                {k: v for k, v in props.items() if k in SECURITY_KEYS})
        except ZkConsumerError as e:
            raise click.BadParameter(str(e), param_hint="--kafka-config")
    return value


kafka_config_option = click.option(
    "--kafka-config", type=click.Path(exists=True, dir_okay=False), default=None, expose_value=False,
    callback=_load_kafka_config, is_eager=True,
    help="A .properties file with the Kafka client security keys (security.protocol, sasl.mechanism, "
         "sasl.jaas.config or sasl.credentials.file, ssl.*) for every Kafka connection; other keys are ignored "
         "(a consumer.properties file will do). Never give passwords as options.")


def kafka_security():
    """The --kafka-config's KafkaSecurity of the running command (PLAINTEXT without one); call it on the command's
    thread."""
    from ..core.kafka_security import PLAINTEXT
    ctx = click.get_current_context(silent=True)
    return (ctx.meta.get(_KAFKA_SECURITY) if ctx is not None else None) or PLAINTEXT


def bootstrap_option(f):
    """--bootstrap-server and --kafka-config (the security settings of the same connections)."""
    return _bootstrap_option(kafka_config_option(f))


ZK_AUTH_ENV, ZK_CREDENTIALS_ENV = "ZK_AUTH_SCHEME", "ZK_CREDENTIALS_FILE"
_AUTH_META = "zkconsumer.zookeeper.auth"


def _remember_auth(ctx, param, value):
    ctx.meta.setdefault(_AUTH_META, {})[param.name] = value
    return value


def zookeeper_auth_options(f, set_acl=True):
    """``--zookeeper-auth``, ``--zookeeper-credentials FILE`` and, on commands that create znodes (*set_acl*),
    ``--zookeeper-set-acl``: the ``zookeeper.auth.*`` keys for the tools (a credentials file, never a password
    option). Read back by :func:`connect_zookeeper`."""
    opts = [
        click.option("--zookeeper-auth", "zk_auth_scheme", type=click.Choice(["none", "digest", "sasl"]),
                     default=None, envvar=ZK_AUTH_ENV, expose_value=False, callback=_remember_auth,
                     help="Authenticate to ZooKeeper (zookeeper.auth.scheme) [default: $%s, else digest when "
                          "--zookeeper-credentials is given, else none]." % ZK_AUTH_ENV),
        click.option("--zookeeper-credentials", "zk_credentials", metavar="FILE", default=None,
                     envvar=ZK_CREDENTIALS_ENV, expose_value=False, callback=_remember_auth,
                     help="File with username= and password= (or JSON) for ZooKeeper; must not be world-readable "
                          "[default: $%s]." % ZK_CREDENTIALS_ENV),
    ]
    if set_acl:
        opts.append(click.option("--zookeeper-set-acl", "zk_set_acl", is_flag=True, default=False,
                                 expose_value=False, callback=_remember_auth,
                                 help="Znodes this command creates get creator-all + world-read ACLs "
                                      "(zookeeper.set.acl)."))
    for opt in reversed(opts):
        f = opt(f)
    return f


def given_auth_options():
    """The ZooKeeper authentication options given to the current command (name -> value, unset ones left out)."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta.get(_AUTH_META, {}) if ctx is not None else {}
    return {k: v for k, v in meta.items() if v}


def zookeeper_auth_from_context():
    """The :class:`~zkconsumer.zookeeper.auth.ZkAuth` of the current command's ``--zookeeper-auth`` options."""
    from ..zookeeper.auth import build
    given = given_auth_options()
    scheme = given.get("zk_auth_scheme") or ("digest" if given.get("zk_credentials") else "none")
    return build(scheme, given.get("zk_credentials"), set_acl=bool(given.get("zk_set_acl")))


def connect_zookeeper(zookeeper_connect, long_lived: bool = False):
    """A started kazoo client for a tool, authenticated as the ``--zookeeper-auth`` options say. A one-shot
    command's client gives up (its requests fail) after its connection stayed lost for
    ``zookeeper.client.ONE_SHOT_GIVE_UP_MS`` (then it fails, exit 3); a
    *long_lived* one (the exporter, the registry mirror) waits for ZooKeeper to come back."""
    from ..zookeeper import client as zkmod
    return zkmod.connect(zookeeper_connect, auth=zookeeper_auth_from_context(),
                         give_up_after_ms=None if long_lived else zkmod.ONE_SHOT_GIVE_UP_MS)


_zookeeper_connect_option = click.option("--zookeeper", "zookeeper", metavar="HOST:PORT[,...][/CHROOT]", default=None,
                                         help="ZooKeeper connect string [default: $ZK_CONNECT or the local cluster].")


def zookeeper_option(f):
    """``--zookeeper`` and the ZooKeeper authentication options (:func:`zookeeper_auth_options`)."""
    return _zookeeper_connect_option(zookeeper_auth_options(f))


def zookeeper_read_option(f):
    """``--zookeeper`` and the authentication options of a command that creates no znode (no
    ``--zookeeper-set-acl``: there would be nothing for it to do)."""
    return _zookeeper_connect_option(zookeeper_auth_options(f, set_acl=False))


def _remember_json(ctx, param, value):
    if value:
        # ctx.meta is shared by the whole context tree: errors go out as JSON
        ctx.meta["zkconsumer.json"] = True
    return value


json_option = click.option("--json", "as_json", is_flag=True, callback=_remember_json, is_eager=True,
                           help="Print machine-readable JSON (errors too: {\"error\": ..., \"exit_code\": ...}).")


def _validate_groups(ctx, param, values):
    """Check every --group name before anything connects (a bad name fails at once, exit code 2)."""
    from ..core.layout import validate_group
    out = []
    for v in values or ():
        try:
            out.append(validate_group(v))
        except ValueError as e:
            raise click.BadParameter(str(e), ctx=ctx, param=param)
    return tuple(out)


def group_options(all_groups=True):
    """``--group G`` (repeatable) and, where Kafka's tools have it, ``--all-groups``."""
    def deco(f):
        if all_groups:
            f = click.option("--all-groups", is_flag=True, help="Every group under /consumers.")(f)
        return click.option("--group", "groups", multiple=True, metavar="GROUP", callback=_validate_groups,
                            help="Consumer group id (repeatable%s)." % (", or --all-groups" if all_groups else ""))(f)
    return deco


def selected_groups(zk, groups, all_groups, required=True):
    """The groups a command works on: --group values in order, or every group with --all-groups."""
    if groups and all_groups:
        raise click.UsageError("give --group or --all-groups, not both")
    if all_groups:
        from ..tools.groups import list_groups
        return list_groups(zk)
    if not groups and required:
        raise click.UsageError("no group given: pass --group GROUP (repeatable) or --all-groups")
    return list(dict.fromkeys(groups))


def check_group_choice(groups, all_groups):
    """The usage checks of :func:`selected_groups` that need no connection (run them before connecting)."""
    if groups and all_groups:
        raise click.UsageError("give --group or --all-groups, not both")
    if not groups and not all_groups:
        raise click.UsageError("no group given: pass --group GROUP (repeatable) or --all-groups")


def print_table(rows):
    """Left-aligned columns, the header first (as Kafka's tools print)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(" ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
