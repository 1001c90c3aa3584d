"""Errors in the user's own words.

Spark analyses the SQL sqlwin *generated*, so its errors carry positions in that text and may
suggest sqlwin's internal names (``__w``, ``__r``, ``__q``, ``__w7``...). Here they become a
``SqlwinError`` positioned in the statement the user wrote (the offending identifier or
expression, found among the statement's own tokens) whose message names only the user's tables
and columns. Statements nested beyond what the parser's recursion can take become a positioned
"nested too deeply" error instead of a ``RecursionError``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlwin.dialect import NESTING_LIMIT
from sqlwin.errors import SqlwinError

INTERNAL = re.compile(r"__\w*")  # every name sqlwin generates starts with two underscores
_QUOTED = r"`(?:[^`]|``)*`"
_NAME = rf"{_QUOTED}(?:\.{_QUOTED})*"
_SUGGESTIONS = re.compile(r"(Did you mean one of the following\?\s*)\[([^\]]*)\](\.?\s*)")
_SPARK_POS = re.compile(r";?\s*line (\d+) pos (\d+);?\s*$")
_STRUCT_BOUND = re.compile(r"`?__w`?\.`?(start|end)`?")  # spark_groupby's window struct
_PARAM_KEYS = ("objectName", "routineName", "relationName", "functionName", "expression", "sqlExpr",
               "name", "fieldName", "columnName", "tableName", "viewName", "condition", "ident")


def _route_bound(micros: str) -> str:
    """Spark's text of a window bound that a session or count-window route computes from epoch microseconds
    (``SparkBatchCompiler.from_us``: TIMESTAMP, or TIMESTAMP_NTZ in a UTC session)."""
    bound = rf"timestamp_micros\({micros}\)"
    return rf"(?:CAST\({bound} AS TIMESTAMP_NTZ\)|{bound})"


_MICROS = r"(?:(?:`?\w+`?\.)?`?__us`?|unix_micros\((?:CAST\([^()]+ AS TIMESTAMP\)|[^()]+)\))"  # a row's time
# the bounds a route puts where the user wrote window_start/end/time (spark_groupby's SessionRoute, CountRoute)
_ROUTE_BOUNDS = [(re.compile(_route_bound(micros), re.IGNORECASE), name) for micros, name in (
    (rf"\(\(max\({_MICROS}\) \+ \d+\) - \d+\)", "window_time"),
    (rf"\(max\({_MICROS}\) \+ \d+\)", "window_end"),
    (rf"(?:(?:`?\w+`?\.)?`?__ws`?|min\({_MICROS}\))", "window_start"))]


def user_bounds(text: str) -> str:
    """``text`` with the expressions sqlwin computes window bounds with read as the bounds' names."""
    text = _STRUCT_BOUND.sub(lambda m: f"window_{m.group(1)}", text)
    for pattern, name in _ROUTE_BOUNDS:
        text = pattern.sub(name, text)
    return text


@dataclass
class SparkFailure:
    """What Spark said, read off a pyspark exception (or a bare message)."""

    condition: str | None
    message: str  # first line, without SQLSTATE, position and plan dump
    params: dict[str, str]
    fragment: str | None  # the text Spark pointed at, in the SQL it analysed
    start: int | None  # 0-based offset of ``fragment`` in that SQL
    line_pos: tuple[int, int] | None  # Spark's "line N pos M" (1-based line, 0-based pos)


