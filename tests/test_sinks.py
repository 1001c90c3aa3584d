"""Sinks that last (issue 17, item 5): every file format Spark writes, exactly once, and compaction.

The streams are fed file by file (tests/streamtools.py), each file processed whole before the next; the panes
are hand-worked (those of tests/test_streaming.py, or the one-window-per-file stream below).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from sqlwin.streaming.compaction import FANIN, Compactor, SinkLog, plan
from sqlwin.streaming.sinks import BatchSink
from tests.streamtools import rows_of, stream_env, ts
from tests.test_streaming import BATCHES, at

pytestmark = pytest.mark.slow

PANES = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
LATE = ["k", "v", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]
QUERY = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k"""


@pytest.fixture()
def env(spark, tmp_path, monkeypatch, request):
    """A stream ``s_<test>`` over a fresh folder, with its own streaming root; stops what the test started."""
    with stream_env(spark, tmp_path, monkeypatch, request.node.name) as env:
        yield env


def start(spark, sql: str):
    sqlwin.sql(spark, sql)
    return catalog.find_table(sql.split("TABLE", 1)[1].split()[0])


def data_files(folder: Path) -> list[Path]:
    """The data files under a sink's folder, compacted or not (not Spark's _SUCCESS and checksums)."""
    return [p for p in folder.rglob("part-*") if not p.name.endswith(".crc")]


def batch_folders(folder: Path) -> list[int]:
    return sorted(int(p.name.split("=")[1]) for p in folder.glob("micro_batch=*"))


# -- formats ------------------------------------------------------------------------------------------------
FORMATS = ["json", "orc", "csv"]  # parquet, the default, gives these panes in tests/test_streaming.py


def test_every_format_gives_the_hand_worked_panes(spark, env):
    """json, orc and csv sinks (and their late rows) on both paths: the panes of tests/test_streaming.py (which
    checks them for parquet, the default), as files of that format, no folder for a micro-batch without rows,
    and compacted (every 2 micro-batches: the custom path's 2 and 3) in that format. A sink continues in its
    format: INSERT INTO takes it, another USING is an error."""
    s, feeder, root = env
    tables = {}
    for fmt in FORMATS:
        tables[f"c_{fmt}"] = start(spark, f"CREATE STREAMING TABLE c_{fmt} USING {fmt} OPTIONS (compaction_batches "
                                          f"'2') AS {QUERY.format(s=s)} ALLOWED LATENESS INTERVAL 5 SECONDS "
                                          f"LATE ROWS TO c_{fmt}_late")
        tables[f"n_{fmt}"] = start(spark, f"CREATE STREAMING TABLE n_{fmt} USING {fmt} AS {QUERY.format(s=s)}")
    assert [t.path for t in tables.values()] == ["custom", "native"] * len(FORMATS)
    feeder.feed(BATCHES, *tables.values())
    custom = [(at(0), "a", 3, 2, 0, "ON_TIME", False, 2), (at(0), "a", 8, 3, 1, "LATE", False, 3),
              (at(0), "b", 3, 1, 0, "ON_TIME", False, 2), (at(10), "a", 4, 1, 0, "ON_TIME", True, 5)]
    native = [(at(0), "a", 3, 2, 0, "ON_TIME", True), (at(0), "b", 3, 1, 0, "ON_TIME", True),
              (at(10), "a", 4, 1, 0, "ON_TIME", True)]
    for fmt in FORMATS:
        assert rows_of(spark.table(f"c_{fmt}"), PANES) == custom, fmt
        assert rows_of(tables[f"c_{fmt}"].read(), PANES) == custom, fmt
        assert rows_of(spark.table(f"c_{fmt}_late"), LATE) == [("a", 7, at(8), at(0), at(10), at(28), "late", 6)]
        assert rows_of(spark.table(f"n_{fmt}"), PANES[:7]) == native, fmt
        data = root / f"c_{fmt}" / "data"
        # micro-batches 2 and 3 compacted when 5 was written; the others emitted nothing and left no folder
        assert SinkLog(str(data)).newest().through == 4 and batch_folders(data) == [2, 3, 5], fmt
        assert batch_folders(root / f"c_{fmt}" / "late_rows") == [6]
        assert len(batch_folders(root / f"n_{fmt}" / "data")) == 2  # the two micro-batches that evicted windows
        assert tables[f"c_{fmt}"].format == fmt
        sinks = (f"c_{fmt}/data", f"c_{fmt}/late_rows", f"n_{fmt}/data")
        files = [p for sink in sinks for p in data_files(root / sink)]
        assert files and all(p.name.endswith(f".{fmt}") for p in files), files
    compacted = data_files(root / "c_csv" / "data" / "_sqlwin_sink")
    assert [p.read_text().splitlines()[0] for p in compacted if p.stat().st_size] == \
        ["window_start,window_end,k,s,c,pane_index,pane_timing,is_final,micro_batch"]  # a header line
    sqlwin.sql(spark, "STOP STREAMING TABLE n_json")
    with pytest.raises(SqlwinError, match=r"the sink n_json at .* holds json files written before: continue it "
                                          "USING json, or give the table another path"):
        sqlwin.sql(spark, f"CREATE STREAMING TABLE n_json USING csv AS {QUERY.format(s=s)}")
    assert BatchSink("n_json", str(root / "n_json" / "data")).format == "json"  # what INSERT INTO continues in


