"""Kafka 1.1.1's Scala consumer as a bench peer: bench/jvm/*.java compiled against the legacy jars (as
tests/jvm_helpers.py does for the interop tests) and run with the JDK found by zkconsumer.local.discovery."""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm")
LOG4J = "log4j.rootLogger=ERROR, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n" \
        "log4j.appender.stderr.Target=System.err\nlog4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n" \
        "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
_compiled = {}


class Unavailable(Exception):
    """No JDK or no Kafka 1.1.1 jars: the Scala rows are left out, saying why."""


def java():
    from zkconsumer.local import discovery
    return discovery.find_java()


def classpath():
    """legacy jars + the compiled bench/jvm classes (compiled once per process into a temporary directory)."""
    if "cp" in _compiled:
        return _compiled["cp"]
    javac = shutil.which("javac")
    if not javac:
        raise Unavailable("javac (a JDK) is needed to compile bench/jvm/*.java")
    from zkconsumer.local import maven
    try:
        cp = maven.classpath("kafka-legacy")
    except Exception as e:
        raise Unavailable("Kafka 1.1.1 jars: %s" % str(e).splitlines()[0])
    out = tempfile.mkdtemp(prefix="zkconsumer-bench-jvm-")
    sources = [os.path.join(HERE, f) for f in sorted(os.listdir(HERE)) if f.endswith(".java")]
    p = subprocess.run([javac, "-nowarn", "-cp", cp, "-d", out] + sources, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise Unavailable("javac failed: %s%s" % (p.stdout, p.stderr))
    with open(os.path.join(out, "log4j.properties"), "w") as f:
        f.write(LOG4J)
    _compiled["dir"] = out
    _compiled["cp"] = cp + os.pathsep + out
    return _compiled["cp"]


def write_props(path, props):
    with open(path, "w") as f:
        f.writelines("%s=%s\n" % kv for kv in props.items())
    return path


def command(main_class, args, jvm_opts=()):
    cp = classpath()
    log4j = os.path.join(_compiled["dir"], "log4j.properties")
    return [java()] + list(jvm_opts) + ["-Dlog4j.configuration=file:" + log4j, "-cp", cp, main_class] + list(args)


class Member:
    """One ScalaConsumerMember process: ``go()`` subscribes, ``stop()`` shuts down gracefully, ``kill()`` is kill -9.

    ``assigned`` is its latest assignment (None while a rebalance has released its partitions), ``consumed`` the
    (perf_counter time, partition) of every first message since an assignment."""

    JVM_OPTS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")  # 9 JVMs on 2 cores: start-up matters

    def __init__(self, props_path, tag, topic):
        self.tag = tag
        self.assigned, self.consumed, self.events = None, [], []
        self.connected, self.stopped = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(command("ScalaConsumerMember", [props_path, tag, topic], self.JVM_OPTS),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            now = time.perf_counter()
            try:
                e = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append((now, e))
                kind = e.get("event")
                if kind == "connected":
                    self.connected.set()
                elif kind == "releasing":
                    self.assigned = None
                elif kind == "assigned":
                    self.assigned = frozenset(e["partitions"])
                elif kind == "consumed":
                    self.consumed.append((now, e["partition"]))
                elif kind == "stopped":
                    self.stopped.set()

    def _send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def go(self):
        self._send("go")

    def stop(self):
        self._send("stop")

    def kill(self):
        self.proc.kill()

    def close(self, timeout=30):
        if self.proc.poll() is None:
            try:
                self.stop()
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
