"""The ``sqlwin`` command line: run sqlwin SQL files on an embedded Spark, show rewrites, serve.

A thin layer over :mod:`sqlwin.api` / :mod:`sqlwin.pipeline`: it splits a script into
statements, runs each, and turns every error into one readable message with its position in the
file (exit status 1, never a traceback); :mod:`sqlwin.display` prints tables, SQL and errors.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlwin.display import (
    consoles,
    note,
    pretty_sql,
    print_sql,
    render_summary,
    report_failure,
    report_sqlwin_error,
    show_result,
    spark_error_message,
    strip_comments,
    summarize,
)
from sqlwin.errors import SqlwinError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

    from sqlwin.results import StatementResult
    from sqlwin.service import Origin

DESCRIPTION = "Flink/Beam/Storm streaming-window SQL on Apache Spark."
EPILOG = """examples:
  sqlwin run sql_examples/tumble_bids.sql       run every statement of a file on a local Spark
  sqlwin run --show-rewrite FILE                also print the Spark SQL each statement became
  sqlwin run pipeline.sql                       a file that starts streaming tables lasts while they run
                                                (live status; Ctrl-C or SIGTERM stops them, resumable)
  sqlwin run --available-now pipeline.sql       catch up: read what the sources hold, fire what that completes, exit
  sqlwin run models/                            run a folder of dbt-style models
  sqlwin -e "SELECT 1 AS x"                     run statements given on the command line
  sqlwin rewrite FILE [--target duckdb]         print the rewritten SQL, without running it
  sqlwin replay FILE --plot panes.png           run a replay script and draw its panes (needs matplotlib)
  sqlwin serve --port 10000                     JDBC/ODBC (HiveServer2) server speaking sqlwin SQL

