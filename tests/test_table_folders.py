"""A streaming table's folders are its own (``sqlwin.streaming.tablefolders``): another query is refused on a
folder that holds a query's state, and two running tables cannot share a checkpoint or a sink folder. Real Spark
streaming, files dropped one at a time; each refusal is a SqlwinError at the table's name, before anything
starts or is written."""

from __future__ import annotations

import datetime as dt

import pytest

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests.streamtools import rows_of, stream_env, ts

pytestmark = pytest.mark.slow

T = dt.datetime(2024, 1, 1)
QUERY = ("SELECT window_start, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE(TABLE {s}, DESCRIPTOR(ts), "
         "INTERVAL {size} SECONDS) GROUP BY window_start, window_end, k")
CLAUSE = {"native": "", "custom": " ALLOWED LATENESS INTERVAL 1 SECOND"}


@pytest.fixture()
def env(spark, tmp_path, monkeypatch, request):
    with stream_env(spark, tmp_path, monkeypatch, request.node.name) as (name, feeder, root):
        yield name, feeder, root


def start(spark, text: str):
    sqlwin.sql(spark, text)
    return catalog.find_table(text.split()[3])


def test_another_query_on_a_folder_that_holds_a_querys_state_is_refused(spark, env):
    """10-second windows, then the same table name with 20-second windows on the same folder: refused (it would
    read the 10-second windows' state, the audit saw panes of both sizes on both paths; the check runs before a
    path is chosen); the first query reformatted and with another trigger option resumes; after DROP ... PURGE
    the 20-second query starts afresh."""
    s, feeder, root = env
    path = "custom"
    first = f"CREATE STREAMING TABLE tf_{path} AS {QUERY.format(s=s, size=10)}{CLAUSE[path]}"
    table = start(spark, first)
    assert table.path == path
    feeder.feed([[{"k": "a", "v": 1, "ts": ts(1)}], [{"k": "a", "v": 2, "ts": ts(15)}]], table)
    table.stop()
    changed = f"CREATE STREAMING TABLE tf_{path} AS {QUERY.format(s=s, size=20)}{CLAUSE[path]}"
    with pytest.raises(SqlwinError) as info:
        sqlwin.sql(spark, changed)
    assert str(info.value).startswith(f"line 1, col 24: streaming table tf_{path}: its folder "
                                      f"{root / f'tf_{path}'}")
    assert "holds the state of another query (SELECT window_start, k, SUM(v) AS s" in str(info.value)
    assert f"DROP STREAMING TABLE tf_{path} PURGE first" in str(info.value)
    assert not catalog.find_table(f"tf_{path}").is_active  # nothing started

    again = first.replace(" AS SELECT", " OPTIONS (trigger '1 second')\n  AS select").replace("FROM", "from")
    table = start(spark, again)
    feeder.feed([[{"k": "a", "v": 4, "ts": ts(33)}]], table)
    assert rows_of(spark.table(f"tf_{path}"), ["window_start", "s", "c"]) == [(T, 1, 1),
                                                                            (T + dt.timedelta(seconds=10), 2, 1)]
    sqlwin.sql(spark, f"DROP STREAMING TABLE tf_{path} PURGE")
    table = start(spark, changed)  # afresh: the 20-second windows over every file
    table.process_all_available()
    assert rows_of(spark.table(f"tf_{path}"), ["window_start", "s", "c"]) == [(T, 3, 2)]


