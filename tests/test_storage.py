"""The storage layer (issue 17, point 1): every file of a stream on the file system its URI names.

A ``viewfs://`` mount (Hadoop's mount-table file system, in the pyspark wheel) over a test folder stands in
for HDFS, S3 or ABFS: a path that is not local to Python. Code that treats such a URI as a local path writes a
folder literally named ``viewfs:`` in the working folder, and anything outside the mount's one link fails, so
"the files are in the mount's folder and nowhere else" is what these tests check.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import sqlwin
from sqlwin.streaming import catalog, storage
from tests.streamtools import Feeder, rows_of, ts
from tests.test_streaming import BATCHES, BATCHES_LATE, BATCHES_PANES, LATE_COLUMNS, PANE_COLUMNS, at


def mount(spark, folder: Path) -> str:
    """``viewfs://<new mount>/data`` over ``folder`` (a mount table of its own: Hadoop caches file systems by
    URI authority, so a new name is a new mount)."""
    name = f"m{uuid.uuid4().hex[:10]}"
    folder.mkdir(parents=True, exist_ok=True)
    spark.sparkContext._jsc.hadoopConfiguration().set(f"fs.viewfs.mounttable.{name}.link./data", folder.as_uri())
    return f"viewfs://{name}/data"


def no_local_copy(*places: Path) -> None:
    """No folder named after the URI's scheme: nothing treated the URI as a local path."""
    for place in places:
        assert not (place / "viewfs:").exists(), place
        assert not any(p.name == "viewfs:" for p in place.rglob("viewfs:")), place


# -- the layer's operations, on a mount and on a local folder ------------------------------------------------
@pytest.fixture(params=["viewfs", "local"])
def base(request, spark, tmp_path) -> str:
    return mount(spark, tmp_path / "mounted") if request.param == "viewfs" else str(tmp_path / "plain")


def test_a_plain_path_is_on_the_default_file_system(spark, tmp_path) -> None:
    """A path without a scheme names a file of Hadoop's default file system (``fs.defaultFS``), as Spark reads
    it: a cluster's HDFS, here a mount. Read once per SparkContext (a process may start another, on another)."""
    from pyspark import SparkContext

    uri = mount(spark, tmp_path / "m")
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    before = conf.get("fs.defaultFS")
    context = SparkContext._active_spark_context
    conf.set("fs.defaultFS", uri.rsplit("/", 1)[0] + "/")
    storage._DEFAULT_SCHEME.pop(context, None)  # as a context started with it
    try:
        assert storage.qualify("/data/ck") == f"{uri}/ck" and not storage.is_local("/data/ck")
        storage.write_json("/data/ck/x.json", {"a": 1})
        assert storage.read_json(f"{uri}/ck/x.json") == {"a": 1} and (tmp_path / "m" / "ck" / "x.json").is_file()
    finally:
        conf.set("fs.defaultFS", before)
        storage._DEFAULT_SCHEME.pop(context, None)
    assert storage.is_local("/data/ck") and storage.qualify("/data/ck") == "/data/ck"


def test_uris_are_kept_as_given(spark, tmp_path, monkeypatch) -> None:
    uri = mount(spark, tmp_path / "m")
    assert storage.qualify(uri) == uri and not storage.is_local(uri)
    assert storage.join(uri, "ck", "state") == f"{uri}/ck/state" and storage.join(uri + "/", "/x") == f"{uri}/x"
    monkeypatch.chdir(tmp_path)
    assert storage.qualify("rel/ck") == str(tmp_path / "rel" / "ck")  # the default file system is the local one
    assert storage.is_local("rel/ck") and storage.is_local("file:///tmp/x") and storage.scheme("C:/x") is None
    no_local_copy(tmp_path)


def test_files_folders_and_commits(spark, base, tmp_path) -> None:
    import pyarrow as pa

    folder = storage.join(base, "ck", "state")
    assert storage.listdir(folder) == [] and not storage.exists(folder) and storage.read_bytes(folder) is None
    storage.makedirs(folder)
    assert storage.isdir(folder) and storage.listdir(folder) == []
    storage.write_json(storage.join(folder, "3.json"), {"watermark": 7})
    assert storage.read_json(storage.join(folder, "3.json")) == {"watermark": 7}
    # a commit file a crash tore (or one written without its end marker) is no commit
    storage.write_once(storage.join(folder, "4.json"), b'{"watermark": 9, "en')
    storage.write_once(storage.join(folder, "5.json"), b'{"watermark": 9}')
    assert storage.read_json(storage.join(folder, "4.json")) is None
    assert storage.read_json(storage.join(folder, "5.json")) is None
    written = sum(storage.size(storage.join(folder, f"{n}.json")) for n in (3, 4, 5))  # a folder's bytes (sinks)
    assert storage.tree_size(storage.join(base, "ck")) >= written > 0 == storage.tree_size(storage.join(base, "no"))
    storage.publish(storage.join(base, "ticks", "tick-1.json"), b'{"t": 1}\n')
    assert [n for n in storage.listdir(storage.join(base, "ticks")) if not n.endswith(".crc")] == ["tick-1.json"]
    table = pa.table({"k": ["a", "b", None], "n": [1, 2, 3]})
    storage.write_parquet(storage.join(base, "rows", "0", "part-00000.parquet"), table)
    assert storage.read_parquet(storage.join(base, "rows", "0", "part-00000.parquet")).equals(table)
    assert spark.read.parquet(storage.join(base, "rows", "0")).count() == 3  # Spark reads what the layer wrote
    storage.delete(storage.join(base, "rows"))
    storage.delete(storage.join(base, "rows"))  # nothing to delete: no error
    assert not storage.exists(storage.join(base, "rows"))
    no_local_copy(tmp_path, Path.cwd())