def read_failure(err: BaseException | str) -> SparkFailure:
    text = err if isinstance(err, str) else _message_of(err)
    condition, params, fragment, start = None, {}, None, None
    if not isinstance(err, str):
        condition = _call(err, "getCondition") or _call(err, "getErrorClass")
        params = dict(_call(err, "getMessageParameters") or {})
        for ctx in _call(err, "getQueryContext") or []:
            fragment, start = _call(ctx, "fragment") or None, _call(ctx, "startIndex")
            break
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    first = lines[0].strip() if lines else text.strip()
    line_pos = None
    m = _SPARK_POS.search(first)
    if m:
        line_pos = (int(m.group(1)), int(m.group(2)))
        first = first[: m.start()]
    first = re.sub(r"\s*SQLSTATE: \w+\.?\s*", " ", first).strip().rstrip(";").strip()
    if condition is None:
        cm = re.match(r"\[([A-Z0-9_.]+)\]", first)
        condition = cm.group(1) if cm else None
    if not params:  # a bare message (a JDBC text, a wrapped error): the first name it quotes
        nm = re.search(_NAME, first) or re.search(r'expression "([^"]+)"', first)
        if nm:
            params = {"objectName": nm.group(0) if nm.group(0).startswith("`") else nm.group(1)}
    if len(lines) > 1 and condition == "MISSING_AGGREGATION":  # its advice is on the second line
        first = f"{first} {lines[1].strip()}"
        first = re.sub(r"\s*SQLSTATE: \w+\.?;?\s*$", "", first).strip()
    return SparkFailure(condition, first, params, fragment, start if isinstance(start, int) else None, line_pos)


def _call(obj: Any, name: str) -> Any:
    fn = getattr(obj, name, None)
    if not callable(fn):
        return None
    try:
        return fn()
    except Exception:
        return None


def _message_of(err: BaseException) -> str:
    """Spark's message of ``err``. A py4j error (a Java exception pyspark leaves unconverted: a
    ``SparkException`` such as a failed job, a ``SparkClassNotFoundException``) reads "An error occurred while
    calling oNN.sql" and then the Java stack: the innermost failure that it names instead."""
    if getattr(err, "java_exception", None) is not None:
        raw = _SECTIONS.split(str(err), maxsplit=1)[0]
        return _innermost(re.sub(r"^An error occurred while calling [\w.]+\.\s*(?:\n\s*:\s*)?", "", raw.strip()))
    desc = getattr(err, "desc", None)
    if isinstance(desc, str) and desc:
        return desc
    return _call(err, "getMessage") or str(err) or type(err).__name__


# -- the user's words ---------------------------------------------------------------------------
def user_names(text: str) -> set[str]:
    """Every identifier-like word of the statement, lower-cased (internal names the user wrote stay)."""
    return {w.lower() for w in re.findall(r"\w+", text)}


def clean_message(message: str, text: str) -> str:
    """Spark's message with sqlwin's internal names taken out of it."""
    own = user_names(text)

    def internal(name: str) -> bool:
        return bool(INTERNAL.fullmatch(name)) and name.lower() not in own

    def rewrite_list(m: re.Match[str]) -> str:
        kept: list[str] = []
        for item in re.findall(_NAME, m.group(2)):
            parts = [p[1:-1].replace("``", "`") for p in re.findall(_QUOTED, item)]
            parts = [p for p in parts[:-1] if not internal(p)] + parts[-1:]
            if internal(parts[-1]):
                continue
            shown = ".".join(f"`{p}`" for p in parts)
            if shown not in kept:
                kept.append(shown)
        return f"{m.group(1)}[{', '.join(kept)}]{m.group(3)}" if kept else ""

    message = user_bounds(message)
    message = _SUGGESTIONS.sub(rewrite_list, message)
    # qualifiers sqlwin invented (`__w3`.`k`, __r.k) read as the bare column
    message = re.sub(r"`(__\w*)`\.", lambda m: "" if internal(m.group(1)) else m.group(0), message)
    message = re.sub(r"\b(__\w*)\.(?=\w)", lambda m: "" if internal(m.group(1)) else m.group(0), message)
    return message


def _tokens(text: str) -> list[Any]:
    from sqlwin import dialect

    try:
        return list(dialect.Sqlwin().tokenize(text))
    except Exception:
        return []


def _norm(token_text: str) -> str:
    return token_text.strip("`\"").lower()


def _words(snippet: str) -> list[str]:
    return [_norm(t.text) for t in _tokens(snippet)]


def _matches(tokens: list[Any], words: list[str]) -> list[int]:
    n = len(words)
    if not n:
        return []
    texts = [_norm(t.text) for t in tokens]
    return [i for i in range(len(texts) - n + 1) if texts[i:i + n] == words]


