"""Typed AST nodes for the sqlwin extensions of Spark SQL (GRAMMAR sections 1-6).

Every node declares its shape once in ``arg_types`` (sqlglot style). The parser produces them;
the generator prints them back as sqlwin SQL; the planner reads them into ``sqlwin.plan``.
Streaming clauses of a query (EMIT, ALLOWED LATENESS, LATE ROWS TO, EVICT) are stored on the
``exp.Select`` they follow, under the arg keys named in ``SELECT_CLAUSE_KEYS``.
"""

from __future__ import annotations

from sqlglot import exp

# ---------------------------------------------------------------- window table-valued functions


class WindowTVF(exp.Expression):
    """``TUMBLE(...)``, ``HOP(...)``, ``CUMULATE(...)``, ``SESSION(...)`` in a FROM/JOIN position.

    ``this``: the function name, upper case (a str). ``expressions``: the raw arguments in
    written order; a named argument is ``exp.Kwarg(this=exp.Var(NAME), expression=value)``.
    The planner binds positions and names, so argument-count errors can point at the call.
    ``wrapped``: written as ``TABLE(TUMBLE(...))``. ``alias``: an ``exp.TableAlias``.
    """

    arg_types = {"this": True, "expressions": True, "alias": False, "wrapped": False}

    @property
    def kind(self) -> str:
        return str(self.this).upper()


class TableArg(exp.Expression):
    """The data argument: ``TABLE t``, ``TABLE(t)``, ``TABLE(subquery)``.

    ``this``: ``exp.Table`` or ``exp.Subquery``. ``partition_by``: list of expressions
    (``TABLE t PARTITION BY k1, k2``). ``wrapped``: written with parentheses.
    """

    arg_types = {"this": True, "partition_by": False, "order_by": False, "wrapped": False}


class Descriptor(exp.Expression):
    """``DESCRIPTOR(col)``: ``expressions`` holds the column(s)."""

    arg_types = {"expressions": True}


class RowsExtent(exp.Expression):
    """``ROWS n`` as a size/slide/step: ``this`` is the literal n."""

    arg_types = {"this": True}


# ---------------------------------------------------------------- query clauses (GRAMMAR 4)

SELECT_CLAUSE_KEYS = ("lateness", "late_rows_to", "evict", "emit")


class AllowedLateness(exp.Expression):
    """``ALLOWED LATENESS interval`` (``grace``=True when written ``GRACE PERIOD interval``)."""

    arg_types = {"this": True, "grace": False}


class LateRowsTo(exp.Expression):
    """``LATE ROWS TO name``: ``this`` is an ``exp.Table``."""

    arg_types = {"this": True}


class Evict(exp.Expression):
    """``EVICT [BEFORE|AFTER] evictor``: ``this`` is an evictor node; ``after`` a bool."""

    arg_types = {"this": True, "after": False}


class EvictKeepLastRows(exp.Expression):
    """``KEEP LAST n ROWS``."""

    arg_types = {"this": True}


class EvictKeepLastInterval(exp.Expression):
    """``KEEP LAST interval``."""

    arg_types = {"this": True}


class EvictDelta(exp.Expression):
    """``DELTA(expr) < threshold``: ``this`` = expr, ``expression`` = threshold."""

    arg_types = {"this": True, "expression": True}


class Emit(exp.Expression):
    """The EMIT clause.

    Either ``trigger`` (a trigger node) with optional ``mode`` ('ACCUMULATING' | 'DISCARDING'),
    or ``sugar`` = 'FINAL' | 'ON WINDOW CLOSE' | 'CHANGES' (then ``trigger`` is None).
    """

    arg_types = {"trigger": False, "mode": False, "sugar": False}


# ---------------------------------------------------------------- triggers (Beam's grammar)


class Trigger(exp.Expression):
    """Base of trigger nodes (so ``isinstance(x, Trigger)`` finds them all)."""


class TriggerAfterWatermark(Trigger):
    """``AFTER WATERMARK [EARLY t] [LATE t]``."""

    arg_types = {"early": False, "late": False}


class TriggerAfterProcessingTime(Trigger):
    """``AFTER PROCESSING TIME [DELAY i] [ALIGNED TO i [OFFSET i]]``."""

    arg_types = {"delay": False, "aligned_to": False, "align_offset": False}


class TriggerAfterCount(Trigger):
    """``AFTER COUNT n``."""

    arg_types = {"this": True}


class TriggerAfterAny(Trigger):
    arg_types = {"expressions": True}


class TriggerAfterAll(Trigger):
    arg_types = {"expressions": True}


class TriggerAfterEach(Trigger):
    arg_types = {"expressions": True}


class TriggerRepeatedly(Trigger):
    arg_types = {"this": True}


class TriggerUntil(Trigger):
    """``this UNTIL expression`` (Beam orFinally)."""

    arg_types = {"this": True, "expression": True}