def test_a_format_spark_lacks_is_an_error(spark, env):
    """USING a name Spark has no source for, or a source that is not a file format, or a column type the format
    cannot hold, or bad compaction options: a SqlwinError before anything runs."""
    s, _, _ = env
    cases = {
        "USING nosuch": "CREATE STREAMING TABLE bad USING nosuch: Spark has no data source nosuch",
        "USING avro": "USING avro: Spark has no data source avro ([AVRO_DATA_SOURCE_NOT_ENABLED]",  # no spark-avro
        "USING rate": "Spark's rate source (org.apache.spark.sql.execution.streaming.sources.RateStreamProvider) "
                      "is not a file format",
        "OPTIONS (compaction 'maybe')": "OPTIONS (compaction 'maybe'): expected 'true' or 'false'",
        "OPTIONS (compaction_target 'lots')": "OPTIONS (compaction_target 'lots'): expected a size such as '128MB'",
        "OPTIONS (compaction_batches '0')": "OPTIONS (compaction_batches '0'): expected a number of micro-batches",
        "OPTIONS (compaction_retention 'a while')": "OPTIONS (compaction_retention 'a while'): expected an interval",
    }
    for clause, message in cases.items():
        with pytest.raises(SqlwinError, match=re.escape(message)):
            sqlwin.sql(spark, f"CREATE STREAMING TABLE bad {clause} AS {QUERY.format(s=s)}")
    collect = QUERY.format(s=s).replace("COUNT(*) AS c", "COLLECT_LIST(v) AS vs")
    with pytest.raises(SqlwinError, match=re.escape("the sink bad is csv, which cannot hold column vs array<int>")):
        sqlwin.sql(spark, f"CREATE STREAMING TABLE bad USING csv AS {collect}")
    assert catalog.all_tables() == []  # none started
    from sqlwin.streaming.sinks import _check_on_server  # what a Spark Connect client asks of the server

    with pytest.raises(SqlwinError, match="USING nosuch: Spark has no data source nosuch"):
        _check_on_server(spark, "nosuch", "bad")
    _check_on_server(spark, "xml", "bad")


def test_any_file_format_of_the_session_with_its_options(spark, tmp_path):
    """A file format beyond the four (Spark's xml) with an option of its own (``rowTag``, as the table's OPTIONS
    pass it): micro-batches written, one without rows leaving no folder, compacted, read back once each."""
    from sqlwin.streaming.compaction import CompactionPolicy
    from sqlwin.streaming.sinks import sink_format

    fmt = sink_format(spark, "XML", "x")
    sink = BatchSink("xml_out", str(tmp_path / "x"), fmt, CompactionPolicy(True, 1 << 27, 2, 0), {"rowtag": "pane"})
    sink.set_schema(spark.sql("SELECT 1 AS a, TIMESTAMP'2024-01-01 00:00:00' AS t").schema)
    for b in range(5):
        sink.write(spark.sql(f"SELECT {b} AS a, TIMESTAMP'2024-01-01 00:00:0{b}' AS t WHERE {b} != 1"), b)
        sink.register(spark)
    assert rows_of(spark.table("xml_out")) == [(b, at(b), b) for b in (0, 2, 3, 4)]
    # 0 and 2 compacted when 3 was written (kept until the next compaction), 1 had no row
    assert batch_folders(tmp_path / "x") == [0, 2, 3, 4] and sink.log.newest().through == 2
    assert "<pane>" in next((tmp_path / "x").rglob("part-*.xml")).read_text()