def locate(text: str, snippets: list[str], after: int = 0, ordinal: int = 0) -> tuple[int, int] | None:
    """1-based (line, col) in ``text`` of the first snippet found among its tokens (from offset
    ``after``); ``ordinal`` picks a later occurrence when Spark's text had several."""
    tokens = [t for t in _tokens(text) if t.start >= after]
    for snippet in snippets:
        hits = _matches(tokens, _words(snippet))
        if hits:
            return offset_position(text, tokens[hits[min(ordinal, len(hits) - 1)]].start)
    return None


def by_shape(text: str, fragment: str) -> tuple[int, int] | None:
    """Where in ``text`` the expression Spark failed on is, when its fragment is of SQL sqlwin rewrote and so is not
    among the statement's tokens (a replay's or the custom path's pane query reads partial aggregates: the user's
    ``SUM(v) DIV (MIN(v) - MIN(v))`` is ``CAST(SUM(rs.__p0) AS BIGINT) DIV (CAST(MIN(rs.__p1) AS INT) - ...)``):
    the first expression of the statement with the fragment's shape, the casts sqlwin adds seen through and each
    part that reads only sqlwin's columns (an aggregate's partials, a key) matching any expression. None if the
    fragment does not parse, is all sqlwin's, or matches nothing."""
    if not INTERNAL.search(fragment):
        return None
    import sqlglot
    from sqlglot import exp

    from sqlwin import dialect
    from sqlwin.errors import position_of

    try:
        pattern = sqlglot.parse_one(fragment, read="spark")
        statements = [n for n in dialect.parse(text) if n is not None]
    except Exception:
        return None
    if _wildcard(pattern, exp):
        return None
    for statement in statements:
        for node in statement.walk(bfs=False):
            if _same_shape(pattern, node, exp):
                line, col = position_of(node)
                if line is not None and col is not None:
                    return line, col
    return None


def _wildcard(node: Any, exp: Any) -> bool:
    """A part of a fragment that reads only sqlwin's columns: a column, an aggregate or a cast or COALESCE of one."""
    columns = [c.name for c in node.find_all(exp.Column)]
    return bool(columns) and all(INTERNAL.fullmatch(c) for c in columns) and \
        isinstance(node, (exp.Column, exp.AggFunc, exp.Cast, exp.Coalesce))


def _same_shape(pattern: Any, node: Any, exp: Any, root: bool = True) -> bool:
    if not root and _wildcard(pattern, exp):
        return True
    if isinstance(pattern, exp.Cast) and not isinstance(node, exp.Cast):  # a cast sqlwin added
        return _same_shape(pattern.this, node, exp, root)
    if type(pattern) is not type(node):
        return False
    if isinstance(pattern, exp.Column):
        return pattern.name.lower() == node.name.lower()
    if isinstance(pattern, (exp.Literal, exp.Identifier, exp.DataType)):
        return pattern.sql(dialect="spark").lower() == node.sql(dialect="spark").lower()
    for key in set(pattern.args) | set(node.args):
        mine, theirs = pattern.args.get(key), node.args.get(key)
        if not isinstance(mine, (exp.Expr, list)) and not isinstance(theirs, (exp.Expr, list)):
            continue
        mine = mine if isinstance(mine, list) else [mine] if mine is not None else []
        theirs = theirs if isinstance(theirs, list) else [theirs] if theirs is not None else []
        if len(mine) != len(theirs) or not all(
                _same_shape(a, b, exp, False) if isinstance(a, exp.Expr) and isinstance(b, exp.Expr) else a == b
                for a, b in zip(mine, theirs, strict=True)):
            return False
    return True