def test_state_store_skips_a_torn_commit(spark, base) -> None:
    from sqlwin.streaming.state import StateStore

    store = StateStore(storage.join(base, "ck"))
    store.commit(0, {"n": 0})
    store.commit(1, {"n": 1})
    assert storage.listdir(storage.join(store.root, "state")) == ["1.json"]  # older commits removed
    storage.write_once(storage.join(store.root, "state", "2.json"), b'{"n": 2')  # killed while committing 2
    assert StateStore(storage.join(base, "ck")).last_committed() == 1
    assert StateStore(storage.join(base, "ck")).load(1) == {"n": 1}
    assert store.begin(2, 100) == 100 and store.begin(2, 200) == 100  # a re-run sees the first clock


# -- streaming tables whose stream, checkpoint and sink are all on the mount -----------------------------------
QUERY = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k"""


@pytest.mark.slow
def test_streaming_tables_on_a_hadoop_uri(spark, tmp_path, monkeypatch) -> None:
    """Both paths, with the stream, the checkpoints, sqlwin's state, ticks, sinks and late rows on viewfs: the
    hand-worked panes of tests/test_streaming.py, and every file inside the mount's folder."""
    backing = tmp_path / "mounted"
    uri = mount(spark, backing)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", storage.join(uri, "root"))
    sqlwin.sql(spark, f"CREATE STREAM s_vfs (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL "
                      f"2 SECONDS) USING json OPTIONS (path '{uri}/in')")
    custom_sql = (f"CREATE STREAMING TABLE vfs_custom OPTIONS (checkpoint '{uri}/ck/custom', compaction_batches "
                  f"'2') AS {QUERY.format(s='s_vfs')} ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO vfs_late")
    try:
        sqlwin.sql(spark, custom_sql)
        sqlwin.sql(spark, f"CREATE STREAMING TABLE vfs_native AS {QUERY.format(s='s_vfs')}")
        custom, native = catalog.find_table("vfs_custom"), catalog.find_table("vfs_native")
        assert (custom.path, native.path) == ("custom", "native")
        assert custom.location == f"{uri}/ck/custom" and native.location == f"{uri}/root/vfs_native"
        Feeder(backing / "in").feed(BATCHES, custom, native)
        assert rows_of(spark.table("vfs_custom"), PANE_COLUMNS) == BATCHES_PANES
        assert rows_of(spark.table("vfs_late"), LATE_COLUMNS) == BATCHES_LATE
        assert rows_of(spark.table("vfs_native"), PANE_COLUMNS[:7]) == [
            (at(0), "a", 3, 2, 0, "ON_TIME", True), (at(0), "b", 3, 1, 0, "ON_TIME", True),
            (at(10), "a", 4, 1, 0, "ON_TIME", True)]
        # more micro-batches, each closing a window (W = ts - 2: 48 passes [30, 40), ..., 88 passes [70, 80)) in the
        # no-data micro-batch it runs at once, no tick asked; but the Spark micro-batch of the third dies before
        # that one: started again from the mount, the table runs it in Spark's re-run of that micro-batch
        from sqlwin.errors import SqlwinError
        from sqlwin.streaming.operator import MicroBatchOperator

        assert custom.operator.ticks.asked == 0
        fire_due, calls = MicroBatchOperator._fire_due, []

        def crash_third(self, *args):
            calls.append(self.next_batch)
            if len(calls) == 3:
                raise RuntimeError("the driver died here")
            fire_due(self, *args)

        monkeypatch.setattr(MicroBatchOperator, "_fire_due", crash_third)
        feeder = Feeder(backing / "in")
        feeder.count = len(BATCHES)
        for i in range(6):
            feeder.write([{"k": "a", "v": 1, "ts": ts(40 + 10 * i)}])
            try:
                custom.process_all_available()
            except SqlwinError:
                assert i == 3
                custom.stop()
                catalog.remove_table("vfs_custom")
                sqlwin.sql(spark, custom_sql)
                custom = catalog.find_table("vfs_custom")
                custom.process_all_available()
        asked = custom.operator.ticks.asked
        fired = rows_of(spark.table("vfs_custom").where("window_start >= TIMESTAMP '2024-01-01 00:00:30'"),
                        ["window_start", "s", "pane_timing"])
        # each window once, across the crash ([30, 40) holds f3's a@30 of BATCHES, v = 6)
        assert fired == [(at(30), 6, "ON_TIME")] + [(at(30 + 10 * i), 1, "ON_TIME") for i in range(1, 5)]
    finally:
        shown = {}
        for table in catalog.all_tables():
            table.stop()
            shown[table.name] = table.status().status
            catalog.remove_table(table.name)
    # stopped, not failed, when the stop cut a listing of the mount short (Hadoop's `ls -ld` per file, interrupted:
    # "Error while running command to get file permissions", which Spark does not take for its stop)
    assert shown == {"vfs_custom": "stopped", "vfs_native": "stopped"}
    custom_folder, native_folder = backing / "ck" / "custom", backing / "root" / "vfs_native"
    for part in ("checkpoint/commits", "sqlwin/state", "ticks", "data", "late_rows"):
        assert (custom_folder / part).is_dir(), part
    # the sink compacted its micro-batches as it went: the compacted files and manifests on the mount too
    log = custom_folder / "data" / "_sqlwin_sink"
    assert [p for p in log.iterdir() if p.name.startswith("manifest-")] and any((log / "compacted").iterdir())
    assert (native_folder / "checkpoint" / "commits").is_dir() and (native_folder / "data").is_dir()
    # no tick asked, before the crash or after it (the tick source's folder is on the mount, empty)
    ticks = [p for p in (custom_folder / "ticks").iterdir() if p.name.startswith("tick-")]
    assert asked == 0 and ticks == [], (asked, sorted(p.name for p in ticks))
    assert sorted(p.name for p in work.iterdir()) == []  # nothing in the working folder
    no_local_copy(tmp_path, Path.cwd())