A file may name its own folder as ${sqlwin.file_dir}, e.g. path '${sqlwin.file_dir}/data/x.csv'
(Spark expands it from the session conf; for -e SQL it is the current folder).
"""
FILE_DIR_CONF = "sqlwin.file_dir"


class Failed(Exception):
    """A statement failed; its message has already been printed."""


class Cancelled(Exception):
    """A signal cancelled the Spark jobs of a statement (``where``: ``file:line:col``), which then failed."""

    def __init__(self, where: str, statement: str):
        super().__init__(where)
        self.where, self.statement = where, statement


# while a signal's statement runs, its job group is cancelled again this often: a job it submits after the signal
# (its Python part was running then) is cancelled too, not run to its end
CANCEL_AGAIN_SECONDS = 0.2


# ---------------------------------------------------------------------------------- arguments
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sqlwin", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="{run,rewrite,replay,serve}")

    run = sub.add_parser("run", help="run a .sql file, or a folder of dbt-style models, on a local Spark",
                         description="Run every statement of a .sql file (or of -e SQL) in order on an "
                                     "embedded local Spark; a folder runs as dbt-style models.")
    run.add_argument("path", nargs="?", help="a .sql file, or a folder of models")
    run.add_argument("-e", "--execute", action="append", metavar="SQL",
                     help="SQL statements to run (repeatable; instead of or before PATH)")
    run.add_argument("--plan", choices=("auto", "udtf"), default="auto",
                     help="auto: fastest equivalent plan; udtf: force sqlwin's window UDTFs")
    run.add_argument("--show-rewrite", action="store_true", help="print the Spark SQL each statement ran as")
    run.add_argument("--max-rows", type=int, default=50, metavar="N",
                     help="print at most N rows per result (0: all; default 50)")
    run.add_argument("--no-progress", action="store_true", help="never draw the Spark progress line")
    run.add_argument("--conf", action="append", default=[], type=_conf_item, metavar="KEY=VALUE",
                     help="extra Spark conf (repeatable)")
    run.add_argument("--available-now", action="store_true",
                     help="streaming tables read what their sources hold now (firing the windows that completes), "
                          "then the run exits; without it the run lasts while any streaming table runs "
                          "(Ctrl-C or SIGTERM stops them)")
    run.add_argument("--refresh", type=_seconds, default=1.0, metavar="SECONDS",
                     help="how often the streaming tables' status is refreshed (default 1)")
    run.set_defaults(func=cmd_run)

    rw = sub.add_parser("rewrite", help="print the SQL that sqlwin produces for each statement",
                        description="Print the rewritten SQL of every statement of FILE. Without "
                                    "--spark no Spark is started and input schemas are unknown: "
                                    "type checks that need them are skipped, and count windows "
                                    "(ROWS n), which need them, ask for --spark.")
    rw.add_argument("file", help="a .sql file, or - for standard input")
    rw.add_argument("--target", choices=("spark", "duckdb"), default="spark")
    rw.add_argument("--plan", choices=("auto", "udtf"), default="auto")
    rw.add_argument("--spark", action="store_true",
                    help="resolve table schemas on a local Spark (runs the file's CREATE/DROP/SET statements "
                         "first); needed for count windows")
    rw.set_defaults(func=cmd_rewrite)

    rp = sub.add_parser("replay", help="run a script with replay streams and draw its panes",
                        description="Run every statement of FILE as `sqlwin run` does; with --plot, draw every "
                                    "query over a replay stream (CREATE STREAM ... FROM TABLE) as an event-time "
                                    "vs processing-time picture of its rows, watermark and panes, one panel each.")
    rp.add_argument("file", help="a .sql file")
    rp.add_argument("--plot", metavar="PATH", help="write the picture to PATH (.png, .svg, .pdf)")
    rp.add_argument("--value", metavar="COLUMN", help="the column whose value labels each pane "
                                                      "(default: the first numeric aggregate)")
    rp.add_argument("--max-rows", type=int, default=50, metavar="N", help="print at most N rows per result")
    rp.add_argument("--no-progress", action="store_true", help="never draw the Spark progress line")
    rp.add_argument("--conf", action="append", default=[], type=_conf_item, metavar="KEY=VALUE",
                    help="extra Spark conf (repeatable)")
    rp.set_defaults(func=cmd_replay)

    sub.add_parser("serve", help="start the Thrift (JDBC/ODBC) server; `sqlwin serve --help` for options",
                   add_help=False)
    return parser


def _conf_item(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _seconds(text: str) -> float:
    """A positive number of seconds: ``--refresh 0`` (or a negative one) made the status loop spin without a
    pause, a CPU kept busy asking Spark for the same status for as long as the service ran."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def _version() -> str:
    from sqlwin.version import __version__

    return f"sqlwin {__version__}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sqlwin`` console script and ``python -m sqlwin``."""
    import logging

    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "unsupported property" warnings
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        from sqlwin.server import main as serve_main

        return serve_main(argv[1:])
    if argv and (argv[0] in ("-e", "--execute") or argv[0].startswith("--execute=")):
        argv.insert(0, "run")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except Failed:
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `sqlwin rewrite FILE | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


# ---------------------------------------------------------------------------------- commands
@dataclass
class Source:
    """A script and where it came from (for error positions and ``${sqlwin.file_dir}``)."""

    name: str
    text: str
    directory: str


def cmd_run(args: argparse.Namespace) -> int:
    if args.path is None and not args.execute:
        raise SystemExit("sqlwin run: give a PATH or -e SQL")
    sources = [Source("<command line>", text, os.getcwd()) for text in args.execute or []]
    folder = None
    if args.path is not None:
        path = Path(args.path)
        if path.is_dir():
            folder = path
        elif path.is_file():
            sources.append(Source(str(path), path.read_text(encoding="utf-8"), str(path.resolve().parent)))
        else:
            print(f"error: no such file or folder: {path}", file=sys.stderr)
            return 1
    import signal

    from sqlwin.service import note_stopped, stop_signals, watch
    from sqlwin.streaming.catalog import all_tables
    from sqlwin.streaming.tables import AVAILABLE_NOW_CONF

    # SIGTERM from the start (a service manager may stop the CLI while Spark or a table starts), SIGINT once Spark
    # started (pyspark's SparkContext puts its own handler in): a signal cancels the Spark jobs of the statement in
    # flight (a statement with none, a table's start, ends), runs no more and stops what started
    with stop_signals((signal.SIGTERM,)) as stop:
        spark = start_spark(dict(args.conf))
        if args.available_now:
            spark.conf.set(AVAILABLE_NOW_CONF, "true")
        out, err = consoles()
        runner = Runner(spark, out, err, plan=args.plan, max_rows=args.max_rows,
                        show_rewrite=args.show_rewrite, progress=not args.no_progress, stop=stop)
        cancelled = None
        with stop_signals((signal.SIGINT,), stop):
            try:
                for source in sources:
                    runner.run_source(source)
                if folder is not None and not stop.is_set():
                    runner.run_models(folder)
            except Cancelled as exc:
                cancelled = exc
            except (Failed, KeyboardInterrupt):
                for table in all_tables():  # what the script started so far ends cleanly (resumable), not with the JVM
                    table.stop()
                raise
        names = list(getattr(stop, "names", []))  # the signals that came while the script ran
        if cancelled is not None:
            err.print(f"{'/'.join(dict.fromkeys(names))}: cancelled the statement at {cancelled.where}: "
                      f"{summarize(cancelled.statement)}", markup=False, highlight=False)
        with stop_signals((signal.SIGINT, signal.SIGTERM), stop):  # the process lives while its tables run
            code = watch(out, err, runner.origins, stop, refresh=args.refresh)
        if stop.is_set() and not runner.origins and cancelled is None:  # stopped before any streaming table started
            note_stopped(out, stop, 0)
        if code == 0 and names and (cancelled is not None or names[0] == "SIGINT"):
            # an interrupted script, as shells report it: 128 + the signal (SIGTERM that cancelled nothing lets a
            # service end cleanly: 0)
            return 128 + int(getattr(signal, names[0]))
        return code


def cmd_replay(args: argparse.Namespace) -> int:
    from sqlwin import plotting

    path = Path(args.file)
    if not path.is_file():
        print(f"error: no such file: {path}", file=sys.stderr)
        return 1
    source = Source(str(path), path.read_text(encoding="utf-8"), str(path.resolve().parent))
    spark = start_spark(dict(args.conf))
    out, err = consoles()
    runner = Runner(spark, out, err, max_rows=args.max_rows, progress=not args.no_progress)
    with plotting.recording() as runs:
        runner.run_source(source)
    if args.plot:
        with _Guard(err, source, None):
            if not runs:
                raise SqlwinError(f"nothing to draw: {path} has no query over a replay stream")
            plotting.draw(plotting.pictures_of(spark, runs, source.text, args.value), args.plot)
        note(out, f"panes drawn to {args.plot}")
    return 0


DDL = re.compile(r"(CREATE|DROP|ALTER|SET|RESET|USE|CACHE|UNCACHE|REFRESH|ADD)\b", re.IGNORECASE)


def cmd_rewrite(args: argparse.Namespace) -> int:
    from sqlwin.api import rewrite
    from sqlwin.pipeline import execute_statement, split_statements

    if args.file == "-":
        source = Source("<stdin>", sys.stdin.read(), os.getcwd())
    else:
        path = Path(args.file)
        if not path.is_file():
            print(f"error: no such file: {path}", file=sys.stderr)
            return 1
        source = Source(str(path), path.read_text(encoding="utf-8"), str(path.resolve().parent))
    out, err = consoles()
    spark = start_spark() if args.spark else None
    if spark is not None:
        spark.conf.set(FILE_DIR_CONF, source.directory)
    hint = None if spark is not None else _schema_hint
    with _Guard(err, source, None):
        statements = split_statements(source.text)
    for statement, start in zip(statements, statement_starts(source.text, statements), strict=True):
        with _Guard(err, source, start, hint, statement):
            sql = rewrite(statement, target=args.target, catalog=spark, plan=args.plan)
            if spark is not None and DDL.match(strip_comments(statement).lstrip()):
                execute_statement(spark, statement, plan=args.plan)  # later statements see its views
        line = f"-- line {start[0] + 1 + leading_lines(statement)}\n" if start else ""
        print_sql(out, f"{line}{pretty_sql(sql, args.target)};\n")
    return 0


def _schema_hint(exc: SqlwinError) -> str | None:
    if re.search(r"schema|catalog|unknown (table|column)|not found", exc.message, re.IGNORECASE):
        return ("without Spark, input schemas are unknown: `sqlwin rewrite --spark FILE` runs the file's "
                "CREATE/DROP/SET statements on a local Spark first, so that its tables are known")
    return None


# ---------------------------------------------------------------------------------- Spark
LOG4J2 = """# written by the sqlwin CLI: Spark's own logging, errors only (WARN until sqlwin sets ERROR)
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.stream.name = org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution
logger.stream.level = off
logger.task.name = org.apache.spark.executor.Executor
logger.task.level = off
logger.taskset.name = org.apache.spark.scheduler.TaskSetManager
logger.taskset.level = off
logger.writer.name = org.apache.spark.sql.execution.datasources.FileFormatWriter
logger.writer.level = off
"""


def quiet_spark_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` plus a log4j2 configuration that keeps Spark's start-up chatter off the terminal.

    Spark's default profile prints several lines at start-up; a custom file whose root level
    equals the shell's (WARN) prints none. A streaming query that fails is logged with its Java stack trace
    by MicroBatchExecution, and a task that fails (a bad cast in the data, a file a stream cannot read) by the
    executor, the task set and the file writer whose job it aborts (a streaming table's sink: "Aborting job"):
    silenced, since ``sqlwin run`` reports the failure in the statement's terms. Skipped when
    SQLWIN_SPARK_LOG_LEVEL asks for more.
    """
    import tempfile

    if os.environ.get("SQLWIN_SPARK_LOG_LEVEL"):
        return conf
    path = Path(tempfile.gettempdir()) / f"sqlwin-log4j2-{os.getuid() if hasattr(os, 'getuid') else 0}.properties"
    try:
        if not path.is_file() or path.read_text() != LOG4J2:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(LOG4J2)
            os.replace(tmp, path)
    except OSError:
        return conf
    key = "spark.driver.extraJavaOptions"
    option = f"-Dlog4j2.configurationFile={path.as_uri()}"
    return {**conf, key: f"{conf[key]} {option}" if conf.get(key) else option}


def start_spark(conf: dict[str, str] | None = None) -> SparkSession:
    """The embedded local Spark, quiet: no start-up chatter, no Python-side error logging."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support")
    from sqlwin.diagnostics import spark_error_loggers
    from sqlwin.session import local_session

    try:  # sqlwin's own settings (sqlwin.streaming.dir) too: local_session keeps them from spark-submit's warning
        spark = local_session("sqlwin-cli", conf=quiet_spark_conf(dict(conf or {})))
    except Exception as exc:
        if os.environ.get("SQLWIN_DEBUG"):
            raise
        print(f"error: could not start Spark: {spark_error_message(exc)}", file=sys.stderr)
        raise Failed from None
    for logger in spark_error_loggers():  # the CLI prints its own
        logger.setLevel(logging.CRITICAL)
    return spark