def offset_position(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def at_name(text: str, name: str, message: str) -> SqlwinError:
    """An error about the table or stream ``name`` of statement ``text`` (which has no parse tree to point
    with), at the name where the text gives it, else where the statement starts."""
    return SqlwinError(message, *(locate(text, [name]) or statement_start(text)))


def statement_start(text: str) -> tuple[int, int]:
    """Where the statement's first token is (comments and blanks skipped)."""
    tokens = _tokens(text)
    return offset_position(text, tokens[0].start) if tokens else (1, 1)


def _snippets(failure: SparkFailure) -> list[str]:
    found: list[str] = []
    if failure.fragment:
        found.append(failure.fragment)
    for key in _PARAM_KEYS:
        value = failure.params.get(key)
        if not value:
            continue
        value = value.strip('"')
        parts = [p[1:-1] for p in re.findall(_QUOTED, value)] if value.startswith("`") else []
        parts = [p for p in parts if not INTERNAL.fullmatch(p)]
        if parts:
            found.append(".".join(parts))
            found.append(parts[-1])
        else:
            found.append(value)
    variants: list[str] = []
    for snippet in found:
        bounds = user_bounds(snippet)  # the grouped window struct, a route's bounds
        for variant in (snippet, bounds, *([bounds[1:-1]] if bounds[:1] == "(" and bounds[-1:] == ")" else [])):
            if variant not in variants:
                variants.append(variant)
    return [s for s in variants if s and not INTERNAL.fullmatch(s)]


def _ordinal(failure: SparkFailure, generated: str | None) -> int:
    """Which occurrence of the fragment Spark meant, counted in the SQL it analysed."""
    if not failure.fragment or failure.start is None or not generated:
        return 0
    return len(_matches(_tokens(generated[: failure.start]), _words(failure.fragment)))


# -- entry points -------------------------------------------------------------------------------
def from_spark(err: BaseException | str, text: str, generated: str | None = None, *,
               prefix: str = "", after: tuple[int, int] | None = None) -> SqlwinError:
    """A SqlwinError for Spark's ``err`` on ``generated`` (None: Spark ran ``text`` itself)."""
    failure = read_failure(err)
    message = prefix + clean_message(failure.message, text)
    position: tuple[int, int] | None = None
    start_offset = _offset(text, after) if after else 0
    if generated is None and failure.line_pos is not None:
        position = _passthrough_position(text, failure.line_pos)
    if position is None:
        position = locate(text, _snippets(failure), start_offset, _ordinal(failure, generated))
    if position is None and failure.fragment:
        position = by_shape(text, failure.fragment)
    if position is None:
        position = after or statement_start(text)
    error = SqlwinError(message, *position)
    error.spark_condition = failure.condition  # type: ignore[attr-defined]
    return error


def _offset(text: str, position: tuple[int, int]) -> int:
    line, col = position
    offset = 0
    for _ in range(line - 1):
        nxt = text.find("\n", offset)
        if nxt < 0:
            break
        offset = nxt + 1
    return offset + col - 1


def _passthrough_position(text: str, line_pos: tuple[int, int]) -> tuple[int, int]:
    """Spark's position in the stripped statement it ran, as a position in ``text``."""
    lead = len(text) - len(text.lstrip())
    base_line, base_col = offset_position(text, lead)
    line, pos = line_pos
    return (base_line, base_col + pos) if line == 1 else (base_line + line - 1, pos + 1)


def refine(err: SqlwinError, text: str) -> SqlwinError:
    """A planner error that wraps a Spark error (schema look-up of a TVF's input): re-point it."""
    spark_error = getattr(err, "spark_error", None)
    if spark_error is None:
        return err
    marker = "cannot read the input: "
    prefix = err.message[: err.message.index(marker) + len(marker)] if marker in err.message else ""
    after = (err.line, err.col or 1) if err.line is not None else None
    return from_spark(spark_error, text, "", prefix=prefix, after=after)


# -- nesting ------------------------------------------------------------------------------------
_PREFIX_WORDS = {"not", "-", "+", "~", "repeatedly", "!"}


def too_deep(text: str) -> SqlwinError:
    """'nested too deeply', positioned where the statement is nested deepest."""
    tokens = _tokens(text)
    depth, best, where = 0, 0, 0
    run, run_start = 0, 0
    for tok in tokens:
        word = tok.text.lower()
        if word == "(":
            depth += 1
            if depth > best:
                best, where = depth, tok.start
        elif word == ")":
            depth = max(0, depth - 1)
        if word in _PREFIX_WORDS:
            run, run_start = run + 1, run_start if run else tok.start
            if run > best:
                best, where = run, run_start
        else:
            run = 0
    line, col = offset_position(text, where) if tokens else (1, 1)
    return SqlwinError(f"the statement is nested too deeply ({best} levels here); sqlwin reads up to about "
                       f"{NESTING_LIMIT} levels of nested parentheses, subqueries or triggers: flatten it "
                       "(for example with WITH ... AS common table expressions)", line, col)


# -- hooks for the pipeline ---------------------------------------------------------------------
F = TypeVar("F", bound=Callable[..., Any])


def in_user_terms(fn: F) -> F:
    """Decorate a ``(text, ...)`` compile step: too-deep input and Spark errors met while planning
    come out as SqlwinErrors positioned in ``text``, never as a RecursionError."""

    @functools.wraps(fn)
    def wrapper(text: str, *args: Any, **kwargs: Any) -> Any:
        try:  # statements nested deeper than NESTING_LIMIT fail in dialect.parse, before parsing
            return fn(text, *args, **kwargs)
        except RecursionError:
            raise too_deep(text) from None
        except SqlwinError as err:
            raise refine(err, text) from None

    return wrapper  # type: ignore[return-value]


def run_sql(spark: Any, sql: str, text: str, generated: str | None, after: tuple[int, int] | None = None) -> Any:
    """``spark.sql(sql)`` whose analysis errors speak of ``text`` (``generated`` is None when Spark
    runs the user's own text; ``after``: where in ``text`` the query Spark analysed begins)."""
    try:
        return spark.sql(sql)
    except Exception as err:
        if not is_spark_error(err):
            raise
        raise from_spark(err, text, generated, after=after) from None


def query_start(text: str) -> tuple[int, int] | None:
    """Where the query of a statement begins: its first SELECT or WITH (the statement's own start for a
    query; after ``CREATE STREAMING TABLE ... AS`` or ``INSERT INTO name`` otherwise), None if it has none."""
    for token in _tokens(text):
        if token.text.upper() in ("SELECT", "WITH"):
            return offset_position(text, token.start)
    return None


def analyse(spark: Any, plan: Any, sql: str, text: str) -> None:
    """Analyse a rewritten *query* (nothing runs) so that its errors are mapped before a JDBC
    client sees them; statements with side effects are left to Spark."""
    from sqlglot import exp

    node = getattr(plan, "node", None)
    if getattr(plan, "windows", None) is not None and isinstance(node, exp.Query):
        run_sql(spark, sql, text, sql)


def is_spark_error(err: BaseException) -> bool:
    module = type(err).__module__
    return module.startswith(("pyspark", "py4j"))


# -- failures while running ---------------------------------------------------------------------
# conditions that only wrap the failure that matters (a micro-batch's function, the query, a task)
_WRAPPERS = {"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR", "TASK_WRITE_FAILED", "PYTHON_EXCEPTION"}
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\] ([^\n]*)")
_EXCEPTION_LINE = re.compile(r"^(?:Caused by: )?([\w.$]*(?:Error|Exception)): (\S[^\n]*)$", re.MULTILINE)
_SQL_CONTEXT = re.compile(r"== SQL[^\n]*\(line \d+, position \d+\) ==\n([^\n]*)\n( *)(\^+)")
_SECTIONS = re.compile(r"\n\s*(?:=== Streaming Query ===|JVM stacktrace:)")
_READ_FILE = re.compile(r"\[FAILED_READ_FILE[A-Z_.]*\] Encountered error while reading file (\S+?)\.?\s")
_CAUSE = re.compile(r"^Caused by: ([\w.$]+): (\S[^\n]*)$", re.MULTILINE)
_BARE_EXCEPTIONS = {"RuntimeException", "SparkException", "Exception", "IOException"}  # their name says nothing


