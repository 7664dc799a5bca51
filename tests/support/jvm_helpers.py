"""JVM members and Kafka's legacy tools for the interop tests: Kafka 1.1.1's own Scala consumer is the oracle.

* :func:`legacy_classpath` — Kafka 1.1.1 (the last release with ``kafka.consumer.ZookeeperConsumerConnector`` and
  the ZooKeeper-reading tools), fetched with Maven by :mod:`zkconsumer.local.maven`;
* :func:`compile_member` — ``javac`` of ``tests/support/jvm/OldConsumerMember.java`` against it;
* :class:`JvmMember` — one Scala-consumer process, read like :class:`consumer_helpers.CliConsumer` (``records``,
  ``events``, ``seen()``, ``kill()``, ``terminate()``), so tests treat Python and JVM members alike;
* :func:`run_tool` — a legacy tool's ``main`` (``kafka.admin.ConsumerGroupCommand``, ``kafka.tools.*``).
"""
import os
import shutil
import subprocess
import threading

from tests.support.consumer_helpers import FAST_PROPS, CliConsumer
from tests.support.waiting import end_process

HERE = os.path.dirname(os.path.abspath(__file__))
LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def java():
    from zkconsumer.local import discovery
    return discovery.find_java()


def legacy_classpath():
    from zkconsumer.local import maven
    return maven.classpath("kafka-legacy")


def compile_member(out_dir):
    """Compile OldConsumerMember.java into out_dir; returns the classpath to run it (legacy jars + out_dir)."""
    javac = shutil.which("javac")
    assert javac, "javac (a JDK) is needed to compile tests/support/jvm/OldConsumerMember.java"
    cp = legacy_classpath()
    p = subprocess.run([javac, "-nowarn", "-cp", cp, "-d", out_dir, os.path.join(HERE, "jvm", "OldConsumerMember.java")],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, "javac failed:\n%s%s" % (p.stdout, p.stderr)
    with open(os.path.join(out_dir, "log4j.properties"), "w") as f:
        f.write(LOG4J)
    return cp + os.pathsep + out_dir


class JvmMember(CliConsumer):
    """A member run by Kafka 1.1.1's ZookeeperConsumerConnector (tests/support/jvm/OldConsumerMember.java).

    ``topics`` is a list of topics (static subscription, ``streams`` each) or ``"whitelist:REGEX"``."""

    def __init__(self, services, group, topics, classpath, consumer_id=None, props=None, streams=1, workdir="/tmp"):
        self.name = "jvm-" + (consumer_id or "anon")
        merged = {k: v for k, v in FAST_PROPS.items()}
        merged.update({"group.id": group, "zookeeper.connect": services.zookeeper_connect})
        merged.update(props or {})
        if consumer_id:
            merged["consumer.id"] = consumer_id
        self.consumer_id = "%s_%s" % (group, consumer_id) if consumer_id else None
        self.props_path = os.path.join(workdir, "%s-%s.properties" % (group, self.name))
        with open(self.props_path, "w") as f:
            f.writelines("%s=%s\n" % kv for kv in merged.items())
        spec = topics if isinstance(topics, str) else ",".join(topics)
        log4j = os.path.join(classpath.rsplit(os.pathsep, 1)[1], "log4j.properties")
        cmd = [java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-Dlog4j.configuration=file:" + log4j, "-cp",
               classpath, "OldConsumerMember", self.props_path, self.name, spec, str(streams)]
        self.records, self.events, self.log = [], [], []
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    def terminate(self, timeout=30):
        """SIGTERM: the shutdown hook shuts the connector down (commit, release); the JVM then exits with 143
        (128 + SIGTERM). Returns 0 for such a graceful stop, else the exit code."""
        rc = super().terminate(timeout)
        with self.lock:
            graceful = any(e.get("event") == "shutdown" for e in self.events)
        return 0 if rc == 143 and graceful else rc

    def started(self):
        with self.lock:
            return any(e.get("event") == "started" for e in self.events)

    def errors(self):
        """Exceptions the Scala consumer reported (stream errors, ConsumerRebalanceFailedException in its log)."""
        with self.lock:
            return [e for e in self.events if e.get("event") == "error"] + \
                [line for line in self.log if "Exception" in line and "ConsumerRebalanceFailed" in line]


def run_tool(main_class, *args, timeout=120):
    """Run a Kafka 1.1.1 tool's main class; returns the CompletedProcess (text)."""
    return subprocess.run([java(), "-Xmx256m", "-cp", legacy_classpath(), main_class] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def kafka4_classpath():
    from zkconsumer.local import maven
    return maven.classpath("kafka4")


def compile_consumer_protocol_member(out_dir):
    """Compile ConsumerProtocolMember.java (a Kafka 4 KafkaConsumer with group.protocol=consumer) against the
    kafka4 jar set; returns the classpath to run it."""
    javac = shutil.which("javac")
    assert javac, "javac (a JDK) is needed to compile tests/support/jvm/ConsumerProtocolMember.java"
    cp = kafka4_classpath()
    p = subprocess.run([javac, "-nowarn", "-cp", cp, "-d", out_dir,
                        os.path.join(HERE, "jvm", "ConsumerProtocolMember.java")],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, "javac failed:\n%s%s" % (p.stdout, p.stderr)
    return cp + os.pathsep + out_dir


class ConsumerProtocolMember:
    """One ConsumerProtocolMember JVM: ``assigned`` holds each assignment it printed; close() ends its stdin (it
    closes the consumer, leaving the group) and waits."""

    def __init__(self, classpath, bootstrap, group, topic, client_id):
        self.proc = subprocess.Popen([java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                                      "ConsumerProtocolMember", bootstrap, group, topic, client_id],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assigned, self.stderr = [], []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.assigned), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True).start()

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append(line.strip())

    def close(self, timeout=30):
        return end_process(self.proc, timeout, ask=lambda p: p.stdin.close())