class Runner:
    """Runs scripts statement by statement and prints each result."""

    def __init__(self, spark: SparkSession, out: Console, err: Console, *, plan: str = "auto",
                 max_rows: int = 50, show_rewrite: bool = False, progress: bool = True, stop: Any = None):
        """``stop``: an event (a signal) after which no further statement runs."""
        self.spark, self.out, self.err = spark, out, err
        self.stop = stop
        self.plan, self.max_rows, self.show_rewrite, self.progress = plan, max_rows, show_rewrite, progress
        self.origins: dict[str, Origin] = {}  # streaming table -> where its statement is (its errors point there)
        self.groups = 0  # job groups made so far (one per statement)
        self.running: str | None = None  # the job group of the statement running
        self.ended = threading.Event()  # set while no statement runs
        self.canceller: threading.Thread | None = None

    def run_source(self, source: Source) -> None:
        from sqlwin.pipeline import execute_statement, split_statements
        from sqlwin.service import Origin
        from sqlwin.streaming.catalog import all_tables

        self.spark.conf.set(FILE_DIR_CONF, source.directory)
        with self.guard(source, None):
            statements = split_statements(source.text)
        for statement, start in zip(statements, statement_starts(source.text, statements), strict=True):
            if self.stop is not None and self.stop.is_set():
                return
            before = {id(t) for t in all_tables()}
            with self.guard(source, start, statement), self.cancellable(position(source, start, statement),
                                                                        statement):
                with self.progress_line():
                    result = execute_statement(self.spark, statement, plan=self.plan)
                self.show(result, start)
            for table in all_tables():
                if id(table) not in before:  # its statement's text and start, as _Guard reports errors
                    self.origins[table.name.lower()] = Origin(source.name, source.text, start)

    def run_models(self, folder: Path) -> None:
        from sqlwin.models import run_models

        with self.guard(Source(str(folder), "", str(folder.resolve())), None), \
                self.cancellable(f"the models of {folder}", ""), self.progress_line():
            summary = run_models(self.spark, str(folder))
        render_summary(self.out, summary)

    @contextmanager
    def cancellable(self, where: str, statement: str) -> Iterator[None]:
        """The body's Spark jobs in a job group of their own, cancelled once ``stop`` is set (a signal) while it
        runs; the body's error after that is the cancellation: :class:`Cancelled`."""
        if self.stop is None:
            yield
            return
        sc = self.spark.sparkContext
        self.groups += 1
        group = f"sqlwin-run-{self.groups}"
        sc.setJobGroup(group, f"{where}: {summarize(statement)}" if statement else where)
        self.running = group
        self.ended.clear()
        if self.canceller is None:
            self.canceller = threading.Thread(target=self._cancel_when_stopped, name="sqlwin-cancel", daemon=True)
            self.canceller.start()
        try:
            yield
        except Exception:
            if self.stop.is_set():
                raise Cancelled(where, statement) from None
            raise
        finally:
            self.running = None
            self.ended.set()
            try:
                for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
                    sc.setLocalProperty(key, None)  # type: ignore[arg-type]  # None removes it
            except Exception:  # Spark's JVM is gone (a signal to the process group): the body's outcome stands
                if not self.stop.is_set():
                    raise

    def _cancel_when_stopped(self) -> None:
        """Once ``stop`` is set: cancel the running statement's job group until the statement ends."""
        self.stop.wait()
        while (group := self.running) is not None:
            try:
                self.spark.sparkContext.cancelJobGroup(group)
            except Exception:  # Spark's JVM is gone (the signal reached it too): the statement fails anyway
                return
            self.ended.wait(CANCEL_AGAIN_SECONDS)

    def progress_line(self) -> Any:
        from sqlwin.progress import spark_progress

        return spark_progress(self.spark, enabled=None if self.progress else False)

    def guard(self, source: Source, start: tuple[int, int] | None, statement: str = "") -> Any:
        return _Guard(self.err, source, start, statement=statement)

    def show(self, result: StatementResult, start: tuple[int, int] | None) -> None:
        where = f"line {start[0] + 1 + leading_lines(result.statement)}" if start else "statement"
        show_result(self.out, result, where, max_rows=self.max_rows, show_rewrite=self.show_rewrite,
                    busy=self.progress_line)


