"""The bench's JVM peers: bench/jvm/*.java compiled against Kafka 1.1.1's jars (as tests/support/jvm_helpers.py does for
the interop tests) and run with the JDK found by zkconsumer.local.discovery: Kafka 1.1.1's Scala consumer, and
Kafka 3.9's ConsumerPerformance (JavaConsumerPerf.java loads it by reflection, so it runs on the 3.9 jars)."""
import json
import os
import queue
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


def command(main_class, args, jvm_opts=(), jars="kafka-legacy"):
    """The java command line running *main_class* on *jars* (a jar set of zkconsumer.local.maven) and the compiled
    bench classes."""
    cp = classpath()
    if jars != "kafka-legacy":
        from zkconsumer.local import maven
        try:
            cp = maven.classpath(jars) + os.pathsep + _compiled["dir"]
        except Exception as e:
            raise Unavailable("the %s jars: %s" % (jars, str(e).splitlines()[0]))
    log4j = os.path.join(_compiled["dir"], "log4j.properties")
    return [java()] + list(jvm_opts) + ["-Dlog4j.configuration=file:" + log4j, "-cp", cp, main_class] + list(args)


class Driver:
    """A long-lived JVM that answers each command line on its stdin with lines on its stdout (bench/jvm's
    ScalaConsumerCount and JavaConsumerPerf): one JVM for all of a suite's runs, so its JIT is warm."""

    def __init__(self, main_class, jvm_opts=(), jars="kafka-legacy"):
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(command(main_class, [], jvm_opts, jars), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, text=True, bufsize=1)
        self._lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def ask(self, line, until=None, timeout=300.0):
        """Send *line*; the lines answered, up to the first that starts with "{" (``until`` None) or equals
        *until*. Raises RuntimeError (with the JVM's stderr) when it exits or takes longer than *timeout* s."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out, deadline = [], time.monotonic() + timeout
        while True:
            try:
                got = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                got = None
            if got is None:
                self._err.seek(0)
                raise RuntimeError("the JVM (%s) did not answer %r: %s" % (
                    " ".join(self.proc.args[-1:]), line, self._err.read().decode(errors="replace")[-2000:]))
            if until is None and got.startswith("{"):
                return out + [got]
            if until is not None and got == until:
                return out
            out.append(got)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        self._err.close()


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
