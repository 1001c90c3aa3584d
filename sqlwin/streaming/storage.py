"""The one storage layer of streams: every file sqlwin reads or writes for a stream goes through here.

A stream's locations (its files, Spark's checkpoint, sqlwin's operator state, ticks, sinks, late rows,
scratch) are URIs exactly as the user gave them: ``viewfs://``, ``hdfs://``, ``s3a://``, ``abfss://`` or a
local path. They are handed to Spark unchanged, and sqlwin's own reads and writes use the file system the
URI names, as Spark would:

- a local path or ``file:`` URI: ``pyarrow.fs.LocalFileSystem`` (no JVM round trip for the state files the
  operator writes every micro-batch);
- any other scheme, in a process with Spark's JVM (the driver): Hadoop's ``FileSystem`` with the session's
  Hadoop configuration, so every file system Spark can reach (and its credentials) works;
- any other scheme without a JVM (the foreachBatch worker of a Spark Connect server): ``pyarrow.fs``.

A path without a scheme means what it means to Hadoop: a file of the default file system (``fs.defaultFS``);
where that is the local one (Spark's default), the path is made absolute, so the driver and a Spark Connect
server agree on it whatever their working folders.

Nothing here depends on an atomic rename (object stores have none): ``write_once`` creates a file whole or
leaves a file its reader rejects (``read_json`` is None for a torn file), and commits are files named by
batch id (``sqlwin.streaming.state``). ``publish`` renames only to keep Spark's file source from listing a
file before it is whole (a hidden name first).
"""

from __future__ import annotations

import json
import os
import re
import weakref
from typing import Any
from urllib.parse import urlparse

from sqlwin.errors import SqlwinError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")


def scheme(uri: str) -> str | None:
    """The URI's scheme (lower case), or None for a plain path (a one-letter "scheme" is a drive letter)."""
    match = _SCHEME.match(uri)
    return match.group(1).lower() if match else None


def join(base: str, *parts: str) -> str:
    """``base/part/...`` for any URI (``os.path.join`` is for local paths only)."""
    out = base
    for part in parts:
        out = f"{out.rstrip('/')}/{part.strip('/')}" if out else part
    return out


GLOB_CHARACTERS = ("[", "]", "{", "}", "*", "?", "\\")  # what Hadoop's globStatus (Spark's file source) reads


def glob_characters(uri: str) -> list[str]:
    """The characters of ``uri``'s path (its scheme and authority aside) that Spark's file source, which takes a
    path as a Hadoop glob pattern, would read as a pattern's, in ``GLOB_CHARACTERS`` order."""
    path = uri
    if scheme(uri) is not None:
        parsed = urlparse(uri)
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
    return [c for c in GLOB_CHARACTERS if c in path]


def qualify(path: str) -> str:
    """``path`` as every process reads it: a URI with a scheme unchanged; a plain path on the default file
    system, absolute (local) or qualified by Hadoop (``hdfs://namenode/user/...``)."""
    if scheme(path) is not None:
        return path
    jvm = _jvm()
    if jvm is None or _default_scheme(jvm) == "file":
        return os.path.abspath(path)  # a local path of this process, the user's own (Spark makes it absolute too)
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return str(hadoop_path.getFileSystem(_conf(jvm)).makeQualified(hadoop_path).toString())


def place(uri: str) -> str:
    """The folder ``uri`` names, spelled one way, so that two spellings of one folder compare equal: a local one
    (a plain path, ``file:/x``, ``file:///x``, ``file://localhost/x``) as its absolute normalised path (what
    ``ArrowFiles`` opens), any other as ``scheme://authority/path`` with the scheme in lower case and no doubled
    or trailing slash. Only for comparing folders (``tablefolders``): Spark and the files keep the URI as given."""
    if is_local(uri):
        path = urlparse(uri).path if scheme(uri) == "file" else os.path.abspath(uri)
        return os.path.normpath(path or "/")
    parsed = urlparse(qualify(uri))
    path = re.sub("/+", "/", parsed.path).rstrip("/")
    return f"{parsed.scheme.lower()}://{parsed.netloc}{path}"


