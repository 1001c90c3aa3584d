"""What the ``sqlwin`` command line prints: result tables, SQL text and errors, with rich.

On a terminal tables are drawn and SQL is highlighted; off one (a pipe, a file, a test) the same
text comes out plain, unwrapped and without trailing blanks, so it can be compared and diffed.
Cells read as Flink/Spark SQL clients print them (``NULL``, ``2020-04-15 08:05:00``, ``4.00``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlwin.errors import SqlwinError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from rich.console import Console

    from sqlwin.results import StatementResult

SUMMARY_WIDTH = 72


def consoles() -> tuple[Console, Console]:
    """(stdout, stderr) rich consoles; off a terminal they never wrap or colour."""
    from rich.console import Console

    def make(stream: Any, stderr: bool) -> Console:
        tty = stream.isatty()
        return Console(stderr=stderr, highlight=False, width=None if tty else 100_000,
                       no_color=not tty or None)

    return make(sys.stdout, False), make(sys.stderr, True)


def note(console: Console, text: str) -> None:
    """A dim line of commentary (statement heads, statuses, row counts)."""
    console.print(text, style="dim", markup=False, highlight=False)


# ---------------------------------------------------------------------------------- results
def show_result(out: Console, result: StatementResult, where: str, *, max_rows: int = 50,
                show_rewrite: bool = False, busy: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
    """One statement's outcome: its table (at most ``max_rows`` rows), its SQL for EXPLAIN, or its status.
    ``where`` names the statement (``line 3``); ``busy()`` wraps the Spark jobs that fetch rows."""
    head = summarize(result.statement)
    explain = re.match(r"EXPLAIN\b", head, re.IGNORECASE)
    if show_rewrite and result.rewritten and not explain:
        note(out, f"-- {where}: {head}, rewritten:")
        print_sql(out, pretty_sql(result.rewritten) + "\n")
    df = result.dataframe
    if explain:
        note(out, f"-- {where}: {head}")
        text = result.message if df is None else "\n".join(str(r[0]) for r in df.collect())
        if re.match(r"EXPLAIN\s+REWRITE\b", head, re.IGNORECASE):
            print_sql(out, pretty_sql(text or "") + ";\n")
        else:
            out.print(text or "", markup=False, highlight=False)
        return
    if df is not None and df.columns and not df.isStreaming:
        note(out, f"-- {where}: {head}")
        df = in_micro_batch_order(df)
        if busy is None:
            rows, total = fetch(df, max_rows)
        else:
            with busy():
                rows, total = fetch(df, max_rows)
        emit(out, result_table(df, rows))
        note(out, row_count(len(rows), total))
        return
    status = result.message or "OK"
    note(out, f"{status}: {head}" if status == "OK" else status)


def fetch(df: DataFrame, max_rows: int) -> tuple[list[Any], int]:
    """Up to ``max_rows`` rows of ``df`` (all when 0) and the total row count."""
    if max_rows <= 0:
        rows = df.collect()
        return rows, len(rows)
    rows = df.limit(max_rows + 1).collect()
    if len(rows) <= max_rows:
        return rows, len(rows)
    return rows[:max_rows], df.count()


def in_micro_batch_order(df: DataFrame) -> DataFrame:
    """Replay panes (and late rows) in the order they were emitted: by ``micro_batch``, then by window.

    A replay returns its panes as a table whose order Spark does not keep, and its ORDER BY runs inside
    each micro-batch (as in a streaming table); printing them in micro-batch order reads as a timeline."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if "micro_batch" not in df.columns or not ({"pane_timing", "reason"} & set(df.columns)):
        return df
    first = ["micro_batch", *(c for c in ("window_start", "window_end", "pane_index") if c in df.columns)]
    rest = [f.name for f in df.schema.fields if f.name not in first
            and not isinstance(f.dataType, (ArrayType, MapType, StructType))]
    return df.orderBy(*first, *rest)