def test_only_the_storage_layer_touches_files() -> None:
    """No module of sqlwin/streaming but storage.py reads or writes a file by itself: no ``os``/``shutil``/
    ``tempfile`` file calls, no ``open``, no pyarrow parquet or file system calls on a path."""
    import ast

    root = Path(__file__).resolve().parents[1] / "sqlwin" / "streaming"
    found = []
    for path in sorted(root.glob("*.py")):
        if path.name == "storage.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{path.name}:{node.lineno} imports {n}" for n in names
                          if (n and n.split(".")[0] in ("shutil", "tempfile", "pathlib")) or n in ("pyarrow.fs",)]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id == "os" and node.attr != "environ") or node.value.id == "pq":
                    found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                found.append(f"{path.name}:{node.lineno} open()")
    assert found == []


def test_relative_paths_and_file_uris_are_this_processs(spark, tmp_path, monkeypatch) -> None:
    """A stream's relative ``path``, a relative checkpoint (with a space) and a ``file:`` URI sink (with a
    non-ASCII name), in a process whose working folder changed after Spark started: every folder is the one this
    process means (Spark alone resolved a stream's relative path against its JVM's starting folder, and read
    nothing), and the sink holds the window."""
    work = tmp_path / "work"
    work.mkdir()
    jvm_folder = Path.cwd()  # where the session's JVM started (pytest's folder)
    monkeypatch.chdir(work)
    sink = tmp_path / "out ü"
    sqlwin.sql(spark, "CREATE STREAM s_rel (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 "
                      "SECONDS) USING json OPTIONS (path 'in rel')")
    try:
        sqlwin.sql(spark, f"CREATE STREAMING TABLE rel_native OPTIONS (checkpoint 'ck rel/t', path 'file://{sink}') "
                          f"AS {QUERY.format(s='s_rel')}")
        table = catalog.find_table("rel_native")
        Feeder(work / "in rel").feed([[{"k": "a", "v": 1, "ts": ts(1)}], [{"k": "a", "v": 2, "ts": ts(15)}]], table)
        assert rows_of(spark.table("rel_native"), ["window_start", "k", "s", "c"]) == [(at(0), "a", 1, 1)]
        assert table.location == str(work / "ck rel" / "t")
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)
    assert sorted(p.name for p in work.iterdir() if not p.name.startswith(".")) == ["ck rel", "in rel"]
    assert (work / "ck rel" / "t" / "checkpoint" / "commits").is_dir() and any(sink.glob("micro_batch=*"))
    assert not (jvm_folder / "in rel").exists() and not (jvm_folder / "ck rel").exists()