def is_local(uri: str) -> bool:
    kind = scheme(uri)
    if kind is not None:
        return kind == "file"
    jvm = _jvm()
    return jvm is None or _default_scheme(jvm) == "file"


def streaming_root(spark: Any) -> str:
    """Where streaming tables keep their folders by default: ``SQLWIN_STREAMING_DIR``, else the session conf
    ``sqlwin.streaming.dir``, else ``./sqlwin_streaming``."""
    root = os.environ.get("SQLWIN_STREAMING_DIR")
    if not root:
        try:
            root = spark.conf.get("sqlwin.streaming.dir", None)
        except Exception:  # a session whose conf cannot be read (stopped): the default
            root = None
    return qualify(root or "sqlwin_streaming")


def scratch_folder(spark: Any, prefix: str) -> str:
    """A new folder for files that live as long as one statement (a replay's state). Spark's executors read
    it: with a local master a temporary folder of this machine, else one under the streaming root, on the
    file system every process of the cluster reaches (``sqlwin.scratch.dir`` chooses another place)."""
    import tempfile
    import uuid

    chosen = _conf_value(spark, "sqlwin.scratch.dir")
    if chosen is None and str(_conf_value(spark, "spark.master") or "local").startswith("local"):
        return tempfile.mkdtemp(prefix=prefix)
    folder = join(qualify(chosen) if chosen else join(streaming_root(spark), "_scratch"), prefix + uuid.uuid4().hex)
    makedirs(folder)
    return folder


def _conf_value(spark: Any, key: str) -> str | None:
    try:
        return spark.conf.get(key, None)
    except Exception:  # a Spark Connect session may refuse a key it does not know
        return None


# -- operations ---------------------------------------------------------------------------------------
def exists(uri: str) -> bool:
    return _files(uri).exists(uri)


def isdir(uri: str) -> bool:
    return _files(uri).isdir(uri)


def makedirs(uri: str) -> None:
    """Make folder ``uri`` and its parents; one that cannot be made (no permission, a file in the way, a read-only
    file system) is a ``SqlwinError`` naming it (the statement that asked for it adds where)."""
    try:
        _files(uri).makedirs(uri)
    except Exception as err:  # pyarrow's OSError, or Hadoop's IOException through py4j
        java = getattr(err, "java_exception", None)
        reason = java.getMessage() if java is not None else getattr(err, "strerror", None) or err
        raise SqlwinError(f"cannot make the folder {uri}: {reason}") from None


def listdir(uri: str) -> list[str]:
    """The names in folder ``uri`` (none when it does not exist)."""
    return _files(uri).listdir(uri)


def list_files(uri: str) -> list[tuple[str, int]]:
    """The files (not folders) in folder ``uri`` with their modification times in milliseconds."""
    return _files(uri).list_files(uri)


def reachable_without_jvm(uri: str) -> bool:
    """Whether a process without Spark's JVM (a Python worker) reaches ``uri``: local, or a file system pyarrow
    knows by its scheme (s3, gs, hdfs through libhdfs, abfs)."""
    if is_local(uri):
        return True
    from pyarrow import fs as pafs

    try:
        pafs.FileSystem.from_uri(uri)
    except Exception:
        return False
    return True


def delete(uri: str) -> None:
    """Remove a file or a folder with everything in it; nothing to do when it does not exist."""
    _files(uri).delete(uri)


def size(uri: str) -> int:
    return _files(uri).size(uri)


def tree_size(uri: str) -> int:
    """The bytes of every file under folder ``uri`` (0 when it does not exist)."""
    return _files(uri).tree_size(uri)


def read_bytes(uri: str) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    return _files(uri).read_bytes(uri)


def write_once(uri: str, data: bytes) -> None:
    """Create (or replace) the file ``uri`` with ``data``. A crash may leave it torn, never half-replaced by
    a rename: readers of commit files check what they read (``read_json``)."""
    _files(uri).write_bytes(uri, data)


def publish(uri: str, data: bytes) -> None:
    """Write ``data`` under a hidden name, then rename it to ``uri``: Spark's file source lists only files
    that are whole (it skips names starting with ``.``)."""
    folder, name = uri.rsplit("/", 1)
    hidden = join(folder, f".{name}.tmp")
    files = _files(uri)
    files.write_bytes(hidden, data)
    files.rename(hidden, uri)