def format_value(value: Any) -> str:
    """A cell as Flink/Spark SQL clients print it: NULL, 2020-04-15 08:05:00, 4.00, true."""
    import datetime as dt

    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        micros = value.microsecond
        if micros == 0:
            return value.strftime("%Y-%m-%d %H:%M:%S")
        if micros % 1000 == 0:
            return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{micros // 1000:03d}"
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


def row_count(shown: int, total: int) -> str:
    if total > shown:
        return f"({total} rows, {total - shown} more not shown: see --max-rows)"
    return f"({total} row{'s' if total != 1 else ''})"


def emit(console: Console, renderable: Any) -> None:
    """Print ``renderable``; off a terminal, without the trailing blanks rich pads lines with."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    console.file.flush()


def result_table(df: DataFrame, rows: list[Any]) -> Any:
    from pyspark.sql.types import NumericType
    from rich import box
    from rich.table import Table

    table = Table(box=box.ROUNDED, show_edge=False, pad_edge=False, header_style="bold")
    for field in df.schema.fields:
        table.add_column(field.name, justify="right" if isinstance(field.dataType, NumericType) else "left",
                         no_wrap=True)
    for row in rows:
        table.add_row(*(format_value(v) for v in row))
    return table


def render_summary(console: Console, summary: Any) -> None:
    """A generic table for what ``run_models`` returns (objects, dicts, or a message)."""
    import dataclasses

    from rich import box
    from rich.table import Table

    items = summary if isinstance(summary, (list, tuple)) else getattr(summary, "models", None)
    if not items:
        console.print(str(summary) if summary is not None else "OK", markup=False, highlight=False)
        return
    records = [dataclasses.asdict(i) if dataclasses.is_dataclass(i) else
               (dict(i) if isinstance(i, dict) else {"model": str(i)}) for i in items]
    columns = list(dict.fromkeys(k for r in records for k in r))
    table = Table(box=box.ROUNDED, show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, no_wrap=True)
    for record in records:
        table.add_row(*(f"{v:.2f}" if isinstance(v, float) else format_value(v)
                        for v in (record.get(c) for c in columns)))
    emit(console, table)
    note(console, f"({len(records)} models)")


# ---------------------------------------------------------------------------------- SQL text
def pretty_sql(sql: str, target: str = "spark") -> str:
    """``sql`` pretty-printed by sqlglot when it parses, else as given."""
    try:
        import sqlglot

        return ";\n".join(sqlglot.transpile(sql, read=target, write=target, pretty=True, comments=False))
    except Exception:
        return sql.strip()


def print_sql(console: Console, sql: str) -> None:
    """SQL, syntax-highlighted on a terminal, verbatim otherwise."""
    if console.is_terminal:
        from rich.syntax import Syntax

        console.print(Syntax(sql.rstrip("\n"), "sql", theme="ansi_dark", background_color="default",
                             word_wrap=True))
    else:
        console.file.write(sql if sql.endswith("\n") else sql + "\n")
        console.file.flush()


def strip_comments(statement: str) -> str:
    """``statement`` without its comments (naive about quotes: for display and keyword checks)."""
    return re.sub(r"--[^\n]*", " ", re.sub(r"/\*.*?\*/", " ", statement, flags=re.DOTALL))


def summarize(statement: str) -> str:
    """The statement on one line without comments, cut to ``SUMMARY_WIDTH`` characters."""
    text = " ".join(strip_comments(statement).split())
    return text if len(text) <= SUMMARY_WIDTH else text[: SUMMARY_WIDTH - 1].rstrip() + "…"


# ---------------------------------------------------------------------------------- errors
def report_sqlwin_error(err: Console, name: str, text: str, start: tuple[int, int] | None,
                        exc: SqlwinError, hint: str | None = None) -> None:
    """``error: line N, col M: message`` in the coordinates of file ``name`` (whose statement at 0-based
    ``start`` failed), then the file's line and a caret."""
    if exc.line is None:
        err.print(f"error: {exc.message}", markup=False, highlight=False)
        note(err, f" --> {name}" + (f":{start[0] + 1}" if start else ""))
    else:
        line, col = exc.line, exc.col or 1
        if start is not None:
            col = col + start[1] if line == 1 else col
            line = line + start[0]
        err.print(f"error: line {line}, col {col}: {exc.message}", markup=False, highlight=False)
        lines = text.splitlines()
        gutter = " " * len(str(line))
        note(err, f"{gutter}--> {name}:{line}:{col}")
        if 0 < line <= len(lines):
            err.print(f"{line} | {lines[line - 1]}", markup=False, highlight=False)
            err.print(f"{gutter} | {' ' * (col - 1)}^", style="bold red", markup=False, highlight=False)
    if hint:
        note(err, f"hint: {hint}")


def report_failure(err: Console, exc: BaseException, where: str) -> None:
    """Any other exception: what was rejected, in a line or two, and where."""
    err.print(f"error: {spark_error_message(exc)}", markup=False, highlight=False)
    note(err, f" --> {where}")


def spark_error_message(exc: BaseException) -> str:
    """One or two lines saying what Spark (or anything else) rejected, without the JVM stack."""
    text = ""
    get_message = getattr(exc, "getMessage", None)
    if callable(get_message):
        try:
            text = get_message() or ""
        except Exception:
            text = ""
    if not text and hasattr(exc, "java_exception"):  # a raw Py4JJavaError
        try:
            text = str(exc.java_exception.toString())
        except Exception:
            text = ""
    text = text or str(exc) or type(exc).__name__
    if type(exc).__name__ == "PythonException":  # a UDF failed: its last traceback line says why
        errors = [ln for ln in text.splitlines() if re.match(r"\s*\w+(Error|Exception)\b", ln)]
        text = errors[-1].strip() if errors else text
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else text
    first = re.sub(r";\s*$", "", first)
    if not type(exc).__module__.startswith(("pyspark", "py4j")):
        return f"{type(exc).__name__}: {first} (set SQLWIN_DEBUG=1 for the traceback)"
    return first
