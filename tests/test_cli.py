"""The ``sqlwin`` command line: subprocess runs of ``python -m sqlwin`` (a JVM each for ``run``:
marked slow, kept few) plus in-process checks of ``cli.main`` and the runner on the shared ``spark`` fixture."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from sqlwin import cli, display
from sqlwin.errors import SqlwinError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "sql_examples"
BAD_HOP = """-- a HOP with one argument missing
CREATE OR REPLACE TEMPORARY VIEW t AS SELECT TIMESTAMP '2020-01-01 00:00:00' AS ts, 1 AS x;

SELECT window_start, COUNT(*)
FROM HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' MINUTES)
GROUP BY window_start, window_end;
"""


def sqlwin_cmd(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SQLWIN_NO_PROGRESS": "1"}
    env.pop("SQLWIN_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "sqlwin", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout)


@pytest.fixture()
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad.sql"
    path.write_text(BAD_HOP)
    return path


def assert_clean_error(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "at org.apache" not in proc.stderr


# ---------------------------------------------------------------------------- no Spark needed
def test_help_lists_the_commands():
    proc = sqlwin_cmd("--help")
    assert proc.returncode == 0
    for command in ("run", "rewrite", "serve", "-e"):
        assert command in proc.stdout


def test_serve_is_wired_to_the_server():
    proc = sqlwin_cmd("serve", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: sqlwin serve")


@pytest.mark.parametrize("given", ["0", "-1", "nan", "soon"])
def test_run_refuses_a_refresh_that_is_not_a_positive_number_of_seconds(given: str,
                                                                        capsys: pytest.CaptureFixture[str]):
    """``--refresh 0`` was taken: the status loop of a service then spun without pause, a CPU busy for good."""
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["run", "--refresh", given, "pipeline.sql"])
    assert exit_.value.code == 2
    wanted = "above 0" if given != "soon" else ""
    assert f"argument --refresh: expected a number of seconds {wanted}".rstrip() + f", got '{given}'" \
        in capsys.readouterr().err
    assert cli.build_parser().parse_args(["run", "--refresh", "0.2", "pipeline.sql"]).refresh == 0.2


def test_rewrite_prints_plain_spark_sql():
    proc = sqlwin_cmd("rewrite", "sql_examples/hop_bids.sql")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("-- line ") == 4  # two views, two queries
    assert not re.search(r"\bHOP\s*\(|DESCRIPTOR", proc.stdout, re.IGNORECASE)
    assert "window_start" in proc.stdout and "${sqlwin.file_dir}/data/bids.csv" in proc.stdout


def test_rewrite_error_points_at_line_and_column(bad_file: Path):
    proc = sqlwin_cmd("rewrite", str(bad_file))
    assert_clean_error(proc)
    lines = proc.stderr.splitlines()
    error = next(i for i, ln in enumerate(lines) if ln.startswith("error:"))
    assert lines[error].startswith("error: line 5, col 6: HOP expects")
    assert lines[error + 2] == "5 | FROM HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' MINUTES)"
    assert lines[error + 3] == "  |      ^"


def test_rewrite_of_count_windows_asks_for_spark():
    proc = sqlwin_cmd("rewrite", "sql_examples/storm_count_windows.sql")
    assert_clean_error(proc)
    assert re.search(r"^error: line \d+, col \d+: ", proc.stderr, re.MULTILINE)
    assert "--spark" in proc.stderr


# ---------------------------------------------------------------------------- helpers
def test_statement_starts_map_statements_back_to_the_file():
    text = "-- head\nSELECT 1;  SELECT\n  2;\n\n/* c */ SELECT 3"
    statements = ["-- head\nSELECT 1", "SELECT\n  2", "/* c */ SELECT 3"]
    assert cli.statement_starts(text, statements) == [(0, 0), (1, 11), (4, 0)]
    assert [cli.leading_lines(s) for s in statements] == [1, 0, 0]
    source = cli.Source("f.sql", text, ".")  # where a signal's cancel line puts each: its first token
    assert [cli.position(source, start, s) for s, start in zip(statements, cli.statement_starts(text, statements),
                                                               strict=True)] == ["f.sql:2:1", "f.sql:2:12", "f.sql:5:9"]
    assert cli.position(source, None, "SELECT 1") == "f.sql"


def test_error_positions_are_shifted_to_the_file():
    out = io.StringIO()
    err = Console(file=out, width=200, no_color=True)
    display.report_sqlwin_error(err, "f.sql", "SELECT 1; SELECT oops(\n  x)", (0, 10), SqlwinError("bad call", 1, 8))
    assert out.getvalue().splitlines()[0] == "error: line 1, col 18: bad call"
    assert out.getvalue().splitlines()[3] == "  |                  ^"


def test_cells_print_like_sql_clients():
    import datetime as dt
    from decimal import Decimal

    assert display.format_value(None) == "NULL"
    assert display.format_value(Decimal("11.00")) == "11.00"
    assert display.format_value(dt.datetime(2020, 4, 15, 8, 9, 59, 999000)) == "2020-04-15 08:09:59.999"
    assert display.format_value(dt.datetime(2020, 4, 15, 8, 0)) == "2020-04-15 08:00:00"
    assert display.format_value(True) == "true"


# ---------------------------------------------------------------------------- in-process runner
def run_text(spark, text: str, **options) -> tuple[str, str, bool]:
    out, err = io.StringIO(), io.StringIO()
    runner = cli.Runner(spark, Console(file=out, width=1000, no_color=True),
                        Console(file=err, width=1000, no_color=True), progress=False, **options)
    failed = False
    try:
        runner.run_source(cli.Source("<test>", text, str(EXAMPLES)))
    except cli.Failed:
        failed = True
    return out.getvalue(), err.getvalue(), failed


def test_runner_prints_tables_statuses_and_caps_rows(spark):
    out, err, failed = run_text(spark, "CREATE OR REPLACE TEMPORARY VIEW seven AS SELECT id FROM range(7);\n"
                                       "SELECT id, id * 2 AS twice FROM seven ORDER BY id", max_rows=5)
    assert not failed, err
    assert out.startswith("OK: CREATE OR REPLACE TEMPORARY VIEW seven")
    assert re.search(r"^ 4 │     8$", out, re.MULTILINE)
    assert not re.search(r"^ 5 │", out, re.MULTILINE)
    assert "(7 rows, 2 more not shown: see --max-rows)" in out


def test_runner_shows_explain_rewrite_as_sql(spark):
    text = (EXAMPLES / "explain_rewrite.sql").read_text()
    out, err, failed = run_text(spark, text, show_rewrite=True)
    assert not failed, err
    assert "EXPLAIN REWRITE SELECT" in out  # the header of the EXPLAIN result
    assert "UNIX_MICROS" in out or "window" in out.lower()
    assert re.search(r"2020-04-15 08:05:00 │ 2020-04-15 08:15:00 │\s+15\.00", out)


def test_spark_errors_are_one_concise_message(spark):
    _, err, failed = run_text(spark, "SELECT 1 AS one;\nSELECT nope FROM range(3)")
    assert failed
    assert err.startswith("error: line 2, col 8: [UNRESOLVED_COLUMN")  # where in the file, as written
    assert "--> <test>:2:8" in err and "2 | SELECT nope FROM range(3)" in err
    assert "Traceback" not in err and "at org.apache" not in err and "Project" not in err


def test_runner_runs_a_folder_of_models(spark, tmp_path: Path):
    (tmp_path / "cli_base.sql").write_text("SELECT 1 AS x")
    (tmp_path / "cli_next.sql").write_text("SELECT x + 1 AS y FROM {{ ref('cli_base') }}")
    out, err = io.StringIO(), io.StringIO()
    runner = cli.Runner(spark, Console(file=out, width=1000, no_color=True),
                        Console(file=err, width=1000, no_color=True), progress=False)
    runner.run_models(tmp_path)
    lines = out.getvalue().splitlines()
    assert lines[0].split("│")[0].strip() == "model", out.getvalue()
    assert [ln.split("│")[0].strip() for ln in lines[2:4]] == ["cli_base", "cli_next"]
    assert lines[-1] == "(2 models)"


# ---------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_run_prints_the_result_tables():
    proc = sqlwin_cmd("run", "sql_examples/tumble_bids.sql")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"2020-04-15 08:00:00 │ 2020-04-15 08:10:00 │\s+11\.00", proc.stdout)
    assert re.search(r"2020-04-15 08:10:00 │ 2020-04-15 08:20:00 │\s+10\.00", proc.stdout)
    assert "WARN" not in proc.stdout and "INFO" not in proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_task_that_fails_is_one_error_line(tmp_path: Path):
    """A value the query cannot cast fails a Spark task: the run ends with sqlwin's one error, not the executor's
    and the task set's logs of it (a Java stack and sqlwin's generated SQL) before it."""
    path = tmp_path / "cast.sql"
    path.write_text("CREATE OR REPLACE TEMPORARY VIEW bids AS SELECT * FROM VALUES\n"
                    "  (TIMESTAMP '2020-04-15 08:05:00', 'C') AS t(bidtime, item);\n"
                    "SELECT window_start, SUM(CAST(item AS INT)) AS s\n"
                    "FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)\n"
                    "GROUP BY window_start, window_end;\n")
    proc = sqlwin_cmd("run", str(path))
    assert_clean_error(proc)
    assert "error: [CAST_INVALID_INPUT] The value 'C'" in proc.stderr and f"--> {path}:3" in proc.stderr
    assert "Executor" not in proc.stderr and "TaskSetManager" not in proc.stderr and "__" not in proc.stderr


def test_execute_then_a_failing_file(spark, bad_file: Path, capfd: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch):
    """``cli.main`` in this process (its Spark is the session's: no JVM of its own; the subprocess path of
    ``python -m sqlwin run`` is test_run_prints_the_result_tables'), output read at the file descriptors."""
    monkeypatch.setenv("SQLWIN_NO_PROGRESS", "1")
    monkeypatch.delenv("SQLWIN_DEBUG", raising=False)
    monkeypatch.chdir(ROOT)
    try:
        code = cli.main(["run", "-e", "SELECT 40 + 2 AS answer", str(bad_file)])
    finally:
        spark.catalog.dropTempView("t")  # BAD_HOP's view, in the shared session
    out, err = capfd.readouterr()
    proc = subprocess.CompletedProcess(["sqlwin", "run"], code, out, err)
    assert_clean_error(proc)
    assert re.search(r"^ *42$", proc.stdout, re.MULTILINE)
    assert "error: line 5, col 6: HOP expects" in proc.stderr
    assert f"--> {bad_file}:5:6" in proc.stderr