def runtime_failure(err: BaseException | str, text: str, prefix: str = "") -> SqlwinError:
    """What a running statement failed on (a row a cast cannot read, a division by zero under ANSI mode, a
    full disk), as one line in the user's terms: the failing expression's position in ``text`` (else where
    the statement starts) and Spark's own message, without the Python and Java stack traces, the wrappers
    of the micro-batch and of the query, or the plan."""
    raw = err if isinstance(err, str) else _message_of(err)
    whole = err if isinstance(err, str) else str(err)  # with the causes that _message_of leaves out
    raw = _SECTIONS.split(raw, maxsplit=1)[0]
    message = _innermost(raw)
    message = re.sub(r"\s*SQLSTATE: \w+\.?.*$", "", message).strip()
    position: tuple[int, int] | None = None
    own = re.match(r"line (\d+), col (\d+): (.*)$", message)  # a SqlwinError raised while running
    if own:
        position, message = (int(own.group(1)), int(own.group(2))), own.group(3)
    condition = _condition_of(message)
    message = prefix + (clean_message(message, text) if text else message)
    read = _READ_FILE.search(raw)  # a row of a stream's file that cannot be read: which file to replace
    if read and read.group(1) not in message:
        message += f" (reading {read.group(1)})"
    elif read and condition and condition.startswith("FAILED_READ_FILE"):
        message = message.rstrip(".") + _read_failure_reason(whole)
    contexts = _SQL_CONTEXT.findall(raw)
    if contexts and text and position is None:
        snippet, lead, carets = contexts[-1]
        fragment = snippet[len(lead): len(lead) + len(carets)]
        position = locate(text, [fragment]) if not INTERNAL.search(fragment) else by_shape(text, fragment)
    if position is None and text:
        position = statement_start(text)
    error = SqlwinError(message, *(position or (None, None)))
    error.spark_condition = condition  # type: ignore[attr-defined]
    return error