class _Guard:
    """Context manager turning any exception of a statement into a printed message + Failed."""

    def __init__(self, err: Console, source: Source, start: tuple[int, int] | None,
                 hint: Any = None, statement: str = ""):
        self.err, self.source, self.start, self.hint = err, source, start, hint
        self.statement = statement

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or isinstance(exc, (KeyboardInterrupt, SystemExit, Failed, Cancelled)):
            return False
        if os.environ.get("SQLWIN_DEBUG"):
            return False
        if isinstance(exc, SqlwinError):
            report_sqlwin_error(self.err, self.source.name, self.source.text, self.start, exc,
                                self.hint(exc) if self.hint else None)
        else:
            line = f":{self.start[0] + 1 + leading_lines(self.statement)}" if self.start else ""
            where = f"{self.source.name}{line}" + (f": {summarize(self.statement)}" if self.statement else "")
            report_failure(self.err, exc, where)
        raise Failed from None


# ---------------------------------------------------------------------------------- helpers
def statement_starts(text: str, statements: list[str]) -> list[tuple[int, int] | None]:
    """The 0-based (line, col) in ``text`` where each statement's own line 1, col 1 lies."""
    starts: list[tuple[int, int] | None] = []
    pos = 0
    for statement in statements:
        index = text.find(statement, pos)
        if index < 0:  # the splitter normalised the text: anchor on its first non-blank part
            core = statement.lstrip()
            found = text.find(core, pos) if core else -1
            index = found - (len(statement) - len(core)) if found >= 0 else -1
        if index < 0:
            starts.append(None)
            continue
        index = max(index, 0)
        line = text.count("\n", 0, index)
        starts.append((line, index - (text.rfind("\n", 0, index) + 1)))
        pos = index + max(len(statement), 1)
    return starts


def position(source: Source, start: tuple[int, int] | None, statement: str) -> str:
    """``file:line:col`` (1-based) of the statement's first token in its source (``file`` alone if unknown)."""
    if start is None:
        return source.name
    offset = _lead(statement)
    lines = statement.count("\n", 0, offset)
    col = offset - (statement.rfind("\n", 0, offset) + 1) + (start[1] if lines == 0 else 0)
    return f"{source.name}:{start[0] + 1 + lines}:{col + 1}"


def leading_lines(statement: str) -> int:
    """How many lines of comments and blanks come before the statement's first token."""
    return statement.count("\n", 0, _lead(statement))


def _lead(statement: str) -> int:
    """The length of the comments and blanks before the statement's first token."""
    lead = re.match(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", statement, re.DOTALL)
    return lead.end() if lead else 0