def test_size_and_interval_options():
    from sqlwin.streaming.compaction import CompactionPolicy, parse_interval, parse_size

    assert [parse_size(t) for t in ("128MB", "1 kb", "1.5g", "4096", "2KiB", "0", "x")] == \
        [128 << 20, 1024, 3 << 29, 4096, 2048, None, None]
    assert [parse_interval(t) for t in ("10 minutes", "0 seconds", "30s", "250 ms", "1 hour", "2 days", "soon")] == \
        [600_000_000, 0, 30_000_000, 250_000, 3_600_000_000, 172_800_000_000, None]
    assert CompactionPolicy.from_options({}, "t") == CompactionPolicy(True, 128 << 20, 50, 0)
    assert not CompactionPolicy.from_options({"compaction": "FALSE"}, "t").enabled


def test_plan_merges_fanin_files_of_one_level():
    from sqlwin.streaming.compaction import Compacted

    def small(level: int) -> Compacted:
        return Compacted("x", 0, 0, 10, 1, level)

    assert plan([], 10, 100) == (0, 0)
    assert plan([small(0)] * (FANIN - 2), 10, 100) == (0, 0)
    assert plan([small(0)] * (FANIN - 1), 10, 100) == (FANIN - 1, 1)
    assert plan([small(1)] * (FANIN - 1) + [small(0)] * (FANIN - 1), 10, 100) == (2 * FANIN - 2, 2)
    assert plan([small(0)] * (FANIN - 1), 100, 100) == (0, 0)  # a full file merges no more
    assert plan([Compacted("x", 0, 0, 100, 1, 0)] * (FANIN - 1), 10, 100) == (0, 0)


# -- compaction ---------------------------------------------------------------------------------------------
def early_file(i: int) -> list[dict]:
    """File i: a@105 (W -> 103 with file 0), an EARLY pane of [100, 110) each micro-batch; from file 1 on, b@50 is
    late (its window [50, 60) ended before W) and dropped. One micro-batch per file, writing both sinks."""
    return [{"k": "a", "v": i, "ts": ts(105)}] + ([{"k": "b", "v": i, "ts": ts(50)}] if i else [])