def _read_failure_reason(whole: str) -> str:
    """Why Spark could not read a file (``FAILED_READ_FILE`` names the file only): the first cause after it,
    such as "is not a Parquet file" or a file that is gone; empty when Spark gave none."""
    read = _READ_FILE.search(whole)
    cause = _CAUSE.search(whole, read.end()) if read else None
    if cause is None:
        return "."
    name = cause.group(1).rsplit(".", 1)[-1].rsplit("$", 1)[-1]
    reason = re.sub(r"\s*SQLSTATE: \w+\.?.*$", "", cause.group(2)).strip()
    first, _, rest = reason.partition(" ")
    if rest and re.sub(r"^\w+:/*", "/", first) == re.sub(r"^\w+:/*", "/", read.group(1)):  # the file again
        reason = f"it {rest}"
    return f": {reason}" if name in _BARE_EXCEPTIONS else f": {name}: {reason}"


def _innermost(raw: str) -> str:
    conditions = [(m.group(1), m.group(0)) for m in _CONDITION.finditer(raw)]
    own = [c for c in conditions if c[0] not in _WRAPPERS]
    if own:
        return own[-1][1]
    exceptions = [m for m in _EXCEPTION_LINE.finditer(raw)]
    if exceptions:
        name, message = exceptions[-1].group(1), exceptions[-1].group(2)
        if name.endswith("SqlwinError"):
            return message
        return f"{name.rsplit('.', 1)[-1].rsplit('$', 1)[-1]}: {message}"
    if conditions:
        return conditions[-1][1]
    lines = [ln.strip() for ln in raw.strip().splitlines() if ln.strip()]
    return lines[0] if lines else "failed"


def _condition_of(message: str) -> str | None:
    m = re.match(r"\[([A-Z0-9_.]+)\]", message)
    return m.group(1) if m else None


def spark_error_loggers() -> list[logging.Logger]:
    """pyspark's query-context loggers, which log every AnalysisException it raises as a JSON record on stderr
    (sqlwin reports errors in the user's terms itself)."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pragma: no cover - older pyspark
        return []
    return [PySparkLogger.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]


@contextlib.contextmanager
def unlogged_spark_errors() -> Iterator[None]:
    """Spark errors raised inside are not logged: an attempt whose failure is an answer must not print one."""
    loggers = spark_error_loggers()
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
