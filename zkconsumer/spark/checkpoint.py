"""Reading a streaming query's checkpoint logs (``offsets/<batchId>``, ``commits/<batchId>``) wherever Spark wrote
them: a local path, a ``file:`` URI, HDFS, an object store.

Two ways in, the same answers:

* ``hadoop`` - Spark's own Hadoop ``FileSystem`` through the active SparkContext (py4j). It resolves the location
  exactly as Spark did when it wrote the checkpoint (``fs.defaultFS`` for paths without a scheme, the session's
  credentials and file system settings), so it is the default on a driver, e.g. inside ``foreachBatch``.
* ``pyarrow`` - :mod:`pyarrow.fs` (``FileSystem.from_uri``), with no JVM: for scripts and tools that run after the
  query. ``file:`` URIs and plain paths are local paths; other schemes go to pyarrow (``hdfs``, ``s3``, ``gs``,
  ``abfs``, ...) when it supports them.

Locations are read the way Hadoop's ``Path`` reads them: the path part of a URI is taken literally, not
percent-decoded (``file:///data/my ckpt`` is the directory ``/data/my ckpt``), and ``file:/x``, ``file:///x`` and
``/x`` are the same directory.  A relative path is relative to the working directory (pyarrow) or the file
system's working directory (hadoop).
"""
from __future__ import annotations

import os
import posixpath
from typing import List, Optional
from urllib.parse import quote, urlsplit

FILESYSTEMS = ("auto", "hadoop", "pyarrow")


def _active_spark_context():
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover - pyspark is a dependency of zkconsumer.spark
        return None
    return SparkContext._active_spark_context


class CheckpointFiles:
    """The files of one checkpoint location: ``list(dir)`` (names) and ``read(dir, name)`` (text)."""

    location: str

    def list(self, directory: str) -> List[str]:
        raise NotImplementedError

    def read(self, directory: str, name: str) -> str:
        raise NotImplementedError

    def batch_ids(self, directory: str) -> List[int]:
        """The batch ids logged in ``directory`` (``offsets`` or ``commits``), ascending; checksum (``.0.crc``) and
        temporary files are ignored, a missing directory is an empty log."""
        return sorted(int(n) for n in self.list(directory) if n.isdigit())


class ArrowCheckpointFiles(CheckpointFiles):
    def __init__(self, location: str):
        import pyarrow.fs as pafs
        self.location = location
        parts = urlsplit(location)
        scheme = parts.scheme.lower()
        # a Windows drive letter, not a scheme
        if len(scheme) == 1:
            scheme = ""
        if scheme in ("", "file"):
            if scheme:
                # Hadoop style: file:/x, file:///x, file://localhost/x; the path is literal (no %-decoding)
                rest = location[len("file:"):]
                if rest.startswith("//"):
                    rest = rest[2:]
                    rest = rest[rest.find("/"):] if "/" in rest else "/"
                path = rest
            else:
                path = location
            self.fs = pafs.LocalFileSystem()
            self.root = os.path.abspath(path)
        else:
            # pyarrow decodes %-escapes: quote the literal path so it reaches the file system unchanged
            uri = "%s://%s%s" % (parts.scheme, parts.netloc, quote(parts.path, safe="/:@!$&'()*+,;=~"))
            if parts.query:
                uri += "?" + parts.query
            self.fs, self.root = pafs.FileSystem.from_uri(uri)

    def _path(self, *names: str) -> str:
        return posixpath.join(self.root, *names)

    def list(self, directory: str) -> List[str]:
        import pyarrow.fs as pafs
        path = self._path(directory)
        if self.fs.get_file_info(path).type != pafs.FileType.Directory:
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return [posixpath.basename(i.path.rstrip("/")) for i in infos if i.type == pafs.FileType.File]

    def read(self, directory: str, name: str) -> str:
        with self.fs.open_input_stream(self._path(directory, name)) as f:
            return f.read().decode("utf-8")


class HadoopCheckpointFiles(CheckpointFiles):
    def __init__(self, location: str, sc=None):
        sc = sc or _active_spark_context()
        if sc is None:
            raise RuntimeError("reading checkpoint %s through Hadoop needs an active SparkContext" % location)
        self.location = location
        self._jvm = sc._jvm
        self._path_cls = sc._jvm.org.apache.hadoop.fs.Path
        self.root = self._path_cls(location)
        self.fs = self.root.getFileSystem(sc._jsc.hadoopConfiguration())

    def list(self, directory: str) -> List[str]:
        path = self._path_cls(self.root, directory)
        if not self.fs.exists(path) or not self.fs.getFileStatus(path).isDirectory():
            return []
        return [st.getPath().getName() for st in self.fs.listStatus(path) if st.isFile()]

    def read(self, directory: str, name: str) -> str:
        stream = self.fs.open(self._path_cls(self._path_cls(self.root, directory), name))
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()


def checkpoint_files(location: str, filesystem: str = "auto", sc=None) -> CheckpointFiles:
    """Open a checkpoint location for reading. ``filesystem``: ``auto`` (Hadoop when a SparkContext is active in
    this process, else pyarrow), ``hadoop`` or ``pyarrow``."""
    if filesystem not in FILESYSTEMS:
        raise ValueError("filesystem=%r: choose one of %s" % (filesystem, ", ".join(FILESYSTEMS)))
    location = str(location)
    if filesystem == "hadoop" or (filesystem == "auto" and (sc or _active_spark_context()) is not None):
        return HadoopCheckpointFiles(location, sc)
    return ArrowCheckpointFiles(location)


def read_offset_log_entry(files: CheckpointFiles, batch_id: int, source_index: int = 0) -> Optional[str]:
    """The JSON text of source ``source_index`` in ``offsets/<batch_id>`` (None when the source had no offset).

    Spark's internal format (v1 in 4.2/4.3): line 1 ``v1``, line 2 batch metadata, then one line per source."""
    text = files.read("offsets", str(batch_id))
    lines = text.splitlines()
    where = "%s/offsets/%d" % (files.location.rstrip("/"), batch_id)
    if not lines or lines[0].strip() != "v1":
        raise ValueError("%s: unsupported offset log format %r (expected v1)" % (where, lines[:1]))
    if len(lines) < 3 + source_index:
        raise ValueError("%s: no line for source %d (%d source line(s))" % (where, source_index, len(lines) - 2))
    line = lines[2 + source_index].strip()
    return None if line in ("", "-") else line