def write_json(uri: str, data: dict) -> None:
    """A JSON file its reader can tell whole: the object ends with ``"end": true``, last."""
    write_once(uri, json.dumps({**data, "end": True}).encode())


def read_json(uri: str) -> dict | None:
    """What ``write_json`` wrote; None when the file does not exist or a crash tore it."""
    raw = read_bytes(uri)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.pop("end", None) is not True:
        return None
    return data


def write_parquet(uri: str, table: Any) -> None:
    _files(uri).write_parquet(uri, table)


def read_parquet(uri: str) -> Any:
    return _files(uri).read_parquet(uri)




# -- file systems ---------------------------------------------------------------------------------------
class ArrowFiles:
    """A ``pyarrow.fs`` file system: the local one, or one pyarrow reaches by URI."""

    def __init__(self, filesystem: Any, local: bool):
        self.fs = filesystem
        self.local = local

    def path(self, uri: str) -> str:
        if self.local:
            return urlparse(uri).path if scheme(uri) == "file" else os.path.abspath(uri)
        from pyarrow import fs as pafs

        return pafs.FileSystem.from_uri(uri)[1]

    def _info(self, uri: str) -> Any:
        return self.fs.get_file_info(self.path(uri))

    def exists(self, uri: str) -> bool:
        from pyarrow import fs as pafs

        return self._info(uri).type != pafs.FileType.NotFound

    def isdir(self, uri: str) -> bool:
        from pyarrow import fs as pafs

        return self._info(uri).type == pafs.FileType.Directory

    def makedirs(self, uri: str) -> None:
        self.fs.create_dir(self.path(uri), recursive=True)

    def listdir(self, uri: str) -> list[str]:
        from pyarrow import fs as pafs

        if not self.isdir(uri):
            return []
        return [info.base_name for info in self.fs.get_file_info(pafs.FileSelector(self.path(uri)))]

    def list_files(self, uri: str) -> list[tuple[str, int]]:
        from pyarrow import fs as pafs

        if not self.isdir(uri):
            return []
        return [(info.base_name, int(info.mtime_ns // 1_000_000))
                for info in self.fs.get_file_info(pafs.FileSelector(self.path(uri))) if info.type == pafs.FileType.File]

    def delete(self, uri: str) -> None:
        from pyarrow import fs as pafs

        info = self._info(uri)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(info.path)
        elif info.type != pafs.FileType.NotFound:
            self.fs.delete_file(info.path)

    def size(self, uri: str) -> int:
        return int(self._info(uri).size or 0)

    def tree_size(self, uri: str) -> int:
        from pyarrow import fs as pafs

        if not self.isdir(uri):
            return 0
        infos = self.fs.get_file_info(pafs.FileSelector(self.path(uri), recursive=True))
        return sum(int(i.size or 0) for i in infos if i.type == pafs.FileType.File)

    def read_bytes(self, uri: str) -> bytes | None:
        if not self.exists(uri):
            return None
        with self.fs.open_input_stream(self.path(uri)) as f:
            return f.read()

    def write_bytes(self, uri: str, data: bytes) -> None:
        path = self.path(uri)
        self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with self.fs.open_output_stream(path) as f:
            f.write(data)

    def rename(self, source: str, target: str) -> None:
        self.fs.move(self.path(source), self.path(target))

    def write_parquet(self, uri: str, table: Any) -> None:
        import pyarrow.parquet as pq

        path = self.path(uri)
        self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        pq.write_table(table, path, filesystem=self.fs, compression="snappy")

    def read_parquet(self, uri: str) -> Any:
        import pyarrow.parquet as pq

        return pq.read_table(self.path(uri), filesystem=self.fs)



class HadoopFiles:
    """Hadoop's ``FileSystem`` through Spark's JVM (py4j), with the session's Hadoop configuration. One per
    SparkContext (``_files``): py4j finds a class named by its package path one segment at a time, each a round
    trip and a lookup through every jar of the classpath (2 ms for ``Path`` here, 0.2 ms once found), so the
    classes are found once."""

    def __init__(self, jvm: Any):
        self.jvm = jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._io = jvm.org.apache.commons.io.IOUtils

    def _fs(self, uri: str) -> tuple[Any, Any]:
        path = self._path(uri)
        return path.getFileSystem(_conf(self.jvm)), path

    def exists(self, uri: str) -> bool:
        fs, path = self._fs(uri)
        return bool(fs.exists(path))

    def isdir(self, uri: str) -> bool:
        fs, path = self._fs(uri)
        return bool(fs.exists(path) and fs.getFileStatus(path).isDirectory())

    def makedirs(self, uri: str) -> None:
        fs, path = self._fs(uri)
        fs.mkdirs(path)

    def listdir(self, uri: str) -> list[str]:
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return []
        return [str(status.getPath().getName()) for status in fs.listStatus(path)]

    def list_files(self, uri: str) -> list[tuple[str, int]]:
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return []
        return [(str(s.getPath().getName()), int(s.getModificationTime())) for s in fs.listStatus(path) if s.isFile()]

    def delete(self, uri: str) -> None:
        fs, path = self._fs(uri)
        fs.delete(path, True)

    def size(self, uri: str) -> int:
        fs, path = self._fs(uri)
        return int(fs.getFileStatus(path).getLen())

    def tree_size(self, uri: str) -> int:
        fs, path = self._fs(uri)
        return int(fs.getContentSummary(path).getLength()) if fs.exists(path) else 0

    def read_bytes(self, uri: str) -> bytes | None:
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            return bytes(self._io.toByteArray(stream))
        finally:
            stream.close()

    def write_bytes(self, uri: str, data: bytes) -> None:
        fs, path = self._fs(uri)
        stream = fs.create(path, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def rename(self, source: str, target: str) -> None:
        fs, source_path = self._fs(source)
        target_path = self._path(target)
        fs.delete(target_path, False)
        if not fs.rename(source_path, target_path):
            raise OSError(f"cannot rename {source} to {target}")

    def write_parquet(self, uri: str, table: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer, compression="snappy")
        self.write_bytes(uri, buffer.getvalue().to_pybytes())

    def read_parquet(self, uri: str) -> Any:
        import pyarrow as pa
        import pyarrow.parquet as pq

        raw = self.read_bytes(uri)
        if raw is None:
            raise FileNotFoundError(uri)
        return pq.read_table(pa.BufferReader(raw))


_LOCAL: ArrowFiles | None = None
# per SparkContext (a process may stop one and start another with another fs.defaultFS; the JVM view is the
# same for both): read once a context, as a context's file systems are
_DEFAULT_SCHEME: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_HADOOP: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a context's HadoopFiles


def _files(uri: str) -> ArrowFiles | HadoopFiles:
    global _LOCAL
    if is_local(uri):
        if _LOCAL is None:
            from pyarrow import fs as pafs

            _LOCAL = ArrowFiles(pafs.LocalFileSystem(), local=True)
        return _LOCAL
    jvm = _jvm()
    if jvm is not None:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        files = _HADOOP.get(context)
        if files is None:
            files = _HADOOP[context] = HadoopFiles(jvm)
        return files
    from pyarrow import fs as pafs

    return ArrowFiles(pafs.FileSystem.from_uri(uri)[0], local=False)


def _jvm() -> Any:
    """Spark's JVM in this process (a classic driver), else None (a Spark Connect worker, or no Spark)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    context = SparkContext._active_spark_context
    return context._jvm if context is not None else None


def _conf(jvm: Any) -> Any:
    """The Hadoop configuration Spark's file sources and sinks use (``spark.hadoop.*`` included)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    assert context is not None
    return context._jsc.hadoopConfiguration()


def _default_scheme(jvm: Any) -> str:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    known = _DEFAULT_SCHEME.get(context)
    if known is None:
        uri = jvm.org.apache.hadoop.fs.FileSystem.getDefaultUri(_conf(jvm))
        known = _DEFAULT_SCHEME[context] = str(uri.getScheme() or "file").lower()
    return known
