"""Jar sets the project fetches from Maven Central by name: Apache Kafka 3.9, Apache Kafka 4.1 and the legacy
Kafka 1.1.1.

Each set is described by a small pom shipped in ``zkconsumer/local/poms/``; :func:`classpath` returns a Java
classpath (``DIR/*``) for it, found in this order:

1. the environment variable of the set (``KAFKA_HOME`` for ``kafka``: a Kafka distribution, its ``libs/``;
   ``KAFKA_LEGACY_HOME`` for ``kafka-legacy``, ``KAFKA4_HOME`` for ``kafka4``) — it wins when set, and is an error
   when it holds no Kafka jar;
2. the cache, ``$ZKCONSUMER_CACHE_DIR`` or ``~/.cache/zkconsumer``, filled earlier;
3. Maven: ``mvn dependency:copy-dependencies`` on the shipped pom into the cache (the first time: ~60 MB, under
   a minute), under a file lock so that parallel test processes fetch once.

Nothing is downloaded by hand and nothing but the registries ``mvn`` is configured for is contacted.
"""
from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from ..errors import LocalClusterError

POM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "poms")
CACHE_ENV = "ZKCONSUMER_CACHE_DIR"


@dataclass(frozen=True)
class JarSet:
    name: str
    version: str
    # file name in POM_DIR
    pom: str
    # environment variable naming a distribution directory (its libs/ or itself)
    home_env: str
    # glob of a jar that must be present
    marker: str
    # for messages
    what: str


JAR_SETS = {
    "kafka": JarSet("kafka", "3.9.2", "kafka-3.9.xml", "KAFKA_HOME", "kafka_2.1*-*.jar",
                    "Apache Kafka 3.9 (org.apache.kafka:kafka_2.13:3.9.2)"),
    "kafka-legacy": JarSet("kafka-legacy", "1.1.1", "kafka-legacy-1.1.xml", "KAFKA_LEGACY_HOME", "kafka_2.1*-1.*.jar",
                           "Kafka 1.1.1 with the Scala ZooKeeper consumer (org.apache.kafka:kafka_2.12:1.1.1)"),
    "kafka4": JarSet("kafka4", "4.1.1", "kafka-4.xml", "KAFKA4_HOME", "kafka_2.1*-4.*.jar",
                     "Apache Kafka 4.1 (org.apache.kafka:kafka_2.13:4.1.1; KRaft, KIP-848 consumer groups)"),
}


def cache_root() -> str:
    env = os.environ.get(CACHE_ENV)
    if env:
        return os.path.abspath(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "zkconsumer")


def _jar_set(name: str) -> JarSet:
    try:
        return JAR_SETS[name]
    except KeyError:
        raise LocalClusterError("unknown jar set %r; known: %s" % (name, ", ".join(sorted(JAR_SETS)))) from None


def _libs_of_home(home: str, marker: str) -> Optional[str]:
    for d in (os.path.join(home, "libs"), home):
        if glob.glob(os.path.join(d, marker)):
            return d
    return None


def cache_dir(name: str) -> str:
    js = _jar_set(name)
    return os.path.join(cache_root(), "%s-%s" % (js.name, js.version), "libs")


def locate(name: str) -> Tuple[Optional[str], List[str]]:
    """(libs directory or None, what was tried) without fetching anything."""
    js = _jar_set(name)
    tried: List[str] = []
    home = os.environ.get(js.home_env)
    if home:
        libs = _libs_of_home(home, js.marker)
        if libs:
            return libs, tried
        raise LocalClusterError("%s=%s holds no %s jar (looked in %s/libs and %s); unset it to let zkconsumer "
                                "fetch %s with Maven" % (js.home_env, home, js.marker, home, home, js.what))
    tried.append("%s (not set)" % js.home_env)
    libs = cache_dir(name)
    if os.path.exists(os.path.join(libs, ".complete")) and glob.glob(os.path.join(libs, js.marker)):
        return libs, tried
    tried.append("cache %s (empty)" % libs)
    return None, tried


def jar_version(libs: str, name: str) -> str:
    """The Kafka version of a libs directory, from its kafka_2.1x-VERSION.jar name."""
    js = _jar_set(name)
    for path in sorted(glob.glob(os.path.join(libs, js.marker))):
        base = os.path.basename(path)[:-len(".jar")]
        if base.count("-") == 1 and not base.endswith(("-test", "-sources", "-javadoc")):
            return base.split("-", 1)[1]
    return "unknown"


def fetch(name: str, log: Callable[[str], None] = lambda m: None, timeout: float = 900.0) -> str:
    """Fill the cache for jar set `name` with Maven; return its libs directory."""
    js = _jar_set(name)
    libs = cache_dir(name)
    mvn = shutil.which("mvn")
    if not mvn:
        raise LocalClusterError(
            "no %s found: tried %s=(not set), the cache %s (empty) and Maven (mvn is not on PATH). To get it, "
            "install Maven (apt-get install maven) so zkconsumer can fetch it, or point %s at a Kafka "
            "distribution" % (js.what, js.home_env, libs, js.home_env))
    root = os.path.dirname(libs)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".lock"), "w") as lock:
        # another process may be fetching the same set: wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(libs, ".complete")):
            return libs
        tmp = "%s.tmp-%d" % (libs, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
        log("fetching %s with Maven into %s (once)" % (js.what, libs))
        t0 = time.monotonic()
        argv = [mvn, "-q", "-B", "-f", os.path.join(POM_DIR, js.pom), "dependency:copy-dependencies",
                "-DincludeScope=runtime", "-DoutputDirectory=%s" % tmp]
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            raise LocalClusterError("Maven did not fetch %s within %.0f s (%s)" % (js.what, timeout, " ".join(argv)))
        if proc.returncode != 0 or not glob.glob(os.path.join(tmp, js.marker)):
            shutil.rmtree(tmp, ignore_errors=True)
            out = proc.stdout.decode("utf-8", "replace").strip().splitlines()[-15:]
            raise LocalClusterError("Maven could not fetch %s (exit %d): %s\n%s\nSet %s to a Kafka distribution "
                                    "to use one you have." % (js.what, proc.returncode, " ".join(argv),
                                                              "\n".join(out), js.home_env))
        with open(os.path.join(tmp, ".complete"), "w") as f:
            f.write("\n".join(sorted(os.listdir(tmp))) + "\n")
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(tmp, libs)
        log("fetched %d jars in %.0f s" % (len(os.listdir(libs)) - 1, time.monotonic() - t0))
        return libs


def libs_dir(name: str, log: Callable[[str], None] = lambda m: None, allow_fetch: bool = True) -> str:
    """The libs directory of jar set `name`: $HOME-variable, cache, or fetched now."""
    libs, tried = locate(name)
    if libs:
        return libs
    if not allow_fetch:
        js = _jar_set(name)
        raise LocalClusterError("no %s found: tried %s" % (js.what, "; ".join(tried)))
    return fetch(name, log)


def classpath(name: str, log: Callable[[str], None] = lambda m: None, allow_fetch: bool = True) -> str:
    return os.path.join(libs_dir(name, log, allow_fetch), "*")