class TriggerNever(Trigger):
    arg_types = {}


class TriggerEveryRows(Trigger):
    """Sugar ``EVERY n ROWS`` (= REPEATEDLY AFTER COUNT n); kept for round-tripping."""

    arg_types = {"this": True}


class TriggerEveryInterval(Trigger):
    """Sugar ``EVERY interval`` (= REPEATEDLY AFTER PROCESSING TIME DELAY interval)."""

    arg_types = {"this": True}


class TriggerParen(Trigger):
    """``( trigger )``, kept so the generator prints what the user grouped."""

    arg_types = {"this": True}


# ---------------------------------------------------------------- statements (GRAMMAR 3 and 5)


class WatermarkDef(exp.Expression):
    """``WATERMARK FOR col AS expr [ON ROWS WHERE predicate]``: ``this`` = column identifier,
    ``expression`` = expr, ``where`` = the predicate of a punctuated watermark (or None)."""

    arg_types = {"this": True, "expression": True, "where": False}


class CreateStream(exp.Expression):
    """``CREATE STREAM name (col type, ..., pt AS PROCTIME(), WATERMARK FOR ...) USING fmt
    OPTIONS (...) [WITH IDLE TIMEOUT interval] [WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT interval]``.

    ``this``: exp.Table; ``expressions``: ``exp.ColumnDef`` for typed columns and
    ``exp.Alias``-like ``ComputedColumn`` for ``name AS expr``; ``watermark``: WatermarkDef;
    ``format``: exp.Var; ``options``: list of ``exp.Property(this=key, value=literal)``;
    ``idle_timeout``: interval expression; ``alignment``: WatermarkAlignment.
    """

    arg_types = {"this": True, "expressions": False, "watermark": False, "format": False,
                 "options": False, "idle_timeout": False, "alignment": False}


class WatermarkAlignment(exp.Expression):
    """``WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT interval`` (GRAMMAR 3): ``this`` the group's name (a
    string literal), ``expression`` the drift (an interval)."""

    arg_types = {"this": True, "expression": True}


class ComputedColumn(exp.Expression):
    """``name AS expr`` inside CREATE STREAM (e.g. ``pt AS PROCTIME()``)."""

    arg_types = {"this": True, "expression": True}


class Proctime(exp.Expression, exp.Func):
    """``PROCTIME()``."""

    arg_types = {}


class CreateReplayStream(exp.Expression):
    """``CREATE STREAM name FROM TABLE t ARRIVAL ORDER BY ... [MICRO BATCH BY expr] WATERMARK ...``.

    ``this``: exp.Table (stream name); ``source``: TableArg; ``arrival_order``: list of
    exp.Ordered; ``micro_batch``: expression or None; ``processing_time``: expression (the clock of
    each micro-batch) or None; ``watermark``: WatermarkDef; ``idle_timeout``: interval or None.
    """

    arg_types = {"this": True, "source": True, "arrival_order": True, "micro_batch": False,
                 "processing_time": False, "watermark": True, "idle_timeout": False}


class CreateStreamingTable(exp.Expression):
    """``CREATE STREAMING TABLE out [USING fmt] [OPTIONS (...)] AS query``."""

    arg_types = {"this": True, "format": False, "options": False, "expression": True}


class ShowStreamingTables(exp.Expression):
    arg_types = {}


class StopStreamingTable(exp.Expression):
    arg_types = {"this": True}


class DropStreamingTable(exp.Expression):
    """``DROP STREAMING TABLE out [PURGE]``: stop it, remove its catalog views (PURGE: its folders too)."""

    arg_types = {"this": True, "purge": False}


class ExplainStatement(exp.Expression):
    """``EXPLAIN [REWRITE | EXTENDED | CODEGEN | COST | FORMATTED] statement``.

    Only produced when the statement is parsed by the sqlwin dialect; ``mode`` is the upper-case
    word after EXPLAIN or None.
    """

    arg_types = {"this": True, "mode": False}


ALL_NODES: tuple[type[exp.Expr], ...] = (
    WindowTVF, TableArg, Descriptor, RowsExtent, AllowedLateness, LateRowsTo, Evict,
    EvictKeepLastRows, EvictKeepLastInterval, EvictDelta, Emit, TriggerAfterWatermark,
    TriggerAfterProcessingTime, TriggerAfterCount, TriggerAfterAny, TriggerAfterAll,
    TriggerAfterEach, TriggerRepeatedly, TriggerUntil, TriggerNever, TriggerEveryRows,
    TriggerEveryInterval, TriggerParen, WatermarkDef, CreateStream, WatermarkAlignment, ComputedColumn, Proctime,
    CreateReplayStream, CreateStreamingTable, ShowStreamingTables, StopStreamingTable,
    DropStreamingTable, ExplainStatement,
)