def test_two_running_tables_cannot_share_a_folder(spark, env, tmp_path):
    """A second table whose sink ``path`` is the first's, or whose checkpoint is the first's, or lies inside the
    first's folder (as a path or a ``file:`` URI): refused at its name while the first runs (two sinks would
    replace each other's micro-batch folders; Spark would stop the first query of a checkpoint it is given again)."""
    s, feeder, root = env
    shared = tmp_path / "out" / "shared"
    first = start(spark, f"CREATE STREAMING TABLE tf_one OPTIONS (path '{shared}') AS {QUERY.format(s=s, size=10)}")
    for options, role in ((f"path '{shared}'", "path"), (f"checkpoint '{root / 'tf_one'}'", "checkpoint"),
                          (f"checkpoint '{root / 'tf_one' / 'inner'}'", "checkpoint"),
                          # the same folders spelled as file: URIs (file:///x, file:/x)
                          (f"path '{shared.as_uri()}/'", "path"),
                          (f"checkpoint 'file:{root / 'tf_one'}'", "checkpoint")):
        with pytest.raises(SqlwinError, match=f"^line 1, col 24: streaming table tf_two: its {role} .* is also "
                                              "where the running streaming table tf_one keeps its") as info:
            sqlwin.sql(spark, f"CREATE STREAMING TABLE tf_two OPTIONS ({options}) AS {QUERY.format(s=s, size=10)}")
        assert f"give tf_two another OPTIONS ({role}" in str(info.value)
        assert catalog.find_table("tf_two") is None
    with pytest.raises(SqlwinError, match=r"^line 1, col 24: streaming table tf_one is already running; STOP "):
        sqlwin.sql(spark, f"CREATE STREAMING TABLE tf_one OPTIONS (path '{shared}') AS {QUERY.format(s=s, size=10)}")
    feeder.feed([[{"k": "a", "v": 1, "ts": ts(1)}, {"k": "a", "v": 2, "ts": ts(15)}]], first)
    assert rows_of(spark.table("tf_one"), ["window_start", "s", "c"]) == [(T, 1, 1)]
    first.stop()  # stopped, its folders are free (to continue it, or to read its sink's folder elsewhere)
    second = start(spark, f"CREATE STREAMING TABLE tf_two OPTIONS (path '{tmp_path / 'out' / 'two'}') AS "
                          f"{QUERY.format(s=s, size=10)}")
    second.process_all_available()
    assert rows_of(spark.table("tf_two"), ["window_start", "s", "c"]) == [(T, 1, 1)]


def test_a_folder_with_glob_characters_is_refused_naming_it(spark, env, tmp_path):
    """Spark's file source reads a path as a glob pattern: a table's checkpoint ``ck[1]`` failed on the custom path
    (its own files read back as ``ck1``: PATH_NOT_FOUND), and a stream over a folder ``in[1]`` read nothing on both.
    Each is refused, naming the folder, before anything is made; a stream's pattern that names no folder is the
    user's glob (no folder of that name made)."""
    s, _feeder, _root = env
    for option, folder, found in (("checkpoint", tmp_path / "ck[1]", "[ ]"), ("path", tmp_path / "o{a}" / "d", "{ }"),
                                  ("checkpoint", tmp_path / "ck*", "*")):
        with pytest.raises(SqlwinError) as info:
            sqlwin.sql(spark, f"CREATE STREAMING TABLE tf_glob OPTIONS ({option} '{folder}') AS "
                              f"{QUERY.format(s=s, size=10)}{CLAUSE['custom']}")
        assert str(info.value) == (
            f"line 1, col 24: streaming table tf_glob: its {option} {folder} has {found} in it, which Spark reads as "
            f"a glob pattern, not as that folder; give it a folder without [ ] {{ }} * ? \\ (OPTIONS ({option} ...))")
        assert catalog.find_table("tf_glob") is None and not folder.exists()
    literal = tmp_path / "in[1]"
    literal.mkdir()
    stream = "(k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json"
    with pytest.raises(SqlwinError) as info:
        sqlwin.sql(spark, f"CREATE STREAM tf_glob_in {stream} OPTIONS (path '{literal}')")
    assert str(info.value) == (
        f"line 1, col 1: CREATE STREAM tf_glob_in: its path {literal} is a folder with [ ] in its name, which Spark's "
        "file source reads as a glob pattern, not as that folder; rename the folder (or give a pattern that names "
        "no folder literally)")
    sqlwin.sql(spark, f"CREATE STREAM tf_glob_files {stream} OPTIONS (path '{tmp_path}/in[0-9]')")
    assert not (tmp_path / "in[0-9]").exists()


@pytest.mark.parametrize("statement", ["STOP STREAMING TABLE tf_nosuch", "DROP STREAMING TABLE tf_nosuch PURGE"])
def test_a_table_that_does_not_exist_is_an_error_at_its_name(spark, statement):
    with pytest.raises(SqlwinError, match=f"^line 1, col 22: {statement.split()[0]} STREAMING TABLE tf_nosuch: no "
                                          "such streaming table"):
        sqlwin.sql(spark, statement)