def test_compaction_keeps_every_row_once_and_the_files_few(spark, env):
    """Compaction every 2 micro-batch folders over 9 micro-batches (4 compactions, the 4th merging the first 3
    compacted files into one): the panes and late rows are those of the same run without compaction and the
    hand-worked ones, the files stay few, and a reader that listed the files before a compaction still reads
    every row once after it (also a Spark Connect client's reading of the manifests, through Spark)."""
    s, feeder, root = env
    query = f"{QUERY.format(s=s)} LATE ROWS TO {{late}} EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 1 ROWS"
    custom = start(spark, "CREATE STREAMING TABLE cmp OPTIONS (compaction_batches '2', compaction_retention "
                          f"'0 seconds') AS {query.format(late='cmp_late')}")
    plain = start(spark, f"CREATE STREAMING TABLE ref OPTIONS (compaction 'false') AS {query.format(late='ref_late')}")
    log = SinkLog(str(root / "cmp" / "data"))
    files, reader = 9, None
    for i in range(files):
        feeder.feed([early_file(i)], custom, plain)
        newest = log.newest()
        if reader is None and newest is not None:  # a reader of what the first compaction left
            reader, seen, first = spark.table("cmp"), rows_of(spark.table("cmp"), PANES), newest.sequence
        elif reader is not None and newest.sequence == first + 1:  # one compaction later: its files are still there
            assert rows_of(reader, PANES) == seen
    panes = [(at(100), "a", i * (i + 1) // 2, i + 1, i, "EARLY", False, i) for i in range(files)]
    late = [("b", i, at(50), at(50), at(60), at(103), "late", i) for i in range(1, files)]
    assert rows_of(spark.table("cmp"), PANES) == rows_of(spark.table("ref"), PANES) == panes
    assert rows_of(custom.read(), PANES) == panes
    assert rows_of(spark.table("cmp_late"), LATE) == rows_of(spark.table("ref_late"), LATE) == late
    # compactions at micro-batches 2, 4, 6, 8 (through 1, 3, 5, 7); the 4th merged the three before it: one file
    manifest = log.newest()
    assert (manifest.sequence, manifest.through, [(f.first, f.last, f.level) for f in manifest.files]) == \
        (3, 7, [(0, 7, 1)])
    assert len(batch_folders(root / "ref" / "data")) == files
    assert batch_folders(root / "cmp" / "data") == [6, 7, 8]  # 6 and 7 kept until the next compaction
    # the view lists one compacted file and folders 6 to 8 (6 and 7 pruned: micro_batch <= 7 is compacted)
    assert len(spark.table("cmp").inputFiles()) <= 4 < files <= len(spark.table("ref").inputFiles())
    late_log = SinkLog(str(root / "cmp" / "late_rows"))  # late rows in 1..8: compacted at 3, 5, 7
    assert (late_log.newest().sequence, late_log.newest().through) == (2, 6)
    assert log.newest_through_spark(spark) == log.newest() and late_log.newest_through_spark(spark) == \
        late_log.newest()


def test_a_crash_inside_a_compaction_resumes_exactly_once(spark, env, monkeypatch):
    """Compactions (of every micro-batch folder below the one written) die after their files are written (no
    manifest names them) or after their manifest, before sqlwin's commit of the micro-batch (custom path) or
    Spark's (native path); the same statements started again on the same folders end with exactly the rows of an
    uninterrupted run, and compact on."""
    s, feeder, root = env
    often = "OPTIONS (compaction_batches '1')"
    statements = {name: f"CREATE STREAMING TABLE {name} {often} AS {QUERY.format(s=s)}"
                  + (f" LATE ROWS TO {name}_late" if name.startswith("c") else "")
                  for name in ("c_files", "c_manifest", "n_manifest")}
    crashed: list[str] = []

    def crash_at(point: str):
        def crash(self, _):
            name = self.sink.name
            if name.endswith(point) and name not in crashed:
                crashed.append(name)
                raise RuntimeError(f"crash inside the compaction of {name}")
        return crash

    monkeypatch.setattr(Compactor, "files_written", crash_at("_files"))
    monkeypatch.setattr(Compactor, "manifest_written", crash_at("_manifest"))
    tables = {name: start(spark, sql) for name, sql in statements.items()}
    files = 5
    for i in range(files):
        feeder.write(files_of(i))
        for name in statements:
            try:
                tables[name].process_all_available()
            except SqlwinError:  # its compaction died: the same statement again
                assert name in crashed
                tables[name].stop()
                tables[name] = start(spark, statements[name])
                tables[name].process_all_available()
    assert sorted(crashed) == sorted(statements)
    for name in statements:  # custom: writes 2, 4 (crash), 6, 8; native: 3, 5 (crash), 7, 9
        assert SinkLog(str(root / name / "data")).newest().sequence == 2, name
        assert rows_of(spark.table(name), PANES[:7]) == [row[:7] for row in expected_panes(files)], name
    for name in ("c_files", "c_manifest"):
        assert rows_of(spark.table(name), PANES) == expected_panes(files)
        assert rows_of(spark.table(f"{name}_late"), LATE) == expected_late(files)


def files_of(i: int) -> list[dict]:
    """File i: a@(10 i + 5) moves W to 10 i + 3, so window [10(i-1), 10 i) fires in the no-data micro-batch after
    it; from file 2 on, b@(10(i-2) + 1) is late (its window ended at 10(i-1) <= W) and dropped."""
    rows = [{"k": "a", "v": i, "ts": ts(10 * i + 5)}]
    return rows + ([{"k": "b", "v": i, "ts": ts(10 * (i - 2) + 1)}] if i >= 2 else [])


def expected_panes(files: int) -> list[tuple]:
    """Custom path: file i is micro-batch 2 i - 1 (0 for file 0), the window it closes fires in 2 i."""
    return [(at(10 * j), "a", j, 1, 0, "ON_TIME", True, 2 * j + 2) for j in range(files - 1)]


def expected_late(files: int) -> list[tuple]:
    return [("b", i, at(10 * (i - 2) + 1), at(10 * (i - 2)), at(10 * (i - 1)), at(10 * (i - 1) + 3), "late", 2 * i - 1)
            for i in range(2, files)]


def test_a_replays_output_of_many_micro_batches_is_a_union_of_few_parts(spark, tmp_path, monkeypatch):
    """A stepped replay's output (``ReplaySink``) keeps each micro-batch's rows in Spark, merged every ``MERGE``
    micro-batches, so a replay of many micro-batches reads a union of at most ``2 * MERGE`` parts (a union of
    2000 failed in Spark's planning): 50 micro-batches of rows (n, n * 10), one of them cleared, give every row
    once with its micro_batch, whatever the merges."""
    from sqlwin.streaming.sinks import ReplaySink

    monkeypatch.setattr(ReplaySink, "MERGE", 4)
    sink = ReplaySink("many", str(tmp_path / "many"))
    sink.set_schema(spark.createDataFrame([], "n int, v bigint").schema)
    for n in range(50):
        if n == 7:
            sink.clear(n)  # a micro-batch without rows
            continue
        sink.write(spark.createDataFrame([(n, n * 10)], "n int, v bigint"), n)
        assert len(sink.merged) + len(sink.parts) <= 2 * ReplaySink.MERGE
    out = sink.read(spark)
    assert out.columns == ["n", "v", "micro_batch"]
    assert rows_of(out) == [(n, n * 10, n) for n in range(50) if n != 7]
